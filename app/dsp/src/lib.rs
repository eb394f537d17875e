//! Radar processing chain, spec v1 (docs/processing-chain.md; the frame and
//! the defaults in docs/requirements.md).
//!
//! `config` holds the geometry, physical constants and chain parameters;
//! `detection` the output types shared by every backend; `backend` the trait
//! that the CPU reference and the CUDA backend implement. `cfar`, `angle`,
//! `refine` and `window` are the host-side pieces every backend shares;
//! `cpu` is the reference backend, `scene` the synthetic frame generator,
//! `framefile` raw frame files, `select` picks a backend by name; `cuda` is
//! the GPU backend. With the `instrument` feature (on by default, off where
//! radard links the library) the CUDA backend also has the instrumented
//! runs that the `radar-dsp` tool's `bench` reports.

pub mod angle;
pub mod backend;
pub mod cfar;
pub mod config;
pub mod cpu;
pub mod cuda;
pub mod detection;
pub mod error;
pub mod framefile;
pub mod refine;
pub mod scene;
pub mod select;
pub mod spectra;
pub mod window;

pub use backend::{
    Backend, CompletionAccess, FrameInput, SlotAddr, SlotFrame, TriggerStamp, TriggerWait,
    Triggered,
};
pub use config::{CfarConfig, ChainConfig, Geometry, Physical};
pub use cpu::CpuBackend;
pub use detection::{Detection, Detections};
pub use error::DspError;
pub use select::{BackendKind, SelectedBackend, select_backend, select_backend_explained};
