//! A checker of completion records, for tests of a source that writes
//! them (the simulator's, the kernel module's with the emulated card): a
//! thread reads the ring's status page as a GPU waiting on it would, and
//! the moment a slot's record says chunk `c` landed it checks that chunk's
//! bytes against the test pattern of the record's frame
//! ([`crate::verify_chunk`]). The consumer of the frames asks
//! [`RecordChecker::wait_verified`] before it resets the slot's count and
//! releases the slot, so the bytes checked are the frame's own.
//!
//! A chunk of zeros is not a failure but noted ([`RecordChecker::padded`]):
//! a SHORT frame is padded with zeros, and only a SHORT frame may have one.
//! A record is written whole but not necessarily at once: the sequence
//! number is read again after the check, and a check of a record that
//! changed meanwhile is not counted.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::pattern::verify_chunk;
use crate::ring::{COMPLETION_BYTES, RingMemory};

struct Shared {
    /// Per slot: sequence << 16 | chunks checked.
    verified: Vec<AtomicU64>,
    /// Per slot: the last sequence with a chunk of zeros (u64::MAX: none).
    padded: Vec<AtomicU64>,
    failures: AtomicU64,
    checked: AtomicU64,
    done: AtomicBool,
    first_failure: Mutex<Option<String>>,
}

/// The checking thread; stopped (joined) by [`RecordChecker::stop`] or drop.
pub struct RecordChecker {
    shared: Arc<Shared>,
    chunks: u32,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone, Copy)]
struct Layout {
    base: usize,
    status: usize,
    slot_bytes: usize,
    chunk_bytes: usize,
    slots: u32,
    chunks: u32,
}

impl RecordChecker {
    /// Starts checking the records of `ring`, whose frames come in chunks
    /// of `chunk_bytes` carrying the test pattern. Fails only when its
    /// thread cannot be started.
    ///
    /// # Safety
    /// The ring's memory (slots and status page) stays allocated and mapped
    /// until the checker is stopped or dropped; the source writes the
    /// records of `ring` (`chunks` last, after the chunk's bytes), and a
    /// slot's frame is not overwritten before its consumer's
    /// [`RecordChecker::wait_verified`] returned and it released the slot.
    pub unsafe fn start(ring: &RingMemory, chunk_bytes: usize) -> std::io::Result<Self> {
        let slots = ring.nr_slots();
        let chunks = (ring.slot_bytes() / chunk_bytes.max(1)) as u32;
        let shared = Arc::new(Shared {
            verified: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            padded: (0..slots).map(|_| AtomicU64::new(u64::MAX)).collect(),
            failures: AtomicU64::new(0),
            checked: AtomicU64::new(0),
            done: AtomicBool::new(false),
            first_failure: Mutex::new(None),
        });
        let layout = Layout {
            base: ring.base() as usize,
            status: ring.status_ptr() as usize,
            slot_bytes: ring.slot_bytes(),
            chunk_bytes,
            slots,
            chunks,
        };
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("record-check".into())
            .spawn(move || check_loop(&sh, layout))?;
        Ok(Self {
            shared,
            chunks,
            thread: Some(thread),
        })
    }

    /// Waits until every chunk of frame `seq` in `slot` was checked the
    /// moment its record said it landed; an error after `timeout`.
    pub fn wait_verified(&self, slot: u32, seq: u64, timeout: Duration) -> Result<(), String> {
        let want = seq << 16 | u64::from(self.chunks);
        let t0 = Instant::now();
        let v = &self.shared.verified[slot as usize];
        while v.load(Ordering::Acquire) != want {
            if t0.elapsed() > timeout {
                let got = v.load(Ordering::Acquire);
                return Err(format!(
                    "slot {slot} frame {seq}: the records' checker saw {} of {} chunks (of frame {}) in {timeout:?}",
                    got & 0xffff,
                    self.chunks,
                    got >> 16
                ));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Whether frame `seq` in `slot` had a chunk of zeros.
    pub fn padded(&self, slot: u32, seq: u64) -> bool {
        self.shared.padded[slot as usize].load(Ordering::Acquire) == seq
    }

    /// Chunks whose bytes were not there when their record said so.
    pub fn failures(&self) -> u64 {
        self.shared.failures.load(Ordering::Relaxed)
    }

    /// The first of them, described.
    pub fn first_failure(&self) -> Option<String> {
        self.shared.first_failure.lock().ok()?.clone()
    }

    /// Chunks checked.
    pub fn checked(&self) -> u64 {
        self.shared.checked.load(Ordering::Relaxed)
    }

    /// Stops the thread.
    pub fn stop(&mut self) {
        self.shared.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RecordChecker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn check_loop(sh: &Shared, l: Layout) {
    let count = |slot: u32| {
        // SAFETY: the status page outlives the thread (start's contract);
        // the records are read through atomics only, 4-byte aligned.
        unsafe { AtomicU32::from_ptr((l.status + slot as usize * COMPLETION_BYTES) as *mut u32) }
    };
    let sequence = |slot: u32| {
        // SAFETY: as above; the sequence is 8-byte aligned in the record.
        unsafe {
            AtomicU64::from_ptr((l.status + slot as usize * COMPLETION_BYTES + 8) as *mut u64)
        }
    };
    let mut cur = vec![(u64::MAX, 0u32); l.slots as usize];
    let mut idle = 0u32;
    while !sh.done.load(Ordering::Relaxed) {
        let mut progress = false;
        for slot in 0..l.slots {
            let n = count(slot).load(Ordering::Acquire);
            if n == 0 {
                continue;
            }
            let seq = sequence(slot).load(Ordering::Relaxed);
            let (cseq, cdone) = &mut cur[slot as usize];
            if *cseq != seq {
                *cseq = seq;
                *cdone = 0;
            }
            while *cdone < n.min(l.chunks) {
                let c = *cdone as usize;
                let off = l.base + slot as usize * l.slot_bytes + c * l.chunk_bytes;
                // SAFETY: inside the ring; the source wrote the chunk before
                // its record said so and does not write it again before the
                // consumer releases the slot, which waits for this check.
                let bytes = unsafe { std::slice::from_raw_parts(off as *const u8, l.chunk_bytes) };
                let result = verify_chunk(bytes, seq, c, l.chunk_bytes);
                fence(Ordering::Acquire);
                let still = count(slot).load(Ordering::Relaxed) > c as u32
                    && sequence(slot).load(Ordering::Relaxed) == seq;
                if !still {
                    break; // reset, or the record changed meanwhile: look again
                }
                if result.is_err() && bytes.iter().all(|&b| b == 0) {
                    sh.padded[slot as usize].store(seq, Ordering::Release);
                } else if let Err(m) = result {
                    if sh.failures.fetch_add(1, Ordering::Relaxed) == 0 {
                        if let Ok(mut f) = sh.first_failure.lock() {
                            *f = Some(format!(
                                "slot {slot} frame {seq}: chunk {c} not there when its record said so: {m:?}"
                            ));
                        }
                    }
                }
                *cdone += 1;
                progress = true;
                sh.checked.fetch_add(1, Ordering::Relaxed);
                sh.verified[slot as usize].store(seq << 16 | u64::from(*cdone), Ordering::Release);
            }
        }
        if progress {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
