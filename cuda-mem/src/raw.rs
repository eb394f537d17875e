//! The driver calls on memory that cudarc's result layer does not wrap,
//! checked: the only calls into `cudarc::driver::sys` in this crate.

use std::ffi::c_void;

use cudarc::driver::{DriverError, sys};

/// `cuMemHostGetDevicePointer`: the device address of host address `host`.
///
/// # Safety
/// `host` lies in memory from `cuMemHostAlloc` with `DEVICEMAP` that is
/// still allocated, and the context it was allocated in (or, for PORTABLE
/// memory, any context) is current.
pub unsafe fn host_device_pointer(host: *mut c_void) -> Result<sys::CUdeviceptr, DriverError> {
    let mut device: sys::CUdeviceptr = 0;
    // SAFETY: `device` is a valid out-pointer; the caller vouches for `host`.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }.result()?;
    Ok(device)
}

/// `cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 1)` on the
/// allocation holding device address `device`: synchronous memory
/// operations on it are ordered with the device's work, as memory pinned
/// for another device's DMA needs.
///
/// # Safety
/// `device` is an address inside a live allocation of the current context.
pub unsafe fn set_sync_memops(device: sys::CUdeviceptr) -> Result<(), DriverError> {
    let one: u32 = 1;
    // SAFETY: the value points at a live u32, as the attribute requires;
    // the caller vouches for `device`.
    unsafe {
        sys::cuPointerSetAttribute(
            (&one as *const u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
            device,
        )
    }
    .result()
}
