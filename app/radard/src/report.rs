//! The non-real-time side of the loop's output. The loop pushes fixed-size
//! records into a lock-free single-producer queue and bumps atomic counters;
//! a normal-priority thread formats and prints them. The loop never blocks
//! on the terminal: when the queue is full the record is counted as lost.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use heapless::spsc::{Consumer, Queue};

/// Detections shown on a frame's line.
pub const SHOWN_DETECTIONS: usize = 8;

/// Records the queue holds (about a second of frames at 8 ms).
pub const LOG_CAPACITY: usize = 256;

pub type LogQueue = Queue<FrameRecord, LOG_CAPACITY>;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShownDetection {
    pub range_m: f32,
    pub velocity_mps: f32,
    pub azimuth_deg: f32,
    pub snr_db: f32,
}

/// What became of the frame's payload check (test-pattern content).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PayloadCheck {
    /// Not checked (scene content goes through the DSP instead).
    #[default]
    NotChecked,
    Verified,
    /// First mismatching byte offset.
    PatternMismatch(usize),
    CrcMismatch,
}

/// One frame, as the loop saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameRecord {
    pub sequence: u64,
    pub slot: u32,
    pub dropped_before: u32,
    pub flags: u32,
    pub bytes: u32,
    pub latency_ns: u64,
    pub deadline_missed: bool,
    /// The sequence number is not explained by the drop count.
    pub sequence_break: bool,
    pub detections: u32,
    pub cut: u32,
    pub shown: [ShownDetection; SHOWN_DETECTIONS],
    pub check: PayloadCheck,
}

/// Running totals the loop publishes for the status line (relaxed atomics:
/// a snapshot may mix two frames, which a status line tolerates).
#[derive(Debug, Default)]
pub struct LiveStats {
    pub frames: AtomicU64,
    pub dropped_at_source: AtomicU64,
    pub deadline_misses: AtomicU64,
    pub payload_errors: AtomicU64,
    pub sequence_errors: AtomicU64,
    pub short_frames: AtomicU64,
    /// Chunk events handed to the backend (chunk-streamed mode), and those
    /// it refused (the frame is then processed whole).
    pub chunks_streamed: AtomicU64,
    pub chunk_errors: AtomicU64,
    pub records_lost: AtomicU64,
    pub max_latency_ns: AtomicU64,
    pub last_latency_ns: AtomicU64,
    /// The latest GPU telemetry sample (written by the telemetry thread).
    pub telemetry: crate::telemetry::TelemetryCell,
}

impl LiveStats {
    pub fn add(c: &AtomicU64, v: u64) {
        c.fetch_add(v, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Formats one record as the frame line of the console log.
pub fn frame_line(r: &FrameRecord, w: &mut impl Write) -> std::io::Result<()> {
    write!(
        w,
        "frame seq={} slot={} dropped={} latency={:.3}ms",
        r.sequence,
        r.slot,
        r.dropped_before,
        r.latency_ns as f64 / 1e6
    )?;
    if r.deadline_missed {
        write!(w, " DEADLINE-MISS")?;
    }
    if r.sequence_break {
        write!(w, " SEQUENCE-BREAK")?;
    }
    if r.flags != 0 {
        write!(w, " flags={:#x}", r.flags)?;
    }
    match r.check {
        PayloadCheck::NotChecked => {
            write!(w, " detections={}", r.detections)?;
            if r.cut > 0 {
                write!(w, " cut={}", r.cut)?;
            }
            let n = (r.detections as usize).min(SHOWN_DETECTIONS);
            for d in &r.shown[..n] {
                write!(
                    w,
                    " [{:.1}m {:+.2}m/s {:+.1}deg {:.1}dB]",
                    d.range_m, d.velocity_mps, d.azimuth_deg, d.snr_db
                )?;
            }
            if r.detections as usize > n {
                write!(w, " ...")?;
            }
        }
        PayloadCheck::Verified => write!(w, " pattern=ok crc=ok")?,
        PayloadCheck::PatternMismatch(off) => write!(w, " PATTERN-MISMATCH at byte {off}")?,
        PayloadCheck::CrcMismatch => write!(w, " CRC-MISMATCH")?,
    }
    writeln!(w)
}

/// Prints queued frame lines and, every `status_every`, a status line, until
/// `done` is set and the queue is drained.
pub fn run_printer(
    mut records: Consumer<'_, FrameRecord>,
    live: &LiveStats,
    done: &AtomicBool,
    status_every: Duration,
    out: &mut impl Write,
) {
    let mut next_status = Instant::now() + status_every;
    let mut last_frames = 0u64;
    let mut last_time = Instant::now();
    loop {
        let finished = done.load(Ordering::Acquire);
        while let Some(r) = records.dequeue() {
            // A closed stdout must not stop the appliance: drop the text.
            let _ = frame_line(&r, out);
        }
        if Instant::now() >= next_status {
            let frames = LiveStats::get(&live.frames);
            let rate = (frames - last_frames) as f64 / last_time.elapsed().as_secs_f64();
            last_frames = frames;
            last_time = Instant::now();
            let _ = writeln!(
                out,
                "status frames={} rate={:.1}/s dropped_at_source={} deadline_misses={} \
                 payload_errors={} sequence_errors={} short={} max_latency={:.3}ms log_lost={}",
                frames,
                rate,
                LiveStats::get(&live.dropped_at_source),
                LiveStats::get(&live.deadline_misses),
                LiveStats::get(&live.payload_errors),
                LiveStats::get(&live.sequence_errors),
                LiveStats::get(&live.short_frames),
                LiveStats::get(&live.max_latency_ns) as f64 / 1e6,
                LiveStats::get(&live.records_lost),
            );
            if let Some(t) = live.telemetry.latest() {
                let _ = writeln!(out, "status {t}");
            }
            next_status += status_every;
        }
        let _ = out.flush();
        if finished {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_what_happened() {
        let mut r = FrameRecord {
            sequence: 7,
            slot: 2,
            dropped_before: 1,
            latency_ns: 2_500_000,
            detections: 10,
            ..FrameRecord::default()
        };
        r.shown[0] = ShownDetection {
            range_m: 20.0,
            velocity_mps: -3.0,
            azimuth_deg: 12.0,
            snr_db: 25.0,
        };
        let mut s = Vec::new();
        frame_line(&r, &mut s).expect("write to vec");
        let s = String::from_utf8(s).expect("utf8");
        assert!(s.starts_with("frame seq=7 slot=2 dropped=1 latency=2.500ms detections=10 [20.0m -3.00m/s +12.0deg 25.0dB]"), "{s}");
        assert!(s.trim_end().ends_with("..."), "{s}");

        r.check = PayloadCheck::PatternMismatch(4096);
        r.deadline_missed = true;
        let mut s = Vec::new();
        frame_line(&r, &mut s).expect("write to vec");
        let s = String::from_utf8(s).expect("utf8");
        assert!(
            s.contains("DEADLINE-MISS") && s.contains("PATTERN-MISMATCH at byte 4096"),
            "{s}"
        );
    }

    #[test]
    fn printer_drains_everything_before_it_stops() {
        let mut q = LogQueue::new();
        let (mut p, c) = q.split();
        for i in 0..10 {
            p.enqueue(FrameRecord {
                sequence: i,
                ..FrameRecord::default()
            })
            .expect("room");
        }
        let live = LiveStats::default();
        let done = AtomicBool::new(true);
        let mut out = Vec::new();
        run_printer(c, &live, &done, Duration::from_secs(3600), &mut out);
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(text.lines().filter(|l| l.starts_with("frame ")).count(), 10);
        assert!(text.contains("seq=9 "));
    }
}
