//! Errors of the processing chain.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DspError {
    /// A configuration value is unusable; `key` is its dotted TOML path.
    #[error("config: {key}: {reason}")]
    Config { key: String, reason: String },
    /// The configuration file is not valid TOML or has unknown keys.
    #[error("config: {0}")]
    Parse(String),
    /// A frame buffer does not have the size the geometry needs.
    #[error("frame has {got} bytes, the geometry needs {want}")]
    FrameSize { got: usize, want: usize },
    /// A raw frame file ends in the middle of a frame.
    #[error("{path}: truncated: {bytes} bytes is not a whole number of {frame_bytes}-byte frames")]
    Truncated {
        path: String,
        bytes: u64,
        frame_bytes: usize,
    },
    /// A CUDA driver call failed; `op` says what was attempted.
    #[error("cuda: {op}: {source}")]
    Cuda {
        op: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// CUDA cannot serve here: a library does not load, there is no
    /// device, or the driver's memory cannot be used as asked.
    #[error("cuda: {0}")]
    CudaUnusable(#[source] cuda_mem::CudaError),
    /// NVRTC could not compile the kernels; `log` is its program log (or,
    /// when it failed before compiling, its error).
    #[error("cuda: NVRTC compile: {log}")]
    Nvrtc {
        log: String,
        #[source]
        source: cudarc::nvrtc::CompileError,
    },
    /// A cuFFT call failed; `op` says what was attempted.
    #[error("cuda: {op}: {source}")]
    Cufft {
        op: &'static str,
        #[source]
        source: cudarc::cufft::result::CufftError,
    },
    /// The CUDA backend cannot serve a request: a ring slot it cannot read,
    /// an input never prepared, a size its kernels or cuFFT cannot take.
    #[error("cuda: {0}")]
    CudaRequest(String),
    /// A backend failed for a reason of its own (a worker thread died).
    #[error("backend: {0}")]
    Backend(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<cuda_mem::CudaError> for DspError {
    fn from(e: cuda_mem::CudaError) -> Self {
        match e {
            cuda_mem::CudaError::Driver { op, source } => DspError::Cuda { op, source },
            other => DspError::CudaUnusable(other),
        }
    }
}

impl DspError {
    /// Whether CUDA failed or cannot serve (any of the `Cuda*`, `Nvrtc`
    /// and `Cufft` variants).
    pub fn is_cuda(&self) -> bool {
        matches!(
            self,
            DspError::Cuda { .. }
                | DspError::CudaUnusable(_)
                | DspError::Nvrtc { .. }
                | DspError::Cufft { .. }
                | DspError::CudaRequest(_)
        )
    }

    pub fn config(key: &str, reason: impl Into<String>) -> Self {
        DspError::Config {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}
