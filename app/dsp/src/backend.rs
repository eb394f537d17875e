//! The interface every processing backend implements.

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
}
