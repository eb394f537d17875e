//! One-dimensional batched C2C cuFFT plans on our stream, with input and
//! output addresses chosen per execution (out of place for the angle FFT).
//! Made with `cufftCreate` + `cufftMakePlanMany`, so that plan properties
//! can be set between the two.

use std::ffi::c_int;
use std::sync::Arc;

use cudarc::cufft::{result as fft_result, sys as fft_sys};
use cudarc::driver::CudaStream;

use cuda_mem::cuda_err;

use crate::error::DspError;

/// The error of cuFFT call `op`, for `map_err`.
fn cufft_err(op: &'static str) -> impl FnOnce(fft_result::CufftError) -> DspError {
    move |source| DspError::Cufft { op, source }
}

pub(super) struct FftPlan {
    handle: fft_sys::cufftHandle,
    // The plan runs on this stream; keep it alive as long as the plan.
    _stream: Arc<CudaStream>,
}

// SAFETY: the handle is owned by this value and used from one thread at a
// time (`&self` methods only enqueue work on the plan's stream).
unsafe impl Send for FftPlan {}

/// Layout of a batch of 1-D transforms of `n` points: element `k` of
/// transform `b` at `b * dist + k * stride` (input and output alike).
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub n: c_int,
    pub stride: c_int,
    pub dist: c_int,
    pub batch: c_int,
}

impl FftPlan {
    /// A C2C plan for `layout` on `stream`.
    pub fn new(
        stream: &Arc<CudaStream>,
        layout: Layout,
        what: &'static str,
    ) -> Result<Self, DspError> {
        stream
            .context()
            .bind_to_thread()
            .map_err(cuda_err("bind context"))?;
        let mut handle: fft_sys::cufftHandle = 0;
        // SAFETY: FFI with a valid out-pointer.
        unsafe { fft_sys::cufftCreate(&mut handle) }
            .result()
            .map_err(cufft_err(what))?;
        let plan = FftPlan {
            handle,
            _stream: stream.clone(),
        };
        let mut n = [layout.n];
        let mut embed = [layout.n];
        // A null embed means "contiguous" and ignores stride and distance.
        let embed_ptr = if layout.stride == 1 && layout.dist == layout.n {
            std::ptr::null_mut()
        } else {
            embed.as_mut_ptr()
        };
        // SAFETY: `n` and `embed` outlive the call; the handle is ours.
        unsafe {
            fft_result::make_plan_many(
                handle,
                1,
                n.as_mut_ptr(),
                embed_ptr,
                layout.stride,
                layout.dist,
                embed_ptr,
                layout.stride,
                layout.dist,
                fft_sys::cufftType::CUFFT_C2C,
                layout.batch,
            )
        }
        .map_err(cufft_err(what))?;
        // SAFETY: the handle is planned; the stream outlives the plan.
        unsafe { fft_result::set_stream(handle, stream.cu_stream() as _) }
            .map_err(cufft_err("cufftSetStream"))?;
        Ok(plan)
    }

    /// Queue a forward transform from `input` to `output` (the same
    /// address for in place).
    ///
    /// # Safety
    /// Both must be device buffers of the layout's size, equal or not
    /// overlapping, alive until the work completes.
    pub unsafe fn forward(&self, input: u64, output: u64) -> Result<(), DspError> {
        // SAFETY: the caller's contract.
        unsafe {
            fft_result::exec_c2c(
                self.handle,
                input as *mut fft_sys::cufftComplex,
                output as *mut fft_sys::cufftComplex,
                -1,
            )
        }
        .map_err(cufft_err("cufftExecC2C"))
    }
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        // SAFETY: the handle came from cufftCreate and is not used after.
        let _ = unsafe { fft_result::destroy(self.handle) };
    }
}
