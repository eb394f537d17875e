//! `radard`, the appliance program: frames from the FPGA (kernel module) or
//! its simulator, the processing chain on the GPU or CPU, detections out.
//! The binary (`main.rs`, `cli.rs`, `cmd/`, `signals.rs`) drives this
//! library.
//!
//! A run: [`Radard::builder`] (`runner`) wires it, from `unit` (the source
//! and the chain it feeds, opened by `setup`) and the loop's buffers
//! (`frame_loop::LoopResources`); `frame_loop` is the loop itself; `summary`
//! what a run reports at exit; `error` why it failed and the exit status.
//!
//! Around the loop: `config` the one TOML file; `fpga_reset` the FPGA's
//! reset line at start-up; `rt` the real-time set-up of the loop thread;
//! `status` the board the loop publishes on (through `seqlock`); `report`
//! the console's frame and status lines; `sinks` where detections go;
//! `service` systemd and the health verdict; `wall_clock` the frames' UTC
//! time; `diag` the diagnostics link;
//! `telemetry` the GPU's temperature, clocks and load; `recording` the
//! recorded frame files, `recorder` what `radard record` does, `replay`
//! the source that plays a recording back; `threads` how the process's
//! threads were scheduled over a run.

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
pub mod service_watchdog;
pub mod setup;
pub mod sinks;
pub mod status;
pub mod summary;
pub mod telemetry;
pub mod threads;
pub mod timekeeping;
pub mod trigger;
pub mod unit;
pub mod wall_clock;

pub use config::RadardConfig;
pub use error::{RadardError, RunEnd};
pub use runner::{Radard, RunReport};
