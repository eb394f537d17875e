//! Stream memory operations: a stream that waits until a 32-bit word in
//! memory reaches a value (`cuStreamWaitValue32`), and one that writes a
//! word (`cuStreamWriteValue32`), what GPU-triggered processing is built on;
//! and the device attributes that say whether the device supports them.
//!
//! cudarc binds the CUDA 12 names (`cuStreamWaitValue32_v2`, ...) for the
//! `cuda-12060` feature and panics on first use when the driver lacks the
//! symbol. The calls are therefore resolved here by name, before any use:
//! the `_v2` name that CUDA 12 headers call (and a CUDA 13 driver still
//! exports for programs built against them), else the plain name under
//! which CUDA 13 headers call the same function. A driver with neither is
//! an error, never a panic.

use std::ffi::{c_int, c_uint};

use cudarc::driver::{CudaContext, DriverError, sys};

use crate::{CudaError, Library};

type ValueFn = unsafe extern "C" fn(sys::CUstream, sys::CUdeviceptr, u32, c_uint) -> sys::CUresult;
type AttrFn = unsafe extern "C" fn(*mut c_int, c_int, sys::CUdevice) -> sys::CUresult;

/// `CU_STREAM_WAIT_VALUE_GEQ`: wait until `(int32_t)(*addr - value) >= 0`
/// (a cyclic comparison).
const WAIT_GEQ: c_uint = 0;
/// `CU_STREAM_WRITE_VALUE_DEFAULT`: a memory fence before the write.
const WRITE_DEFAULT: c_uint = 0;

/// The driver's stream memory operations, resolved by name.
#[derive(Clone, Copy)]
pub struct StreamMemOps {
    wait: ValueFn,
    write: ValueFn,
    /// The symbols found, for the log.
    pub wait_symbol: &'static str,
    pub write_symbol: &'static str,
}

impl std::fmt::Debug for StreamMemOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamMemOps")
            .field("wait", &self.wait_symbol)
            .field("write", &self.write_symbol)
            .finish()
    }
}

/// The symbol `name` of the loaded driver, as a function of type `F`.
///
/// # Safety
/// `F` is the function's real C signature.
unsafe fn symbol<F: Copy>(name: &'static str) -> Option<F> {
    // SAFETY: libcuda loads (checked by the callers); cudarc's handle to it
    // lives for the program. The caller vouches for F.
    unsafe {
        let lib = sys::culib();
        lib.get::<F>(name.as_bytes()).ok().map(|s| *s)
    }
}

/// The first of `names` that the driver exports.
///
/// # Safety
/// As for [`symbol`]: every name has signature `F`.
unsafe fn first_symbol<F: Copy>(names: &[&'static str]) -> Option<(F, &'static str)> {
    names
        .iter()
        // SAFETY: the caller vouches for every name's signature.
        .find_map(|&n| unsafe { symbol::<F>(n) }.map(|f| (f, n)))
}

impl StreamMemOps {
    /// Resolves the wait and write calls in the loaded driver; an error
    /// names what is missing.
    pub fn resolve() -> Result<Self, CudaError> {
        Library::require(&[Library::Driver])?;
        // SAFETY: both names of each pair are the same C function
        // (CUstream, CUdeviceptr, cuuint32_t, unsigned int) -> CUresult.
        let wait =
            unsafe { first_symbol::<ValueFn>(&["cuStreamWaitValue32_v2", "cuStreamWaitValue32"]) };
        // SAFETY: as above.
        let write = unsafe {
            first_symbol::<ValueFn>(&["cuStreamWriteValue32_v2", "cuStreamWriteValue32"])
        };
        match (wait, write) {
            (Some((wait, wait_symbol)), Some((write, write_symbol))) => Ok(StreamMemOps {
                wait,
                write,
                wait_symbol,
                write_symbol,
            }),
            _ => Err(CudaError::Missing {
                what: "cuStreamWaitValue32/cuStreamWriteValue32 in libcuda (stream memory operations)",
            }),
        }
    }

    /// Queues on `stream` a wait until the word at `addr` is at least
    /// `value` (cyclic comparison: `(int32_t)(*addr - value) >= 0`). Inside
    /// a stream capture it becomes a graph node.
    ///
    /// # Safety
    /// `stream` is a live stream of the current context; `addr` is a device
    /// address of 4 live, 4-byte aligned bytes (mapped host memory: its
    /// device pointer) that stay allocated until the wait has completed.
    /// Every kernel queued behind the wait must have been loaded before
    /// (launched once): with lazy module loading a first launch behind an
    /// unsatisfied wait deadlocks.
    pub unsafe fn wait_geq(
        &self,
        stream: sys::CUstream,
        addr: sys::CUdeviceptr,
        value: u32,
    ) -> Result<(), DriverError> {
        // SAFETY: the caller vouches for the arguments.
        unsafe { (self.wait)(stream, addr, value, WAIT_GEQ) }.result()
    }

    /// Queues on `stream` a write of `value` to the word at `addr`, after
    /// a memory fence (the work before it is visible first).
    ///
    /// # Safety
    /// As for [`Self::wait_geq`].
    pub unsafe fn write(
        &self,
        stream: sys::CUstream,
        addr: sys::CUdeviceptr,
        value: u32,
    ) -> Result<(), DriverError> {
        // SAFETY: the caller vouches for the arguments.
        unsafe { (self.write)(stream, addr, value, WRITE_DEFAULT) }.result()
    }
}

/// The device attributes about stream memory operations, each None where
/// the driver does not know it (an attribute a newer CUDA added or an
/// older one retired).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemOpAttributes {
    /// 92, CAN_USE_STREAM_MEM_OPS(_V1): the CUDA 11 gate (retired in 12.x,
    /// where 32-bit waits and writes are "available by default").
    pub stream_mem_ops_v1: Option<i32>,
    /// 122, CAN_USE_64_BIT_STREAM_MEM_OPS (CUDA 12 numbering).
    pub mem_ops_64: Option<i32>,
    /// 123, CAN_USE_STREAM_WAIT_VALUE_NOR (CUDA 12 numbering).
    pub wait_value_nor: Option<i32>,
    /// 98, CAN_FLUSH_REMOTE_WRITES.
    pub flush_remote_writes: Option<i32>,
    /// 118, GPU_DIRECT_RDMA_WRITES_ORDERING (0 none, 100 owner, 200 all).
    pub rdma_writes_ordering: Option<i32>,
    /// 18, INTEGRATED: an iGPU (Orin) rather than a discrete GPU.
    pub integrated: Option<i32>,
}

impl std::fmt::Display for MemOpAttributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |a: Option<i32>| a.map_or("unknown".to_string(), |v| v.to_string());
        write!(
            f,
            "stream mem ops (v1) {}, 64-bit mem ops {}, wait-value NOR {}, flush remote writes {}, RDMA writes ordering {}, integrated {}",
            v(self.stream_mem_ops_v1),
            v(self.mem_ops_64),
            v(self.wait_value_nor),
            v(self.flush_remote_writes),
            v(self.rdma_writes_ordering),
            v(self.integrated)
        )
    }
}

/// Reads the attributes of `ctx`'s device; never fails (an attribute the
/// driver refuses is None).
pub fn mem_op_attributes(ctx: &CudaContext) -> MemOpAttributes {
    if !Library::Driver.is_present() {
        return MemOpAttributes::default();
    }
    // SAFETY: cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
    // CUdevice dev): the enum is passed as an int.
    let Some(get) = (unsafe { symbol::<AttrFn>("cuDeviceGetAttribute") }) else {
        return MemOpAttributes::default();
    };
    let dev = ctx.cu_device();
    let attr = |n: c_int| {
        let mut v: c_int = 0;
        // SAFETY: `v` is a live out-pointer; `dev` is the context's device;
        // an attribute number the driver does not know is an error return.
        let r = unsafe { get(&mut v, n, dev) };
        (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
    };
    MemOpAttributes {
        stream_mem_ops_v1: attr(92),
        mem_ops_64: attr(122),
        wait_value_nor: attr(123),
        flush_remote_writes: attr(98),
        rdma_writes_ordering: attr(118),
        integrated: attr(18),
    }
}
