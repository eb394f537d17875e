//! The frame loop: next frame event -> run the chain on that slot -> publish
//! -> release the slot -> account. In chunk-streamed mode the chunk events
//! before a frame's event hand each landed chunk to the backend, which starts
//! that chunk's work without waiting for it. After warm-up it allocates
//! nothing, takes no lock, and makes no system call but the source's event
//! wait (`tests/hot_loop_alloc.rs` checks the allocation part).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use heapless::spsc::Producer;
use radar_dsp::{Backend, Detections, DspError, FrameInput, SlotFrame};
use tegra_p2p::source::Event;
use tegra_p2p::{Frame, FrameSource, SequenceTracker, verify_test_pattern};
use thiserror::Error;

use crate::config::Content;
use crate::diag::live::{LoopSettings, ParamLink};
use crate::report::{FrameRecord, LiveStats, PayloadCheck, SHOWN_DETECTIONS, ShownDetection};

#[derive(Debug, Error)]
pub enum LoopError {
    #[error("frame source: {0}")]
    Source(#[from] tegra_p2p::Error),
    #[error("processing chain: {0}")]
    Dsp(#[from] DspError),
}

#[derive(Clone, Debug)]
pub struct LoopOptions {
    pub content: Content,
    /// Deadline per frame (the frame period); None = no deadline accounting.
    pub deadline: Option<Duration>,
    /// Stop after this many frames.
    pub max_frames: Option<u64>,
    /// Frames before the loop counts as warm (lazy set-up in backends).
    pub warmup_frames: u64,
    /// Queue a console line every N frames (0 = none).
    pub print_every: u32,
    /// Frames were captured into slots the backend prepared (CUDA graphs per
    /// slot): pass the slot index along.
    pub slots_prepared: bool,
    /// Chunk-streamed mode: the source delivers chunk events, and each is
    /// handed to the backend (needs `slots_prepared`).
    pub chunk_streaming: bool,
}

/// Why the loop ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopEnd {
    FrameLimit,
    StopRequested,
}

/// Latencies of the last `capacity` frames, kept without allocating.
pub struct LatencyLog {
    ns: Vec<u64>,
    next: usize,
    filled: bool,
}

impl LatencyLog {
    pub fn with_capacity(capacity: usize) -> Self {
        LatencyLog {
            ns: vec![0; capacity.max(1)],
            next: 0,
            filled: false,
        }
    }

    fn push(&mut self, v: u64) {
        self.ns[self.next] = v;
        self.next += 1;
        if self.next == self.ns.len() {
            self.next = 0;
            self.filled = true;
        }
    }

    /// The recorded values (not in arrival order once it wrapped).
    pub fn values(&self) -> &[u64] {
        if self.filled {
            &self.ns
        } else {
            &self.ns[..self.next]
        }
    }
}

/// Everything the loop needs besides the source and the backend.
pub struct LoopContext<'q, 'a> {
    pub log: Producer<'q, FrameRecord>,
    pub live: &'a LiveStats,
    pub stop: &'a AtomicBool,
    pub latencies: &'a mut LatencyLog,
    /// Called once, when the warm-up frames are done.
    pub on_warm: &'a mut dyn FnMut(),
    /// Parameter changes from the diagnostics server, applied between frames.
    pub params: Option<ParamLink<'q>>,
}

/// Waits for the next frame event, the `capture`-th since the start. Chunk
/// events before it are that frame's (events come in order): in
/// chunk-streamed mode each goes to the backend as part of capture
/// `capture` of its slot (its work starts; nothing waits for it), else they
/// are passed over, as are transmit completions. A chunk event the backend
/// refuses is counted, and the frame is processed whole.
fn next_frame<'s, 'b>(
    src: &'s dyn FrameSource,
    mut backend: Option<&mut (dyn Backend + 'b)>,
    opts: &LoopOptions,
    live: &LiveStats,
    capture: u64,
) -> Result<Frame<'s>, LoopError> {
    loop {
        match src.next_event(None)? {
            Event::Frame(f) => return Ok(f),
            Event::Chunk(c) => {
                if let Some(b) = backend.as_deref_mut().filter(|_| opts.chunk_streaming) {
                    let frame = SlotFrame {
                        index: c.slot as usize,
                        capture,
                    };
                    match b.chunk_landed(frame, c.chunk as usize) {
                        Ok(()) => LiveStats::add(&live.chunks_streamed, 1),
                        Err(_) => LiveStats::add(&live.chunk_errors, 1),
                    }
                }
            }
            Event::TxDone { .. } => {}
        }
    }
}

/// Runs until the frame limit, a stop request, or an error of the source or
/// the chain. `backend` is None for test-pattern content.
pub fn run(
    src: &dyn FrameSource,
    mut backend: Option<&mut dyn Backend>,
    dets: &mut Detections,
    opts: &LoopOptions,
    ctx: &mut LoopContext<'_, '_>,
) -> Result<LoopEnd, LoopError> {
    let chunk_bytes = src.chunk_bytes();
    let slot_bytes = src.ring().slot_bytes();
    let mut count: u64 = 0;
    let mut sequence = SequenceTracker::new();
    let live = ctx.live;
    let mut settings = LoopSettings {
        print_every: opts.print_every,
        print_every_on: opts.print_every,
    };
    loop {
        if ctx.stop.load(Ordering::Relaxed) {
            return Ok(LoopEnd::StopRequested);
        }
        if let Some(p) = ctx.params.as_mut() {
            p.apply_pending(backend.as_deref_mut(), &mut settings, count);
        }
        if opts.max_frames.is_some_and(|m| count >= m) {
            return Ok(LoopEnd::FrameLimit);
        }
        if count == opts.warmup_frames {
            (ctx.on_warm)();
        }

        // `count` numbers the frame events: it is this frame's capture.
        let frame = next_frame(src, backend.as_deref_mut(), opts, live, count)?;
        let t0 = Instant::now();
        let meta = *frame.meta();
        let sequence_ok = sequence.observe(meta.sequence, meta.dropped).is_ok();
        if !sequence_ok {
            LiveStats::add(&live.sequence_errors, 1);
        }
        let mut rec = FrameRecord {
            sequence_break: !sequence_ok,
            sequence: meta.sequence,
            slot: meta.slot,
            dropped_before: meta.dropped,
            flags: meta.flags,
            bytes: meta.bytes,
            ..FrameRecord::default()
        };

        if frame.len() < slot_bytes {
            // A short frame cannot go through the chain; it is reported.
            LiveStats::add(&live.short_frames, 1);
        } else {
            match opts.content {
                Content::TestPattern => {
                    rec.check = match verify_test_pattern(frame.data(), meta.sequence, chunk_bytes)
                    {
                        Err(m) => PayloadCheck::PatternMismatch(m.offset),
                        Ok(()) if frame.check_crc().is_err() => PayloadCheck::CrcMismatch,
                        Ok(()) => PayloadCheck::Verified,
                    };
                    if rec.check != PayloadCheck::Verified {
                        LiveStats::add(&live.payload_errors, 1);
                    }
                }
                Content::Scene => {
                    if let Some(b) = backend.as_deref_mut() {
                        let input = FrameInput {
                            bytes: frame.data(),
                            slot: opts.slots_prepared.then_some(SlotFrame {
                                index: meta.slot as usize,
                                capture: count,
                            }),
                        };
                        b.process(input, dets)?;
                        rec.detections = dets.list.len() as u32;
                        rec.cut = dets.cut;
                        for (shown, d) in rec.shown.iter_mut().zip(&dets.list) {
                            *shown = ShownDetection {
                                range_m: d.range_m,
                                velocity_mps: d.velocity_mps,
                                azimuth_deg: d.azimuth_deg,
                                snr_db: d.snr_db,
                            };
                        }
                        debug_assert!(rec.shown.len() == SHOWN_DETECTIONS);
                    }
                }
            }
        }
        frame.release()?;

        let latency = t0.elapsed().as_nanos() as u64;
        rec.latency_ns = latency;
        rec.deadline_missed = opts.deadline.is_some_and(|d| latency > d.as_nanos() as u64);
        ctx.latencies.push(latency);
        LiveStats::add(&live.frames, 1);
        LiveStats::add(&live.dropped_at_source, u64::from(meta.dropped));
        if rec.deadline_missed {
            LiveStats::add(&live.deadline_misses, 1);
        }
        live.last_latency_ns.store(latency, Ordering::Relaxed);
        live.max_latency_ns.fetch_max(latency, Ordering::Relaxed);
        let failed = rec.deadline_missed
            || rec.sequence_break
            || matches!(
                rec.check,
                PayloadCheck::PatternMismatch(_) | PayloadCheck::CrcMismatch
            );
        let print = settings.print_every > 0 && count % u64::from(settings.print_every) == 0;
        if (print || failed) && ctx.log.enqueue(rec).is_err() {
            LiveStats::add(&live.records_lost, 1);
        }
        count += 1;
    }
}
