//! Errors of the capture path. Every variant that comes from the environment
//! names the device (or memory) and the operation, so a log line is enough to
//! act on. Nothing in this crate panics on an environment failure.

use std::sync::Arc;

use nix::errno::Errno;

/// What went wrong, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call on the device failed.
    #[error("{device}: {op}: {errno} ({desc})", desc = errno.desc())]
    Device {
        device: Arc<str>,
        op: &'static str,
        errno: Errno,
    },
    /// The device node does not exist (module not loaded, no card, wrong index).
    #[error("{device}: no such device node (is the fpga_p2p module loaded?)")]
    NoDevice { device: Arc<str> },
    /// Opening or using the device was refused.
    #[error("{device}: {op}: permission denied (need access to the node, e.g. group radar)")]
    PermissionDenied { device: Arc<str>, op: &'static str },
    /// The module speaks another uapi version or event size than this library.
    #[error(
        "{device}: module uapi version {found} (event {event_bytes} bytes) does not match this library's version {expected} ({expected_event_bytes} bytes): update the module or the program"
    )]
    UapiMismatch {
        device: Arc<str>,
        found: u32,
        expected: u32,
        event_bytes: u32,
        expected_event_bytes: u32,
    },
    /// A signal arrived while waiting for an event (a slot release the wait
    /// carried was done); waiting again is safe.
    #[error("{device}: wait interrupted by a signal")]
    Interrupted { device: Arc<str> },
    /// No event arrived within the event timeout.
    #[error("{device}: no event within {timeout_ms} ms")]
    Timeout { device: Arc<str>, timeout_ms: u32 },
    /// The ring memory went away (freed, unmapped, or revoked) and capture stopped.
    #[error("{device}: ring memory was revoked; capture stopped")]
    Revoked { device: Arc<str> },
    /// The engine reported a fault and stopped (`code`: `FPGA_P2P_FAULT_*`).
    #[error("{device}: engine fault (code {code}); capture stopped")]
    Fault { device: Arc<str>, code: u32 },
    /// The event queue overflowed (events were lost).
    #[error("{device}: event queue overflow: events were lost")]
    Overflow { device: Arc<str> },
    /// The source is not streaming (never started, stopped, or after a fault).
    #[error("{device}: {op}: not streaming")]
    NotStreaming { device: Arc<str>, op: &'static str },
    /// A request that cannot be valid (geometry, slot index, sizes).
    #[error("{what}: {reason}")]
    InvalidArgument { what: &'static str, reason: String },
    /// The device does not offer what was asked for.
    #[error("{device}: {what} is not supported by this device")]
    Unsupported {
        device: Arc<str>,
        what: &'static str,
    },
    /// Ring memory could not be allocated, mapped or locked.
    #[error("ring memory: {op}: {reason}")]
    Memory { op: &'static str, reason: String },
    /// A CUDA driver call failed; `op` says what was attempted.
    #[cfg(feature = "cuda")]
    #[error("CUDA: {op}: {source}")]
    Cuda {
        op: &'static str,
        #[source]
        source: cuda_mem::DriverError,
    },
    /// CUDA cannot serve here: libcuda does not load, there is no device,
    /// or the driver's memory cannot be used as asked.
    #[cfg(feature = "cuda")]
    #[error("CUDA: {0}")]
    CudaUnusable(#[source] cuda_mem::CudaError),
    /// CUDA memory was asked of a build without the `cuda` feature.
    #[error("CUDA: {op}: built without the `cuda` feature")]
    CudaNotBuilt { op: &'static str },
}

#[cfg(feature = "cuda")]
impl From<cuda_mem::CudaError> for Error {
    fn from(e: cuda_mem::CudaError) -> Self {
        match e {
            cuda_mem::CudaError::Driver { op, source } => Error::Cuda { op, source },
            other => Error::CudaUnusable(other),
        }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps an errno of `op` on `device` to the most specific variant.
    pub fn from_errno(device: &Arc<str>, op: &'static str, errno: Errno) -> Self {
        match errno {
            Errno::ENOENT | Errno::ENODEV | Errno::ENXIO if op == "open" => Error::NoDevice {
                device: device.clone(),
            },
            Errno::EACCES | Errno::EPERM => Error::PermissionDenied {
                device: device.clone(),
                op,
            },
            _ => Error::Device {
                device: device.clone(),
                op,
                errno,
            },
        }
    }

    /// The errno behind this error, if it came from a system call.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Device { errno, .. } => Some(*errno),
            Error::PermissionDenied { .. } => Some(Errno::EACCES),
            Error::NoDevice { .. } => Some(Errno::ENOENT),
            Error::Timeout { .. } => Some(Errno::ETIMEDOUT),
            _ => None,
        }
    }
}
