//! The status board: what the frame loop publishes for every other thread
//! (status line, sinks, systemd watchdog, health verdict, the diagnostics
//! server). The loop is the single writer of the snapshot and the power
//! map; it publishes after every frame through sequence locks
//! ([`SeqLock`]: plain atomic stores), so it never takes a lock or
//! allocates. Readers copy out and retry when a write overlapped their copy.
//!
//! Three parts:
//! - [`StatusSnapshot`]: counters, histograms, the latest frame's
//!   detections; fixed size, plain data.
//! - [`PowerMapSnapshot`] (`power_map`): every Nth frame a 64 x 64
//!   max-pooled range-Doppler power map in dB with its axes.
//! - The recent-events log ([`EventLog`], `events`): a lock-free ring of
//!   [`Event`]s any thread may append to and read with a cursor.

mod events;
mod power_map;
pub mod time;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytemuck::{Pod, Zeroable};
use radar_dsp::Detection;

use crate::seqlock::SeqLock;
use time::TimeState;

pub use events::{EVENT_CAPACITY, Event, EventKind, EventLog, SourceFault};
pub use power_map::{MAP_COLS, MAP_DETECTIONS, MAP_ROWS, PowerMapSnapshot, pool_power_map};

/// Latency histogram bins: bin 0 is [0, 1 us), then two bins per octave
/// from 1 us (edges 1, 1.41, 2, 2.83, 4, ... us); the last bin is open.
pub const LATENCY_BINS: usize = 48;
/// Detections of the latest frame kept in the snapshot (the rest are cut).
pub const LATEST_DETECTIONS: usize = 16;
/// Sinks the board has counters for.
pub const MAX_SINKS: usize = 8;

/// Lower edges of the latency bins in microseconds, and the upper edge of
/// the last closed bin (`LATENCY_BINS + 1` values; the last bin is open).
pub fn latency_bin_edges_us() -> [f64; LATENCY_BINS + 1] {
    let mut e = [0.0; LATENCY_BINS + 1];
    for (i, v) in e.iter_mut().enumerate().skip(1) {
        *v = 2f64.powf((i - 1) as f64 / 2.0);
    }
    e
}

/// The bin of a duration in nanoseconds (see [`latency_bin_edges_us`]).
pub fn latency_bin(ns: u64) -> usize {
    let us = ns / 1000;
    if us == 0 {
        return 0;
    }
    let l = 63 - us.leading_zeros() as u64;
    // Upper half of the octave: us >= 2^l * sqrt(2), i.e. us^2 >= 2^(2l+1).
    let upper = (us as u128 * us as u128) >= (1u128 << (2 * l + 1));
    ((1 + 2 * l + u64::from(upper)) as usize).min(LATENCY_BINS - 1)
}

/// Why a frame was not processed (index into [`StatusSnapshot::dropped`]).
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Never delivered: the FPGA found no free slot, or dropped it.
    AtSource = 0,
    /// Released unprocessed because a newer frame was due (skip-to-newest).
    Late = 1,
    /// Delivered short (the frame ended early).
    Short = 2,
    /// The FPGA flagged a CRC mismatch or the payload failed its check.
    Crc = 3,
    /// The processing chain failed on it.
    Error = 4,
}

pub const DROP_REASONS: usize = 5;

impl DropReason {
    pub const ALL: [DropReason; DROP_REASONS] = [
        DropReason::AtSource,
        DropReason::Late,
        DropReason::Short,
        DropReason::Crc,
        DropReason::Error,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::AtSource => "at_source",
            DropReason::Late => "late",
            DropReason::Short => "short",
            DropReason::Crc => "crc",
            DropReason::Error => "error",
        }
    }
}

/// The health verdict's state ([`StatusSnapshot::health`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthState {
    /// Not yet `health.good_frames` consecutive good frames.
    Pending,
    /// The verdict was written.
    Good,
    /// The threshold was reached but writing the verdict failed.
    WriteFailed,
}

impl HealthState {
    fn from_u64(v: u64) -> Self {
        match v {
            1 => HealthState::Good,
            2 => HealthState::WriteFailed,
            _ => HealthState::Pending,
        }
    }
    fn to_u64(self) -> u64 {
        match self {
            HealthState::Pending => 0,
            HealthState::Good => 1,
            HealthState::WriteFailed => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            HealthState::Pending => "pending",
            HealthState::Good => "good",
            HealthState::WriteFailed => "write-failed",
        }
    }
}

/// Counters of one sink, in frames' detections, and its state.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SinkCounters {
    /// Frames' detections written out.
    pub sent: u64,
    /// Frames' detections lost because the sink fell behind (its queue
    /// was full).
    pub queue_full: u64,
    /// Frames' detections the sink failed to write (also those that came
    /// while it was down).
    pub errors: u64,
    /// The sink's kind (`SinkKind::code`; 0 before it is set).
    pub kind: u64,
    /// 1 while the sink could not be created (the unit runs degraded and
    /// its thread retries), else 0.
    pub down: u64,
    /// Datagram sinks (asterix): datagrams sent, records in them, frames
    /// that took more than one datagram, datagrams whose send failed, and
    /// records with a value saturated to fit its field.
    pub datagrams: u64,
    pub records: u64,
    pub split_frames: u64,
    pub send_errors: u64,
    pub clamped: u64,
}

/// Indices of [`SinkCounters`]' words on the board.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub enum SinkCounter {
    Sent,
    QueueFull,
    Errors,
    Kind,
    Down,
    Datagrams,
    Records,
    SplitFrames,
    SendErrors,
    Clamped,
}

/// Words per sink on the board.
const SINK_WORDS: usize = 10;
const _: () = assert!(std::mem::size_of::<SinkCounters>() == SINK_WORDS * 8);

/// The latest processed frame.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct LatestFrame {
    pub sequence: u64,
    /// Capture timestamp (source clock, ns).
    pub timestamp_ns: u64,
    /// Capture timestamp to detections published.
    pub latency_ns: u64,
    /// Detections of the frame (all of them, also those not kept here).
    pub count: u32,
    /// Cut by the chain's cap, plus those beyond `LATEST_DETECTIONS`.
    pub cut: u32,
    pub detections: [Detection; LATEST_DETECTIONS],
}

/// Everything the loop publishes after a frame. Fixed size, plain data
/// (`Pod`: no padding, checked by the derive), copied by the [`SeqLock`] as
/// whole words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct StatusSnapshot {
    /// Publications so far (0: the loop has published nothing yet).
    pub generation: u64,
    /// Since the board was created.
    pub uptime_ns: u64,
    /// Frames the source produced: processed + dropped by every reason.
    pub frames_produced: u64,
    /// Frames that went through the chain (or the payload check).
    pub frames_processed: u64,
    /// Frames not processed, by [`DropReason`].
    pub dropped: [u64; DROP_REASONS],
    /// Processed frames finished after their deadline.
    pub deadline_misses: u64,
    /// Of those, misses the source's late delivery explains: the frame
    /// would have made its deadline had it arrived when its capture ended
    /// (the rest are the loop's own).
    pub deadline_misses_source_late: u64,
    /// Event waits that timed out (the source stalled).
    pub source_timeouts: u64,
    /// Frames whose sequence number the drop counts do not explain.
    pub sequence_errors: u64,
    /// Chunk events handed to the backend, and those it refused.
    pub chunks_streamed: u64,
    pub chunk_errors: u64,
    /// Good frames in a row (processed, on time, no fault) and since start.
    pub consecutive_good: u64,
    /// Frame lines the console could not take (its queue was full).
    pub frame_lines_lost: u64,
    /// Frames processed per second over the last second.
    pub rate_hz: f64,
    /// Capture timestamp to detections published.
    pub latency_hist: [u64; LATENCY_BINS],
    /// How late a late frame finished, past its deadline.
    pub lateness_hist: [u64; LATENCY_BINS],
    pub latency_max_ns: u64,
    /// Frame event to detections published (the processing time).
    pub processing_last_ns: u64,
    pub processing_max_ns: u64,
    /// Loop thread CPU time per frame over the last status interval, and
    /// in total (read from the thread's CPU clock by the status thread).
    pub loop_cpu_per_frame_ns: u64,
    pub loop_cpu_total_ns: u64,
    /// [`HealthState`] as a number; see [`StatusSnapshot::health`].
    pub health_state: u64,
    pub latest: LatestFrame,
    pub sink_count: u64,
    pub sinks: [SinkCounters; MAX_SINKS],
}

impl Default for StatusSnapshot {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl StatusSnapshot {
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.dropped[r as usize]
    }
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
    /// produced == processed + dropped by every reason.
    pub fn ledger_closes(&self) -> bool {
        self.frames_produced == self.frames_processed + self.dropped_total()
    }
    pub fn health(&self) -> HealthState {
        HealthState::from_u64(self.health_state)
    }
    /// Sinks down (not created; the unit runs degraded).
    pub fn sinks_down(&self) -> usize {
        self.sinks
            .iter()
            .take(self.sink_count as usize)
            .filter(|c| c.down != 0)
            .count()
    }
    /// The `q` quantile (0..=1) of the latency histogram in microseconds
    /// (None: no frames), by [`histogram_percentile_us`]: never above the
    /// largest latency seen.
    pub fn latency_quantile_us(&self, q: f64) -> Option<f64> {
        histogram_percentile_us(&self.latency_hist, q, self.latency_max_ns as f64 / 1e3)
    }
}

/// The `q` quantile (0..=1) of a latency-binned histogram in microseconds,
/// by the project's one percentile rule (`radar_stats`, nearest rank): the
/// upper edge of the bin holding that rank, capped at `observed_max_us`, the
/// largest value that went into the histogram. None when it is empty.
pub fn histogram_percentile_us(
    h: &[u64; LATENCY_BINS],
    q: f64,
    observed_max_us: f64,
) -> Option<f64> {
    let edges = latency_bin_edges_us();
    let upper_edge = |i: usize| {
        if i + 1 < LATENCY_BINS {
            edges[i + 1]
        } else {
            f64::INFINITY
        }
    };
    radar_stats::histogram_percentile(h, upper_edge, q, observed_max_us)
}

/// The board. Create once, share by `Arc`.
pub struct StatusBoard {
    start: Instant,
    snapshot: SeqLock<StatusSnapshot>,
    map: SeqLock<PowerMapSnapshot>,
    /// The frames' time (the clock thread's, read by the loop every frame).
    time: SeqLock<TimeState>,
    events: EventLog,
    /// Per-sink counters, written by the sinks' threads (sent, errors) and
    /// the loop (queue-full); read into the snapshot by `snapshot()`.
    sinks: [[AtomicU64; SINK_WORDS]; MAX_SINKS],
    sink_count: AtomicU64,
    loop_cpu_per_frame_ns: AtomicU64,
    loop_cpu_total_ns: AtomicU64,
    health: AtomicU64,
}

// Shared between threads by its atomics alone.
const _: fn() = || {
    fn sync<T: Sync + Send>() {}
    sync::<StatusBoard>();
};

impl Default for StatusBoard {
    fn default() -> Self {
        Self::new()
    }
}

impl StatusBoard {
    pub fn new() -> Self {
        let start = Instant::now();
        StatusBoard {
            start,
            snapshot: SeqLock::new(),
            map: SeqLock::new(),
            time: SeqLock::new(),
            events: EventLog::new(start),
            sinks: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            sink_count: AtomicU64::new(0),
            loop_cpu_per_frame_ns: AtomicU64::new(0),
            loop_cpu_total_ns: AtomicU64::new(0),
            health: AtomicU64::new(0),
        }
    }

    /// Nanoseconds since the board was created.
    pub fn uptime_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The loop's publication (single writer: the loop thread).
    pub fn publish(&self, s: &StatusSnapshot) {
        self.snapshot.write(s);
    }

    /// The latest snapshot (all zero before the first publication), with
    /// the sink, CPU and health figures other threads keep.
    pub fn snapshot(&self) -> StatusSnapshot {
        let mut s = self.snapshot.read().unwrap_or_default();
        let n = (self.sink_count.load(Ordering::Relaxed) as usize).min(MAX_SINKS);
        s.sink_count = n as u64;
        for (c, a) in s.sinks.iter_mut().zip(&self.sinks).take(n) {
            let words: [u64; SINK_WORDS] = std::array::from_fn(|k| a[k].load(Ordering::Relaxed));
            *c = bytemuck::cast(words);
        }
        s.loop_cpu_per_frame_ns = self.loop_cpu_per_frame_ns.load(Ordering::Relaxed);
        s.loop_cpu_total_ns = self.loop_cpu_total_ns.load(Ordering::Relaxed);
        s.health_state = self.health.load(Ordering::Relaxed);
        if s.generation > 0 {
            s.uptime_ns = self.uptime_ns();
        }
        s
    }

    /// The loop's power-map publication (single writer).
    pub fn publish_power_map(&self, m: &PowerMapSnapshot) {
        self.map.write(m);
    }

    /// The latest power map, None before the first.
    pub fn power_map(&self) -> Option<PowerMapSnapshot> {
        self.map.read()
    }

    /// The clock thread's publication (single writer).
    pub fn publish_time(&self, t: &TimeState) {
        self.time.write(t);
    }

    /// The frames' time as last judged (None before the first).
    pub fn time(&self) -> Option<TimeState> {
        self.time.read()
    }

    /// Number of sinks with counters (set once at start-up).
    pub fn set_sink_count(&self, n: usize) {
        self.sink_count
            .store(n.min(MAX_SINKS) as u64, Ordering::Relaxed);
    }
    /// Adds `n` to one of sink `i`'s counters; returns its new value (0
    /// for a sink without counters).
    pub fn sink_add(&self, i: usize, counter: SinkCounter, n: u64) -> u64 {
        self.sinks.get(i).map_or(0, |c| {
            c[counter as usize].fetch_add(n, Ordering::Relaxed) + n
        })
    }
    /// Sets one of sink `i`'s words (its kind, whether it is down).
    pub fn sink_set(&self, i: usize, counter: SinkCounter, v: u64) {
        if let Some(c) = self.sinks.get(i) {
            c[counter as usize].store(v, Ordering::Relaxed);
        }
    }
    pub fn sink_sent(&self, i: usize, n: u64) {
        self.sink_add(i, SinkCounter::Sent, n);
    }
    pub fn sink_queue_full(&self, i: usize, n: u64) {
        self.sink_add(i, SinkCounter::QueueFull, n);
    }
    /// Counts a sink error; returns the sink's errors so far.
    pub fn sink_error(&self, i: usize) -> u64 {
        self.sink_add(i, SinkCounter::Errors, 1)
    }

    /// Loop CPU figures (from the status thread).
    pub fn set_loop_cpu(&self, per_frame_ns: u64, total_ns: u64) {
        self.loop_cpu_per_frame_ns
            .store(per_frame_ns, Ordering::Relaxed);
        self.loop_cpu_total_ns.store(total_ns, Ordering::Relaxed);
    }

    pub fn set_health(&self, h: HealthState) {
        self.health.store(h.to_u64(), Ordering::Relaxed);
    }

    /// Appends an event (any thread; lock-free, no allocation).
    pub fn post(&self, kind: EventKind, a: u64, b: u64) {
        self.events.post(kind, a, b);
    }

    /// The cursor of the next event to be posted (see [`EventLog::cursor`]).
    pub fn events_cursor(&self) -> u64 {
        self.events.cursor()
    }

    /// Copies events from `cursor` on into `out` (see [`EventLog::since`]).
    pub fn events_since(&self, cursor: u64, out: &mut [Event]) -> (usize, u64) {
        self.events.since(cursor, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn bins_are_log_spaced_and_match_their_edges() {
        let e = latency_bin_edges_us();
        assert_eq!(e[0], 0.0);
        assert_eq!(e[1], 1.0);
        assert!((e[2] - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(e[3], 2.0);
        for ns in [
            0u64,
            999,
            1000,
            1414,
            1415,
            2000,
            7_999_999,
            8_000_000,
            1 << 40,
        ] {
            let b = latency_bin(ns);
            let us = (ns / 1000) as f64;
            assert!(us >= e[b].floor(), "{ns} ns in bin {b} below {}", e[b]);
            if b + 1 < LATENCY_BINS {
                assert!(us < e[b + 1], "{ns} ns in bin {b} above {}", e[b + 1]);
            }
        }
        assert_eq!(latency_bin(u64::MAX), LATENCY_BINS - 1);
    }

    #[test]
    fn snapshots_are_never_torn() {
        let board = Arc::new(StatusBoard::new());
        assert_eq!(board.snapshot().generation, 0);
        let w = board.clone();
        let writer = std::thread::spawn(move || {
            let mut s = StatusSnapshot::default();
            for g in 1..=200_000u64 {
                s.generation = g;
                s.frames_processed = g;
                s.frames_produced = g * 2;
                s.latency_hist = [g; LATENCY_BINS];
                s.latest.sequence = g;
                w.publish(&s);
            }
        });
        let mut last = 0;
        while last < 200_000 {
            let s = board.snapshot();
            let g = s.generation;
            assert!(g >= last);
            if g > 0 {
                assert_eq!(s.frames_produced, 2 * g);
                assert!(s.latency_hist.iter().all(|&v| v == g));
                assert_eq!(s.latest.sequence, g);
            }
            last = g;
        }
        writer.join().expect("writer");
    }

    #[test]
    fn the_power_map_is_published_whole() {
        let board = StatusBoard::new();
        assert!(board.power_map().is_none());
        let mut m = PowerMapSnapshot::default();
        pool_power_map(&[1.0; 16 * 16], 16, 16, 0.5, 0.1, &mut m);
        m.generation = 1;
        board.publish_power_map(&m);
        assert_eq!(board.power_map(), Some(m));
    }

    /// A histogram's percentile never exceeds the largest latency seen:
    /// frames of 22.0 to 22.493 ms all fall in the bin [16.384, 23.170) ms,
    /// whose upper edge is above every one of them.
    #[test]
    fn histogram_percentiles_are_never_above_the_max() {
        let mut s = StatusSnapshot::default();
        assert_eq!(s.latency_quantile_us(0.5), None);
        for ns in (22_000_000..=22_493_000).step_by(1000) {
            s.latency_hist[latency_bin(ns)] += 1;
            s.latency_max_ns = s.latency_max_ns.max(ns);
        }
        let bin = latency_bin(22_493_000);
        let upper_edge_us = latency_bin_edges_us()[bin + 1];
        assert!(
            upper_edge_us > 23_000.0,
            "the bin's edge {upper_edge_us} us"
        );
        for q in [0.5, 0.99, 0.999, 1.0] {
            assert_eq!(s.latency_quantile_us(q), Some(22_493.0), "q {q}");
        }
        // Spread over two bins, p50 is the lower bin's edge, below the max.
        s.latency_hist = [0; LATENCY_BINS];
        s.latency_hist[latency_bin(1_000_000)] = 10;
        s.latency_hist[bin] = 10;
        let p50 = s.latency_quantile_us(0.5).expect("frames");
        assert_eq!(p50, latency_bin_edges_us()[latency_bin(1_000_000) + 1]);
        assert!(p50 < 22_493.0);
        // A latency in the open last bin: the max, never infinity.
        s.latency_hist = [0; LATENCY_BINS];
        s.latency_hist[LATENCY_BINS - 1] = 1;
        s.latency_max_ns = u64::MAX / 2;
        assert_eq!(
            s.latency_quantile_us(0.999),
            Some((u64::MAX / 2) as f64 / 1e3)
        );
    }
}
