//! The interface every processing backend implements.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use crate::detection::Detections;
use crate::error::DspError;

/// Where one ring slot lives: its host address and, when the ring is
/// GPU-visible (mapped pinned memory), the device address of the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotAddr {
    pub host_ptr: usize,
    pub device_ptr: Option<u64>,
    pub bytes: usize,
}

/// A frame in a prepared ring slot: the slot's index, and which capture
/// into that slot it is. `capture` is the caller's: the same value for a
/// frame's chunk events and for the frame itself, another one for every
/// other capture (radard numbers the frame events it receives; the source's
/// sequence number cannot serve, as a frame's is known only when it
/// completes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotFrame {
    pub index: usize,
    pub capture: u64,
}

/// One frame to process: the raw int16 I/Q bytes in the frame layout of
/// docs/requirements.md, and, when it sits in a prepared ring slot, which one
/// (so a backend can replay the work it captured for that slot, and finish
/// what `chunk_landed` started for that frame).
#[derive(Clone, Copy, Debug)]
pub struct FrameInput<'a> {
    pub bytes: &'a [u8],
    pub slot: Option<SlotFrame>,
}

pub trait Backend {
    /// Short name for logs: "cpu", "cuda".
    fn name(&self) -> &'static str;

    /// Tell the backend where the ring slots are, once, before streaming.
    /// Backends that read frames in place (CUDA graphs per slot) prepare
    /// their per-slot work here; others ignore it.
    fn prepare_slots(&mut self, _slots: &[SlotAddr]) -> Result<(), DspError> {
        Ok(())
    }

    /// Whether [`Self::chunk_landed`] starts work before the frame is
    /// complete (chunk-streamed mode, docs/processing-chain.md). When false the
    /// caller need not ask its source for chunk events at all.
    fn streams_chunks(&self) -> bool {
        false
    }

    /// Chunk `chunk` of `frame` has landed in its slot while the rest of
    /// the frame is still being captured; `landed` is the slot's bytes from
    /// its start through the end of that chunk (chunks land in order). The
    /// backend may start the work that needs only those bytes (a GPU
    /// backend must not wait for it; a CPU backend does it here, between
    /// events); [`Self::process`] of the same `SlotFrame` then does only
    /// what is left. Chunks of a frame that is never processed are simply
    /// superseded by the next frame's. Backends that process whole frames
    /// ignore it.
    fn chunk_landed(
        &mut self,
        _frame: SlotFrame,
        _chunk: usize,
        _landed: &[u8],
    ) -> Result<(), DspError> {
        Ok(())
    }

    /// Run the whole chain on one frame. `out` is cleared and refilled; it
    /// never grows beyond `max_detections` (its capacity is reserved once).
    fn process(&mut self, frame: FrameInput<'_>, out: &mut Detections) -> Result<(), DspError>;

    /// Frames processed so far whose work `chunk_landed` had started
    /// (diagnostics: chunk-streamed mode is doing what it should).
    fn frames_streamed(&self) -> u64 {
        0
    }

    /// Use new CFAR scale factors from the next frame on: `alpha[r]` per
    /// range bin, as [`crate::cfar::CfarTables::alpha`] computes them for
    /// this geometry and CFAR window with another Pfa (compute them off the
    /// frame loop; the inverse beta function is slow). Called between
    /// frames; copies into the buffers the backend already holds and never
    /// allocates. Errors when the length is not `N_s`.
    fn set_cfar_alpha(&mut self, alpha: &[f64]) -> Result<(), DspError>;

    /// The non-coherently integrated power map `P[d][r]` of the last
    /// processed frame, Doppler-major, fftshifted (`N_l * N_s` values).
    fn power_map(&mut self, out: &mut Vec<f32>) -> Result<(), DspError>;

    /// GPU-triggered processing, when the backend can do it (the CUDA
    /// backend): see [`Triggered`].
    fn triggered(&mut self) -> Option<&mut dyn Triggered> {
        None
    }
}

/// The source's completion records (tegra-p2p's `CompletionWords`, which
/// radard adapts to this): after the last byte of each chunk the card writes
/// the slot's count of landed chunks; the consumer resets it to 0 before it
/// releases the slot (docs/capture-path.md).
pub trait CompletionAccess {
    /// Slots with a record (the ring's slots).
    fn slots(&self) -> u32;
    /// Chunks of a frame: the count a landed frame reaches.
    fn chunks_per_frame(&self) -> u32;
    /// Device address of `slot`'s count (None: the ring is not GPU-visible).
    fn device_ptr(&self, slot: u32) -> Option<u64>;
    /// Chunks of the frame in `slot` landed so far.
    fn landed(&self, slot: u32) -> u32;
    /// Sets `slot`'s count to a whole frame, whatever landed: lets a GPU
    /// that waits on it go on (its result is then not a frame's).
    fn satisfy(&self, slot: u32);
    /// Sets `slot`'s count to 0 (the consumer's reset).
    fn reset(&self, slot: u32);
    /// A word of the ring's status page the card never writes, for a
    /// self-test of waits on the ring's memory.
    fn scratch(&self) -> &AtomicU32;
    /// Its device address.
    fn scratch_device_ptr(&self) -> Option<u64>;
    /// `slot`'s count itself (host side).
    fn word(&self, slot: u32) -> &AtomicU32;
}

/// What [`Triggered::wait_completed`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerWait {
    /// At least the asked number of frames are complete: how many.
    Reached(u64),
    /// The timeout passed first.
    Timeout,
    /// A signal interrupted the wait.
    Interrupted,
}

/// When a GPU-triggered frame's detections were in host memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriggerStamp {
    /// The GPU's clock (`%globaltimer`, ns) when its last kernel ended.
    pub gpu_done_ns: u64,
    /// The same clock when the work of the frame's last chunk started
    /// (its wait released): `gpu_done_ns - gpu_start_ns` is the GPU's part
    /// of the frame's latency.
    pub gpu_start_ns: u64,
    /// CLOCK_MONOTONIC when the host learned it (the host function at the
    /// end of the frame's work, or the host's reading of the flag when
    /// that came first): an upper bound of the moment on the host's clock.
    pub host_done_ns: u64,
}

/// GPU-triggered processing (docs/processing-chain.md, section 10): every
/// ring slot's work waits on the GPU, before each chunk, for the slot's
/// completion count, and ends by writing the slot's detections and a
/// "ready" flag into host memory; the work of the next frames is queued
/// ahead (by the backend itself: frames land in the ring's slots in
/// release order, which is ring order), so no host thread launches
/// anything between a frame's first chunk and its detections, and the
/// thread that takes the detections launches nothing at all.
pub trait Triggered {
    /// Checks that the device can wait on the ring's memory (the device's
    /// attributes, then a self-test on the ring's own status page), builds
    /// each slot's work, runs it once, and queues every slot's work in
    /// ring order. Call before the source starts. An error says why the
    /// mode cannot run; nothing is queued then. Returns one line for the
    /// log: what was found.
    ///
    /// # Safety
    /// The memory of `words` (the ring's status page) and the ring's slots
    /// stay allocated until [`Self::cancel`] succeeded or the backend is
    /// dropped: the queued work reads and writes them.
    unsafe fn arm(&mut self, words: &dyn CompletionAccess) -> Result<String, DspError>;
    /// Whether [`Self::arm`] succeeded (and [`Self::cancel`] has not run).
    fn armed(&self) -> bool;
    /// Frames whose work finished since arming (their detections are in
    /// host memory).
    fn completed(&self) -> u64;
    /// Blocks until [`Self::completed`] reaches `target`, the timeout
    /// passes or a signal comes; the thread sleeps (one wake-up).
    fn wait_completed(&self, target: u64, timeout: Duration) -> TriggerWait;
    /// The detections of the frame whose work finished in `slot`: copied
    /// into `out`, the slot's flag cleared. Returns when they were ready,
    /// or None when they are not (yet). Never allocates when `out` has room
    /// for max_detections. Take a slot's frame before releasing the slot.
    fn take(&mut self, slot: usize, out: &mut Detections)
    -> Result<Option<TriggerStamp>, DspError>;
    /// Whether the detections of the frame in `slot` are in host memory
    /// (the GPU's ready flag, read without side effects: for benchmarks
    /// that watch it).
    fn ready(&self, slot: usize) -> bool;
    /// The power map of the frame whose detections [`Self::take`] took
    /// last from `slot` (every frame's is kept, per slot, until the slot is
    /// queued again). Never allocates when `out` has room for the map.
    fn take_power_map(&mut self, slot: usize, out: &mut Vec<f32>) -> bool;
    /// Frames queued whose detections were not taken yet.
    fn in_flight(&self) -> u64;
    /// Ends the mode: says every queued frame landed (their results are
    /// no frames), waits at most `timeout` for the GPU to finish them,
    /// resets the counts. Stop the source first. Returns how many queued
    /// frames were flushed; an error when the GPU did not finish (its work
    /// is then left queued and its buffers are kept).
    fn cancel(&mut self, words: &dyn CompletionAccess, timeout: Duration) -> Result<u64, DspError>;
}
