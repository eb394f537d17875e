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

/// One frame to process: the raw int16 I/Q bytes in the layout of
/// DESIGN.md section 3, and, when it sits in a prepared ring slot, which one
/// (so a backend can replay the work it captured for that slot).
#[derive(Clone, Copy, Debug)]
pub struct FrameInput<'a> {
    pub bytes: &'a [u8],
    pub slot: Option<usize>,
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

    /// Run the whole chain on one frame. `out` is cleared and refilled; it
    /// never grows beyond `max_detections` (its capacity is reserved once).
    fn process(&mut self, frame: FrameInput<'_>, out: &mut Detections) -> Result<(), DspError>;

    /// The non-coherently integrated power map `P[d][r]` of the last
    /// processed frame, Doppler-major, fftshifted (`N_l * N_s` values).
    fn power_map(&mut self, out: &mut Vec<f32>) -> Result<(), DspError>;
}
