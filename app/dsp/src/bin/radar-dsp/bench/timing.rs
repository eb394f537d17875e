//! The timing loops of `radar-dsp bench`: frames handed to the code under
//! test back to back or paced, chunk by chunk in chunk-streamed mode, each
//! frame timed from "complete in its slot" to "detections on the host".

use std::time::{Duration, Instant};

use radar_dsp::{Backend, Detections, DspError, FrameInput, SlotFrame};
use radar_stats::LatencyStats;

use super::options::BenchOptions;
use super::report::{BenchReport, unix_time_f64};

/// The frames a timing loop rotates through (by slot index), with the
/// detection count each gave the first time (a different count later
/// means a broken backend).
#[derive(Clone, Copy)]
pub struct Rotation<'a> {
    pub expect: &'a [usize],
    pub warmup: usize,
    pub frames: usize,
}

/// Per-frame times of one timing loop.
pub struct Timed {
    /// Microseconds, in the order taken.
    pub samples: Vec<f64>,
    /// Summed busy time, seconds.
    pub busy_s: f64,
    /// Wall clock when the first timed frame began.
    pub started_unix_s: f64,
}

/// What a timing loop asks of the code under test.
#[derive(Clone, Copy)]
pub enum Step {
    /// Process this frame, complete in its slot; returns its detection count.
    Frame(SlotFrame),
    /// Chunk-streamed mode: this chunk of the frame has landed (untimed).
    Chunk(SlotFrame, usize),
    /// Chunk-streamed mode, back to back: let the chunks' work finish
    /// before the frame's time starts, as it would have while the rest of
    /// the frame was being captured (untimed).
    Settle,
    /// Wake the GPU (`--wake-us`): the frame is due shortly.
    Wake,
}

/// How a timing loop hands out frames.
#[derive(Clone, Copy, Default)]
pub struct Pacing {
    /// One frame every `period`; None: back to back.
    pub period: Option<Duration>,
    /// With a period: `Step::Wake` this long before each frame is due.
    pub wake: Option<Duration>,
    /// Chunk-streamed mode with this many chunks a frame: the chunks but
    /// the last land before the frame completes, evenly over the period
    /// when paced, just before the frame (then `Step::Settle`) otherwise.
    pub chunks: Option<usize>,
}

/// Sleep until shortly before `due`, then spin until it.
fn wait_until(due: Instant) {
    // Sleeping closer than this to a deadline risks waking late.
    const SPIN: Duration = Duration::from_micros(500);
    let now = Instant::now();
    if due > now + SPIN {
        std::thread::sleep(due - now - SPIN);
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Time `frame(Step::Frame(..))` on the slots in rotation: back to back,
/// or with one frame every `period` (the thread sleeps until shortly before
/// each frame's time and spins the rest, so the frame starts on time; the
/// GPU and the bus idle in between as they do in operation), with `wake`
/// calling `frame(Step::Wake)` that long before each frame is due, and in
/// chunk-streamed mode `frame(Step::Chunk(..))` as each chunk lands. Only
/// the frame step is timed: from "frame complete in the slot" to
/// "detections readable on the host".
pub fn time_frames(
    rot: &Rotation,
    pacing: Pacing,
    what: &str,
    mut frame: impl FnMut(Step) -> Result<usize, DspError>,
) -> Result<Timed, DspError> {
    let mut t = Timed {
        samples: Vec::with_capacity(rot.frames),
        busy_s: 0.0,
        started_unix_s: 0.0,
    };
    let start = Instant::now();
    for k in 0..rot.warmup + rot.frames {
        let s = k % rot.expect.len();
        let this = SlotFrame {
            index: s,
            capture: k as u64,
        };
        let chunks = pacing.chunks.unwrap_or(1);
        if let Some(p) = pacing.period {
            let due = start + p * u32::try_from(k).unwrap_or(u32::MAX);
            // Chunk c of C lands (C - 1 - c) chunk periods before the frame
            // completes with the last one.
            for c in 0..chunks - 1 {
                let before = p * u32::try_from(chunks - 1 - c).unwrap_or(u32::MAX)
                    / u32::try_from(chunks).unwrap_or(u32::MAX);
                wait_until(due.checked_sub(before).unwrap_or(due));
                frame(Step::Chunk(this, c))?;
            }
            if let Some(lead) = pacing.wake {
                wait_until(due.checked_sub(lead).unwrap_or(due));
                frame(Step::Wake)?;
            }
            wait_until(due);
        } else if chunks > 1 {
            for c in 0..chunks - 1 {
                frame(Step::Chunk(this, c))?;
            }
            frame(Step::Settle)?;
        }
        if k == rot.warmup {
            t.started_unix_s = unix_time_f64();
        }
        let t0 = Instant::now();
        let n = frame(Step::Frame(this))?;
        let dt = t0.elapsed().as_secs_f64();
        if n != rot.expect[s] {
            return Err(DspError::Backend(format!(
                "{what} {s}: {n} detections, {} the first time: the backend is not deterministic",
                rot.expect[s]
            )));
        }
        if k >= rot.warmup {
            t.samples.push(dt * 1e6);
            t.busy_s += dt;
        }
    }
    Ok(t)
}

/// Waits until the work started for the landed chunks is done (`Step::Settle`).
pub type Settle<B> = fn(&B) -> Result<(), DspError>;

/// `process` on the slots, back to back and, with `--period-us`, paced;
/// whole frames, or with `streamed` (chunks per frame, and what waits for
/// the landed chunks' work: `Step::Settle`) chunk-streamed; into the report.
pub fn time_slots<B: Backend>(
    opts: &BenchOptions,
    report: &mut BenchReport,
    backend: &mut B,
    slots: &[&[u8]],
    rot: &Rotation,
    dets: &mut Detections,
    streamed: Option<(usize, Settle<B>)>,
) -> Result<(), DspError> {
    let chunks = streamed.map(|(c, _)| c);
    let streamed_before = backend.frames_streamed();
    let mut frame = |step: Step| -> Result<usize, DspError> {
        match step {
            Step::Wake => Ok(0),
            Step::Chunk(f, c) => {
                let slot = slots[f.index];
                let chunk_bytes = slot.len() / chunks.unwrap_or(1).max(1);
                let landed = &slot[..((c + 1) * chunk_bytes).min(slot.len())];
                backend.chunk_landed(f, c, landed).map(|()| 0)
            }
            Step::Settle => streamed
                .map_or(Ok(()), |(_, settle)| settle(backend))
                .map(|()| 0),
            Step::Frame(f) => process_slot(backend, slots, f, dets),
        }
    };
    let what = if chunks.is_some() {
        "slot (chunk-streamed)"
    } else {
        "slot"
    };
    let pacing = Pacing {
        chunks,
        ..Pacing::default()
    };
    let t = time_frames(rot, pacing, what, &mut frame)?;
    let stats = LatencyStats::from_samples(&t.samples, t.busy_s);
    let samples = opts.keep_samples.then_some((t.samples, t.started_unix_s));
    let paced = match opts.period() {
        Some(period) => {
            let pacing = Pacing {
                period: Some(period),
                ..pacing
            };
            let t = time_frames(rot, pacing, what, &mut frame)?;
            Some((
                LatencyStats::from_samples(&t.samples, t.busy_s),
                opts.keep_samples.then_some((t.samples, t.started_unix_s)),
            ))
        }
        None => None,
    };
    let (paced_stats, paced_samples) = match paced {
        Some((s, samples)) => (Some(s), samples),
        None => (None, None),
    };
    if chunks.is_some() {
        // Every frame of those loops must have finished from its chunks'
        // work, or the figures would be whole frames under another name.
        let loops = if paced_stats.is_some() { 2 } else { 1 };
        let want = (loops * (rot.warmup + rot.frames)) as u64;
        let got = backend.frames_streamed() - streamed_before;
        if got != want {
            return Err(DspError::Backend(format!(
                "chunk-streamed timing: {got} of {want} frames finished from their chunks' work"
            )));
        }
        report.end_to_end_streamed = Some(stats);
        report.end_to_end_streamed_paced = paced_stats;
        report.end_to_end_streamed_samples_us = samples.map(|(v, _)| v);
        report.end_to_end_streamed_paced_samples_us = paced_samples.map(|(v, _)| v);
    } else {
        report.end_to_end = stats;
        report.end_to_end_paced = paced_stats;
        if let Some((v, at)) = samples {
            report.end_to_end_samples_us = Some(v);
            report.end_to_end_started_unix_s = Some(at);
        }
        if let Some((v, at)) = paced_samples {
            report.end_to_end_paced_samples_us = Some(v);
            report.end_to_end_paced_started_unix_s = Some(at);
        }
    }
    Ok(())
}

pub fn first_counts(
    backend: &mut dyn Backend,
    views: &[&[u8]],
    dets: &mut Detections,
) -> Result<Vec<usize>, DspError> {
    (0..views.len())
        .map(|s| {
            let f = SlotFrame {
                index: s,
                capture: s as u64,
            };
            process_slot(backend, views, f, dets)
        })
        .collect()
}

/// `process` on `frame`, complete in its slot; its detection count.
pub fn process_slot(
    backend: &mut dyn Backend,
    slots: &[&[u8]],
    frame: SlotFrame,
    dets: &mut Detections,
) -> Result<usize, DspError> {
    backend.process(
        FrameInput {
            bytes: slots[frame.index],
            slot: Some(frame),
        },
        dets,
    )?;
    Ok(dets.list.len())
}

pub fn mean(v: &[usize]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<usize>() as f64 / v.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunk-streamed pacing: before each frame, chunks 0..C-1 of that
    /// frame (same slot and capture), in order; paced, spread over the
    /// period so the last lands one chunk period before the frame; back to
    /// back, followed by a settle step. Only frames are timed.
    #[test]
    fn streamed_pacing_hands_over_the_chunks_before_each_frame() {
        let expect = [0usize; 3];
        let rot = Rotation {
            expect: &expect,
            warmup: 2,
            frames: 6,
        };
        let period = Duration::from_millis(4);
        for paced in [false, true] {
            let pacing = Pacing {
                period: paced.then_some(period),
                wake: None,
                chunks: Some(4),
            };
            let start = Instant::now();
            let mut log: Vec<(char, usize, u64, usize, Duration)> = Vec::new();
            let t = time_frames(&rot, pacing, "test", |step| {
                let at = start.elapsed();
                match step {
                    Step::Chunk(f, c) => log.push(('c', f.index, f.capture, c, at)),
                    Step::Settle => log.push(('s', 0, 0, 0, at)),
                    Step::Frame(f) => log.push(('f', f.index, f.capture, 0, at)),
                    Step::Wake => log.push(('w', 0, 0, 0, at)),
                }
                Ok(0)
            })
            .expect("timing loop");
            assert_eq!(t.samples.len(), 6);
            let per_frame = if paced { 4 } else { 5 };
            assert_eq!(log.len(), 8 * per_frame, "paced {paced}: {log:?}");
            for (k, steps) in log.chunks(per_frame).enumerate() {
                let (slot, seq) = (k % 3, k as u64);
                for (c, step) in steps[..3].iter().enumerate() {
                    assert_eq!((step.0, step.1, step.2, step.3), ('c', slot, seq, c));
                }
                let last = steps[per_frame - 1];
                assert_eq!((last.0, last.1, last.2), ('f', slot, seq));
                if paced {
                    // Frame k is due k periods after the start; chunk c
                    // (3 - c) quarter periods before it.
                    let due = period * k as u32;
                    assert!(last.4 >= due, "frame {k} at {:?}, due {due:?}", last.4);
                    for (c, step) in steps[..3].iter().enumerate() {
                        let lands = due.saturating_sub(period * (3 - c as u32) / 4);
                        assert!(step.4 >= lands, "chunk {c} of {k} early");
                    }
                } else {
                    assert_eq!(steps[3].0, 's');
                }
            }
        }
    }
}
