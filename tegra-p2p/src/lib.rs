//! `tegra-p2p`: the capture path of the radar appliance in userspace.
//!
//! Layers, as in cudarc: [`uapi`] is the raw mirror of the kernel module's
//! header; [`kmod::Device`] wraps each ioctl into a checked call; the safe API
//! is [`RingMemory`] (the frame ring, GPU-visible when CUDA is there) and the
//! [`FrameSource`] trait with its two implementations, [`KmodSource`] (the
//! `fpga_p2p` kernel module) and [`SimSource`] (a userspace FPGA simulator).
//!
//! ```no_run
//! use tegra_p2p::*;
//! # fn main() -> Result<()> {
//! // 4 slots of 4 MiB; CUDA mapped memory if CUDA works here, else locked host memory.
//! let ring = RingMemory::new(&RingConfig::new(4, sim::DEFAULT_SLOT_BYTES))?;
//! let mut src = SimSource::new(ring, SimConfig::default())?; // or KmodSource::open(0, ring, chunk)
//! src.start(&StartParams::test_pattern())?;
//! loop {
//!     let frame = src.next_frame(None)?;       // waits (futex / one ioctl)
//!     let _host: &[u8] = frame.data();         // payload, read in place
//!     let _dev: Option<u64> = frame.device_ptr(); // CUdeviceptr for kernels
//!     verify_test_pattern(frame.data(), frame.sequence(), src.chunk_bytes()).ok();
//!     frame.release()?;                        // or drop it
//! #   break;
//! }
//! # Ok(()) }
//! ```

pub mod clock;
mod dma_copy;
pub mod error;
pub mod kmod;
pub mod pattern;
pub mod phc;
mod queue;
pub mod record_check;
pub mod ring;
pub mod sim;
pub mod source;
pub mod uapi;

pub use error::{Error, Result};
pub use kmod::KmodSource;
pub use pattern::{Mismatch, SequenceTracker, check_crc, crc32, verify_chunk, verify_test_pattern};
pub use ring::{CompletionWords, MemoryKind, RingConfig, RingMemory};
pub use sim::{ProducerScheduling, SimConfig, SimFaults, SimPacing, SimSource};
pub use source::{
    CaptureClock, ChunkEvent, Counters, Event, Frame, FrameMeta, FrameSource, SourceMode,
    StartParams, TxTarget,
};

// Sources move into the real-time thread: they must be Send (not Sync).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<SimSource>();
    assert_send::<KmodSource>();
    assert_send::<RingMemory>();
};
