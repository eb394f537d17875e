//! Plain device memory (`cuMemAlloc`), addressed by raw device pointer: the
//! graphs bake these addresses in, so nothing here may move or be freed
//! while a graph that uses it exists (the backend owns both).

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use crate::error::DspError;

use super::cuda_err;

pub struct DeviceBuffer {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
}

// SAFETY: device memory owned by this value; no host aliasing.
unsafe impl Send for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocate `bytes` (at least 1) of device memory, zero-filled.
    pub fn zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self, DspError> {
        let bytes = bytes.max(1);
        ctx.bind_to_thread().map_err(cuda_err("bind context"))?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: FFI with a valid out-pointer; the context is current.
        unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) }
            .result()
            .map_err(cuda_err("cuMemAlloc"))?;
        let buf = DeviceBuffer {
            ctx: ctx.clone(),
            ptr,
        };
        // SAFETY: `ptr` is a fresh allocation of `bytes` bytes.
        unsafe { sys::cuMemsetD8_v2(ptr, 0, bytes) }
            .result()
            .map_err(cuda_err("cuMemsetD8"))?;
        Ok(buf)
    }

    /// Allocate and fill from host data.
    pub fn from_host<T: Copy>(ctx: &Arc<CudaContext>, data: &[T]) -> Result<Self, DspError> {
        let bytes = std::mem::size_of_val(data);
        let buf = Self::zeroed(ctx, bytes)?;
        if bytes > 0 {
            // SAFETY: `data` is `bytes` readable bytes; `buf` holds at least
            // `bytes`; the synchronous copy finishes before returning.
            unsafe { sys::cuMemcpyHtoD_v2(buf.ptr, data.as_ptr() as *const _, bytes) }
                .result()
                .map_err(cuda_err("cuMemcpyHtoD"))?;
        }
        Ok(buf)
    }

    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Overwrite the start of the buffer with host data (synchronous). The
    /// caller makes sure the buffer holds `size_of_val(data)` bytes.
    pub fn copy_from_host<T: Copy>(
        &self,
        ctx: &Arc<CudaContext>,
        data: &[T],
    ) -> Result<(), DspError> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Ok(());
        }
        ctx.bind_to_thread().map_err(cuda_err("bind context"))?;
        // SAFETY: `data` is `bytes` readable bytes; the caller guarantees the
        // buffer's size; the synchronous copy finishes before returning.
        unsafe { sys::cuMemcpyHtoD_v2(self.ptr, data.as_ptr() as *const _, bytes) }
            .result()
            .map_err(cuda_err("cuMemcpyHtoD"))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc and is not used after drop.
            unsafe { sys::cuMemFree_v2(self.ptr) };
        }
    }
}
