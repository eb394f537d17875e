//! A sequence lock over words of atomics: one writer publishes a value of
//! plain data, any number of readers copy the latest one out. Nobody waits
//! on a lock and nothing is allocated after creation, so the frame loop can
//! publish every frame. The words are atomics: a read that overlapped a
//! write is detected by the sequence number and retried, never undefined
//! behaviour.
//!
//! The value is copied as words, so `T` is `bytemuck::Pod`: no padding, and
//! any bits make a valid value (each type stored here derives `Pod`, which
//! checks that at compile time). Its size must be a whole number of words
//! and its alignment at least a word's (checked when the lock is made).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use bytemuck::Pod;

const WORD: usize = std::mem::size_of::<u64>();

pub struct SeqLock<T: Pod> {
    /// Even: stable; odd: a write is in progress. 0: never written.
    seq: AtomicU64,
    words: Box<[AtomicU64]>,
    _value: PhantomData<T>,
}

impl<T: Pod> Default for SeqLock<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Pod> SeqLock<T> {
    const WORDS: usize = {
        assert!(
            std::mem::size_of::<T>().is_multiple_of(WORD)
                && std::mem::align_of::<T>() >= std::mem::align_of::<u64>(),
            "a SeqLock value is a whole number of aligned 8-byte words"
        );
        std::mem::size_of::<T>() / WORD
    };

    pub fn new() -> Self {
        debug_assert!(Self::WORDS > 0);
        SeqLock {
            seq: AtomicU64::new(0),
            words: (0..Self::WORDS).map(|_| AtomicU64::new(0)).collect(),
            _value: PhantomData,
        }
    }

    /// Publishes `v`. One writer at a time (the value's owner thread).
    pub fn write(&self, v: &T) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        // Cannot fail: T is whole aligned words (WORDS).
        let src: &[u64] = bytemuck::cast_slice(std::slice::from_ref(v));
        for (word, v) in self.words.iter().zip(src) {
            word.store(*v, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The latest value written; None before the first write.
    pub fn read(&self) -> Option<T> {
        let mut out = T::zeroed();
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 == 0 {
                return None;
            }
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let dst: &mut [u64] = bytemuck::cast_slice_mut(std::slice::from_mut(&mut out));
            for (d, word) in dst.iter_mut().zip(self.words.iter()) {
                *d = word.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader racing a writer sees only whole writes: every word of a
    /// write carries the same value, and values never go back.
    #[test]
    fn readers_never_see_a_torn_write() {
        let lock = SeqLock::<[u64; 8]>::new();
        assert!(lock.read().is_none());
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 1..=200_000u64 {
                    lock.write(&[i; 8]);
                }
            });
            let mut seen = 0;
            while seen < 200_000 {
                if let Some(w) = lock.read() {
                    assert!(w.iter().all(|v| *v == w[0]), "torn: {w:?}");
                    assert!(w[0] >= seen, "went back from {seen} to {}", w[0]);
                    seen = w[0];
                }
            }
        });
    }
}
