//! Device 0's primary context: the one context the capture path and the
//! chain share, so that mapped memory one allocates the other can use.

use std::sync::Arc;

use cudarc::driver::{CudaContext, result};

use crate::{CudaError, Library, cuda_err};

/// The primary context of device 0, bound to the calling thread; or why
/// there is none (libcuda missing, the driver failing to start, no device).
pub fn primary_context() -> Result<Arc<CudaContext>, CudaError> {
    Library::require(&[Library::Driver])?;
    result::init().map_err(cuda_err("cuInit"))?;
    let count = result::device::get_count().map_err(cuda_err("cuDeviceGetCount"))?;
    if count < 1 {
        return Err(CudaError::NoDevice);
    }
    CudaContext::new(0).map_err(cuda_err("open device 0 (primary context)"))
}
