//! Radar processing chain, spec v1 (DESIGN.md section 6).
//!
//! `config` holds the geometry, physical constants and chain parameters;
//! `detection` the output types shared by every backend; `backend` the trait
//! that the CPU reference and the CUDA backend implement.

pub mod backend;
pub mod config;
pub mod cuda;
pub mod detection;
pub mod error;

pub use backend::{Backend, FrameInput, SlotAddr};
pub use config::{CfarConfig, ChainConfig, Geometry, Physical};
pub use detection::{Detection, Detections};
pub use error::DspError;
