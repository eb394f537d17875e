//! Detections: the output of the chain for one frame.

use serde::{Deserialize, Serialize};

/// One detected target (spec v1 step 10).
///
/// `repr(C)`: this is also the record the CUDA chain writes to mapped host
/// memory (`struct GpuDetection` in cuda/kernels.cu, field for field), so the
/// host reads it as it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// Integer range bin of the CFAR cell.
    pub range_bin: u32,
    /// Integer Doppler bin after fftshift (`N_l/2` is zero velocity).
    pub doppler_bin: u32,
    /// Range in metres from the parabolic-refined range bin.
    pub range_m: f32,
    /// Radial velocity in m/s from the refined Doppler bin.
    pub velocity_mps: f32,
    /// Azimuth in degrees from the refined angle bin.
    pub azimuth_deg: f32,
    /// `10 log10(P / mu)`.
    pub snr_db: f32,
    /// `10 log10(P)`.
    pub power_db: f32,
    /// Refined positions in bins, for comparing backends.
    pub range_bin_refined: f32,
    pub doppler_bin_refined: f32,
    pub angle_bin_refined: f32,
}

/// The detections of one frame, at most `capacity` of them, in ascending
/// range bin then Doppler bin; `cut` counts those dropped by the cap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detections {
    pub list: Vec<Detection>,
    pub cut: u32,
}

impl Detections {
    /// Reserve room for `max` detections once, so processing never allocates.
    pub fn with_capacity(max: usize) -> Self {
        Detections {
            list: Vec::with_capacity(max),
            cut: 0,
        }
    }

    pub fn clear(&mut self) {
        self.list.clear();
        self.cut = 0;
    }
}
