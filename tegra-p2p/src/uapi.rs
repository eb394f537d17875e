//! Raw mirror of the kernel module's uapi header `kmod/include/uapi/fpga_p2p.h`.
//!
//! Every struct is `#[repr(C)]` with the header's field order and widths; the
//! test `tests/uapi_layout.rs` compiles a C probe against the header itself and
//! compares every size, offset, constant and ioctl number with these, so the
//! two cannot drift apart silently.
#![allow(non_camel_case_types)]

/// `FPGA_P2P_UAPI_VERSION`: the header version this crate was written for.
pub const FPGA_P2P_UAPI_VERSION: u32 = 1;
/// Slot addresses and sizes must be multiples of this (Tegra nv-p2p).
pub const FPGA_P2P_SLOT_ALIGN: u32 = 4096;

pub const FPGA_P2P_CAP_CAPTURE: u32 = 1 << 0;
pub const FPGA_P2P_CAP_TRANSMIT: u32 = 1 << 1;
pub const FPGA_P2P_CAP_TEST_PATTERN: u32 = 1 << 2;
pub const FPGA_P2P_CAP_PLAYBACK: u32 = 1 << 3;
pub const FPGA_P2P_CAP_CHUNK_EVENTS: u32 = 1 << 4;
/// The card writes completion records (GPU-triggered processing).
pub const FPGA_P2P_CAP_COMPLETION: u32 = 1 << 8;

/// REGISTER flag: the ring has a status page of completion records.
pub const FPGA_P2P_RING_COMPLETION: u32 = 1 << 0;
/// Bytes of the status page after a ring's last slot.
pub const FPGA_P2P_STATUS_BYTES: u32 = 4096;
/// `fpga_p2p_completion.magic`.
pub const FPGA_P2P_COMPLETION_MAGIC: u32 = 0x434f_4d50;

pub const FPGA_P2P_DIR_C2H: u32 = 0;
pub const FPGA_P2P_DIR_H2C: u32 = 1;

pub const FPGA_P2P_SRC_ADC: u32 = 0;
pub const FPGA_P2P_SRC_TEST_PATTERN: u32 = 1;
pub const FPGA_P2P_SRC_PLAYBACK: u32 = 2;

pub const FPGA_P2P_START_CHUNK_EVENTS: u32 = 1 << 0;

pub const FPGA_P2P_TX_DETECTIONS: u32 = 0;
pub const FPGA_P2P_TX_WAVEFORM: u32 = 1;
pub const FPGA_P2P_TX_PLAYBACK: u32 = 2;

pub const FPGA_P2P_EV_FRAME: u32 = 1;
pub const FPGA_P2P_EV_CHUNK: u32 = 2;
pub const FPGA_P2P_EV_TX_DONE: u32 = 3;
pub const FPGA_P2P_EV_REVOKED: u32 = 4;
pub const FPGA_P2P_EV_FAULT: u32 = 5;
pub const FPGA_P2P_EV_OVERFLOW: u32 = 6;

pub const FPGA_P2P_EVF_SHORT: u32 = 1 << 0;
pub const FPGA_P2P_EVF_CRC_MISMATCH: u32 = 1 << 1;
pub const FPGA_P2P_EVF_LINK_ERROR: u32 = 1 << 2;
pub const FPGA_P2P_EVF_TX_ERROR: u32 = 1 << 3;

/// EV_FAULT reasons (in `fpga_p2p_event.chunk`; `.bytes` holds a detail).
pub const FPGA_P2P_FAULT_ENGINE: u32 = 1;
pub const FPGA_P2P_FAULT_STREAM: u32 = 2;
pub const FPGA_P2P_FAULT_DMA_TIMEOUT: u32 = 3;
pub const FPGA_P2P_FAULT_DEVICE_GONE: u32 = 4;

pub const FPGA_P2P_NO_SLOT: u32 = 0xffff_ffff;

pub const FPGA_P2P_IOC_MAGIC: u8 = 0xF2;

/// `struct fpga_p2p_info`
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_info {
    pub uapi_version: u32,
    pub caps: u32,
    pub hw_id: u32,
    pub hw_version: u32,
    pub max_slots: u32,
    pub max_chunks_per_frame: u32,
    pub max_slot_bytes: u64,
    pub slot_align: u32,
    pub event_bytes: u32,
    pub max_playback_frames: u32,
    pub reserved0: u32,
    pub reserved: [u64; 4],
}

/// `struct fpga_p2p_ring`
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_ring {
    pub addr: u64,
    pub slot_bytes: u64,
    pub nr_slots: u32,
    pub direction: u32,
    pub chunk_bytes: u32,
    pub handle: u32,
    pub flags: u32,
    pub reserved0: u32,
    pub reserved: [u64; 1],
}

/// `struct fpga_p2p_completion`: a slot's completion record in the status
/// page; the card writes it after each chunk, the consumer resets `chunks`
/// before it releases the slot.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct fpga_p2p_completion {
    pub chunks: u32,
    pub magic: u32,
    pub sequence: u64,
    pub chunk: u32,
    pub reserved0: u32,
    pub timestamp_ns: u64,
}

const _: () = assert!(std::mem::size_of::<fpga_p2p_completion>() == 32);

/// `struct fpga_p2p_start`
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_start {
    pub handle: u32,
    pub source: u32,
    pub chunk_period_ns: u32,
    pub flags: u32,
    pub playback_frames: u32,
    pub event_timeout_ms: u32,
    pub reserved: [u64; 2],
}

/// `struct fpga_p2p_release`
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_release {
    pub handle: u32,
    pub slot: u32,
}

/// `struct fpga_p2p_tx`
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_tx {
    pub handle: u32,
    pub slot: u32,
    pub bytes: u32,
    pub target: u32,
    pub index: u32,
    pub reserved0: u32,
    pub cookie: u64,
}

/// `struct fpga_p2p_event`: the fixed-size record `read()` returns.
/// `Pod`: plain integers, no padding, any bits valid, so records are read
/// from the device's bytes as they are.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct fpga_p2p_event {
    pub type_: u32,
    pub handle: u32,
    pub slot: u32,
    pub flags: u32,
    pub sequence: u64,
    pub timestamp_ns: u64,
    pub bytes: u32,
    pub crc32: u32,
    pub dropped: u32,
    pub chunk: u32,
    pub cookie: u64,
    pub host_ns: u64,
}

// The header's record: 64 bytes, 8-byte aligned, no padding (what `Pod`
// needs; tests/uapi_layout.rs checks every offset against the header).
const _: () = assert!(std::mem::size_of::<fpga_p2p_event>() == 64);
const _: () = assert!(std::mem::align_of::<fpga_p2p_event>() == 8);

/// `struct fpga_p2p_wait`: release a slot, then wait for the next event.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_wait {
    pub release_handle: u32,
    pub release_slot: u32,
    pub timeout_ms: u32,
    pub reserved0: u32,
    pub event: fpga_p2p_event,
}

/// `struct fpga_p2p_counters`
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fpga_p2p_counters {
    pub frames: u64,
    pub chunks: u64,
    pub drops_no_slot: u64,
    pub drops_fault: u64,
    pub short_frames: u64,
    pub crc_errors: u64,
    pub desc_errors: u64,
    pub irqs: u64,
    pub revocations: u64,
    pub tx_submitted: u64,
    pub tx_completed: u64,
    pub event_overflows: u64,
    pub dma_timeouts: u64,
    /// Completions the interrupt-loss watchdog found (lost interrupts).
    pub lost_irqs: u64,
    /// Rings whose memory the module keeps for ever (an engine that did
    /// not stop, a teardown it gave up waiting for).
    pub quarantined: u64,
    pub reserved: [u64; 1],
}

/// ioctl request numbers, as `_IOR/_IOW/_IOWR` compute them.
pub mod ioc {
    use super::*;
    use core::mem::size_of;

    pub const INFO: u32 =
        nix::request_code_read!(FPGA_P2P_IOC_MAGIC, 0x00, size_of::<fpga_p2p_info>()) as u32;
    pub const REGISTER: u32 =
        nix::request_code_readwrite!(FPGA_P2P_IOC_MAGIC, 0x01, size_of::<fpga_p2p_ring>()) as u32;
    pub const UNREGISTER: u32 =
        nix::request_code_write!(FPGA_P2P_IOC_MAGIC, 0x02, size_of::<u32>()) as u32;
    pub const START: u32 =
        nix::request_code_write!(FPGA_P2P_IOC_MAGIC, 0x03, size_of::<fpga_p2p_start>()) as u32;
    pub const STOP: u32 =
        nix::request_code_write!(FPGA_P2P_IOC_MAGIC, 0x04, size_of::<u32>()) as u32;
    pub const RELEASE: u32 =
        nix::request_code_write!(FPGA_P2P_IOC_MAGIC, 0x05, size_of::<fpga_p2p_release>()) as u32;
    pub const COUNTERS: u32 =
        nix::request_code_read!(FPGA_P2P_IOC_MAGIC, 0x06, size_of::<fpga_p2p_counters>()) as u32;
    pub const TX_SUBMIT: u32 =
        nix::request_code_write!(FPGA_P2P_IOC_MAGIC, 0x07, size_of::<fpga_p2p_tx>()) as u32;
    pub const WAIT: u32 =
        nix::request_code_readwrite!(FPGA_P2P_IOC_MAGIC, 0x08, size_of::<fpga_p2p_wait>()) as u32;
}

nix::ioctl_read!(ioctl_info, FPGA_P2P_IOC_MAGIC, 0x00, fpga_p2p_info);
nix::ioctl_readwrite!(ioctl_register, FPGA_P2P_IOC_MAGIC, 0x01, fpga_p2p_ring);
nix::ioctl_write_ptr!(ioctl_unregister, FPGA_P2P_IOC_MAGIC, 0x02, u32);
nix::ioctl_write_ptr!(ioctl_start, FPGA_P2P_IOC_MAGIC, 0x03, fpga_p2p_start);
nix::ioctl_write_ptr!(ioctl_stop, FPGA_P2P_IOC_MAGIC, 0x04, u32);
nix::ioctl_write_ptr!(ioctl_release, FPGA_P2P_IOC_MAGIC, 0x05, fpga_p2p_release);
nix::ioctl_read!(ioctl_counters, FPGA_P2P_IOC_MAGIC, 0x06, fpga_p2p_counters);
nix::ioctl_write_ptr!(ioctl_tx_submit, FPGA_P2P_IOC_MAGIC, 0x07, fpga_p2p_tx);
nix::ioctl_readwrite!(ioctl_wait, FPGA_P2P_IOC_MAGIC, 0x08, fpga_p2p_wait);

/// Every struct of the header with its Rust size, for the layout test and for
/// `badinput`'s truncated-struct ioctls.
pub const STRUCT_SIZES: &[(&str, usize)] = &[
    ("fpga_p2p_info", core::mem::size_of::<fpga_p2p_info>()),
    ("fpga_p2p_ring", core::mem::size_of::<fpga_p2p_ring>()),
    (
        "fpga_p2p_completion",
        core::mem::size_of::<fpga_p2p_completion>(),
    ),
    ("fpga_p2p_start", core::mem::size_of::<fpga_p2p_start>()),
    ("fpga_p2p_release", core::mem::size_of::<fpga_p2p_release>()),
    ("fpga_p2p_tx", core::mem::size_of::<fpga_p2p_tx>()),
    ("fpga_p2p_event", core::mem::size_of::<fpga_p2p_event>()),
    ("fpga_p2p_wait", core::mem::size_of::<fpga_p2p_wait>()),
    (
        "fpga_p2p_counters",
        core::mem::size_of::<fpga_p2p_counters>(),
    ),
];
