//! Choosing a backend by name (`--backend auto|cuda|cpu`).

use std::fmt;
use std::str::FromStr;

use crate::backend::Backend;
use crate::config::ChainConfig;
use crate::cpu::CpuBackend;
use crate::cuda::{CudaBackend, CudaOptions};
use crate::error::DspError;

/// Which backend runs the chain. Spelled `auto`, `cuda` and `cpu` on
/// command lines, in TOML and in text.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum BackendKind {
    /// CUDA when it can be used, else the CPU.
    #[default]
    Auto,
    /// The CUDA backend; an error when it cannot start.
    Cuda,
    /// The CPU reference backend.
    Cpu,
}

impl FromStr for BackendKind {
    type Err = DspError;

    fn from_str(s: &str) -> Result<Self, DspError> {
        <BackendKind as clap::ValueEnum>::from_str(s, false)
            .map_err(|_| DspError::Parse(format!("unknown backend {s:?} (auto, cuda, cpu)")))
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

/// A backend and why it was chosen (for the caller's log).
pub struct SelectedBackend {
    pub backend: Box<dyn Backend>,
    /// The kind actually built (`Auto` resolves to `Cuda` or `Cpu`).
    pub kind: BackendKind,
    pub reason: String,
}

/// Make the backend `kind` for `cfg`.
///
/// `Cuda` builds the CUDA backend or fails with the reason. `Auto` picks
/// CUDA only when libcuda and libnvrtc load and a device exists
/// (and the backend then starts); otherwise the CPU backend, saying why.
pub fn select_backend_explained(
    kind: BackendKind,
    cfg: &ChainConfig,
) -> Result<SelectedBackend, DspError> {
    select_backend_with_options(kind, cfg, &CudaOptions::default())
}

/// [`select_backend_explained`] with the CUDA backend's launch and wait
/// choices (unused by the CPU backend).
pub fn select_backend_with_options(
    kind: BackendKind,
    cfg: &ChainConfig,
    cuda_opts: &CudaOptions,
) -> Result<SelectedBackend, DspError> {
    let cpu = |reason: String| -> Result<SelectedBackend, DspError> {
        Ok(SelectedBackend {
            backend: Box::new(CpuBackend::new(cfg)?),
            kind: BackendKind::Cpu,
            reason,
        })
    };
    match kind {
        BackendKind::Cpu => cpu("cpu backend: requested".to_string()),
        BackendKind::Cuda => {
            let b = CudaBackend::with_options(cfg, cuda_opts)?;
            let reason = format!("cuda backend: requested; device {}", b.device());
            Ok(SelectedBackend {
                backend: Box::new(b),
                kind: BackendKind::Cuda,
                reason,
            })
        }
        BackendKind::Auto => match crate::cuda::probe() {
            Err(why) => cpu(format!(
                "auto: CUDA unusable ({why}); using the cpu backend"
            )),
            Ok(info) => match CudaBackend::with_options(cfg, cuda_opts) {
                Ok(b) => Ok(SelectedBackend {
                    backend: Box::new(b),
                    kind: BackendKind::Cuda,
                    reason: format!(
                        "auto: CUDA libraries loaded and device {info} present; using the cuda backend"
                    ),
                }),
                Err(e) => cpu(format!(
                    "auto: device {info} present but the cuda backend failed to start ({e}); using the cpu backend"
                )),
            },
        },
    }
}

/// [`select_backend_explained`] without the reason.
pub fn select_backend(kind: BackendKind, cfg: &ChainConfig) -> Result<Box<dyn Backend>, DspError> {
    select_backend_explained(kind, cfg).map(|s| s.backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without CUDA (CI), auto falls back to the CPU and says why, and an
    /// explicit cuda request is an error, not a panic.
    #[test]
    fn auto_explains_its_choice() {
        let cfg = ChainConfig::default();
        let s = select_backend_explained(BackendKind::Auto, &cfg).expect("auto");
        assert!(s.reason.starts_with("auto: "), "{}", s.reason);
        match crate::cuda::probe() {
            Ok(_) => {
                assert_eq!(s.kind, BackendKind::Cuda, "{}", s.reason);
                assert_eq!(s.backend.name(), "cuda");
            }
            Err(_) => {
                println!("no CUDA here: {}", s.reason);
                assert_eq!(s.kind, BackendKind::Cpu);
                assert_eq!(s.backend.name(), "cpu");
                assert!(s.reason.contains("CUDA unusable"), "{}", s.reason);
                let e = select_backend(BackendKind::Cuda, &cfg)
                    .err()
                    .expect("cuda without CUDA must fail");
                assert!(e.is_cuda(), "{e}");
            }
        }
    }

    /// `auto`, `cuda` and `cpu`, whichever way they come in or go out.
    #[test]
    fn backend_kind_spellings() {
        use clap::ValueEnum;
        for (k, text) in [
            (BackendKind::Auto, "auto"),
            (BackendKind::Cuda, "cuda"),
            (BackendKind::Cpu, "cpu"),
        ] {
            assert_eq!(k.to_string(), text);
            assert_eq!(text.parse::<BackendKind>().expect("FromStr"), k);
            assert_eq!(<BackendKind as ValueEnum>::from_str(text, false), Ok(k));
            assert_eq!(
                serde_json::to_string(&k).expect("serialize"),
                format!("\"{text}\"")
            );
            let back: BackendKind =
                serde_json::from_str(&format!("\"{text}\"")).expect("deserialize");
            assert_eq!(back, k);
        }
        assert_eq!(BackendKind::value_variants().len(), 3);
        let e = "gpu".parse::<BackendKind>().expect_err("unknown backend");
        assert!(e.to_string().contains("auto, cuda, cpu"), "{e}");
    }
}
