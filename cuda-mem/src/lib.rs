//! `cuda-mem`: the CUDA driver access that the capture path (`tegra-p2p`)
//! and the processing chain (`radar-dsp`) share.
//!
//! Layers, as in cudarc (whose `sys` and `result` layers this builds on):
//! [`raw`] holds the few driver calls cudarc's result layer does not wrap,
//! [`CudaError`] and [`cuda_err`] are the checked results, and the safe API
//! is [`Library`] (which CUDA libraries load here), [`primary_context`]
//! (device 0's primary context, which both crates use, so memory one
//! allocates the other can use), [`MappedHostBuffer`] (page-locked host
//! memory the GPU reads and writes through a device pointer of its own) and
//! [`DeviceMemory`] (plain device memory at a fixed address).
//!
//! cudarc loads libcuda, libnvrtc and libcufft at run time and panics when
//! one is missing; nothing here calls into a library before checking that
//! it loads, so every failure is an error, never a panic.

mod context;
mod device;
mod error;
mod library;
mod mapped;
pub mod memops;
pub mod raw;

pub use context::primary_context;
pub use cudarc::driver::{CudaContext, DriverError};
pub use device::DeviceMemory;
pub use error::{CudaError, cuda_err};
pub use library::Library;
pub use mapped::{MappedHostBuffer, Mapping, PAGE_BYTES};
pub use memops::{MemOpAttributes, StreamMemOps, mem_op_attributes};
