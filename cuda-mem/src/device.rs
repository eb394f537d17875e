//! Plain device memory (`cuMemAlloc`) at a fixed device address: CUDA
//! graphs bake such addresses in, so nothing here moves, and the owner
//! keeps it alive while any graph that uses it exists.

use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{CudaContext, result};

use crate::{CudaError, cuda_err};

/// One device allocation, freed on drop.
pub struct DeviceMemory {
    ctx: Arc<CudaContext>,
    ptr: u64,
    len: usize,
}

// SAFETY: device memory owned by this value, with no host alias; the
// context is bound on use.
unsafe impl Send for DeviceMemory {}

impl DeviceMemory {
    /// `len` bytes (at least 1) of device memory in `ctx`, zero-filled.
    pub fn zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, CudaError> {
        let len = len.max(1);
        ctx.bind_to_thread().map_err(cuda_err("bind context"))?;
        // SAFETY: a plain size; the context is current; the memory is
        // zeroed below before any use.
        let ptr = unsafe { result::malloc_sync(len) }.map_err(cuda_err("cuMemAlloc"))?;
        // From here on, dropping `mem` frees it.
        let mem = DeviceMemory {
            ctx: ctx.clone(),
            ptr,
            len,
        };
        // SAFETY: `ptr` is a live allocation of `len` bytes.
        unsafe { result::memset_d8_sync(ptr, 0, len) }.map_err(cuda_err("cuMemsetD8"))?;
        Ok(mem)
    }

    /// Device memory holding a copy of `data`.
    pub fn from_host<T: Pod>(ctx: &Arc<CudaContext>, data: &[T]) -> Result<Self, CudaError> {
        let mem = Self::zeroed(ctx, std::mem::size_of_val(data))?;
        mem.copy_from_host(data)?;
        Ok(mem)
    }

    /// The device address of the first byte.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes in the allocation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: an allocation holds at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Overwrite the start of the allocation with `data` (synchronous: done
    /// when this returns); an error when `data` is longer than it.
    pub fn copy_from_host<T: Pod>(&self, data: &[T]) -> Result<(), CudaError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.is_empty() {
            return Ok(());
        }
        if bytes.len() > self.len {
            return Err(CudaError::Memory {
                op: "cuMemcpyHtoD",
                reason: "more bytes than the device allocation holds",
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(cuda_err("bind context"))?;
        // SAFETY: `bytes` is readable; the allocation holds at least as many
        // bytes; the synchronous copy is done before this returns.
        unsafe { result::memcpy_htod_sync(self.ptr, bytes) }.map_err(cuda_err("cuMemcpyHtoD"))
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // A failure to bind leaves nothing to do but try the free anyway.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemAlloc and is freed once, here.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zeroed, filled from the host, and a too-long copy refused.
    #[test]
    fn device_memory_round_trip() {
        let ctx = match crate::primary_context() {
            Ok(ctx) => ctx,
            Err(e) => {
                println!("skipped: no CUDA ({e})");
                return;
            }
        };
        let data = [1.5f32, -2.0, 3.25];
        let mem = DeviceMemory::from_host(&ctx, &data).expect("device memory");
        assert_eq!(mem.len(), 12);
        let mut back = [0f32; 3];
        // SAFETY: `mem` holds 12 bytes; the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(&mut back, mem.ptr()) }.expect("copy back");
        assert_eq!(back, data);
        assert!(mem.copy_from_host(&[0f32; 4]).is_err());
        let z = DeviceMemory::zeroed(&ctx, 0).expect("one byte");
        assert_eq!(z.len(), 1);
    }
}
