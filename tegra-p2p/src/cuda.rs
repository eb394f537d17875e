//! CUDA mapped host memory through cudarc's raw driver API.
//!
//! cudarc loads libcuda lazily and panics when it is missing, so every entry
//! point first checks `is_culib_present()`. The primary context of device 0 is
//! used (`CudaContext::new(0)`), so the DSP backend, which opens the same
//! primary context, sees the same memory.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::sys;

use crate::error::{Error, Result};

fn cuda_err(op: &'static str, e: impl std::fmt::Debug) -> Error {
    Error::Cuda {
        op,
        reason: format!("{e:?}"),
    }
}

/// Whether libcuda can be loaded on this machine (never panics).
pub fn cuda_library_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { sys::is_culib_present() }
}

/// The primary context of device 0, or why there is none.
pub fn primary_context() -> Result<Arc<CudaContext>> {
    if !cuda_library_present() {
        return Err(Error::Cuda {
            op: "load libcuda",
            reason: "libcuda not found (no NVIDIA driver on this machine)".into(),
        });
    }
    CudaContext::new(0).map_err(|e| cuda_err("open device 0 (primary context)", e))
}

/// One `cuMemHostAlloc(DEVICEMAP | PORTABLE)` region.
pub(crate) struct CudaHostAlloc {
    ctx: Arc<CudaContext>,
    raw: *mut c_void,
    aligned: NonNull<u8>,
}

impl CudaHostAlloc {
    /// `len` bytes whose start is aligned to `align` (over-allocating only if
    /// the driver's pointer is not aligned already).
    pub(crate) fn new(len: usize, align: usize) -> Result<Self> {
        let ctx = primary_context()?;
        ctx.bind_to_thread()
            .map_err(|e| cuda_err("bind primary context", e))?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        for extra in [0, align] {
            let mut raw: *mut c_void = std::ptr::null_mut();
            // SAFETY: out-pointer to a local; size and flags are plain values.
            let r = unsafe { sys::cuMemHostAlloc(&mut raw, len + extra, flags) };
            r.result().map_err(|e| cuda_err("cuMemHostAlloc", e))?;
            let Some(p) = NonNull::new(raw.cast::<u8>()) else {
                return Err(cuda_err("cuMemHostAlloc", "returned NULL"));
            };
            let pad = p.as_ptr().align_offset(align);
            if pad == 0 || pad <= extra {
                // SAFETY: pad <= extra, so the aligned start plus len stays inside.
                let aligned = unsafe { p.add(pad) };
                return Ok(Self { ctx, raw, aligned });
            }
            // SAFETY: freeing the pointer just returned by cuMemHostAlloc.
            unsafe { sys::cuMemFreeHost(raw) };
        }
        Err(cuda_err("cuMemHostAlloc", "could not get aligned memory"))
    }

    pub(crate) fn host_base(&self) -> NonNull<u8> {
        self.aligned
    }

    /// Device pointer of a host address inside this allocation.
    pub(crate) fn device_pointer(&self, host: *mut u8) -> Result<u64> {
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: host lies in memory allocated by cuMemHostAlloc(DEVICEMAP).
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, host.cast(), 0) };
        r.result()
            .map_err(|e| cuda_err("cuMemHostGetDevicePointer_v2", e))?;
        Ok(d)
    }

    /// Sets `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on the region.
    pub(crate) fn set_sync_memops(&self, dev: u64) -> Result<()> {
        let one: u32 = 1;
        // SAFETY: value points at a live u32, as the attribute requires.
        let r = unsafe {
            sys::cuPointerSetAttribute(
                (&one as *const u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                dev,
            )
        };
        r.result()
            .map_err(|e| cuda_err("cuPointerSetAttribute(SYNC_MEMOPS)", e))
    }
}

impl Drop for CudaHostAlloc {
    fn drop(&mut self) {
        // A failure to bind leaves nothing to do but try the free anyway.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: raw came from cuMemHostAlloc and is freed once.
        unsafe { sys::cuMemFreeHost(self.raw) };
    }
}
