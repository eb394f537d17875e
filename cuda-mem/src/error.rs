//! What went wrong in a CUDA call, keeping the driver's own error.

use cudarc::driver::DriverError;

use crate::library::Library;

/// A CUDA failure: a driver call that failed (what was attempted, and the
/// driver's error), or CUDA that cannot be used here at all.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// A driver call failed; `op` says what was attempted.
    #[error("{op}: {source}")]
    Driver {
        op: &'static str,
        #[source]
        source: DriverError,
    },
    /// Libraries that cannot be loaded (no NVIDIA driver or toolkit, or not
    /// on the library path).
    #[error(
        "cannot load {} (searched the names cudarc tries, e.g. {}; set LD_LIBRARY_PATH)",
        Library::names(missing),
        Library::sonames(missing)
    )]
    MissingLibraries { missing: Vec<Library> },
    /// The driver loads but reports no device.
    #[error("the CUDA driver reports no device")]
    NoDevice,
    /// The driver lacks a function this program needs.
    #[error("the CUDA driver lacks {what}")]
    Missing { what: &'static str },
    /// The driver gave memory that cannot be used as asked.
    #[error("{op}: {reason}")]
    Memory {
        op: &'static str,
        reason: &'static str,
    },
}

/// The error of driver call `op`, for `map_err`: `.map_err(cuda_err("cuMemAlloc"))`.
pub fn cuda_err(op: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |source| CudaError::Driver { op, source }
}

impl CudaError {
    /// The driver's error, when a driver call failed.
    pub fn driver_error(&self) -> Option<DriverError> {
        match self {
            CudaError::Driver { source, .. } => Some(*source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    /// Each message says what was attempted, and the driver's error stays
    /// the source. (cudarc formats a driver error with libcuda's
    /// cuGetErrorString: without libcuda only the structure is checked.)
    #[test]
    fn messages_name_the_operation_and_keep_the_source() {
        let e = cuda_err("cuMemAlloc")(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert_eq!(
            e.driver_error(),
            Some(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY))
        );
        assert!(std::error::Error::source(&e).is_some(), "source kept");
        if Library::Driver.is_present() {
            let text = e.to_string();
            assert!(text.starts_with("cuMemAlloc: "), "{text}");
            assert!(text.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{text}");
        } else {
            println!("no libcuda: driver error text not formatted");
        }

        let e = CudaError::MissingLibraries {
            missing: vec![Library::Driver, Library::Cufft],
        };
        assert_eq!(
            e.to_string(),
            "cannot load libcuda, libcufft (searched the names cudarc tries, e.g. libcuda.so, libcufft.so; set LD_LIBRARY_PATH)"
        );
        assert!(e.driver_error().is_none());
    }
}
