//! The status board: what the frame loop publishes for every other thread
//! (status line, sinks, systemd watchdog, health verdict, the diagnostics
//! server). The loop is the single writer of the snapshot and the power-map
//! cells; it publishes after every frame with plain atomic stores (a
//! seqlock over words of atomics), so it never takes a lock or allocates.
//! Readers copy out and retry when a write overlapped their copy.
//!
//! Three parts:
//! - [`StatusSnapshot`]: counters, histograms, the latest frame's
//!   detections; fixed size, `Copy`.
//! - [`PowerMapSnapshot`]: every Nth frame a 64 x 64 max-pooled
//!   range-Doppler power map in dB with its axes.
//! - The recent-events log: a lock-free ring of [`Event`] records any
//!   thread may append to and any thread may read with a cursor.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::Instant;

use radar_dsp::Detection;

/// Latency histogram bins: bin 0 is [0, 1 us), then two bins per octave
/// from 1 us (edges 1, 1.41, 2, 2.83, 4, ... us); the last bin is open.
pub const LATENCY_BINS: usize = 48;
/// Detections of the latest frame kept in the snapshot (the rest are cut).
pub const LATEST_DETECTIONS: usize = 16;
/// Sinks the board has counters for.
pub const MAX_SINKS: usize = 8;
/// Power map size (rows = Doppler, columns = range).
pub const MAP_ROWS: usize = 64;
pub const MAP_COLS: usize = 64;
/// Detections kept with a power map.
pub const MAP_DETECTIONS: usize = 32;
/// Records the events ring holds.
pub const EVENT_CAPACITY: usize = 1024;

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

/// Counters of one sink.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkCounters {
    /// Records written out.
    pub sent: u64,
    /// Records lost because the sink's queue was full (it fell behind).
    pub queue_full: u64,
    /// Records the sink failed to write.
    pub errors: u64,
}

/// The latest processed frame.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
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

/// Everything the loop publishes after a frame. Fixed size, `Copy`; every
/// field is 8 bytes wide or a padding-free array or struct of such, so the
/// seqlock copies it as whole words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
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
    pub log_records_lost: u64,
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

// The seqlock copies whole words: the snapshot must have no padding. The
// sum of the fields' sizes equals the size.
const _: () = {
    let fields = 8 * 4
        + 8 * DROP_REASONS
        + 8 * 8
        + 8 * LATENCY_BINS * 2
        + 8 * 3
        + 8 * 3
        + (8 * 3 + 4 * 2 + 40 * LATEST_DETECTIONS)
        + 8
        + 24 * MAX_SINKS;
    assert!(std::mem::size_of::<StatusSnapshot>() == fields);
    assert!(std::mem::size_of::<StatusSnapshot>().is_multiple_of(8));
    assert!(std::mem::size_of::<Detection>() == 40);
};

impl Default for StatusSnapshot {
    fn default() -> Self {
        StatusSnapshot {
            generation: 0,
            uptime_ns: 0,
            frames_produced: 0,
            frames_processed: 0,
            dropped: [0; DROP_REASONS],
            deadline_misses: 0,
            source_timeouts: 0,
            sequence_errors: 0,
            chunks_streamed: 0,
            chunk_errors: 0,
            consecutive_good: 0,
            log_records_lost: 0,
            rate_hz: 0.0,
            latency_hist: [0; LATENCY_BINS],
            lateness_hist: [0; LATENCY_BINS],
            latency_max_ns: 0,
            processing_last_ns: 0,
            processing_max_ns: 0,
            loop_cpu_per_frame_ns: 0,
            loop_cpu_total_ns: 0,
            health_state: 0,
            latest: LatestFrame::default(),
            sink_count: 0,
            sinks: [SinkCounters::default(); MAX_SINKS],
        }
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
    /// The `q` quantile (0..=1) of the latency histogram, as the upper edge
    /// of its bin in microseconds (None: no frames).
    pub fn latency_quantile_us(&self, q: f64) -> Option<f64> {
        hist_quantile_us(&self.latency_hist, q)
    }
}

/// Upper bin edge (us) of the `q` quantile of a latency-binned histogram.
pub fn hist_quantile_us(h: &[u64; LATENCY_BINS], q: f64) -> Option<f64> {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return None;
    }
    let want = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let edges = latency_bin_edges_us();
    let mut acc = 0;
    for (i, &n) in h.iter().enumerate() {
        acc += n;
        if acc >= want {
            return Some(if i + 1 < LATENCY_BINS {
                edges[i + 1]
            } else {
                f64::INFINITY
            });
        }
    }
    Some(f64::INFINITY)
}

/// A range-Doppler power map, max-pooled to 64 x 64, in dB.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerMapSnapshot {
    /// Maps published so far (1 for the first).
    pub generation: u64,
    /// The frame it is of.
    pub sequence: u64,
    /// Rows and columns actually used (fewer when the frame has fewer
    /// Doppler or range bins than 64).
    pub rows: u32,
    pub cols: u32,
    /// Source bins pooled into one cell (Doppler, range).
    pub pool_doppler: u32,
    pub pool_range: u32,
    /// `10 log10` of the largest power in the cell; row = Doppler (zero
    /// velocity in the middle), column = range.
    pub db: [[f32; MAP_COLS]; MAP_ROWS],
    /// Range in metres at the centre of each column.
    pub range_m: [f32; MAP_COLS],
    /// Radial velocity in m/s at the centre of each row.
    pub velocity_mps: [f32; MAP_ROWS],
    pub detection_count: u32,
    pub detection_cut: u32,
    pub detections: [Detection; MAP_DETECTIONS],
}

const _: () = {
    let fields = 8 * 2
        + 4 * 4
        + 4 * MAP_ROWS * MAP_COLS
        + 4 * MAP_COLS
        + 4 * MAP_ROWS
        + 4 * 2
        + 40 * MAP_DETECTIONS;
    assert!(std::mem::size_of::<PowerMapSnapshot>() == fields);
    assert!(std::mem::size_of::<PowerMapSnapshot>().is_multiple_of(8));
};

impl Default for PowerMapSnapshot {
    fn default() -> Self {
        PowerMapSnapshot {
            generation: 0,
            sequence: 0,
            rows: 0,
            cols: 0,
            pool_doppler: 0,
            pool_range: 0,
            db: [[0.0; MAP_COLS]; MAP_ROWS],
            range_m: [0.0; MAP_COLS],
            velocity_mps: [0.0; MAP_ROWS],
            detection_count: 0,
            detection_cut: 0,
            detections: [Detection::default(); MAP_DETECTIONS],
        }
    }
}

/// Max-pools a Doppler-major `n_loops x n_samples` power map (linear) into
/// `out.db` (dB) and fills the axes. `range_bin_m`, `velocity_bin_mps`: one
/// bin's worth; Doppler bin `n_loops/2` is zero velocity. Allocates nothing.
pub fn pool_power_map(
    power: &[f32],
    n_loops: usize,
    n_samples: usize,
    range_bin_m: f64,
    velocity_bin_mps: f64,
    out: &mut PowerMapSnapshot,
) {
    let rows = n_loops.clamp(1, MAP_ROWS);
    let cols = n_samples.clamp(1, MAP_COLS);
    let pd = n_loops.div_ceil(rows).max(1);
    let pr = n_samples.div_ceil(cols).max(1);
    out.rows = rows as u32;
    out.cols = cols as u32;
    out.pool_doppler = pd as u32;
    out.pool_range = pr as u32;
    for row in out.db.iter_mut() {
        row.fill(f32::NEG_INFINITY);
    }
    if power.len() >= n_loops * n_samples {
        for d in 0..n_loops {
            let r_out = (d / pd).min(rows - 1);
            let line = &power[d * n_samples..(d + 1) * n_samples];
            let dst = &mut out.db[r_out];
            for (c, cell) in dst.iter_mut().enumerate().take(cols) {
                let lo = c * pr;
                let hi = (lo + pr).min(n_samples);
                if lo >= hi {
                    break;
                }
                let m = line[lo..hi]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max);
                if m > *cell {
                    *cell = m;
                }
            }
        }
    }
    for row in out.db.iter_mut() {
        for v in row.iter_mut() {
            *v = if *v > 0.0 { 10.0 * v.log10() } else { -200.0 };
        }
    }
    for (c, v) in out.range_m.iter_mut().enumerate() {
        *v = ((c * pr) as f64 + (pr as f64 - 1.0) / 2.0) as f32 * range_bin_m as f32;
    }
    let half = (n_loops / 2) as f64;
    for (r, v) in out.velocity_mps.iter_mut().enumerate() {
        *v = (((r * pd) as f64 + (pd as f64 - 1.0) / 2.0 - half) * velocity_bin_mps) as f32;
    }
}

/// A seqlock over `W` words: one writer, any number of readers. `T` must
/// be `W * 8` bytes without padding (checked where `T` is defined).
struct SeqCell<T: Copy, const W: usize> {
    seq: AtomicU64,
    words: Box<[AtomicU64]>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Copy, const W: usize> SeqCell<T, W> {
    fn new() -> Self {
        assert!(std::mem::size_of::<T>() == W * 8);
        SeqCell {
            seq: AtomicU64::new(0),
            words: (0..W).map(|_| AtomicU64::new(0)).collect(),
            _t: std::marker::PhantomData,
        }
    }

    /// Single writer only (the board's owner thread).
    fn write(&self, v: &T) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        // SAFETY: T is W words with no padding (asserted in new() and at
        // T's definition), so every byte read is initialised.
        let src = unsafe { std::slice::from_raw_parts(v as *const T as *const u64, W) };
        for (d, s) in self.words.iter().zip(src) {
            d.store(*s, Ordering::Relaxed);
        }
        self.seq.store(s + 2, Ordering::Release);
    }

    /// Copies out; None if never written.
    fn read(&self) -> Option<T> {
        let mut buf = std::mem::MaybeUninit::<T>::uninit();
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 == 0 {
                return None;
            }
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            // SAFETY: buf is W words of writable memory (size asserted).
            let dst = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u64, W) };
            for (d, s) in dst.iter_mut().zip(self.words.iter()) {
                *d = s.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                // SAFETY: every word was written by one complete write of a
                // valid T (the sequence did not move), and T is plain data
                // (integers and floats) for which any bits are valid.
                return Some(unsafe { buf.assume_init() });
            }
        }
    }
}

const SNAP_WORDS: usize = std::mem::size_of::<StatusSnapshot>() / 8;
const MAP_WORDS: usize = std::mem::size_of::<PowerMapSnapshot>() / 8;

/// Kinds of [`Event`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// radard started (a: frame period ns, 0 = free running).
    Started = 1,
    /// The first frame was processed (a: its sequence).
    FramesFlowing = 2,
    /// A frame finished after its deadline (a: sequence, b: lateness ns).
    DeadlineMiss = 3,
    /// Frames were not processed (a: sequence, b: reason index).
    Drop = 4,
    /// The source timed out, overflowed or faulted (a: sequence of the last
    /// frame, b: 1 timeout, 2 overflow, 3 fatal).
    SourceFault = 5,
    /// The chain failed on a frame (a: sequence).
    BackendError = 6,
    /// A sink failed to write (a: sink index, b: errors so far).
    SinkError = 7,
    /// The health verdict was written (a: good frames, b: sequence).
    HealthGood = 8,
    /// A parameter changed (diagnostics; a: parameter id, b: new value).
    ParameterChange = 9,
    /// The loop stopped (a: frames processed).
    Stop = 10,
}

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => EventKind::Started,
            2 => EventKind::FramesFlowing,
            3 => EventKind::DeadlineMiss,
            4 => EventKind::Drop,
            5 => EventKind::SourceFault,
            6 => EventKind::BackendError,
            7 => EventKind::SinkError,
            8 => EventKind::HealthGood,
            9 => EventKind::ParameterChange,
            10 => EventKind::Stop,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::FramesFlowing => "frames-flowing",
            EventKind::DeadlineMiss => "deadline-miss",
            EventKind::Drop => "drop",
            EventKind::SourceFault => "source-fault",
            EventKind::BackendError => "backend-error",
            EventKind::SinkError => "sink-error",
            EventKind::HealthGood => "health-good",
            EventKind::ParameterChange => "parameter-change",
            EventKind::Stop => "stop",
        }
    }
}

/// One recent event: fixed size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// Since the board was created.
    pub time_ns: u64,
    /// [`EventKind`] as a number (unknown numbers are possible from a
    /// newer writer; `EventKind::from_u32` says).
    pub kind: u32,
    pub a: u64,
    pub b: u64,
}

struct EventSlot {
    /// Index + 1 of the event in it; 0 while being written.
    stamp: AtomicU64,
    time_ns: AtomicU64,
    kind: AtomicU32,
    a: AtomicU64,
    b: AtomicU64,
}

/// The board. Create once, share by `Arc`.
pub struct StatusBoard {
    start: Instant,
    snapshot: SeqCell<StatusSnapshot, SNAP_WORDS>,
    map: SeqCell<PowerMapSnapshot, MAP_WORDS>,
    events_head: AtomicU64,
    events: Box<[EventSlot]>,
    /// Per-sink counters, written by the sinks' threads (sent, errors) and
    /// the loop (queue-full); read into the snapshot by `snapshot()`.
    sinks: [[AtomicU64; 3]; MAX_SINKS],
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
        StatusBoard {
            start: Instant::now(),
            snapshot: SeqCell::new(),
            map: SeqCell::new(),
            events_head: AtomicU64::new(0),
            events: (0..EVENT_CAPACITY)
                .map(|_| EventSlot {
                    stamp: AtomicU64::new(0),
                    time_ns: AtomicU64::new(0),
                    kind: AtomicU32::new(0),
                    a: AtomicU64::new(0),
                    b: AtomicU64::new(0),
                })
                .collect(),
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
            *c = SinkCounters {
                sent: a[0].load(Ordering::Relaxed),
                queue_full: a[1].load(Ordering::Relaxed),
                errors: a[2].load(Ordering::Relaxed),
            };
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

    /// Number of sinks with counters (set once at start-up).
    pub fn set_sink_count(&self, n: usize) {
        self.sink_count
            .store(n.min(MAX_SINKS) as u64, Ordering::Relaxed);
    }
    pub fn sink_sent(&self, i: usize, n: u64) {
        if let Some(c) = self.sinks.get(i) {
            c[0].fetch_add(n, Ordering::Relaxed);
        }
    }
    pub fn sink_queue_full(&self, i: usize, n: u64) {
        if let Some(c) = self.sinks.get(i) {
            c[1].fetch_add(n, Ordering::Relaxed);
        }
    }
    /// Counts a sink error; returns the sink's errors so far.
    pub fn sink_error(&self, i: usize) -> u64 {
        self.sinks
            .get(i)
            .map_or(0, |c| c[2].fetch_add(1, Ordering::Relaxed) + 1)
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
        let i = self.events_head.fetch_add(1, Ordering::Relaxed);
        let slot = &self.events[(i % EVENT_CAPACITY as u64) as usize];
        slot.stamp.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.time_ns.store(self.uptime_ns(), Ordering::Relaxed);
        slot.kind.store(kind as u32, Ordering::Relaxed);
        slot.a.store(a, Ordering::Relaxed);
        slot.b.store(b, Ordering::Relaxed);
        slot.stamp.store(i + 1, Ordering::Release);
    }

    /// The cursor of the next event to be posted (start here to see only
    /// new events; 0 sees everything still in the ring).
    pub fn events_cursor(&self) -> u64 {
        self.events_head.load(Ordering::Acquire)
    }

    /// Copies events from `cursor` on into `out`; returns how many and the
    /// cursor to pass next time. Events overwritten before they were read
    /// are skipped (the returned cursor minus `cursor` minus n says how
    /// many). Stops at an event still being written.
    pub fn events_since(&self, cursor: u64, out: &mut [Event]) -> (usize, u64) {
        let head = self.events_head.load(Ordering::Acquire);
        let mut c = cursor.max(head.saturating_sub(EVENT_CAPACITY as u64));
        let mut n = 0;
        while c < head && n < out.len() {
            let slot = &self.events[(c % EVENT_CAPACITY as u64) as usize];
            let s1 = slot.stamp.load(Ordering::Acquire);
            if s1 != c + 1 {
                if s1 > c + 1 {
                    // Overwritten meanwhile: jump to what the ring still holds.
                    c = self
                        .events_head
                        .load(Ordering::Acquire)
                        .saturating_sub(EVENT_CAPACITY as u64)
                        .max(c + 1);
                    continue;
                }
                break; // being written
            }
            let e = Event {
                time_ns: slot.time_ns.load(Ordering::Relaxed),
                kind: slot.kind.load(Ordering::Relaxed),
                a: slot.a.load(Ordering::Relaxed),
                b: slot.b.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            if slot.stamp.load(Ordering::Relaxed) != s1 {
                continue; // overwritten during the copy; the check above skips it
            }
            out[n] = e;
            n += 1;
            c += 1;
        }
        (n, c)
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
    fn events_are_read_in_order_with_a_cursor() {
        let board = StatusBoard::new();
        let mut out = [Event::default(); 8];
        assert_eq!(board.events_since(0, &mut out), (0, 0));
        board.post(EventKind::Started, 8_000_000, 0);
        board.post(EventKind::DeadlineMiss, 7, 100);
        let (n, c) = board.events_since(0, &mut out);
        assert_eq!((n, c), (2, 2));
        assert_eq!(out[0].kind, EventKind::Started as u32);
        assert_eq!((out[1].a, out[1].b), (7, 100));
        assert_eq!(board.events_since(c, &mut out), (0, 2));
        // Overrun: only the last EVENT_CAPACITY remain.
        for i in 0..(EVENT_CAPACITY as u64 + 10) {
            board.post(EventKind::Drop, i, 1);
        }
        let (n, c2) = board.events_since(c, &mut out);
        assert_eq!(n, 8);
        assert_eq!(c2, 12 + 8);
        assert_eq!(out[0].a, 10);
    }

    #[test]
    fn power_map_pools_the_maximum_with_axes() {
        let (nl, ns) = (128, 256);
        let mut p = vec![1.0f32; nl * ns];
        p[70 * ns + 200] = 1e6; // Doppler 70 -> row 35, range 200 -> column 50
        let mut m = PowerMapSnapshot::default();
        pool_power_map(&p, nl, ns, 0.5, 0.1, &mut m);
        assert_eq!(
            (m.rows, m.cols, m.pool_doppler, m.pool_range),
            (64, 64, 2, 4)
        );
        assert!((m.db[35][50] - 60.0).abs() < 1e-3);
        assert!(m.db[0][0].abs() < 1e-6);
        assert!((m.range_m[50] - (200.0 + 1.5) * 0.5).abs() < 1e-4);
        // Row 32 holds Doppler bins 64 and 65 (64 is zero velocity).
        assert!((m.velocity_mps[32] - 0.05).abs() < 1e-4);
        let board = StatusBoard::new();
        assert!(board.power_map().is_none());
        m.generation = 1;
        board.publish_power_map(&m);
        assert_eq!(board.power_map().map(|m| m.generation), Some(1));
    }
}
