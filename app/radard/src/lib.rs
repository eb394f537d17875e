//! `radard`, the appliance program: frames from the FPGA (kernel module) or
//! its simulator, the processing chain on the GPU or CPU, detections out.
//!
//! `config` is the one TOML file; `fpga_reset` the FPGA's reset line at
//! start-up; `rt` the real-time set-up of the loop
//! thread; `frame_loop` the loop itself; `report` the non-real-time side
//! (per-frame lines, status, summary) fed through a lock-free queue;
//! `telemetry` the GPU's temperature, clocks and load; `recording`,
//! `record` and `replay` the recorded frame files; `threads` how the
//! process's threads were scheduled over a run.

pub mod config;
pub mod diag;
pub mod error;
pub mod fpga_reset;
pub mod frame_loop;
pub mod recorder;
pub mod recording;
pub mod replay;
pub mod report;
pub mod rt;
pub mod runner;
pub mod seqlock;
pub mod service;
pub mod setup;
pub mod sinks;
pub mod status;
pub mod summary;
pub mod telemetry;
pub mod threads;
pub mod unit;

pub use config::RadardConfig;
pub use error::{RadardError, RunEnd};
pub use runner::{Radard, RunReport};
