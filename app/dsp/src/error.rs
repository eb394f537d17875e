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
    /// The CUDA backend could not be used (libraries, device, compile, launch).
    #[error("cuda: {0}")]
    Cuda(String),
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

impl DspError {
    pub fn config(key: &str, reason: impl Into<String>) -> Self {
        DspError::Config {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}
