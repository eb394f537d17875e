//! The non-real-time side of the loop's output. The loop pushes a
//! fixed-size [`FrameLine`] per frame it shows into a lock-free
//! single-producer queue and publishes its counters on the status board; a
//! normal-priority thread formats and prints them. The loop never blocks on
//! the terminal: when the queue is full the line is counted as lost.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use heapless::spsc::{Consumer, Queue};

use crate::config::SinkKind;
use crate::status::{DropReason, StatusBoard, StatusSnapshot};
use crate::timekeeping::TimeState;

/// Detections shown on a frame's line.
pub const SHOWN_DETECTIONS: usize = 8;

/// Frame lines the queue holds (about a second of frames at 8 ms).
pub const FRAME_LINE_QUEUE: usize = 256;

pub type FrameLineQueue = Queue<FrameLine, FRAME_LINE_QUEUE>;

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

/// One frame as the loop saw it: what its console line shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameLine {
    pub sequence: u64,
    pub slot: u32,
    pub dropped_before: u32,
    pub flags: u32,
    pub bytes: u32,
    /// Frame event to detections (processing).
    pub latency_ns: u64,
    /// Capture timestamp to the frame event (capture and delivery).
    pub delivery_ns: u64,
    pub deadline_missed: bool,
    /// The sequence number is not explained by the drop count.
    pub sequence_break: bool,
    pub detections: u32,
    pub cut: u32,
    pub shown: [ShownDetection; SHOWN_DETECTIONS],
    pub check: PayloadCheck,
    /// Not processed, and why.
    pub skipped: Option<DropReason>,
}

/// Writes one frame's line of the console log.
pub fn write_frame_line(r: &FrameLine, w: &mut impl Write) -> std::io::Result<()> {
    write!(
        w,
        "frame seq={} slot={} dropped={} latency={:.3}ms",
        r.sequence,
        r.slot,
        r.dropped_before,
        r.latency_ns as f64 / 1e6
    )?;
    if r.deadline_missed {
        write!(
            w,
            " DEADLINE-MISS (capture to event {:.3}ms)",
            r.delivery_ns as f64 / 1e6
        )?;
    }
    if r.sequence_break {
        write!(w, " SEQUENCE-BREAK")?;
    }
    if r.flags != 0 {
        write!(w, " flags={:#x}", r.flags)?;
    }
    if let Some(reason) = r.skipped {
        return writeln!(w, " NOT-PROCESSED ({})", reason.name());
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

/// The status line: counters, rate, drops by reason, latency, loop CPU,
/// health, sinks.
pub fn status_line(
    s: &StatusSnapshot,
    sink_names: &[String],
    w: &mut impl Write,
) -> std::io::Result<()> {
    write!(
        w,
        "status frames={} produced={} rate={:.1}/s dropped",
        s.frames_processed, s.frames_produced, s.rate_hz
    )?;
    for r in DropReason::ALL {
        write!(w, " {}={}", r.name(), s.dropped(r))?;
    }
    write!(
        w,
        " deadline_misses={} timeouts={} sequence_errors={}",
        s.deadline_misses, s.source_timeouts, s.sequence_errors
    )?;
    match (s.latency_quantile_us(0.5), s.latency_quantile_us(0.999)) {
        (Some(p50), Some(p999)) => write!(
            w,
            " latency p50<={:.0}us p99.9<={:.0}us max={:.3}ms",
            p50,
            p999,
            s.latency_max_ns as f64 / 1e6
        )?,
        _ => write!(w, " latency -")?,
    }
    write!(
        w,
        " loop_cpu={:.1}us/frame health={}",
        s.loop_cpu_per_frame_ns as f64 / 1e3,
        s.health().name()
    )?;
    for (i, c) in s.sinks.iter().take(s.sink_count as usize).enumerate() {
        let name = sink_names.get(i).map_or("?", |n| n.as_str());
        write!(w, " sink[{i}]({name})")?;
        if c.down != 0 {
            write!(w, " DOWN")?;
        }
        write!(
            w,
            " sent={} queue_full={} errors={}",
            c.sent, c.queue_full, c.errors
        )?;
        if SinkKind::from_code(c.kind) == Some(SinkKind::Asterix) {
            write!(
                w,
                " datagrams={} records={} split_frames={} send_errors={} clamped={}",
                c.datagrams, c.records, c.split_frames, c.send_errors, c.clamped
            )?;
        }
    }
    let down = s.sinks_down();
    if down > 0 {
        write!(w, " outputs=degraded({down} down)")?;
    }
    if s.frame_lines_lost > 0 {
        write!(w, " log_lost={}", s.frame_lines_lost)?;
    }
    Ok(())
}

/// The status line's time field: ` time=SOURCE:QUALITY[<=BOUND]`, and the
/// card's offset from the system clock when it has been read.
pub fn time_field(t: &TimeState, w: &mut impl Write) -> std::io::Result<()> {
    write!(w, " time={}:{}", t.source().name(), t.quality().name())?;
    if let Some(b) = t.bound() {
        write!(w, "<={b}ns")?;
    }
    if let Some(o) = t.offset() {
        write!(w, " clock_offset={o}ns")?;
    }
    if let Some(d) = t.drift() {
        write!(w, " clock_drift={d}ppb")?;
    }
    Ok(())
}

/// What runs at every status interval besides the status line (loop CPU
/// clock, systemd notification, health verdict), and whatever the line
/// should end with (telemetry).
pub trait StatusHook {
    /// Called every tick (about 20 ms) with the latest snapshot.
    fn tick(&mut self, snap: &StatusSnapshot);
    /// Called at each status interval before the line is printed.
    fn interval(&mut self, snap: &StatusSnapshot);
    /// Appends to the status line.
    fn extend_line(&mut self, _w: &mut dyn Write) {}
}

/// No hook (tests).
pub struct NoHook;
impl StatusHook for NoHook {
    fn tick(&mut self, _: &StatusSnapshot) {}
    fn interval(&mut self, _: &StatusSnapshot) {}
}

/// Prints queued frame lines and, every `status_every`, a status line from
/// the board, until `done` is set and the queue is drained.
pub fn run_printer(
    mut lines: Consumer<'_, FrameLine>,
    board: &StatusBoard,
    done: &AtomicBool,
    status_every: Duration,
    sink_names: &[String],
    hook: &mut dyn StatusHook,
    out: &mut impl Write,
) {
    let mut next_status = Instant::now() + status_every;
    let mut line = Vec::with_capacity(1024);
    loop {
        let finished = done.load(Ordering::Acquire);
        while let Some(r) = lines.dequeue() {
            // A closed stdout must not stop the appliance: drop the text.
            let _ = write_frame_line(&r, out);
        }
        let snap = board.snapshot();
        hook.tick(&snap);
        if Instant::now() >= next_status {
            hook.interval(&snap);
            let snap = board.snapshot();
            line.clear();
            let _ = status_line(&snap, sink_names, &mut line);
            if let Some(t) = board.time() {
                let _ = time_field(&t, &mut line);
            }
            hook.extend_line(&mut line);
            line.push(b'\n');
            let _ = out.write_all(&line);
            next_status += status_every;
            if next_status < Instant::now() {
                next_status = Instant::now() + status_every;
            }
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
        let mut r = FrameLine {
            sequence: 7,
            slot: 2,
            dropped_before: 1,
            latency_ns: 2_500_000,
            detections: 10,
            ..FrameLine::default()
        };
        r.shown[0] = ShownDetection {
            range_m: 20.0,
            velocity_mps: -3.0,
            azimuth_deg: 12.0,
            snr_db: 25.0,
        };
        let mut s = Vec::new();
        write_frame_line(&r, &mut s).expect("write to vec");
        let s = String::from_utf8(s).expect("utf8");
        assert!(s.starts_with("frame seq=7 slot=2 dropped=1 latency=2.500ms detections=10 [20.0m -3.00m/s +12.0deg 25.0dB]"), "{s}");
        assert!(s.trim_end().ends_with("..."), "{s}");

        r.check = PayloadCheck::PatternMismatch(4096);
        r.deadline_missed = true;
        let mut s = Vec::new();
        write_frame_line(&r, &mut s).expect("write to vec");
        let s = String::from_utf8(s).expect("utf8");
        assert!(
            s.contains("DEADLINE-MISS") && s.contains("PATTERN-MISMATCH at byte 4096"),
            "{s}"
        );
    }

    #[test]
    fn printer_drains_everything_before_it_stops() {
        let mut q = FrameLineQueue::new();
        let (mut p, c) = q.split();
        for i in 0..10 {
            p.enqueue(FrameLine {
                sequence: i,
                ..FrameLine::default()
            })
            .expect("room");
        }
        let board = StatusBoard::new();
        let done = AtomicBool::new(true);
        let mut out = Vec::new();
        run_printer(
            c,
            &board,
            &done,
            Duration::from_secs(3600),
            &[],
            &mut NoHook,
            &mut out,
        );
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(text.lines().filter(|l| l.starts_with("frame ")).count(), 10);
        assert!(text.contains("seq=9 "));
    }
}
