//! Mapped pinned host memory: `cuMemHostAlloc(DEVICEMAP)`, page-locked host
//! memory that the GPU reads and writes through a device address of its own
//! (across PCIe on a discrete GPU, in place on Orin). Never WRITECOMBINED
//! (what cudarc's `alloc_pinned` always adds): the CPU reads this memory
//! too, and write-combined memory is slow to read.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{CudaContext, result, sys};

use crate::{CudaError, cuda_err, raw};

/// Bytes of a page: a mapped buffer's length is a whole number of them.
pub const PAGE_BYTES: usize = 4096;

/// How a [`MappedHostBuffer`] is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Also `CU_MEMHOSTALLOC_PORTABLE`: pinned for every context, not only
    /// the one current at allocation.
    pub portable: bool,
    /// The buffer starts at a multiple of this many bytes (a power of two).
    pub align: usize,
}

impl Default for Mapping {
    /// DEVICEMAP only, page aligned.
    fn default() -> Self {
        Mapping {
            portable: false,
            align: PAGE_BYTES,
        }
    }
}

/// One page-locked, device-mapped host allocation, zero-filled, freed on drop.
pub struct MappedHostBuffer {
    ctx: Arc<CudaContext>,
    /// What cuMemHostAlloc returned (freed on drop).
    raw: NonNull<c_void>,
    /// The aligned start, at most `Mapping::align` bytes past `raw`.
    host: NonNull<u8>,
    /// The device address of `host`.
    device: u64,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value; moving it to
// another thread moves that ownership (the context is bound on use).
unsafe impl Send for MappedHostBuffer {}

impl MappedHostBuffer {
    /// At least `len` bytes (whole pages, at least one) in context `ctx`,
    /// starting at a multiple of `mapping.align`: the driver's pointer when
    /// it is aligned already, else a second allocation `align` bytes longer.
    pub fn new(ctx: &Arc<CudaContext>, len: usize, mapping: Mapping) -> Result<Self, CudaError> {
        const OP: &str = "cuMemHostAlloc";
        let align = mapping.align;
        if !align.is_power_of_two() {
            return Err(CudaError::Memory {
                op: OP,
                reason: "the alignment is not a power of two",
            });
        }
        let too_big = CudaError::Memory {
            op: OP,
            reason: "the size overflows",
        };
        let Some(len) = len.max(1).checked_next_multiple_of(PAGE_BYTES) else {
            return Err(too_big);
        };
        if len.checked_add(align).is_none() {
            return Err(too_big);
        }
        ctx.bind_to_thread().map_err(cuda_err("bind context"))?;
        let mut flags = sys::CU_MEMHOSTALLOC_DEVICEMAP;
        if mapping.portable {
            flags |= sys::CU_MEMHOSTALLOC_PORTABLE;
        }
        for extra in [0, align] {
            // SAFETY: plain size and flags; the context is current. The
            // memory is written (zeroed) below before anything reads it.
            let raw = unsafe { result::malloc_host(len + extra, flags) }.map_err(cuda_err(OP))?;
            let Some(raw) = NonNull::new(raw) else {
                return Err(CudaError::Memory {
                    op: OP,
                    reason: "the driver returned NULL",
                });
            };
            let pad = raw.as_ptr().cast::<u8>().align_offset(align);
            if pad > extra {
                // SAFETY: `raw` came from cuMemHostAlloc just now and is not
                // used after this.
                let _ = unsafe { result::free_host(raw.as_ptr()) };
                continue;
            }
            // SAFETY: pad <= extra, so the aligned start plus `len` bytes
            // stays inside the `len + extra` bytes allocated.
            let host = unsafe { raw.cast::<u8>().add(pad) };
            // From here on, dropping `buf` frees the allocation.
            let mut buf = MappedHostBuffer {
                ctx: ctx.clone(),
                raw,
                host,
                device: 0,
                len,
            };
            // SAFETY: `host` lies in the DEVICEMAP allocation just made, in
            // the current context.
            buf.device = unsafe { raw::host_device_pointer(host.as_ptr().cast()) }
                .map_err(cuda_err("cuMemHostGetDevicePointer"))?;
            // SAFETY: `host` points to `len` writable bytes owned by `buf`.
            unsafe { std::ptr::write_bytes(host.as_ptr(), 0, len) };
            return Ok(buf);
        }
        Err(CudaError::Memory {
            op: OP,
            reason: "could not get aligned memory",
        })
    }

    /// The host address of the first byte.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host.as_ptr()
    }

    /// The device address of the first byte.
    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    /// The device address of the byte at `offset`, asked of the driver.
    pub fn device_ptr_at(&self, offset: usize) -> Result<u64, CudaError> {
        const OP: &str = "cuMemHostGetDevicePointer";
        if offset >= self.len {
            return Err(CudaError::Memory {
                op: OP,
                reason: "the offset lies outside the buffer",
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(cuda_err("bind context"))?;
        // SAFETY: offset < len, so the address lies in this live DEVICEMAP
        // allocation; its context is current.
        let host = unsafe { self.host.as_ptr().add(offset) };
        // SAFETY: as above.
        unsafe { raw::host_device_pointer(host.cast()) }.map_err(cuda_err(OP))
    }

    /// Set `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on the allocation, through
    /// `device`, a device address inside it (as NVIDIA's nv-p2p sample
    /// does before memory is pinned for another device's DMA).
    pub fn set_sync_memops(&self, device: u64) -> Result<(), CudaError> {
        const OP: &str = "cuPointerSetAttribute(SYNC_MEMOPS)";
        if device < self.device || device - self.device >= self.len as u64 {
            return Err(CudaError::Memory {
                op: OP,
                reason: "the address lies outside the buffer",
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(cuda_err("bind context"))?;
        // SAFETY: `device` lies in this live allocation; its context is current.
        unsafe { raw::set_sync_memops(device) }.map_err(cuda_err(OP))
    }

    /// Bytes in the buffer (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a buffer holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes as a host slice. The caller must not let the GPU write them
    /// while the slice is alive (read what the GPU wrote only after
    /// synchronising with its work).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `host` points to `len` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.host.as_ptr(), self.len) }
    }

    /// The bytes as a mutable host slice (same caveat as [`Self::as_slice`]).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `host` points to `len` initialised bytes owned by self,
        // borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.host.as_ptr(), self.len) }
    }
}

impl Drop for MappedHostBuffer {
    fn drop(&mut self) {
        // A failure to bind leaves nothing to do but try the free anyway.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `raw` came from cuMemHostAlloc and is freed once, here.
        let _ = unsafe { result::free_host(self.raw.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context_or_skip() -> Option<Arc<CudaContext>> {
        match crate::primary_context() {
            Ok(ctx) => Some(ctx),
            Err(e) => {
                println!("skipped: no CUDA ({e})");
                None
            }
        }
    }

    /// Whole pages, zeroed, aligned as asked, a device address per byte
    /// (consecutive like the host's), SYNC_MEMOPS settable inside only.
    #[test]
    fn mapped_buffers_are_aligned_zeroed_and_device_visible() {
        let Some(ctx) = context_or_skip() else {
            return;
        };
        let b = MappedHostBuffer::new(&ctx, 3, Mapping::default()).expect("mapped buffer");
        assert_eq!(b.len(), PAGE_BYTES);
        assert_eq!(b.host_ptr() as usize % PAGE_BYTES, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        assert_ne!(b.device_ptr(), 0);

        let align = 1 << 16;
        let mapping = Mapping {
            portable: true,
            align,
        };
        let ring = MappedHostBuffer::new(&ctx, 5 * PAGE_BYTES, mapping).expect("portable");
        assert_eq!(ring.host_ptr() as usize % align, 0);
        assert_eq!(ring.len(), 5 * PAGE_BYTES);
        let at = ring.device_ptr_at(PAGE_BYTES).expect("device address");
        assert_eq!(at, ring.device_ptr() + PAGE_BYTES as u64);
        ring.set_sync_memops(at).expect("SYNC_MEMOPS");
        assert!(ring.device_ptr_at(5 * PAGE_BYTES).is_err());
        assert!(
            ring.set_sync_memops(ring.device_ptr() + 5 * PAGE_BYTES as u64)
                .is_err()
        );
        let odd = Mapping {
            portable: false,
            align: 3,
        };
        assert!(MappedHostBuffer::new(&ctx, 1, odd).is_err());
    }
}
