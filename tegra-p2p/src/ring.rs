//! Ring memory: N slots of `slot_bytes` (4 KiB aligned, exactly one frame each)
//! in one region, allocated once at start-up ("map once, stream forever").
//!
//! With CUDA (feature `cuda`, libcuda present, a device): `cuMemHostAlloc`
//! with `DEVICEMAP | PORTABLE` (cuda-mem's `MappedHostBuffer`, zero-filled)
//! in the primary context of device 0, a device
//! pointer per slot, and `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set on the region
//! (as NVIDIA's nv-p2p sample does before the memory is pinned for DMA).
//! Without CUDA: anonymous page-aligned `mmap`, populated and `mlock`ed.
//!
//! Either way the ring starts one guard page past the start of its
//! allocation and is marked `MADV_DONTFORK`. One more page follows the last
//! slot: the status page, where the card writes each slot's completion
//! record after every chunk (GPU-triggered processing, [`CompletionWords`]);
//! it is registered with the ring when the card writes them. NVIDIA's Tegra `nvidia-p2p`
//! revokes a registration on any mmu-notifier invalidation whose range holds
//! the ring's start address, its end included: without the guard, a munmap
//! or mprotect of the mapping that ends exactly where the ring starts would
//! revoke it, and a `fork()` would (its copy-on-write protection of private
//! memory is such an invalidation) unless the ring is not inherited.

use std::ptr::NonNull;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::uapi::{
    FPGA_P2P_COMPLETION_MAGIC, FPGA_P2P_SLOT_ALIGN, FPGA_P2P_STATUS_BYTES, fpga_p2p_completion,
};

const ALIGN: usize = FPGA_P2P_SLOT_ALIGN as usize;
/// Bytes of the allocation below the ring's start that no registration covers.
pub const GUARD_BYTES: usize = ALIGN;
/// Bytes of the status page after the last slot.
pub const STATUS_BYTES: usize = FPGA_P2P_STATUS_BYTES as usize;
/// Bytes of one slot's completion record in the status page.
pub const COMPLETION_BYTES: usize = std::mem::size_of::<fpga_p2p_completion>();
/// The most slots whose records fit the status page.
pub const MAX_COMPLETION_SLOTS: usize = STATUS_BYTES / COMPLETION_BYTES / 2;

/// The most bytes a slot may hold: the kernel module's limit
/// (`FP_MAX_SLOT_BYTES` in kmod/fpga_p2p_drv.h, reported by INFO as
/// `max_slot_bytes`, which a card may lower further). A frame must fit one
/// slot, so this is also the largest frame.
pub const MAX_SLOT_BYTES: usize = 64 << 20;

/// Which memory backs the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryKind {
    /// CUDA mapped host memory when CUDA works here, locked host memory otherwise.
    #[default]
    Auto,
    /// Page-aligned locked host memory (no device pointers).
    Host,
    /// CUDA mapped host memory; an error when CUDA is unavailable.
    Cuda,
}

/// How to build a ring.
#[derive(Debug, Clone)]
pub struct RingConfig {
    /// Slots in the ring (at least 2 for capture, 1 for transmit).
    pub nr_slots: u32,
    /// Bytes per slot: one frame, a multiple of 4096.
    pub slot_bytes: usize,
    /// Memory to use.
    pub memory: MemoryKind,
    /// Fail when host memory cannot be locked (default: warn and continue unlocked).
    pub require_locked: bool,
}

impl RingConfig {
    /// `nr_slots` slots of `slot_bytes`, memory chosen automatically, lock best-effort.
    pub fn new(nr_slots: u32, slot_bytes: usize) -> Self {
        Self {
            nr_slots,
            slot_bytes,
            memory: MemoryKind::Auto,
            require_locked: false,
        }
    }

    /// Same, on a chosen kind of memory.
    pub fn with_memory(mut self, memory: MemoryKind) -> Self {
        self.memory = memory;
        self
    }
}

enum Backing {
    /// The whole mapping: the guard page, then the ring.
    Mmap { start: NonNull<u8>, len: usize },
    #[cfg(feature = "cuda")]
    // Held for its Drop (cuMemFreeHost).
    Cuda(#[allow(dead_code)] cuda_mem::MappedHostBuffer),
}

/// One allocation holding every slot of a ring.
pub struct RingMemory {
    base: NonNull<u8>,
    nr_slots: u32,
    slot_bytes: usize,
    backing: Backing,
    locked: bool,
    device_ptrs: Vec<u64>,
    /// Device address of the status page (CUDA memory only).
    status_device: Option<u64>,
    warnings: Vec<String>,
}

// SAFETY: the region is plain memory owned by this value; who may write which
// slot is decided by the frame sources' ownership protocol, not by this type,
// which only hands out raw pointers.
unsafe impl Send for RingMemory {}
// SAFETY: as above; `&RingMemory` only exposes addresses and immutable geometry.
unsafe impl Sync for RingMemory {}

impl std::fmt::Debug for RingMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingMemory")
            .field("base", &self.base)
            .field("nr_slots", &self.nr_slots)
            .field("slot_bytes", &self.slot_bytes)
            .field("cuda", &self.is_cuda())
            .field("locked", &self.locked)
            .finish()
    }
}

impl RingMemory {
    /// Allocates the ring. Never panics when CUDA is absent; with
    /// [`MemoryKind::Auto`] it falls back to host memory and records why in
    /// [`RingMemory::warnings`].
    pub fn new(cfg: &RingConfig) -> Result<Self> {
        if cfg.nr_slots == 0 {
            return Err(Error::InvalidArgument {
                what: "ring nr_slots",
                reason: "must be at least 1".into(),
            });
        }
        if cfg.slot_bytes == 0 || !cfg.slot_bytes.is_multiple_of(ALIGN) {
            return Err(Error::InvalidArgument {
                what: "ring slot_bytes",
                reason: format!(
                    "{} is not a non-zero multiple of {ALIGN} (slots must stay 4 KiB aligned)",
                    cfg.slot_bytes
                ),
            });
        }
        if cfg.slot_bytes > MAX_SLOT_BYTES {
            return Err(Error::InvalidArgument {
                what: "ring slot_bytes",
                reason: format!(
                    "{} bytes is more than the {MAX_SLOT_BYTES} a slot may hold (a frame must fit one slot)",
                    cfg.slot_bytes
                ),
            });
        }
        let len = cfg
            .slot_bytes
            .checked_mul(cfg.nr_slots as usize)
            .ok_or_else(|| Error::InvalidArgument {
                what: "ring size",
                reason: "nr_slots * slot_bytes overflows".into(),
            })?;
        let mut warnings = Vec::new();
        match cfg.memory {
            MemoryKind::Host => Self::new_host(cfg, len, warnings),
            MemoryKind::Cuda => Self::new_cuda(cfg, len, warnings),
            MemoryKind::Auto => match Self::new_cuda(cfg, len, Vec::new()) {
                Ok(r) => Ok(r),
                Err(e) => {
                    warnings.push(format!("using host memory, not CUDA: {e}"));
                    Self::new_host(cfg, len, warnings)
                }
            },
        }
    }

    #[cfg(feature = "cuda")]
    fn new_cuda(cfg: &RingConfig, len: usize, mut warnings: Vec<String>) -> Result<Self> {
        let ctx = cuda_mem::primary_context()?;
        let mapping = cuda_mem::Mapping {
            portable: true,
            align: ALIGN,
        };
        let alloc =
            cuda_mem::MappedHostBuffer::new(&ctx, GUARD_BYTES + len + STATUS_BYTES, mapping)?;
        // SAFETY: the allocation holds GUARD_BYTES more than the ring.
        let base = unsafe { NonNull::new_unchecked(alloc.host_ptr().add(GUARD_BYTES)) };
        if let Err(e) = dont_fork(base, len + STATUS_BYTES) {
            warnings.push(format!("ring not excluded from fork(): {e}"));
        }
        let mut device_ptrs = Vec::with_capacity(cfg.nr_slots as usize);
        for s in 0..cfg.nr_slots as usize {
            device_ptrs.push(alloc.device_ptr_at(GUARD_BYTES + s * cfg.slot_bytes)?);
        }
        let status_device = alloc.device_ptr_at(GUARD_BYTES + len)?;
        if let Err(e) = alloc.set_sync_memops(device_ptrs[0]) {
            warnings.push(format!("CU_POINTER_ATTRIBUTE_SYNC_MEMOPS not set: {e}"));
        }
        Ok(Self {
            base,
            nr_slots: cfg.nr_slots,
            slot_bytes: cfg.slot_bytes,
            backing: Backing::Cuda(alloc),
            // cuMemHostAlloc memory is page-locked by the driver.
            locked: true,
            device_ptrs,
            status_device: Some(status_device),
            warnings,
        })
    }

    #[cfg(not(feature = "cuda"))]
    fn new_cuda(_cfg: &RingConfig, _len: usize, _warnings: Vec<String>) -> Result<Self> {
        Err(Error::CudaNotBuilt {
            op: "allocate ring",
        })
    }

    fn new_host(cfg: &RingConfig, len: usize, mut warnings: Vec<String>) -> Result<Self> {
        let total =
            len.checked_add(GUARD_BYTES + STATUS_BYTES)
                .ok_or_else(|| Error::InvalidArgument {
                    what: "ring size",
                    reason: "too large".into(),
                })?;
        // The guard page and the ring in one reservation, no access yet.
        // SAFETY: anonymous private mapping chosen by the kernel; no existing
        // memory is affected. The result is checked against MAP_FAILED.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(Error::Memory {
                op: "mmap",
                reason: format!("{total} bytes: {}", std::io::Error::last_os_error()),
            });
        }
        let start = NonNull::new(start.cast::<u8>()).ok_or_else(|| Error::Memory {
            op: "mmap",
            reason: "null mapping".into(),
        })?;
        let unmap = |e: Error| {
            // SAFETY: the reservation made above, not yet handed out.
            unsafe { libc::munmap(start.as_ptr().cast(), total) };
            e
        };
        // SAFETY: the range lies inside the reservation above (MAP_FIXED
        // replaces only our own PROT_NONE pages); checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                start.as_ptr().add(GUARD_BYTES).cast(),
                len + STATUS_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(unmap(Error::Memory {
                op: "mmap",
                reason: format!("{len} bytes: {}", std::io::Error::last_os_error()),
            }));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Memory {
            op: "mmap",
            reason: "null mapping".into(),
        })?;
        dont_fork(base, len + STATUS_BYTES).map_err(unmap)?;
        let mut ring = Self {
            base,
            nr_slots: cfg.nr_slots,
            slot_bytes: cfg.slot_bytes,
            backing: Backing::Mmap { start, len: total },
            locked: false,
            device_ptrs: Vec::new(),
            status_device: None,
            warnings: Vec::new(),
        };
        // SAFETY: the range is the mapping just created.
        if unsafe { libc::mlock(p, len + STATUS_BYTES) } == 0 {
            ring.locked = true;
        } else {
            let err = std::io::Error::last_os_error();
            let msg = format!(
                "mlock of {len} bytes failed ({err}); raise RLIMIT_MEMLOCK or grant CAP_IPC_LOCK"
            );
            if cfg.require_locked {
                return Err(Error::Memory {
                    op: "mlock",
                    reason: msg,
                });
            }
            eprintln!("tegra-p2p: warning: ring memory not locked: {msg}; continuing unlocked");
            warnings.push(format!("not locked: {msg}"));
        }
        ring.warnings.append(&mut warnings);
        Ok(ring)
    }

    /// Start of the region (slot 0).
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
    /// Bytes of the region (`nr_slots * slot_bytes`).
    pub fn len(&self) -> usize {
        self.slot_bytes * self.nr_slots as usize
    }
    /// Never true (a ring has at least one slot); for clippy's sake.
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn nr_slots(&self) -> u32 {
        self.nr_slots
    }
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }
    /// Host address of `slot`; panics never, returns None when out of range.
    pub fn slot_ptr(&self, slot: u32) -> Option<*mut u8> {
        if slot < self.nr_slots {
            // SAFETY: slot < nr_slots keeps the offset inside the region.
            Some(unsafe { self.base.as_ptr().add(slot as usize * self.slot_bytes) })
        } else {
            None
        }
    }
    /// CUDA device pointer of `slot` (None without CUDA memory).
    pub fn slot_device_ptr(&self, slot: u32) -> Option<u64> {
        self.device_ptrs.get(slot as usize).copied()
    }
    /// Host address of the status page, right after the last slot.
    pub fn status_ptr(&self) -> *mut u8 {
        // SAFETY: the allocation holds STATUS_BYTES past the last slot.
        unsafe { self.base.as_ptr().add(self.len()) }
    }
    /// Device address of the status page (None without CUDA memory).
    pub fn status_device_ptr(&self) -> Option<u64> {
        self.status_device
    }
    /// The slots' completion records in the status page, for frames of
    /// `chunks` chunks; None when the ring has more slots than the page
    /// has records for, or `chunks` is 0.
    pub fn completion_words(&self, chunks: u32) -> Option<CompletionWords<'_>> {
        (chunks > 0 && self.nr_slots as usize <= MAX_COMPLETION_SLOTS)
            .then_some(CompletionWords { ring: self, chunks })
    }
    /// Whether the memory is CUDA mapped host memory.
    pub fn is_cuda(&self) -> bool {
        !self.device_ptrs.is_empty()
    }
    /// Whether the memory is locked (CUDA memory always is).
    pub fn is_locked(&self) -> bool {
        self.locked
    }
    /// What did not go as asked (fallback to host memory, memory not locked).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A slot's bytes, writable.
    ///
    /// # Safety
    /// The caller must own the slot exclusively (no reader or other writer).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slot_mut(&self, slot: u32, offset: usize, len: usize) -> &mut [u8] {
        debug_assert!(slot < self.nr_slots && offset + len <= self.slot_bytes);
        // SAFETY: in range per the debug assertion and the callers; exclusivity per contract.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base
                    .as_ptr()
                    .add(slot as usize * self.slot_bytes + offset),
                len,
            )
        }
    }
}

/// The completion records of a ring's slots in its status page
/// (`struct fpga_p2p_completion`, docs/capture-path.md): after the last
/// byte of each chunk the card (or the simulator) writes the slot's record,
/// `chunks` last; the consumer resets `chunks` to 0 before it releases the
/// slot. A GPU waits on `chunks` through [`Self::device_ptr`]; the CPU side
/// reads, resets and, to cancel a GPU's waits, satisfies it here.
#[derive(Clone, Copy)]
pub struct CompletionWords<'a> {
    ring: &'a RingMemory,
    chunks: u32,
}

impl std::fmt::Debug for CompletionWords<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionWords")
            .field("slots", &self.ring.nr_slots)
            .field("chunks", &self.chunks)
            .finish()
    }
}

impl<'a> CompletionWords<'a> {
    /// Slots with a record.
    pub fn slots(&self) -> u32 {
        self.ring.nr_slots
    }
    /// Chunks of a frame: the value `chunks` reaches when a frame has landed.
    pub fn chunks_per_frame(&self) -> u32 {
        self.chunks
    }
    /// Byte offset of `slot`'s record in the status page.
    pub fn offset(slot: u32) -> usize {
        slot as usize * COMPLETION_BYTES
    }
    fn record(&self, slot: u32) -> *mut u8 {
        assert!(slot < self.ring.nr_slots, "slot {slot} outside the ring");
        // SAFETY: slot < nr_slots <= MAX_COMPLETION_SLOTS keeps the record
        // inside the status page.
        unsafe { self.ring.status_ptr().add(Self::offset(slot)) }
    }
    /// `slot`'s `chunks` word itself (for a consumer that keeps its
    /// address, or waits on it).
    pub fn word(&self, slot: u32) -> &'a AtomicU32 {
        // SAFETY: the record is 8-byte aligned (a page plus a multiple of
        // 32) in memory that lives as long as the ring; the card and the
        // GPU write it concurrently, so it is only touched atomically.
        unsafe { AtomicU32::from_ptr(self.record(slot).cast()) }
    }
    fn field64(&self, slot: u32, offset: usize) -> &'a AtomicU64 {
        // SAFETY: as in `word`; offset is 8 or 24, 8-byte aligned.
        unsafe { AtomicU64::from_ptr(self.record(slot).add(offset).cast()) }
    }
    /// Device address of `slot`'s `chunks` word (CUDA ring memory only).
    pub fn device_ptr(&self, slot: u32) -> Option<u64> {
        assert!(slot < self.ring.nr_slots, "slot {slot} outside the ring");
        self.ring
            .status_device
            .map(|d| d + Self::offset(slot) as u64)
    }
    /// Chunks of the frame in `slot` that have landed (Acquire: the
    /// chunks' bytes are visible once this says so).
    pub fn landed(&self, slot: u32) -> u32 {
        self.word(slot).load(Ordering::Acquire)
    }
    /// The whole record, field by field (not one atomic read: a record
    /// being rewritten can mix two chunks' fields).
    pub fn snapshot(&self, slot: u32) -> fpga_p2p_completion {
        let rec = self.record(slot);
        // SAFETY: as in `word`; offsets 4 and 16 are 4-byte aligned.
        let (magic, chunk) = unsafe {
            (
                AtomicU32::from_ptr(rec.add(4).cast()).load(Ordering::Relaxed),
                AtomicU32::from_ptr(rec.add(16).cast()).load(Ordering::Relaxed),
            )
        };
        fpga_p2p_completion {
            chunks: self.landed(slot),
            magic,
            sequence: self.sequence(slot),
            chunk,
            reserved0: 0,
            timestamp_ns: self.timestamp_ns(slot),
        }
    }
    /// The record's frame sequence number (valid once `landed` > 0).
    pub fn sequence(&self, slot: u32) -> u64 {
        self.field64(slot, 8).load(Ordering::Relaxed)
    }
    /// When the record was written (the card's clock; the simulator's
    /// CLOCK_MONOTONIC).
    pub fn timestamp_ns(&self, slot: u32) -> u64 {
        self.field64(slot, 24).load(Ordering::Relaxed)
    }
    /// Byte offset in the status page of the consumer's scratch word: the
    /// page's second half is never written by the card (its records end at
    /// MAX_COMPLETION_SLOTS), and a GPU's self-test of waits on the ring's
    /// memory uses this word.
    pub const SCRATCH_OFFSET: usize = STATUS_BYTES / 2;
    /// The scratch word (see [`Self::SCRATCH_OFFSET`]).
    pub fn scratch(&self) -> &'a AtomicU32 {
        // SAFETY: inside the status page, 4-byte aligned, lives with the ring.
        unsafe { AtomicU32::from_ptr(self.ring.status_ptr().add(Self::SCRATCH_OFFSET).cast()) }
    }
    /// Device address of the scratch word (CUDA ring memory only).
    pub fn scratch_device_ptr(&self) -> Option<u64> {
        self.ring
            .status_device
            .map(|d| d + Self::SCRATCH_OFFSET as u64)
    }
    /// The consumer's reset, before it releases the slot.
    pub fn reset(&self, slot: u32) {
        self.word(slot).store(0, Ordering::Release);
    }
    /// Says every chunk of `slot` landed, whatever did: what a consumer
    /// writes to let a GPU that waits on the word go on when no frame will
    /// come (a stop, a stalled or revoked source). The slot's contents are
    /// then not a frame.
    pub fn satisfy(&self, slot: u32) {
        self.word(slot).store(self.chunks, Ordering::Release);
    }
    /// Writes `slot`'s record for chunk `chunk` of frame `sequence` the way
    /// the card does: after the chunk's bytes, `chunks` last (Release).
    pub(crate) fn publish(&self, slot: u32, sequence: u64, chunk: u32, timestamp_ns: u64) {
        let rec = self.record(slot);
        // SAFETY: as in `word`; the other fields are written only by the
        // writer of the slot (the producer while it fills it).
        unsafe {
            AtomicU32::from_ptr(rec.add(4).cast())
                .store(FPGA_P2P_COMPLETION_MAGIC, Ordering::Relaxed);
            AtomicU32::from_ptr(rec.add(16).cast()).store(chunk, Ordering::Relaxed);
        }
        self.field64(slot, 8).store(sequence, Ordering::Relaxed);
        self.field64(slot, 24)
            .store(timestamp_ns, Ordering::Relaxed);
        self.word(slot).store(chunk + 1, Ordering::Release);
    }
}

/// Keeps the ring out of child processes: a `fork()` neither shares it nor
/// write-protects it for copy-on-write (an invalidation NVIDIA's nvidia-p2p
/// takes for a revocation).
fn dont_fork(base: NonNull<u8>, len: usize) -> Result<()> {
    // SAFETY: advice on a range of memory this value owns; no data changes.
    if unsafe { libc::madvise(base.as_ptr().cast(), len, libc::MADV_DONTFORK) } != 0 {
        return Err(Error::Memory {
            op: "madvise(MADV_DONTFORK)",
            reason: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(())
}

impl Drop for RingMemory {
    fn drop(&mut self) {
        match &self.backing {
            Backing::Mmap { start, len } => {
                // SAFETY: unmapping exactly the mapping this value created
                // (guard and ring); no borrow of it can outlive `self`.
                unsafe { libc::munmap(start.as_ptr().cast(), *len) };
            }
            #[cfg(feature = "cuda")]
            Backing::Cuda(_) => {} // MappedHostBuffer frees itself.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ring_geometry_and_alignment() {
        let r = RingMemory::new(&RingConfig::new(3, 8192).with_memory(MemoryKind::Host)).unwrap();
        assert_eq!(r.len(), 3 * 8192);
        assert_eq!(r.base() as usize % 4096, 0);
        assert_eq!(
            r.slot_ptr(2).unwrap() as usize - r.base() as usize,
            2 * 8192
        );
        assert!(r.slot_ptr(3).is_none());
        assert!(r.slot_device_ptr(0).is_none());
        // Memory is usable.
        // SAFETY: test owns the whole ring.
        unsafe { r.slot_mut(1, 0, 8192) }.fill(0xAB);
        // SAFETY: as above.
        assert!(unsafe { r.slot_mut(1, 0, 8192) }.iter().all(|&b| b == 0xAB));
    }

    /// The VMA of /proc/self/smaps holding `addr`: (permissions, VmFlags).
    fn vma_of(addr: usize) -> Option<(String, String)> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut hit: Option<String> = None;
        for line in smaps.lines() {
            let mut f = line.split_whitespace();
            let first = f.next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                if f.clone().count() >= 1 && a <= addr && addr < b {
                    hit = f.next().map(str::to_string);
                } else if hit.is_some() {
                    return None; // no VmFlags line for the hit
                }
                continue;
            }
            if let (Some(perms), Some(flags)) = (&hit, line.strip_prefix("VmFlags:")) {
                return Some((perms.clone(), flags.trim().to_string()));
            }
        }
        None
    }

    #[test]
    fn host_ring_has_a_guard_page_and_is_not_forked() {
        let r = RingMemory::new(&RingConfig::new(2, 8192).with_memory(MemoryKind::Host)).unwrap();
        let base = r.base() as usize;
        let (perms, flags) = vma_of(base).expect("ring VMA");
        assert!(perms.starts_with("rw"), "ring perms {perms}");
        assert!(
            flags.split_whitespace().any(|f| f == "dc"),
            "ring VmFlags {flags}: no dc (MADV_DONTFORK)"
        );
        let (perms, _) = vma_of(base - GUARD_BYTES).expect("guard VMA");
        assert_eq!(perms, "---p", "the page below the ring is not a guard");
    }

    #[test]
    fn bad_geometry_is_an_error() {
        assert!(RingMemory::new(&RingConfig::new(0, 4096)).is_err());
        assert!(RingMemory::new(&RingConfig::new(2, 4095)).is_err());
        assert!(RingMemory::new(&RingConfig::new(2, 0)).is_err());
        assert!(RingMemory::new(&RingConfig::new(u32::MAX, usize::MAX & !4095)).is_err());
        assert!(RingMemory::new(&RingConfig::new(u32::MAX, MAX_SLOT_BYTES)).is_err());
        let e = RingMemory::new(&RingConfig::new(2, MAX_SLOT_BYTES + 4096)).unwrap_err();
        assert!(e.to_string().contains("a frame must fit one slot"), "{e}");
    }

    #[test]
    fn auto_never_panics_without_cuda() {
        let r = RingMemory::new(&RingConfig::new(2, 4096)).unwrap();
        if !r.is_cuda() {
            assert!(!r.warnings().is_empty(), "fallback must say why");
        } else {
            assert!(r.slot_device_ptr(1).is_some());
        }
    }
}
