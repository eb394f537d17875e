//! The simulator's copy crew: helper threads that write their part of each
//! played-back chunk alongside the producer thread. The card's DMA engine
//! writes a 4 MiB frame per millisecond at the shortest frame period; one
//! CPU's copy into pinned memory manages about that on a virtual machine,
//! so a single producer falls behind and its frames reach the application
//! late. With a crew of N, each chunk is cut into N parts written at once.
//! The helpers spin between chunks (a wake-up from a sleep would come too
//! late for a 62.5 us chunk period), so each costs a CPU while streaming:
//! an opt-in for fast cadences, off by default.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::ring::RingMemory;

/// One chunk to copy: the playback frame's bytes `[off, off + len)` into
/// the same range of `slot`.
#[derive(Default)]
pub(crate) struct CrewJob {
    /// Bumped (Release) after the fields below are set: a new job.
    generation: AtomicU64,
    /// Parts finished, over all jobs (each helper adds one per job).
    done: AtomicU64,
    stop: AtomicBool,
    slot: AtomicU32,
    frame: AtomicUsize,
    off: AtomicUsize,
    len: AtomicUsize,
}

/// Part `index` of `parts` of a chunk of `len` bytes: (offset, length),
/// cut on 64-byte lines; the last part takes the rest.
fn part(len: usize, parts: usize, index: usize) -> (usize, usize) {
    let each = (len / parts) & !63;
    let start = each * index;
    let end = if index + 1 == parts {
        len
    } else {
        start + each
    };
    (start, end - start)
}

impl CrewJob {
    /// Writes frame `frame`'s bytes `[off, off + len)` into `slot` with the
    /// helpers (parts 1..parts; this thread writes part 0) and returns when
    /// every part is written. `frames[frame]` must hold `off + len` bytes.
    ///
    /// The caller must own `slot` as the simulator's producer does (FILLING:
    /// no reader, no other writer but this crew).
    pub(crate) fn copy(
        &self,
        ring: &RingMemory,
        frames: &[&[u8]],
        parts: usize,
        (slot, frame, off, len): (u32, usize, usize, usize),
    ) {
        self.slot.store(slot, Ordering::Relaxed);
        self.frame.store(frame, Ordering::Relaxed);
        self.off.store(off, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        let generation = self.generation.fetch_add(1, Ordering::Release) + 1;
        copy_part(ring, frames[frame], slot, off, len, parts, 0);
        // Every helper adds one per job: wait for this job's.
        let target = generation * (parts as u64 - 1);
        while self.done.load(Ordering::Acquire) < target {
            std::hint::spin_loop();
        }
    }

    /// Ends the helpers' loops.
    pub(crate) fn finish(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// A helper's loop: part `index` of every job, until `finish`.
    pub(crate) fn helper(&self, ring: &RingMemory, frames: &[&[u8]], parts: usize, index: usize) {
        let mut seen = 0;
        while !self.stop.load(Ordering::Acquire) {
            let generation = self.generation.load(Ordering::Acquire);
            if generation == seen {
                std::hint::spin_loop();
                continue;
            }
            seen = generation;
            let (slot, frame) = (
                self.slot.load(Ordering::Relaxed),
                self.frame.load(Ordering::Relaxed),
            );
            let (off, len) = (
                self.off.load(Ordering::Relaxed),
                self.len.load(Ordering::Relaxed),
            );
            copy_part(ring, frames[frame], slot, off, len, parts, index);
            // Publishes the part's bytes to the producer's Acquire.
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

fn copy_part(
    ring: &RingMemory,
    frame: &[u8],
    slot: u32,
    off: usize,
    len: usize,
    parts: usize,
    index: usize,
) {
    let (p_off, p_len) = part(len, parts, index);
    if p_len == 0 {
        return;
    }
    // SAFETY: the producer owns the slot (FILLING) for the crew, and each
    // member writes only its own part of the chunk, so no two references
    // to the same bytes exist at once.
    let dst = unsafe { ring.slot_mut(slot, off + p_off, p_len) };
    dst.copy_from_slice(&frame[off + p_off..off + p_off + p_len]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_chunk_once() {
        for (len, parts) in [(256 << 10, 4), (4096, 3), (100, 4), (64, 8), (1, 2)] {
            let mut next = 0;
            for i in 0..parts {
                let (o, l) = part(len, parts, i);
                assert_eq!(o, next, "{len} in {parts}: part {i}");
                next = o + l;
            }
            assert_eq!(next, len, "{len} in {parts}");
        }
    }
}
