//! CUDA backend (spec v1 on the GPU): four NVRTC-compiled kernels, FFTs
//! included (no cuFFT), captured once per ring slot as a CUDA graph and
//! replayed per frame. See `kernels.cu` for the data flow,
//! docs/processing-chain.md (sections 9 and 10) for the kernels, the launch
//! choices and GPU-triggered processing, and docs/performance.md for the
//! figures.
//!
//! cudarc loads libcuda and libnvrtc at run time and panics when one is
//! missing, so [`probe`] checks both before the first cudarc call; every
//! failure after that is a [`DspError`], never a panic.

#[cfg(feature = "instrument")]
mod instrument;
mod options;
mod pipeline;
mod trigger;

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

use cuda_mem::{Library, cuda_err};
use cudarc::driver::{CudaContext, CudaGraph, sys};

use crate::backend::{
    Backend, CompletionAccess, FrameInput, SlotAddr, SlotFrame, TriggerWait, Triggered,
};
use crate::config::ChainConfig;
use crate::detection::Detections;
use crate::error::DspError;

pub use cuda_mem::{MappedHostBuffer, Mapping};
#[cfg(feature = "instrument")]
pub use instrument::GraphSet;
pub use options::{ChunkWait, CudaOptions, GpuWait, SelectAt};
pub use pipeline::MAX_STREAMED_CHUNKS;
#[cfg(feature = "instrument")]
pub use pipeline::{KERNELS_CU_ENV, StageTiming};

use pipeline::{Pipeline, SlotGraph};
use trigger::TriggerState;

/// The device the backend runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (device {}, sm_{}{})",
            self.name, self.ordinal, self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// The libraries the backend loads: the driver and NVRTC (the FFTs are
/// kernels of its own).
const LIBRARIES: [Library; 2] = [Library::Driver, Library::Nvrtc];

/// Whether the CUDA backend can run here: the three libraries load, the
/// driver initialises and device 0 exists. The error says why not.
pub fn probe() -> Result<DeviceInfo, DspError> {
    Library::require(&LIBRARIES)?;
    let ctx = cuda_mem::primary_context()?;
    device_info(&ctx)
}

fn device_info(ctx: &Arc<CudaContext>) -> Result<DeviceInfo, DspError> {
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(cuda_err("cuDeviceGetName"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(cuda_err("compute capability"))?,
    })
}

/// The CUDA implementation of spec v1.
pub struct CudaBackend {
    // Field order is drop order: the graphs before the buffers they use
    // (Drop drops the ManuallyDrop ones, in this order, unless GPU work that
    // could not be cancelled still uses them: then it leaks them).
    /// GPU-triggered mode, once armed.
    trigger: Option<TriggerState>,
    /// The internal mapped slot for frames that are not in a prepared slot.
    staging: ManuallyDrop<SlotGraph>,
    /// One captured graph per prepared ring slot.
    slots: Vec<SlotGraph>,
    /// Frames copied into device memory once (benchmarks).
    #[cfg(feature = "instrument")]
    resident: Vec<SlotGraph>,
    /// The tail again for frames over the detection cap
    /// (SelectAt::HostFallback), launched by `wait`.
    overflow: Option<CudaGraph>,
    pipeline: ManuallyDrop<Pipeline>,
    info: DeviceInfo,
    /// The CFAR scale table in use (GPU-triggered mode's host copy starts
    /// from it).
    alpha: Vec<f64>,
    /// The prepared slots' device addresses (what triggered graphs read).
    slot_inputs: Vec<u64>,
    /// Host addresses of the armed ring's completion counts and the count
    /// of a whole frame, for a cancel at drop (arm's contract: the ring
    /// outlives the armed backend).
    trigger_words: Vec<usize>,
    trigger_chunks: u32,
    frame_bytes: usize,
    /// Chunk-streamed mode: the frame whose chunks' range work has been
    /// launched into x, and which chunks (bit c: chunk c). Anything else
    /// that writes x forgets it.
    streamed_frame: Cell<Option<SlotFrame>>,
    streamed_mask: Cell<u64>,
    /// Frames finished with work chunk_landed had started.
    frames_streamed: Cell<u64>,
}

// SAFETY: the backend owns its graphs, plans, buffers and stream; nothing is
// shared with another thread. CUDA graph objects must not be used from two
// threads at once, which `&mut self`/ownership already rules out; moving the
// whole backend to another thread is fine (the context is bound on use).
unsafe impl Send for CudaBackend {}

impl CudaBackend {
    /// Open device 0, compile the kernels for its architecture, allocate
    /// every buffer and capture the staging slot's
    /// graph; then run that graph once so that any fault shows here.
    pub fn new(cfg: &ChainConfig) -> Result<Self, DspError> {
        Self::with_options(cfg, &CudaOptions::default())
    }

    /// [`Self::new`] with launch choices other than the defaults.
    pub fn with_options(cfg: &ChainConfig, opts: &CudaOptions) -> Result<Self, DspError> {
        cfg.validate()?;
        Library::require(&LIBRARIES)?;
        let ctx = cuda_mem::primary_context()?;
        let info = device_info(&ctx)?;
        // By default spin, do not sleep, while waiting for a frame's work:
        // the lowest wake-up latency, and no system call in the real-time
        // loop; `wait=block` trades a little latency for the loop's CPU time.
        let (flag, name) = match opts.wait {
            GpuWait::Spin => (
                sys::CUctx_flags::CU_CTX_SCHED_SPIN,
                "cuCtxSetFlags(SCHED_SPIN)",
            ),
            GpuWait::Yield => (
                sys::CUctx_flags::CU_CTX_SCHED_YIELD,
                "cuCtxSetFlags(SCHED_YIELD)",
            ),
            GpuWait::Block => (
                sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC,
                "cuCtxSetFlags(SCHED_BLOCKING_SYNC)",
            ),
        };
        ctx.set_flags(flag).map_err(cuda_err(name))?;
        let pipeline = Pipeline::new(cfg, ctx, info.compute_capability, opts)?;
        let frame_bytes = cfg.geometry.frame_bytes();
        let staging = pipeline.mapped_slot(frame_bytes)?;
        let overflow = pipeline.overflow_graph()?;
        let backend = CudaBackend {
            trigger: None,
            overflow,
            info,
            pipeline: ManuallyDrop::new(pipeline),
            staging: ManuallyDrop::new(staging),
            alpha: crate::cfar::CfarTables::new(cfg)?.alpha,
            slot_inputs: Vec::new(),
            trigger_words: Vec::new(),
            trigger_chunks: 0,
            slots: Vec::new(),
            #[cfg(feature = "instrument")]
            resident: Vec::new(),
            frame_bytes,
            streamed_frame: Cell::new(None),
            streamed_mask: Cell::new(0),
            frames_streamed: Cell::new(0),
        };
        backend
            .staging
            .graph
            .launch()
            .map_err(cuda_err("graph launch"))?;
        backend.wait()?;
        // cudarc resolves each driver function on its first call, and that
        // allocates: call once here what the frame loop calls only now and
        // then (the power-map copy), so it never allocates after warm-up.
        let g = &cfg.geometry;
        let mut warm_map = Vec::with_capacity(g.n_loops * g.n_samples);
        backend.pipeline.power_map(&mut warm_map)?;
        Ok(backend)
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// DMA chunks per frame when chunk-streamed mode is set up for the
    /// prepared slots (the geometry has 2 to MAX_STREAMED_CHUNKS chunks).
    pub fn streamed_chunks(&self) -> Option<usize> {
        self.slots.first().and(self.pipeline.streamed_chunks())
    }

    /// x is about to be overwritten by other work: no chunk's range work
    /// in it counts for any frame any more.
    fn forget_chunks(&self) {
        self.streamed_frame.set(None);
        self.streamed_mask.set(0);
    }

    /// Launch the work of a frame complete in prepared slot `frame.index`:
    /// what chunk_landed did not launch for it, else the whole chain.
    fn launch_in_slot(&self, frame: SlotFrame, g: &SlotGraph) -> Result<(), DspError> {
        let landed = if self.streamed_frame.get() == Some(frame) {
            self.streamed_mask.get()
        } else {
            0
        };
        self.forget_chunks();
        match &g.streamed {
            Some(st) if landed != 0 => {
                self.frames_streamed.set(self.frames_streamed.get() + 1);
                for (c, chunk) in st.chunks.iter().enumerate() {
                    if landed & (1u64 << c) == 0 {
                        chunk.launch().map_err(cuda_err("graph launch (chunk)"))?;
                    }
                }
                st.finish
                    .launch()
                    .map_err(cuda_err("graph launch (finish)"))?;
            }
            _ => g.graph.launch().map_err(cuda_err("graph launch"))?,
        }
        Ok(())
    }

    /// Wait until the launched frame's detections are in host memory. A
    /// frame over the detection cap gets its tail again here with the kept
    /// detections when the selection is SelectAt::HostFallback.
    pub fn wait(&self) -> Result<(), DspError> {
        self.pipeline.synchronize()?;
        if let Some(g) = &self.overflow
            && self.pipeline.over_cap()?
        {
            g.launch()
                .map_err(cuda_err("graph launch (over the cap)"))?;
            self.pipeline.synchronize()?;
        }
        Ok(())
    }

    fn check_size(&self, bytes: &[u8]) -> Result<(), DspError> {
        if bytes.len() != self.frame_bytes {
            return Err(DspError::FrameSize {
                got: bytes.len(),
                want: self.frame_bytes,
            });
        }
        Ok(())
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn prepare_slots(&mut self, slots: &[SlotAddr]) -> Result<(), DspError> {
        let mut graphs = Vec::with_capacity(slots.len());
        for (i, s) in slots.iter().enumerate() {
            let Some(dptr) = s.device_ptr else {
                return Err(DspError::CudaRequest(format!(
                    "slot {i} has no device pointer (the ring is not in mapped pinned memory)"
                )));
            };
            if s.bytes < self.frame_bytes {
                return Err(DspError::CudaRequest(format!(
                    "slot {i} holds {} bytes, a frame needs {}",
                    s.bytes, self.frame_bytes
                )));
            }
            if dptr % 16 != 0 || s.host_ptr % 16 != 0 {
                return Err(DspError::CudaRequest(format!(
                    "slot {i} is not 16-byte aligned"
                )));
            }
            graphs.push(self.pipeline.slot_graph(dptr, s.host_ptr)?);
        }
        if self.trigger.is_some() {
            return Err(DspError::Backend(
                "GPU-triggered mode is armed on the prepared slots".to_string(),
            ));
        }
        // Chunk work in x belonged to the old slots' frames.
        self.forget_chunks();
        self.slot_inputs = slots.iter().filter_map(|s| s.device_ptr).collect();
        self.slots = graphs;
        Ok(())
    }

    fn streams_chunks(&self) -> bool {
        self.streamed_chunks().is_some()
    }

    fn frames_streamed(&self) -> u64 {
        self.frames_streamed.get()
    }

    fn chunk_landed(
        &mut self,
        frame: SlotFrame,
        chunk: usize,
        _landed: &[u8],
    ) -> Result<(), DspError> {
        let Some(g) = self.slots.get(frame.index) else {
            return Err(DspError::Backend(format!(
                "chunk {chunk} landed in slot {}, which was not prepared",
                frame.index
            )));
        };
        let Some(st) = &g.streamed else {
            // Whole frames only (chunk-streamed mode not set up).
            return Ok(());
        };
        let chunks = st.chunks.len() + 1;
        if chunk >= chunks {
            return Err(DspError::Backend(format!(
                "chunk {chunk} of capture {} in slot {}: a frame has {chunks} chunks",
                frame.capture, frame.index
            )));
        }
        if self.streamed_frame.get() != Some(frame) {
            // The first chunk of a new frame: x's rows of any earlier one
            // (a frame that was never processed) no longer count.
            self.streamed_frame.set(Some(frame));
            self.streamed_mask.set(0);
        }
        let bit = 1u64 << chunk;
        // The last chunk is the frame's completion: `process` follows at
        // once and its finishing graph does that chunk's range work.
        if chunk + 1 == chunks || self.streamed_mask.get() & bit != 0 {
            return Ok(());
        }
        st.chunks[chunk]
            .launch()
            .map_err(cuda_err("graph launch (chunk)"))?;
        self.streamed_mask.set(self.streamed_mask.get() | bit);
        Ok(())
    }

    fn process(&mut self, frame: FrameInput<'_>, out: &mut Detections) -> Result<(), DspError> {
        self.refuse_when_armed("process")?;
        self.check_size(frame.bytes)?;
        let in_slot = frame.slot.and_then(|sf| {
            self.slots
                .get(sf.index)
                .filter(|g| g.host_ptr == frame.bytes.as_ptr() as usize)
                .map(|g| (sf, g))
        });
        match in_slot {
            Some((sf, g)) => self.launch_in_slot(sf, g)?,
            None => {
                self.forget_chunks();
                let dst = self
                    .staging
                    .mapped
                    .as_mut()
                    .ok_or_else(|| DspError::CudaRequest("staging slot missing".to_string()))?;
                dst.as_mut_slice()[..frame.bytes.len()].copy_from_slice(frame.bytes);
                self.staging
                    .graph
                    .launch()
                    .map_err(cuda_err("graph launch"))?;
            }
        }
        self.wait()?;
        self.pipeline.read_detections(out)
    }

    fn power_map(&mut self, out: &mut Vec<f32>) -> Result<(), DspError> {
        self.refuse_when_armed("power_map")?;
        self.pipeline.power_map(out)
    }

    fn set_cfar_alpha(&mut self, alpha: &[f64]) -> Result<(), DspError> {
        match &self.trigger {
            // The queued frames read the device table: the host's pair.
            Some(t) => t.set_alpha(alpha)?,
            None => self.pipeline.set_cfar_alpha(alpha)?,
        }
        self.alpha.clear();
        self.alpha.extend_from_slice(alpha);
        Ok(())
    }

    fn triggered(&mut self) -> Option<&mut dyn Triggered> {
        Some(self)
    }
}

impl CudaBackend {
    /// Calls that synchronise the stream would wait for the queued frames
    /// of GPU-triggered mode, which wait for frames to land.
    fn refuse_when_armed(&self, what: &str) -> Result<(), DspError> {
        if self.trigger.is_some() {
            return Err(DspError::Backend(format!(
                "{what}: GPU-triggered mode is armed (its frames come through Triggered::take)"
            )));
        }
        Ok(())
    }

    /// Satisfies the armed ring's counts from the stored addresses and
    /// waits for the queued frames (Drop's cancel). False when they did
    /// not finish.
    fn cancel_stored(&mut self) -> bool {
        let Some(t) = self.trigger.as_mut() else {
            return true;
        };
        if !t.busy() {
            return true;
        }
        let words = StoredWords {
            words: &self.trigger_words,
            chunks: self.trigger_chunks,
        };
        t.cancel(&self.pipeline, &words, Duration::from_secs(2))
            .is_ok()
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if !self.cancel_stored() {
            // Work that waits on the ring still uses every buffer: freeing
            // one would wait for it (cuMemFree synchronises) for ever.
            eprintln!(
                "radar-dsp: GPU-triggered work did not finish after its cancellation: its GPU memory is kept"
            );
            if let Some(t) = &self.trigger {
                t.stop_feeding();
            }
            std::mem::forget(self.trigger.take());
            std::mem::forget(std::mem::take(&mut self.slots));
            #[cfg(feature = "instrument")]
            std::mem::forget(std::mem::take(&mut self.resident));
            std::mem::forget(self.overflow.take());
            return;
        }
        self.trigger = None;
        // SAFETY: dropped once, here, in the field order above (the graphs
        // before the buffers they use); never used after.
        unsafe { ManuallyDrop::drop(&mut self.staging) };
        self.slots.clear();
        #[cfg(feature = "instrument")]
        self.resident.clear();
        self.overflow = None;
        // SAFETY: as above, last.
        unsafe { ManuallyDrop::drop(&mut self.pipeline) };
    }
}

/// The armed ring's counts from their stored host addresses (Drop only).
struct StoredWords<'a> {
    words: &'a [usize],
    chunks: u32,
}

impl StoredWords<'_> {
    fn at(&self, slot: u32) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: arm's contract: the ring (and its status page) outlives
        // the armed backend; the address is a 4-byte aligned word of it.
        unsafe { &*(self.words[slot as usize] as *const std::sync::atomic::AtomicU32) }
    }
}

impl CompletionAccess for StoredWords<'_> {
    fn slots(&self) -> u32 {
        self.words.len() as u32
    }
    fn chunks_per_frame(&self) -> u32 {
        self.chunks
    }
    fn device_ptr(&self, _slot: u32) -> Option<u64> {
        None
    }
    fn landed(&self, slot: u32) -> u32 {
        self.at(slot).load(std::sync::atomic::Ordering::Acquire)
    }
    fn satisfy(&self, slot: u32) {
        self.at(slot)
            .store(self.chunks, std::sync::atomic::Ordering::Release);
    }
    fn reset(&self, slot: u32) {
        self.at(slot).store(0, std::sync::atomic::Ordering::Release);
    }
    fn scratch(&self) -> &std::sync::atomic::AtomicU32 {
        self.at(0)
    }
    fn scratch_device_ptr(&self) -> Option<u64> {
        None
    }
    fn word(&self, slot: u32) -> &std::sync::atomic::AtomicU32 {
        self.at(slot)
    }
}

impl Triggered for CudaBackend {
    unsafe fn arm(&mut self, words: &dyn CompletionAccess) -> Result<String, DspError> {
        if self.trigger.is_some() {
            return Err(DspError::Backend(
                "GPU-triggered mode is armed already".to_string(),
            ));
        }
        if self.slot_inputs.is_empty() || self.slot_inputs.len() != self.slots.len() {
            return Err(DspError::Backend(
                "GPU-triggered mode: the ring's slots are not prepared in GPU-visible memory"
                    .to_string(),
            ));
        }
        self.forget_chunks();
        let (state, line) =
            TriggerState::arm(&self.pipeline, &self.slot_inputs, words, &self.alpha)?;
        self.trigger_words = (0..words.slots())
            .map(|s| words.word(s) as *const std::sync::atomic::AtomicU32 as usize)
            .collect();
        self.trigger_chunks = words.chunks_per_frame();
        self.trigger = Some(state);
        Ok(line)
    }

    fn armed(&self) -> bool {
        self.trigger.is_some()
    }

    fn completed(&self) -> u64 {
        self.trigger.as_ref().map_or(0, TriggerState::completed)
    }

    fn wait_completed(&self, target: u64, timeout: Duration) -> TriggerWait {
        match &self.trigger {
            Some(t) => t.wait_completed(target, timeout),
            None => TriggerWait::Timeout,
        }
    }

    fn take(
        &mut self,
        slot: usize,
        out: &mut Detections,
    ) -> Result<Option<crate::backend::TriggerStamp>, DspError> {
        let t = self.trigger.as_mut().ok_or_else(not_armed)?;
        t.take(&self.pipeline, slot, out)
    }

    fn ready(&self, slot: usize) -> bool {
        self.trigger.as_ref().is_some_and(|t| t.ready(slot))
    }

    fn take_power_map(&mut self, slot: usize, out: &mut Vec<f32>) -> bool {
        self.trigger
            .as_ref()
            .is_some_and(|t| t.take_power_map(slot, out))
    }

    fn in_flight(&self) -> u64 {
        self.trigger.as_ref().map_or(0, TriggerState::in_flight)
    }

    fn cancel(&mut self, words: &dyn CompletionAccess, timeout: Duration) -> Result<u64, DspError> {
        let Some(t) = self.trigger.as_mut() else {
            return Ok(0);
        };
        let flushed = t.cancel(&self.pipeline, words, timeout)?;
        self.trigger = None;
        self.trigger_words.clear();
        Ok(flushed)
    }
}

fn not_armed() -> DspError {
    DspError::Backend("GPU-triggered mode is not armed".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: where libnvrtc loads, the kernels must compile
    /// for Orin (sm_87) and Hopper (sm_90) with the default and a custom
    /// configuration. Set RADAR_PTX_DIR to keep the PTX (for ptxas -v).
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !Library::Nvrtc.is_present() {
            println!("skipped: no libnvrtc");
            return;
        }
        let mut custom = ChainConfig::default();
        custom.geometry.n_loops = 64;
        custom.geometry.n_samples = 128;
        custom.chain.clutter_removal = true;
        custom.chain.max_detections = 100;
        for (name, cfg) in [("default", ChainConfig::default()), ("custom", custom)] {
            for cc in [(8, 7), (9, 0)] {
                let ptx = pipeline::compile_kernels(&cfg, cc, options::KernelShape::DEFAULT)
                    .unwrap_or_else(|e| panic!("{name} sm_{}{}: {e}", cc.0, cc.1));
                let text = ptx.to_src();
                for k in [
                    "range_fft",
                    "doppler_power",
                    "cfar_peaks",
                    "select_overflow",
                    "refine_output",
                    "alpha_sync",
                    "frame_done",
                    "map_export",
                ] {
                    assert!(text.contains(k), "{k} missing from the PTX");
                }
                if let Ok(dir) = std::env::var("RADAR_PTX_DIR") {
                    let path = format!("{dir}/{name}_sm{}{}.ptx", cc.0, cc.1);
                    std::fs::write(&path, text).expect("write ptx");
                }
            }
        }
    }
}
