//! GPU-triggered processing in the CUDA backend (docs/processing-chain.md,
//! section 10): the per-slot graphs of `pipeline/trigger.rs`, the buffers
//! they write for the host, the wake-up of the host thread, the feeder
//! thread that keeps the next frames' work queued, the checks at arming and
//! the way out (`cancel`).
//!
//! Frames land in the ring's slots in order, so the `q`-th graph launched
//! since arming is slot `q mod N`'s: the feeder (a thread of its own, at
//! normal priority) launches them ahead, keeping `2N` frames queued, and
//! the host thread that takes the detections launches nothing. A graph
//! queued for a slot whose previous frame the host still holds waits for
//! the slot's count to leave 0, which happens only after the host released
//! the slot and the card refilled it.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaGraph, sys};

use cuda_mem::{MappedHostBuffer, Mapping, MemOpAttributes, StreamMemOps, cuda_err};

use super::pipeline::{HostWake, Pipeline, TriggerTargets};
use crate::backend::{CompletionAccess, TriggerStamp, TriggerWait};
use crate::detection::{Detection, Detections};
use crate::error::DspError;

/// Bytes of a slot's TriggerRecord (kernels.cu).
const RECORD_BYTES: usize = 64;
/// Offsets (in u32 words) of the control buffer's words.
const ALPHA_INDEX: usize = 0;
const CANCELLING: usize = 8;
const ACK: usize = 16;

/// What the host function at the end of each slot's graph shares with the
/// waiting thread and the feeder. Leaked at arming: a host node may still
/// run after the backend is gone (a cancel that timed out), and must find it.
pub(super) struct WakeShared {
    /// Frames finished since arming.
    done: AtomicU64,
    /// Low 32 bits of `done`: the futex the host thread sleeps on.
    futex: AtomicU32,
    /// The waiter wants a wake-up once `done` reaches this.
    wake_at: AtomicU64,
    /// The same for the feeder.
    feed_futex: AtomicU32,
    feed_at: AtomicU64,
    /// Per slot, CLOCK_MONOTONIC when the host function of its last frame
    /// ran: the frame's detections were in host memory by then.
    stamps: Box<[AtomicU64]>,
}

/// A slot's host node argument.
struct SlotWake {
    shared: &'static WakeShared,
    slot: usize,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The host node's function: stamps the slot's frame, counts it, and
/// wakes the host thread and the feeder when they asked for this many.
/// Runs on a CUDA driver thread; makes no CUDA call.
unsafe extern "C" fn host_wake(data: *mut c_void) {
    // SAFETY: `data` is a leaked SlotWake of the graph's arming.
    let s = unsafe { &*(data as *const SlotWake) };
    let w = s.shared;
    w.stamps[s.slot].store(monotonic_ns(), Ordering::Release);
    let n = w.done.fetch_add(1, Ordering::AcqRel) + 1;
    w.futex.store(n as u32, Ordering::Release);
    w.feed_futex.store(n as u32, Ordering::Release);
    if n >= w.wake_at.load(Ordering::Acquire) {
        futex::wake(&w.futex);
    }
    if n >= w.feed_at.load(Ordering::Acquire) {
        futex::wake(&w.feed_futex);
    }
}

/// The feeder's view of the graphs (raw driver handles: the thread only
/// launches them, and is joined before they are destroyed).
struct FeedShared {
    execs: Vec<usize>,
    stream: usize,
    ctx: usize,
    /// Frames kept queued ahead of the last finished one.
    depth: u64,
    /// Graphs launched since arming.
    launched: AtomicU64,
    stop: AtomicBool,
    /// The CUresult of a launch that failed (0: none).
    error: AtomicI32,
    wake: &'static WakeShared,
}

/// The feeder thread; stopped and joined on drop.
struct Feeder {
    shared: Arc<FeedShared>,
    thread: Option<JoinHandle<()>>,
}

impl Feeder {
    fn start(shared: FeedShared) -> Result<Self, DspError> {
        let shared = Arc::new(shared);
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("gpu-feeder".into())
            .spawn(move || feed(&s))
            .map_err(|e| DspError::Backend(format!("GPU-triggered mode: feeder thread: {e}")))?;
        Ok(Feeder {
            shared,
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        futex::wake(&self.shared.wake.feed_futex);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn launched(&self) -> u64 {
        self.shared.launched.load(Ordering::Acquire)
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The feeder: keeps `depth` frames' graphs queued beyond the last
/// finished frame, in ring order; sleeps until half of them finished.
fn feed(s: &FeedShared) {
    // SAFETY: the context outlives this thread (joined first).
    if unsafe { sys::cuCtxSetCurrent(s.ctx as sys::CUcontext) } != sys::CUresult::CUDA_SUCCESS {
        s.error.store(-1, Ordering::Release);
        return;
    }
    let n = s.execs.len() as u64;
    while !s.stop.load(Ordering::Acquire) {
        let seen = s.wake.feed_futex.load(Ordering::Acquire);
        let done = s.wake.done.load(Ordering::Acquire);
        let mut launched = s.launched.load(Ordering::Relaxed);
        while launched < done + s.depth && !s.stop.load(Ordering::Acquire) {
            let exec = s.execs[(launched % n) as usize] as sys::CUgraphExec;
            // SAFETY: a live graph exec and stream of the arming (joined
            // before either is destroyed); only this thread launches them.
            let r = unsafe { sys::cuGraphLaunch(exec, s.stream as sys::CUstream) };
            if r != sys::CUresult::CUDA_SUCCESS {
                s.error.store(r as i32, Ordering::Release);
                return;
            }
            launched += 1;
            s.launched.store(launched, Ordering::Release);
        }
        s.wake
            .feed_at
            .store(done + s.depth / 2 + 1, Ordering::Release);
        if s.wake.done.load(Ordering::Acquire) > done + s.depth / 2 {
            continue;
        }
        let _ = futex::wait(&s.wake.feed_futex, seen, Duration::from_millis(200));
    }
}

/// GPU-triggered mode of one CUDA backend, once armed.
pub(super) struct TriggerState {
    // Field order is drop order: the feeder before the graphs it launches,
    // the graphs before the buffers they write.
    feeder: Option<Feeder>,
    graphs: Vec<CudaGraph>,
    /// Per slot an OutHeader and max_detections records, `out_stride` apart.
    outs: MappedHostBuffer,
    out_stride: usize,
    /// Per slot a TriggerRecord.
    records: MappedHostBuffer,
    /// Two CFAR scale tables.
    alpha: MappedHostBuffer,
    /// Words: the alpha index, the self-test ack.
    control: MappedHostBuffer,
    /// Per slot the frame's power map (n_cells floats).
    maps: MappedHostBuffer,
    wake: &'static WakeShared,
    /// Graphs launched before the feeder (the warm-up).
    queued: u64,
    taken: u64,
    n_samples: usize,
    n_cells: usize,
}

impl TriggerState {
    fn word(buf: &MappedHostBuffer, index: usize) -> &AtomicU32 {
        assert!((index + 1) * 4 <= buf.len());
        // SAFETY: inside the buffer, 4-byte aligned (a page start plus a
        // multiple of 4); the GPU writes it concurrently, so it is only
        // touched atomically; lives as long as `buf`.
        unsafe { AtomicU32::from_ptr(buf.host_ptr().add(index * 4).cast()) }
    }

    fn control(&self, index: usize) -> &AtomicU32 {
        Self::word(&self.control, index)
    }

    fn record_ready(&self, slot: usize) -> &AtomicU32 {
        Self::word(&self.records, slot * RECORD_BYTES / 4)
    }

    /// A u64 of `slot`'s TriggerRecord: 8 gpu_done_ns, 16 gpu_start_ns.
    fn record_u64(&self, slot: usize, offset: usize) -> u64 {
        let p = self.records.host_ptr() as usize + slot * RECORD_BYTES + offset;
        // SAFETY: inside the records buffer, 8-byte aligned; written by the
        // GPU before it set `ready` (read after an Acquire load of it).
        unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Relaxed)
    }

    /// Arms GPU-triggered mode on `pipeline` for the ring slots at
    /// `inputs` (device addresses), with the source's completion records.
    pub fn arm(
        pipeline: &Pipeline,
        inputs: &[u64],
        words: &dyn CompletionAccess,
        alpha: &[f64],
    ) -> Result<(TriggerState, String), DspError> {
        let unusable = |why: String| DspError::Backend(format!("GPU-triggered mode: {why}"));
        let chunks = pipeline.triggered_chunks().ok_or_else(|| {
            unusable("more chunks per frame than a slot's graph waits for".into())
        })?;
        if words.chunks_per_frame() as usize != chunks {
            return Err(unusable(format!(
                "the source counts {} chunks a frame, the chain {chunks}",
                words.chunks_per_frame()
            )));
        }
        if words.slots() as usize != inputs.len() || inputs.is_empty() {
            return Err(unusable(format!(
                "{} completion records for {} prepared slots",
                words.slots(),
                inputs.len()
            )));
        }
        let counts: Vec<u64> = (0..words.slots())
            .map(|s| words.device_ptr(s))
            .collect::<Option<_>>()
            .ok_or_else(|| unusable("the ring's status page has no device address".into()))?;
        let scratch_dev = words
            .scratch_device_ptr()
            .ok_or_else(|| unusable("the ring's status page has no device address".into()))?;
        let ops = StreamMemOps::resolve().map_err(|e| unusable(e.to_string()))?;
        let ctx = pipeline.context().clone();
        let attrs = cuda_mem::mem_op_attributes(&ctx);
        let g = pipeline.geometry();
        let n_cells = g.n_loops * g.n_samples;
        let slots = inputs.len();
        let max_det = pipeline.max_detections();
        let out_stride = (16 + max_det * std::mem::size_of::<Detection>()).next_multiple_of(256);
        let map_buf = |len: usize| MappedHostBuffer::new(&ctx, len, Mapping::default());
        let state = TriggerState {
            graphs: Vec::new(),
            outs: map_buf(slots * out_stride)?,
            out_stride,
            records: map_buf(slots * RECORD_BYTES)?,
            alpha: map_buf(2 * g.n_samples * 8)?,
            control: map_buf(4096)?,
            maps: map_buf(slots * n_cells * 4)?,
            wake: Box::leak(Box::new(WakeShared {
                done: AtomicU64::new(0),
                futex: AtomicU32::new(0),
                wake_at: AtomicU64::new(u64::MAX),
                feed_futex: AtomicU32::new(0),
                feed_at: AtomicU64::new(u64::MAX),
                stamps: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            })),
            feeder: None,
            queued: 0,
            taken: 0,
            n_samples: g.n_samples,
            n_cells,
        };
        let self_test_us = state.self_test(&ctx, &ops, words, scratch_dev)?;
        state.write_alpha(alpha, 0)?;
        state.control(ALPHA_INDEX).store(0, Ordering::Release);
        let targets = |slot: usize| -> Result<TriggerTargets, DspError> {
            Ok(TriggerTargets {
                input: inputs[slot],
                count: counts[slot],
                out: state.outs.device_ptr_at(slot * out_stride)?,
                record: state.records.device_ptr_at(slot * RECORD_BYTES)?,
                slot: slot as u32,
                alpha_tables: state.alpha.device_ptr(),
                alpha_index: state.control.device_ptr_at(ALPHA_INDEX * 4)?,
                map: state.maps.device_ptr_at(slot * n_cells * 4)?,
                cancelling: state.control.device_ptr_at(CANCELLING * 4)?,
            })
        };
        // Every kernel once before any wait is queued (lazy loading).
        pipeline.warm_trigger_kernels(&targets(0)?)?;
        state.control(CANCELLING).store(0, Ordering::Release);
        let mut graphs = Vec::with_capacity(slots);
        for slot in 0..slots {
            let data: &'static SlotWake = Box::leak(Box::new(SlotWake {
                shared: state.wake,
                slot,
            }));
            let wake = HostWake {
                func: Some(host_wake),
                data: data as *const SlotWake as *mut c_void,
            };
            graphs.push(pipeline.triggered_graph(&targets(slot)?, &ops, wake)?);
        }
        let mut state = TriggerState { graphs, ..state };
        // Each slot's graph once, its waits satisfied from here: every node
        // runs before the first real wait, and the GPU's reset of the
        // ring's counts (frame_done) is seen here.
        for slot in 0..slots as u32 {
            words.satisfy(slot);
        }
        for g in &state.graphs {
            g.launch()
                .map_err(cuda_err("graph launch (GPU-triggered warm-up)"))?;
        }
        state.queued = slots as u64;
        match state.wait_completed(slots as u64, Duration::from_secs(10)) {
            TriggerWait::Reached(_) => {}
            other => {
                // The graphs may still run: their buffers must stay.
                std::mem::forget(state);
                return Err(unusable(format!(
                    "the warm-up of the slots' graphs did not finish ({other:?})"
                )));
            }
        }
        pipeline.synchronize()?;
        for slot in 0..slots {
            if words.landed(slot as u32) != 0 {
                // (Drained: nothing is queued that could use the buffers.)
                return Err(unusable(format!(
                    "the GPU's reset of slot {slot}'s completion count did not reach the ring"
                )));
            }
            state.record_ready(slot).store(0, Ordering::Relaxed);
        }
        state.wake.done.store(0, Ordering::Release);
        state.wake.futex.store(0, Ordering::Release);
        state.wake.feed_futex.store(0, Ordering::Release);
        state.queued = 0;
        state.taken = 0;
        // The frames to come land in the ring's slots in order: the feeder
        // queues their graphs, 2 per slot ahead.
        let depth = 2 * slots as u64;
        state.feeder = Some(Feeder::start(FeedShared {
            execs: state
                .graphs
                .iter()
                .map(|g| g.cu_graph_exec() as usize)
                .collect(),
            stream: pipeline.cu_stream() as usize,
            ctx: ctx.cu_ctx() as usize,
            depth,
            launched: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            error: AtomicI32::new(0),
            wake: state.wake,
        })?);
        let t0 = Instant::now();
        while state.launched() < depth {
            if t0.elapsed() > Duration::from_secs(5) || state.feed_error().is_some() {
                return Err(unusable(format!(
                    "the feeder did not queue the first frames ({:?})",
                    state.feed_error()
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let line = format!(
            "{} ({}), {}; self-test on the ring's status page: round trip {self_test_us:.1} us; {slots} slots x {chunks} chunk waits ({}), {depth} frames queued ahead by a feeder thread",
            ops.wait_symbol,
            ops.write_symbol,
            describe(&attrs),
            pipeline.chunk_wait_text()
        );
        Ok((state, line))
    }

    /// Waits on the ring's own memory, on a stream of its own: a stream
    /// wait must hold until the host writes the scratch word, see that
    /// write, and a stream write must reach the word. Returns the round
    /// trip in microseconds (host write to the GPU's answer seen).
    fn self_test(
        &self,
        ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
        ops: &StreamMemOps,
        words: &dyn CompletionAccess,
        scratch_dev: u64,
    ) -> Result<f64, DspError> {
        let fail = |why: &str| DspError::Backend(format!("GPU-triggered mode: self-test: {why}"));
        let scratch = words.scratch();
        let ack = self.control(ACK);
        scratch.store(0, Ordering::Release);
        ack.store(0, Ordering::Release);
        let stream = ctx
            .new_stream()
            .map_err(cuda_err("create stream (self-test)"))?;
        let ack_dev = self.control.device_ptr_at(ACK * 4)?;
        let s = stream.cu_stream();
        // SAFETY: a live stream of the context; both words are live mapped
        // memory (the ring's status page, the control buffer) that outlive
        // the stream's work (the stream is synchronised below, or leaked
        // with the buffers if the GPU never answers). No kernel is queued.
        unsafe {
            ops.wait_geq(s, scratch_dev, 1)
                .map_err(cuda_err("cuStreamWaitValue32 (self-test)"))?;
            ops.write(s, ack_dev, 1)
                .map_err(cuda_err("cuStreamWriteValue32 (self-test)"))?;
        }
        std::thread::sleep(Duration::from_millis(5));
        if ack.load(Ordering::Acquire) != 0 {
            return Err(fail("a stream wait on the ring's status page did not wait"));
        }
        let t0 = Instant::now();
        scratch.store(1, Ordering::Release);
        while ack.load(Ordering::Acquire) != 1 {
            if t0.elapsed() > Duration::from_secs(1) {
                // The stream may wait for ever: leave it (and its words) be.
                std::mem::forget(stream);
                return Err(fail(
                    "the GPU did not see the host's write to the ring's status page within 1 s",
                ));
            }
            std::hint::spin_loop();
        }
        let rtt_us = t0.elapsed().as_secs_f64() * 1e6;
        // SAFETY: as above.
        unsafe { ops.write(s, scratch_dev, 2) }
            .map_err(cuda_err("cuStreamWriteValue32 (self-test)"))?;
        stream
            .synchronize()
            .map_err(cuda_err("stream synchronize (self-test)"))?;
        if scratch.load(Ordering::Acquire) != 2 {
            return Err(fail(
                "a stream write to the ring's status page did not arrive",
            ));
        }
        scratch.store(0, Ordering::Release);
        Ok(rtt_us)
    }

    /// Writes `alpha` into table `table` (0 or 1) of the host's pair.
    fn write_alpha(&self, alpha: &[f64], table: usize) -> Result<(), DspError> {
        crate::cfar::check_alpha(alpha, self.n_samples)?;
        let p = self.alpha.host_ptr() as usize + table * self.n_samples * 8;
        for (r, a) in alpha.iter().enumerate() {
            // SAFETY: inside the alpha buffer (two tables of n_samples
            // doubles), 8-byte aligned; the GPU reads only the other table
            // meanwhile (write_alpha's callers flip the index after).
            unsafe { AtomicU64::from_ptr((p + r * 8) as *mut u64) }
                .store(a.to_bits(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// New CFAR scale factors from the next frame whose first chunk lands
    /// after this call: written to the table the GPU does not use, then
    /// the index flips (Release).
    pub fn set_alpha(&self, alpha: &[f64]) -> Result<(), DspError> {
        let index = self.control(ALPHA_INDEX);
        let next = index.load(Ordering::Acquire).wrapping_add(1);
        self.write_alpha(alpha, (next & 1) as usize)?;
        index.store(next, Ordering::Release);
        Ok(())
    }

    /// Graphs launched since arming (by the feeder).
    pub fn launched(&self) -> u64 {
        self.feeder.as_ref().map_or(self.queued, Feeder::launched)
    }

    /// The driver's error of a launch the feeder tried, if one failed.
    pub fn feed_error(&self) -> Option<i32> {
        self.feeder
            .as_ref()
            .map(|f| f.shared.error.load(Ordering::Acquire))
            .filter(|&e| e != 0)
    }

    pub fn completed(&self) -> u64 {
        self.wake.done.load(Ordering::Acquire)
    }

    pub fn in_flight(&self) -> u64 {
        self.launched() - self.taken
    }

    pub fn wait_completed(&self, target: u64, timeout: Duration) -> TriggerWait {
        let w = self.wake;
        let deadline = Instant::now() + timeout;
        w.wake_at.store(target, Ordering::Release);
        loop {
            let seen = w.futex.load(Ordering::Acquire);
            let done = w.done.load(Ordering::Acquire);
            if done >= target {
                w.wake_at.store(u64::MAX, Ordering::Relaxed);
                return TriggerWait::Reached(done);
            }
            let now = Instant::now();
            if now >= deadline {
                w.wake_at.store(u64::MAX, Ordering::Relaxed);
                return TriggerWait::Timeout;
            }
            match futex::wait(&w.futex, seen, deadline - now) {
                Ok(()) => {}
                Err(futex::WaitEnd::Interrupted) => {
                    w.wake_at.store(u64::MAX, Ordering::Relaxed);
                    return TriggerWait::Interrupted;
                }
                // EAGAIN (it moved already), ETIMEDOUT: look again.
                Err(_) => {}
            }
        }
    }

    pub fn take(
        &mut self,
        pipeline: &Pipeline,
        slot: usize,
        out: &mut Detections,
    ) -> Result<Option<TriggerStamp>, DspError> {
        if slot >= self.graphs.len() {
            return Err(DspError::Backend(format!(
                "GPU-triggered mode: slot {slot} has no graph"
            )));
        }
        let ready = self.record_ready(slot);
        if ready.load(Ordering::Acquire) != 1 {
            return Ok(None);
        }
        let stamp = TriggerStamp {
            gpu_done_ns: self.record_u64(slot, 8),
            gpu_start_ns: self.record_u64(slot, 16),
            // The host node runs after the frame's last kernel; when the
            // host sees `ready` before it did, the reading is the bound.
            host_done_ns: match self.wake.stamps[slot].load(Ordering::Acquire) {
                0 => monotonic_ns(),
                t => t.min(monotonic_ns()),
            },
        };
        // SAFETY: the slot's own region of the outputs buffer, which the
        // GPU wrote before it set `ready` (Acquire above) and writes again
        // only for the slot's next frame, after the host released the slot.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                self.outs.host_ptr().add(slot * self.out_stride),
                self.out_stride,
            )
        };
        pipeline.read_detections_from(bytes, out)?;
        ready.store(0, Ordering::Release);
        self.wake.stamps[slot].store(0, Ordering::Release);
        self.taken += 1;
        Ok(Some(stamp))
    }

    pub fn ready(&self, slot: usize) -> bool {
        slot < self.graphs.len() && self.record_ready(slot).load(Ordering::Acquire) == 1
    }

    /// The power map of the frame whose detections were taken last from
    /// `slot` (call after `take`, before the slot is queued again).
    pub fn take_power_map(&self, slot: usize, out: &mut Vec<f32>) -> bool {
        if slot >= self.graphs.len() {
            return false;
        }
        out.clear();
        // SAFETY: the slot's map in the maps buffer, written by the GPU
        // before the slot's `ready` (seen by `take`), written again only
        // for the slot's next frame, after the slot is queued again.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                self.maps.host_ptr().add(slot * self.n_cells * 4),
                self.n_cells * 4,
            )
        };
        out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        true
    }

    /// See `Triggered::cancel`. On success every queued frame finished.
    pub fn cancel(
        &mut self,
        pipeline: &Pipeline,
        words: &dyn CompletionAccess,
        timeout: Duration,
    ) -> Result<u64, DspError> {
        // Nothing is launched any more (the feeder is joined before the
        // count is read); everything launched must run out.
        if let Some(f) = self.feeder.as_mut() {
            f.stop();
        }
        let launched = self.launched();
        self.queued = launched;
        self.feeder = None;
        // The frames still waiting for their chunks, counted before the
        // waits are satisfied: after, the GPU may finish them any moment.
        let flushed = launched - self.completed().min(launched);
        let slots = self.graphs.len() as u32;
        // frame_done leaves the counts at a whole frame from now on, so a
        // slot's every queued frame runs, not only the first.
        self.control(CANCELLING).store(1, Ordering::Release);
        for slot in 0..slots.min(words.slots()) {
            words.satisfy(slot);
        }
        match self.wait_completed(launched, timeout) {
            TriggerWait::Reached(_) => {}
            other => {
                return Err(DspError::Backend(format!(
                    "GPU-triggered mode: {flushed} queued frames did not finish within {} ms of their cancellation ({other:?})",
                    timeout.as_millis()
                )));
            }
        }
        pipeline.synchronize()?;
        self.control(CANCELLING).store(0, Ordering::Release);
        for slot in 0..slots {
            self.record_ready(slot as usize).store(0, Ordering::Relaxed);
            if slot < words.slots() {
                words.reset(slot);
            }
        }
        self.taken = launched;
        Ok(flushed)
    }

    /// Whether queued work may still run (a cancel did not drain it).
    pub fn busy(&self) -> bool {
        self.completed() < self.launched()
    }

    /// Stops the feeder without joining (the leak path of a failed cancel).
    pub fn stop_feeding(&self) {
        if let Some(f) = &self.feeder {
            f.shared.stop.store(true, Ordering::Release);
        }
    }
}

fn describe(a: &MemOpAttributes) -> String {
    a.to_string()
}
