//! What is wrong with a configuration; every error names the file or the
//! key.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error("config: {key}: {reason}")]
    InvalidAt { key: String, reason: String },
    /// An error of the key that `files` set (a configuration read from a
    /// base file and drop-ins).
    #[error("{files}: {inner}")]
    InFile {
        files: String,
        inner: Box<ConfigError>,
    },
    /// The chain's own validation, whose messages already say "config:".
    #[error(transparent)]
    Chain(#[from] radar_dsp::DspError),
    #[error("config: {0}")]
    Rt(#[from] crate::rt::RtError),
    #[error("config: {0}")]
    FpgaReset(#[from] crate::fpga_reset::FpgaResetError),
}
