//! `radard`, the appliance program: frames from the FPGA (kernel module) or
//! its simulator, the processing chain on the GPU or CPU, detections out.
//!
//! `config` is the one TOML file; `rt` the real-time set-up of the loop
//! thread; `frame_loop` the loop itself; `report` the non-real-time side
//! (per-frame lines, status, summary) fed through a lock-free queue;
//! `telemetry` the GPU's temperature, clocks and load; `recording`,
//! `record` and `replay` the recorded frame files.

pub mod config;
pub mod frame_loop;
pub mod record;
pub mod recording;
pub mod replay;
pub mod report;
pub mod rt;
pub mod setup;
pub mod telemetry;

pub use config::RadardConfig;
