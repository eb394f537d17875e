//! A single-writer sequence lock over plain words: the telemetry thread
//! stores a sample, any thread reads the latest one, nobody takes a lock and
//! nothing is allocated. Words are atomics, so a torn read is detected by
//! the sequence number and retried, never undefined behaviour.

use std::sync::atomic::{AtomicU64, Ordering, fence};

pub struct SeqCell<const N: usize> {
    /// Even: stable; odd: a store is in progress. 0: never stored.
    seq: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> Default for SeqCell<N> {
    fn default() -> Self {
        SeqCell {
            seq: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl<const N: usize> SeqCell<N> {
    /// Stores `w`. One writer at a time (the telemetry thread).
    pub fn store(&self, w: &[u64; N]) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (cell, v) in self.words.iter().zip(w) {
            cell.store(*v, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The latest stored words, or None before the first store (or when a
    /// writer kept the cell busy for every one of many attempts).
    pub fn load(&self) -> Option<[u64; N]> {
        for _ in 0..1000 {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 == 0 {
                return None;
            }
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let w: [u64; N] = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(w);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader racing a writer sees only whole stores: every word of a
    /// store carries the same value.
    #[test]
    fn readers_never_see_a_torn_store() {
        let cell = SeqCell::<8>::default();
        assert!(cell.load().is_none());
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 1..=200_000u64 {
                    cell.store(&[i; 8]);
                }
            });
            let mut seen = 0;
            while seen < 200_000 {
                if let Some(w) = cell.load() {
                    assert!(w.iter().all(|v| *v == w[0]), "torn: {w:?}");
                    assert!(w[0] >= seen, "went back from {seen} to {}", w[0]);
                    seen = w[0];
                }
            }
        });
    }
}
