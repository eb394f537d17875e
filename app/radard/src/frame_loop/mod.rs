//! The frame loop: next frame event -> run the chain on that slot -> publish
//! -> release the slot -> account. In chunk-streamed mode the chunk events
//! before a frame's event hand each landed chunk to the backend, which starts
//! that chunk's work without waiting for it. In GPU-triggered mode the GPU
//! waits for each chunk itself (the backend keeps the next frames' work
//! queued): the loop sleeps until the backend's work for the next
//! `frames_per_wake` frames has finished (its one wait), then for each of
//! them takes the frame's event (queued since its last chunk landed), reads
//! the detections the GPU left in host memory, publishes and releases the
//! slot. After warm-up it allocates nothing, takes no lock, and makes no
//! system call but the frame wait (`tests/hot_loop_alloc.rs` checks the
//! allocation part).
//!
//! `context` is what the loop works with besides the source and the
//! backend, and builds it; `param_queue` is how another thread changes the
//! loop's parameters between frames.

mod context;
pub mod param_queue;

use std::sync::atomic::Ordering;
use std::time::Duration;

use radar_dsp::{Backend, DspError, FrameInput, SlotFrame, TriggerWait};
use tegra_p2p::clock::monotonic_ns;
use tegra_p2p::source::Event;
use tegra_p2p::uapi::FPGA_P2P_EVF_CRC_MISMATCH;
use tegra_p2p::{Frame, FrameSource, SequenceTracker, TxTarget, verify_test_pattern};
use thiserror::Error;

use crate::config::{Content, LoopPolicy};
use crate::report::{FrameLine, PayloadCheck, SHOWN_DETECTIONS, ShownDetection};
use crate::status::{
    DropReason, EventKind, LATEST_DETECTIONS, MAP_DETECTIONS, SourceFault, StatusBoard,
    StatusSnapshot, latency_bin, pool_power_map,
};
use param_queue::LoopSettings;

pub use context::{FpgaSink, LatencyLog, LoopContext, LoopEnds, LoopResources};

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
    /// The frame period: a frame is due one period after its capture
    /// ended; None = no deadline accounting (frames as fast as they come).
    pub period: Option<Duration>,
    /// Stop after this many frames (delivered frame events).
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
    /// GPU-triggered mode: the backend's work for every slot is armed and
    /// queued (`Unit::open_backend`); the loop waits for it, not for the
    /// source.
    pub gpu_triggered: bool,
    /// How long a wait for a frame may take before it counts as a source
    /// timeout (the source's event timeout).
    pub event_timeout: Duration,
    /// GPU-triggered mode: the loop sleeps until this many frames are done
    /// (`[loop] frames_per_wake`).
    pub frames_per_wake: u32,
    /// What to do when falling behind.
    pub policy: LoopPolicy,
    /// Publish a power map every N processed frames (0 = never).
    pub power_map_every: u32,
    /// Fail the chain on every Nth frame (fault injection; 0 = never).
    pub backend_error_every: u64,
}

impl LoopOptions {
    /// Options for `content` with everything else at its default.
    pub fn new(content: Content) -> Self {
        LoopOptions {
            content,
            period: None,
            max_frames: None,
            warmup_frames: 4,
            print_every: 0,
            slots_prepared: false,
            chunk_streaming: false,
            gpu_triggered: false,
            event_timeout: Duration::from_secs(1),
            frames_per_wake: 1,
            policy: LoopPolicy::ProcessAll,
            power_map_every: 0,
            backend_error_every: 0,
        }
    }
}

/// Why the loop ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopEnd {
    FrameLimit,
    StopRequested,
}

/// The next thing the source has for the loop.
enum Next<'s> {
    /// The frame, and how long the loop waited on the source for it (ns).
    Frame(Frame<'s>, u64),
    /// A recoverable source condition (a timeout or an event overflow);
    /// the loop goes on waiting.
    Fault(SourceFault),
    /// A signal interrupted the wait (SIGTERM, SIGINT): the loop looks at
    /// its stop flag, then waits again. Not a fault.
    Interrupted,
}

/// The source's answer to a wait: an event, or what the loop makes of a
/// recoverable condition (a timeout or an overflow is a fault it reports, a
/// signal is not a fault); any other error ends the loop.
fn source_event<'s>(
    ev: Result<Event<'s>, tegra_p2p::Error>,
) -> Result<Result<Event<'s>, Next<'s>>, LoopError> {
    match ev {
        Ok(ev) => Ok(Ok(ev)),
        Err(tegra_p2p::Error::Timeout { .. }) => Ok(Err(Next::Fault(SourceFault::Timeout))),
        Err(tegra_p2p::Error::Interrupted { .. }) => Ok(Err(Next::Interrupted)),
        Err(tegra_p2p::Error::Overflow { .. }) => Ok(Err(Next::Fault(SourceFault::Overflow))),
        Err(e) => Err(e.into()),
    }
}

/// Waits for the next frame event, the `capture`-th since the start. Chunk
/// events before it are that frame's (events come in order): in
/// chunk-streamed mode each goes to the backend as part of capture
/// `capture` of its slot (its work starts; nothing waits for it), else they
/// are passed over; transmit completions are counted for the fpga sink. A
/// chunk event the backend refuses is counted, and the frame is processed
/// whole. A timeout or an event overflow is reported, not fatal.
/// A frame comes with the time the loop spent waiting on the source for it.
fn next_frame<'s, 'b>(
    src: &'s dyn FrameSource,
    mut backend: Option<&mut (dyn Backend + 'b)>,
    opts: &LoopOptions,
    snap: &mut StatusSnapshot,
    board: &StatusBoard,
    fpga_index: Option<usize>,
    capture: u64,
) -> Result<Next<'s>, LoopError> {
    let mut waited_ns = 0;
    loop {
        let asked = monotonic_ns();
        let ev = src.next_event(None);
        waited_ns += monotonic_ns().saturating_sub(asked);
        let ev = match source_event(ev)? {
            Ok(ev) => ev,
            Err(next) => return Ok(next),
        };
        match ev {
            Event::Frame(f) => return Ok(Next::Frame(f, waited_ns)),
            Event::Chunk(c) => {
                if let Some(b) = backend.as_deref_mut().filter(|_| opts.chunk_streaming) {
                    let frame = SlotFrame {
                        index: c.slot as usize,
                        capture,
                    };
                    match b.chunk_landed(frame, c.chunk as usize, c.landed()) {
                        Ok(()) => snap.chunks_streamed += 1,
                        Err(_) => snap.chunk_errors += 1,
                    }
                }
            }
            Event::TxDone { failed, .. } => {
                if let (true, Some(i)) = (failed, fpga_index) {
                    let errors = board.sink_error(i);
                    if errors.is_power_of_two() {
                        board.post(EventKind::SinkError, i as u64, errors);
                    }
                }
            }
        }
    }
}

/// GPU-triggered mode's frame wait: unless the backend's work for the
/// `taken`-th frame since arming (counted from 0) has finished already,
/// sleeps until that of `frames_per_wake` more frames has (or the timeout
/// ends a shorter batch); then takes the frame's event, which the source
/// queued when its last chunk landed, before the GPU finished. No frame
/// finished within the event timeout:
/// the source is looked at without waiting (a stall is a timeout, a
/// revocation or an engine fault an error); a frame whose event came but
/// whose work did not finish in another timeout is an error (the GPU or its
/// waits are stuck).
fn next_triggered_frame<'s, 'b>(
    src: &'s dyn FrameSource,
    backend: &mut (dyn Backend + 'b),
    opts: &LoopOptions,
    board: &StatusBoard,
    fpga_index: Option<usize>,
    taken: u64,
) -> Result<Next<'s>, LoopError> {
    let stuck = || {
        LoopError::Dsp(DspError::Backend(
            "GPU-triggered mode: the backend is not armed".to_string(),
        ))
    };
    let asked = monotonic_ns();
    let finished = {
        let t = backend.triggered().ok_or_else(stuck)?;
        if t.completed() > taken {
            TriggerWait::Reached(t.completed())
        } else {
            let batch = u64::from(opts.frames_per_wake.max(1));
            match t.wait_completed(taken + batch, opts.event_timeout) {
                // A batch the source cut short: its frames are done.
                TriggerWait::Timeout if t.completed() > taken => {
                    TriggerWait::Reached(t.completed())
                }
                w => w,
            }
        }
    };
    let (mut wait, probe) = match finished {
        TriggerWait::Reached(_) => (opts.event_timeout, false),
        TriggerWait::Interrupted => return Ok(Next::Interrupted),
        TriggerWait::Timeout => (Duration::from_millis(1), true),
    };
    loop {
        let ev = src.next_event(Some(wait));
        let ev = match source_event(ev)? {
            Ok(ev) => ev,
            Err(next) => return Ok(next),
        };
        match ev {
            Event::Frame(f) => {
                if probe {
                    // The frame came; its work had not finished in a whole
                    // timeout: give it one more.
                    let t = backend.triggered().ok_or_else(stuck)?;
                    if !matches!(
                        t.wait_completed(taken + 1, opts.event_timeout),
                        TriggerWait::Reached(_)
                    ) {
                        return Err(LoopError::Dsp(DspError::Backend(format!(
                            "GPU-triggered mode: frame {} landed in slot {} but the GPU did not finish it",
                            f.sequence(),
                            f.slot()
                        ))));
                    }
                }
                return Ok(Next::Frame(f, monotonic_ns().saturating_sub(asked)));
            }
            // Not asked for in this mode; a source that sends them anyway
            // is passed over.
            Event::Chunk(_) => {}
            Event::TxDone { failed, .. } => {
                if let (true, Some(i)) = (failed, fpga_index) {
                    let errors = board.sink_error(i);
                    if errors.is_power_of_two() {
                        board.post(EventKind::SinkError, i as u64, errors);
                    }
                }
            }
        }
        wait = opts.event_timeout;
    }
}

/// Counts a frame not processed.
fn drop_frame(snap: &mut StatusSnapshot, board: &StatusBoard, reason: DropReason, sequence: u64) {
    snap.dropped[reason as usize] += 1;
    snap.consecutive_good = 0;
    board.post(EventKind::Drop, sequence, reason as u64);
}

/// Runs until the frame limit, a stop request, or a fatal error of the
/// source (revoked, engine fault). `backend` is None for test-pattern
/// content. The ledger closes at every publication: frames produced =
/// processed + dropped by reason.
pub fn run(
    src: &dyn FrameSource,
    mut backend: Option<&mut dyn Backend>,
    opts: &LoopOptions,
    ctx: &mut LoopContext<'_, '_>,
) -> Result<LoopEnd, LoopError> {
    let dets = &mut *ctx.dets;
    let chunk_bytes = src.chunk_bytes();
    let slot_bytes = src.ring().slot_bytes();
    let period_ns = opts.period.map_or(0, |d| d.as_nanos() as u64);
    let board = ctx.board;
    let mut count: u64 = 0;
    let mut sequence = SequenceTracker::new();
    let mut settings = LoopSettings {
        print_every: opts.print_every,
        print_every_on: opts.print_every,
    };
    let mut snap = StatusSnapshot::default();
    let mut rate_start = monotonic_ns();
    let mut rate_frames = 0u64;
    let fpga_index = ctx.fpga.as_ref().map(|f| f.index);
    // GPU-triggered mode: frames whose detections were taken from the
    // backend (the GPU's frames are counted from its arming on).
    let mut triggered_taken: u64 = 0;
    board.post(EventKind::Started, period_ns, 0);
    let end = loop {
        if ctx.stop.load(Ordering::Relaxed) {
            break LoopEnd::StopRequested;
        }
        if let Some(p) = ctx.params.as_mut() {
            p.apply_pending(backend.as_deref_mut(), &mut settings, count);
        }
        if opts.max_frames.is_some_and(|m| count >= m) {
            break LoopEnd::FrameLimit;
        }
        if count == opts.warmup_frames {
            (ctx.on_warm)();
        }

        // `count` numbers the frame events: it is this frame's capture.
        let next = match backend.as_deref_mut() {
            Some(b) if opts.gpu_triggered => {
                next_triggered_frame(src, b, opts, board, fpga_index, triggered_taken)
            }
            b => next_frame(src, b, opts, &mut snap, board, fpga_index, count),
        };
        let (frame, waited_ns) = match next {
            Ok(Next::Frame(f, waited)) => (f, waited),
            // Chunk work already handed to the backend for this capture
            // stays valid: the next wait continues the same capture.
            Ok(Next::Interrupted) => continue,
            Ok(Next::Fault(fault)) => {
                if fault == SourceFault::Timeout {
                    snap.source_timeouts += 1;
                }
                snap.consecutive_good = 0;
                board.post(EventKind::SourceFault, snap.latest.sequence, fault as u64);
                snap.generation += 1;
                board.publish(&snap);
                continue;
            }
            Err(e) => {
                board.post(
                    EventKind::SourceFault,
                    snap.latest.sequence,
                    SourceFault::Fatal as u64,
                );
                board.post(EventKind::Stop, snap.frames_processed, 0);
                snap.generation += 1;
                board.publish(&snap);
                return Err(e);
            }
        };
        let t_event = monotonic_ns();
        let meta = *frame.meta();
        // The frame's time of day and its quality (the clock thread's last
        // judgement; never at or before the previous frame's).
        let time_state = board.time().unwrap_or_default();
        let (frame_time, held) = ctx.clock.stamp(&time_state, &meta, t_event);
        if held {
            board.post(
                EventKind::FrameTimeHeld,
                meta.sequence,
                frame_time.held_back_ns.unwrap_or(0),
            );
        }
        // Capture time on this host's CLOCK_MONOTONIC: the source's
        // conversion of the first sample (the kernel module's at the
        // interrupt, the simulator's own schedule); one that cannot be
        // (none, in the future, or more than a minute old) is replaced by
        // "one period before the frame event", when its last chunk landed.
        let captured = if meta.host_ns == 0
            || meta.host_ns > t_event
            || t_event - meta.host_ns > 60_000_000_000
        {
            t_event.saturating_sub(period_ns)
        } else {
            meta.host_ns
        };
        // Capture takes one period; the frame is due one period after that.
        let due = captured + 2 * period_ns;
        let sequence_ok = sequence.observe(meta.sequence, meta.dropped).is_ok();
        if !sequence_ok {
            snap.sequence_errors += 1;
        }
        snap.frames_produced += u64::from(meta.dropped) + 1;
        if meta.dropped > 0 {
            snap.dropped[DropReason::AtSource as usize] += u64::from(meta.dropped);
            snap.consecutive_good = 0;
            board.post(EventKind::Drop, meta.sequence, DropReason::AtSource as u64);
        }
        // GPU-triggered: the GPU processed the frame whatever the loop
        // decides about it; its detections are taken now (clearing the
        // slot's flag), and the slot's work is queued again after release.
        let triggered_result = if opts.gpu_triggered {
            triggered_taken += 1;
            match backend.as_deref_mut().and_then(|b| b.triggered()) {
                Some(t) => match t.take(meta.slot as usize, dets) {
                    Ok(Some(stamp)) => Ok(stamp),
                    Ok(None) => {
                        // The GPU finished a frame, and the frame that came
                        // is another slot's: the ring's order is broken.
                        return Err(LoopError::Dsp(DspError::Backend(format!(
                            "GPU-triggered mode: frame {} landed in slot {}, whose work has not finished",
                            meta.sequence, meta.slot
                        ))));
                    }
                    Err(_) => Err(()),
                },
                None => Err(()),
            }
        } else {
            Ok(radar_dsp::TriggerStamp::default())
        };
        let mut line = FrameLine {
            sequence_break: !sequence_ok,
            sequence: meta.sequence,
            slot: meta.slot,
            dropped_before: meta.dropped,
            flags: meta.flags,
            bytes: meta.bytes,
            ..FrameLine::default()
        };

        let mut processed = false;
        if opts.policy == LoopPolicy::SkipToNewest && period_ns > 0 && t_event >= due {
            // A newer frame is complete already: this one goes unprocessed.
            drop_frame(&mut snap, board, DropReason::Late, meta.sequence);
            line.skipped = Some(DropReason::Late);
        } else if frame.len() < slot_bytes || meta.is_short() {
            // A short frame cannot go through the chain.
            drop_frame(&mut snap, board, DropReason::Short, meta.sequence);
            line.skipped = Some(DropReason::Short);
        } else if meta.flags & FPGA_P2P_EVF_CRC_MISMATCH != 0 {
            drop_frame(&mut snap, board, DropReason::Crc, meta.sequence);
            line.skipped = Some(DropReason::Crc);
        } else {
            match opts.content {
                Content::TestPattern => {
                    line.check = match verify_test_pattern(frame.data(), meta.sequence, chunk_bytes)
                    {
                        Err(m) => PayloadCheck::PatternMismatch(m.offset),
                        Ok(()) if frame.check_crc().is_err() => PayloadCheck::CrcMismatch,
                        Ok(()) => PayloadCheck::Verified,
                    };
                    if line.check == PayloadCheck::Verified {
                        processed = true;
                    } else {
                        drop_frame(&mut snap, board, DropReason::Crc, meta.sequence);
                        line.skipped = Some(DropReason::Crc);
                    }
                }
                Content::Scene | Content::Adc => {
                    if let Some(b) = backend.as_deref_mut() {
                        let input = FrameInput {
                            bytes: frame.data(),
                            slot: opts.slots_prepared.then_some(SlotFrame {
                                index: meta.slot as usize,
                                capture: count,
                            }),
                        };
                        let injected = opts.backend_error_every > 0
                            && meta.sequence % opts.backend_error_every
                                == opts.backend_error_every - 1;
                        let result = if injected {
                            dets.clear();
                            Err(())
                        } else if opts.gpu_triggered {
                            triggered_result.map(|_| ())
                        } else {
                            b.process(input, dets).map_err(|_| ())
                        };
                        match result {
                            Ok(()) => {
                                processed = true;
                                line.detections = dets.list.len() as u32;
                                line.cut = dets.cut;
                                for (shown, d) in line.shown.iter_mut().zip(&dets.list) {
                                    *shown = ShownDetection {
                                        range_m: d.range_m,
                                        velocity_mps: d.velocity_mps,
                                        azimuth_deg: d.azimuth_deg,
                                        snr_db: d.snr_db,
                                    };
                                }
                                debug_assert!(line.shown.len() == SHOWN_DETECTIONS);
                            }
                            Err(()) => {
                                drop_frame(&mut snap, board, DropReason::Error, meta.sequence);
                                board.post(EventKind::BackendError, meta.sequence, 0);
                                line.skipped = Some(DropReason::Error);
                            }
                        }
                    } else {
                        processed = true;
                    }
                }
            }
        }
        // GPU-triggered: a frame's map is in the slot's buffer until the
        // slot's next frame; read now, before the slot goes back.
        let map_due = processed
            && opts.power_map_every > 0
            && opts.content.is_radar()
            && (snap.frames_processed + 1) % u64::from(opts.power_map_every) == 0;
        let triggered_map = map_due
            && opts.gpu_triggered
            && backend
                .as_deref_mut()
                .and_then(|b| b.triggered())
                .is_some_and(|t| t.take_power_map(meta.slot as usize, ctx.power_raw));
        frame.release()?;

        let now = monotonic_ns();
        // GPU-triggered: done when the detections were in host memory (the
        // backend's stamp), however long the loop slept on; counted from
        // the end of the capture (the loop sees the frame only after).
        let (finished, processing) = match (opts.gpu_triggered, triggered_result) {
            (true, Ok(stamp)) if stamp.host_done_ns > 0 => {
                let done = stamp.host_done_ns.min(now);
                (done, done.saturating_sub(captured + period_ns))
            }
            _ => (now, now.saturating_sub(t_event)),
        };
        let latency = finished.saturating_sub(captured);
        if processed {
            snap.frames_processed += 1;
            if snap.frames_processed == 1 {
                board.post(EventKind::FramesFlowing, meta.sequence, 0);
            }
            let late = period_ns > 0 && finished > due;
            line.latency_ns = processing;
            line.delivery_ns = t_event.saturating_sub(captured);
            line.deadline_missed = late;
            ctx.latencies.push(latency, processing);
            snap.latency_hist[latency_bin(latency)] += 1;
            snap.latency_max_ns = snap.latency_max_ns.max(latency);
            snap.processing_last_ns = processing;
            snap.processing_max_ns = snap.processing_max_ns.max(processing);
            if late {
                snap.deadline_misses += 1;
                // The source's part: how long past the frame's arrival time
                // (its capture's end) the loop sat waiting for it. When the
                // frame would have made its deadline without it, the miss
                // is the source's; otherwise the loop's own.
                let source_late = waited_ns.min(t_event.saturating_sub(captured + period_ns));
                if finished - source_late <= due {
                    snap.deadline_misses_source_late += 1;
                }
                snap.lateness_hist[latency_bin(finished - due)] += 1;
                board.post(EventKind::DeadlineMiss, meta.sequence, finished - due);
            }
            if late || !sequence_ok || meta.dropped > 0 {
                snap.consecutive_good = 0;
            } else {
                snap.consecutive_good += 1;
            }
            let list: &[radar_dsp::Detection] = match opts.content {
                Content::Scene | Content::Adc => &dets.list,
                Content::TestPattern => &[],
            };
            let cut = if opts.content.is_radar() { dets.cut } else { 0 };
            let l = &mut snap.latest;
            l.sequence = meta.sequence;
            l.timestamp_ns = meta.timestamp_ns;
            l.latency_ns = latency;
            l.count = list.len() as u32;
            let kept = list.len().min(LATEST_DETECTIONS);
            l.cut = cut + (list.len() - kept) as u32;
            l.detections[..kept].copy_from_slice(&list[..kept]);
            if let Some(feed) = ctx.feed {
                let stamp = crate::sinks::FrameStamp {
                    sequence: meta.sequence,
                    timestamp_ns: meta.timestamp_ns,
                    utc_ns: frame_time.utc_ns,
                    time_source: frame_time.source,
                    time_quality: frame_time.quality,
                    time_bound_ns: frame_time.bound_ns,
                    latency_ns: latency,
                };
                feed.push(&stamp, list, cut);
            }
            if let Some(f) = ctx.fpga.as_deref_mut() {
                crate::sinks::detections_record::encode(
                    meta.sequence,
                    meta.timestamp_ns,
                    list,
                    cut,
                    f.max_detections,
                    &mut f.buf,
                );
                match src.transmit(TxTarget::Detections, &f.buf, meta.sequence) {
                    Ok(()) => board.sink_sent(f.index, 1),
                    // Every transmit slot still with the FPGA.
                    Err(e) if e.errno().is_some_and(|n| n as i32 == libc::EAGAIN) => {
                        board.sink_queue_full(f.index, 1)
                    }
                    Err(_) => {
                        let errors = board.sink_error(f.index);
                        if errors.is_power_of_two() {
                            board.post(EventKind::SinkError, f.index as u64, errors);
                        }
                    }
                }
            }
            if map_due
                && let Some(b) = backend.as_deref_mut()
                && if opts.gpu_triggered {
                    triggered_map
                } else {
                    b.power_map(ctx.power_raw).is_ok()
                }
            {
                let m = &mut *ctx.power_map;
                pool_power_map(
                    ctx.power_raw,
                    ctx.n_loops,
                    ctx.n_samples,
                    ctx.range_bin_m,
                    ctx.velocity_bin_mps,
                    m,
                );
                m.generation += 1;
                m.sequence = meta.sequence;
                m.detection_count = list.len() as u32;
                let kept = list.len().min(MAP_DETECTIONS);
                m.detection_cut = cut + (list.len() - kept) as u32;
                m.detections[..kept].copy_from_slice(&list[..kept]);
                board.publish_power_map(m);
            }
        } else {
            line.latency_ns = processing;
        }
        rate_frames += u64::from(processed);
        if finished - rate_start >= 1_000_000_000 {
            snap.rate_hz = rate_frames as f64 * 1e9 / (finished - rate_start) as f64;
            rate_start = finished;
            rate_frames = 0;
        }
        let failed = line.deadline_missed
            || line.sequence_break
            || line.skipped.is_some()
            || matches!(
                line.check,
                PayloadCheck::PatternMismatch(_) | PayloadCheck::CrcMismatch
            );
        let print =
            settings.print_every > 0 && count.is_multiple_of(u64::from(settings.print_every));
        if (print || failed) && ctx.frame_lines.enqueue(line).is_err() {
            snap.frame_lines_lost += 1;
        }
        snap.generation += 1;
        board.publish(&snap);
        count += 1;
    };
    board.post(EventKind::Stop, snap.frames_processed, 0);
    Ok(end)
}
