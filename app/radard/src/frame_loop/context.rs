//! What the loop works with besides the source and the backend
//! ([`LoopContext`]), and what owns it ([`LoopResources`]): every buffer and
//! queue allocated once at start-up, so that the loop allocates nothing.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use heapless::spsc::{Consumer, Producer};
use radar_dsp::Detections;

use crate::config::{RadardConfig, SinkKind};
use crate::report::{FrameLine, FrameLineQueue};
use crate::sinks::{DetectionFeed, detections_record};
use crate::status::{PowerMapSnapshot, SinkCounter, StatusBoard};
use crate::wall_clock::FrameClock;

use super::param_queue::{self, ChangeQueue, ParamReceiver, ParamSender, ReplyQueue};

/// Latencies of the last `capacity` frames, kept without allocating: from
/// the capture timestamp, and from the frame event (processing).
pub struct LatencyLog {
    ns: Vec<u64>,
    processing_ns: Vec<u64>,
    next: usize,
    filled: bool,
}

impl LatencyLog {
    pub fn with_capacity(capacity: usize) -> Self {
        // Filled with a non-zero value so every page is touched now: the
        // resident size does not grow while the log fills.
        LatencyLog {
            ns: vec![u64::MAX; capacity.max(1)],
            processing_ns: vec![u64::MAX; capacity.max(1)],
            next: 0,
            filled: false,
        }
    }

    pub(super) fn push(&mut self, latency: u64, processing: u64) {
        self.ns[self.next] = latency;
        self.processing_ns[self.next] = processing;
        self.next += 1;
        if self.next == self.ns.len() {
            self.next = 0;
            self.filled = true;
        }
    }

    fn used(&self) -> usize {
        if self.filled {
            self.ns.len()
        } else {
            self.next
        }
    }

    /// Capture timestamp to detections (not in arrival order once it wrapped).
    pub fn values(&self) -> &[u64] {
        &self.ns[..self.used()]
    }

    /// Frame event to detections.
    pub fn processing_values(&self) -> &[u64] {
        &self.processing_ns[..self.used()]
    }

    /// Both logs sorted in place (capture to detections, event to
    /// detections), for percentiles at the end of a run without copying
    /// them: a copy of a million values would stay resident after it is freed.
    pub fn sorted(&mut self) -> (&[u64], &[u64]) {
        let n = self.used();
        self.ns[..n].sort_unstable();
        self.processing_ns[..n].sort_unstable();
        (&self.ns[..n], &self.processing_ns[..n])
    }
}

/// The FPGA sink as the loop drives it (see `sinks`).
pub struct FpgaSink {
    /// Its index among the board's sink counters.
    pub index: usize,
    /// Detections per record at most.
    pub max_detections: usize,
    /// The detections record, encoded here every frame (preallocated).
    pub buf: Vec<u8>,
}

impl FpgaSink {
    pub fn new(index: usize, max_detections: usize) -> Self {
        FpgaSink {
            index,
            max_detections,
            buf: Vec::with_capacity(detections_record::record_bytes(max_detections)),
        }
    }
}

/// Everything the loop needs besides the source and the backend (built by
/// [`LoopResources::context`]).
pub struct LoopContext<'q, 'a> {
    /// Where the chain writes a frame's detections.
    pub dets: &'a mut Detections,
    /// The console's frame lines (see `report`).
    pub frame_lines: Producer<'q, FrameLine>,
    pub board: &'a StatusBoard,
    pub stop: &'a AtomicBool,
    pub latencies: &'a mut LatencyLog,
    /// The threaded sinks' feed (None: no such sinks).
    pub feed: Option<&'a DetectionFeed>,
    pub fpga: Option<&'a mut FpgaSink>,
    /// Preallocated power-map buffers (raw map, pooled snapshot).
    pub power_raw: &'a mut Vec<f32>,
    pub power_map: &'a mut PowerMapSnapshot,
    /// Range (m) and velocity (m/s) of one bin, for the map's axes.
    pub range_bin_m: f64,
    pub velocity_bin_mps: f64,
    pub n_loops: usize,
    pub n_samples: usize,
    /// Called once, when the warm-up frames are done.
    pub on_warm: &'a mut dyn FnMut(),
    /// Parameter changes from another thread (the diagnostics server),
    /// applied between frames.
    pub params: Option<ParamReceiver<'q>>,
    /// Stamps each frame with its time of day.
    pub clock: &'a mut FrameClock,
}

/// The loop's buffers and queues for one run, allocated at start-up for a
/// configuration: the detections, the latency log, the power-map buffers,
/// the detection feed (when a jsonl or udp sink is configured), the fpga
/// sink's record buffer (when an fpga sink is), the console's frame-line
/// queue and the parameter queues; and the status board they publish on.
pub struct LoopResources {
    pub board: Arc<StatusBoard>,
    pub dets: Detections,
    pub latencies: LatencyLog,
    /// The threaded sinks' feed (None: no jsonl or udp sink).
    pub feed: Option<DetectionFeed>,
    /// The fpga sink (None: none configured).
    pub fpga: Option<FpgaSink>,
    power_raw: Vec<f32>,
    power_map: Box<PowerMapSnapshot>,
    frame_lines: FrameLineQueue,
    changes: ChangeQueue,
    replies: ReplyQueue,
    range_bin_m: f64,
    velocity_bin_mps: f64,
    n_loops: usize,
    n_samples: usize,
    clock: FrameClock,
}

/// The loop's context, and the other ends of its queues.
pub struct LoopEnds<'a> {
    pub context: LoopContext<'a, 'a>,
    /// The console's frame lines, for the thread that prints them.
    pub frame_lines: Consumer<'a, FrameLine>,
    /// Where parameter changes are sent from (the diagnostics server).
    pub params: ParamSender<'a>,
}

impl LoopResources {
    /// For `cfg`'s geometry, chain and sinks (the board gets a counter per
    /// sink), with room for the latencies of `latency_frames` frames.
    pub fn new(cfg: &RadardConfig, latency_frames: usize) -> Self {
        let board = Arc::new(StatusBoard::new());
        board.set_sink_count(cfg.sinks.len());
        for (i, s) in cfg.sinks.iter().enumerate() {
            board.sink_set(i, SinkCounter::Kind, s.kind().code());
        }
        let max = cfg.chain.max_detections;
        let threaded = cfg.sinks.iter().any(|s| s.kind() != SinkKind::Fpga);
        let g = &cfg.geometry;
        LoopResources {
            board,
            dets: Detections::with_capacity(max),
            latencies: LatencyLog::with_capacity(latency_frames),
            feed: threaded.then(|| DetectionFeed::new(max)),
            fpga: cfg.fpga_sink_index().map(|i| FpgaSink::new(i, max)),
            power_raw: Vec::with_capacity(g.n_loops * g.n_samples),
            power_map: Box::new(PowerMapSnapshot::default()),
            frame_lines: FrameLineQueue::new(),
            changes: ChangeQueue::new(),
            replies: ReplyQueue::new(),
            range_bin_m: cfg.physical.range_bin_m(g),
            velocity_bin_mps: cfg.physical.velocity_bin_mps(g),
            n_loops: g.n_loops,
            n_samples: g.n_samples,
            clock: FrameClock::new(cfg.frame_period().map_or(0, |p| p.as_nanos() as u64)),
        }
    }

    /// Frames whose time was held after their predecessor's (their clock
    /// stepped back), so far.
    pub fn frames_time_held(&self) -> u64 {
        self.clock.held_frames
    }

    /// The loop's context over these buffers, stopping when `stop` is set
    /// and calling `on_warm` once warm-up is done; the loop takes parameter
    /// changes when `params` is set. Also returns the other ends of its
    /// queues.
    pub fn context<'a>(
        &'a mut self,
        stop: &'a AtomicBool,
        on_warm: &'a mut dyn FnMut(),
        params: bool,
    ) -> LoopEnds<'a> {
        let (producer, consumer) = self.frame_lines.split();
        let (receiver, sender) = param_queue::split(&mut self.changes, &mut self.replies);
        LoopEnds {
            context: LoopContext {
                dets: &mut self.dets,
                frame_lines: producer,
                board: &self.board,
                stop,
                latencies: &mut self.latencies,
                feed: self.feed.as_ref(),
                fpga: self.fpga.as_mut(),
                power_raw: &mut self.power_raw,
                power_map: &mut self.power_map,
                range_bin_m: self.range_bin_m,
                velocity_bin_mps: self.velocity_bin_mps,
                n_loops: self.n_loops,
                n_samples: self.n_samples,
                on_warm,
                params: params.then_some(receiver),
                clock: &mut self.clock,
            },
            frame_lines: consumer,
            params: sender,
        }
    }
}
