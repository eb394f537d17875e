//! Choosing a backend by name (`--backend auto|cuda|cpu`).

use std::fmt;
use std::str::FromStr;

use crate::backend::Backend;
use crate::config::ChainConfig;
use crate::cpu::CpuBackend;
use crate::error::DspError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// CUDA when it can be used, else the CPU.
    #[default]
    Auto,
    Cuda,
    Cpu,
}

impl FromStr for BackendKind {
    type Err = DspError;

    fn from_str(s: &str) -> Result<Self, DspError> {
        match s {
            "auto" => Ok(BackendKind::Auto),
            "cuda" => Ok(BackendKind::Cuda),
            "cpu" => Ok(BackendKind::Cpu),
            other => Err(DspError::Parse(format!(
                "unknown backend {other:?} (auto, cuda, cpu)"
            ))),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Auto => "auto",
            BackendKind::Cuda => "cuda",
            BackendKind::Cpu => "cpu",
        })
    }
}

/// Make the backend `kind` for `cfg`.
///
/// Hook for the CUDA backend: `Cuda` must build it or fail with the reason;
/// `Auto` should try it and fall back to the CPU when CUDA is unusable.
pub fn select_backend(kind: BackendKind, cfg: &ChainConfig) -> Result<Box<dyn Backend>, DspError> {
    match kind {
        BackendKind::Cpu | BackendKind::Auto => Ok(Box::new(CpuBackend::new(cfg)?)),
        BackendKind::Cuda => Err(DspError::Cuda("cuda backend not built yet".into())),
    }
}
