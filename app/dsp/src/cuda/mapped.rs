//! Mapped pinned host memory: `cuMemHostAlloc(DEVICEMAP)`, page-locked host
//! memory that the GPU reads and writes through a device pointer of its own
//! (over PCIe on a discrete GPU, in place on Orin). cudarc's `alloc_pinned`
//! always adds WRITECOMBINED, which makes host reads slow, so this calls the
//! driver directly.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use crate::error::DspError;

use super::cuda_err;

/// One page-locked, device-mapped host allocation.
pub struct MappedHostBuffer {
    ctx: Arc<CudaContext>,
    host: *mut u8,
    device: u64,
    bytes: usize,
}

// SAFETY: the buffer is plain memory owned by this value; moving it to
// another thread moves that ownership (the context is bound on use).
unsafe impl Send for MappedHostBuffer {}

impl MappedHostBuffer {
    /// Allocate `bytes` (rounded up to whole 4 KiB pages), zero-filled.
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self, DspError> {
        let bytes = bytes.max(1).div_ceil(4096) * 4096;
        ctx.bind_to_thread().map_err(cuda_err("bind context"))?;
        let mut host: *mut c_void = std::ptr::null_mut();
        // SAFETY: FFI; `host` is a valid out-pointer and the context is current.
        unsafe { sys::cuMemHostAlloc(&mut host, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) }
            .result()
            .map_err(cuda_err("cuMemHostAlloc(DEVICEMAP)"))?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: FFI; `host` was returned by cuMemHostAlloc with DEVICEMAP.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }.result();
        if let Err(e) = mapped {
            // SAFETY: `host` came from cuMemHostAlloc and is not used after this.
            unsafe { sys::cuMemFreeHost(host) };
            return Err(cuda_err("cuMemHostGetDevicePointer")(e));
        }
        // SAFETY: `host` points to `bytes` writable bytes that we own.
        unsafe { std::ptr::write_bytes(host as *mut u8, 0, bytes) };
        Ok(MappedHostBuffer {
            ctx: ctx.clone(),
            host: host as *mut u8,
            device,
            bytes,
        })
    }

    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The bytes as a host slice. The caller must not let the GPU write them
    /// while the slice is alive (the backend only reads what it wrote after
    /// a stream synchronisation).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `host` points to `bytes` bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.host, self.bytes) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `host` points to `bytes` bytes owned by self, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.bytes) }
    }
}

impl Drop for MappedHostBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `host` came from cuMemHostAlloc; nothing uses it after drop.
            unsafe { sys::cuMemFreeHost(self.host as *mut c_void) };
        }
    }
}
