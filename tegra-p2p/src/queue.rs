//! Single-producer single-consumer event queue between the simulator's
//! producer thread and the consumer (the real-time loop). Lock-free; the
//! consumer blocks only in a futex wait on the producer's head index, and the
//! producer issues the wake system call only when the consumer sleeps.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::uapi::fpga_p2p_event;

pub(crate) struct EventQueue {
    buf: Box<[UnsafeCell<fpga_p2p_event>]>,
    mask: u32,
    /// Next index the producer writes; the futex word.
    head: AtomicU32,
    /// Next index the consumer reads.
    tail: AtomicU32,
    sleeping: AtomicBool,
}

// SAFETY: each cell is written only by the producer before it publishes the
// index with a Release store of `head`, and read only by the consumer after an
// Acquire load of `head` shows it; the producer reuses a cell only after the
// consumer's Release store of `tail` has passed it.
unsafe impl Sync for EventQueue {}

impl EventQueue {
    /// A queue holding at least `min_capacity` events.
    pub(crate) fn new(min_capacity: usize) -> Self {
        let cap = min_capacity.max(2).next_power_of_two();
        Self {
            buf: (0..cap)
                .map(|_| UnsafeCell::new(fpga_p2p_event::default()))
                .collect(),
            mask: (cap - 1) as u32,
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            sleeping: AtomicBool::new(false),
        }
    }

    /// Producer side. False when full (the event is lost).
    pub(crate) fn push(&self, ev: fpga_p2p_event) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > self.mask {
            return false;
        }
        // SAFETY: the cell at head is not visible to the consumer until the
        // Release store below, and the consumer is done with it (tail passed it).
        unsafe { *self.buf[(head & self.mask) as usize].get() = ev };
        self.head.store(head.wrapping_add(1), Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            futex::wake(&self.head);
        }
        true
    }

    /// Consumer side, non-blocking.
    pub(crate) fn try_pop(&self) -> Option<fpga_p2p_event> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: head passed tail, so the producer published this cell and
        // will not touch it until tail moves on.
        let ev = unsafe { *self.buf[(tail & self.mask) as usize].get() };
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(ev)
    }

    /// Consumer side: waits up to `timeout` for an event.
    pub(crate) fn pop_wait(&self, timeout: Duration) -> Option<fpga_p2p_event> {
        if let Some(ev) = self.try_pop() {
            return Some(ev);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let head = self.head.load(Ordering::SeqCst);
            self.sleeping.store(true, Ordering::SeqCst);
            // Re-check after announcing the sleep: the producer either saw the
            // flag or published before this load.
            if self.head.load(Ordering::SeqCst) == head && self.tail.load(Ordering::Relaxed) == head
            {
                let now = Instant::now();
                if now >= deadline {
                    self.sleeping.store(false, Ordering::SeqCst);
                    return None;
                }
                // Any end of the wait (woken, timed out, interrupted, moved
                // already) comes back to the queue and the deadline.
                let _ = futex::wait(&self.head, head, deadline - now);
            }
            self.sleeping.store(false, Ordering::SeqCst);
            if let Some(ev) = self.try_pop() {
                return Some(ev);
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }

    /// Drops everything queued (consumer side, or with the producer stopped).
    pub(crate) fn clear(&self) {
        while self.try_pop().is_some() {}
    }

    /// Wakes a sleeping consumer without an event (used on stop).
    pub(crate) fn kick(&self) {
        futex::wake(&self.head);
    }
}

/// Single-producer single-consumer FIFO of slot numbers: the slots the
/// application released, in release order, on their way back to the engine.
pub(crate) struct SlotFifo {
    buf: Box<[AtomicU32]>,
    mask: u32,
    head: AtomicU32,
    tail: AtomicU32,
}

impl SlotFifo {
    pub(crate) fn new(min_capacity: usize) -> Self {
        let cap = min_capacity.max(2).next_power_of_two();
        Self {
            buf: (0..cap).map(|_| AtomicU32::new(0)).collect(),
            mask: (cap - 1) as u32,
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
        }
    }

    /// Producer side (the application). False when full (cannot happen when
    /// the capacity is at least the number of slots).
    pub(crate) fn push(&self, slot: u32) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head.wrapping_sub(self.tail.load(Ordering::Acquire)) > self.mask {
            return false;
        }
        self.buf[(head & self.mask) as usize].store(slot, Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Consumer side (the engine).
    pub(crate) fn pop(&self) -> Option<u32> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.buf[(tail & self.mask) as usize].load(Ordering::Relaxed);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(slot)
    }

    /// Empties the FIFO (only while neither side runs).
    pub(crate) fn reset(&self) {
        self.tail
            .store(self.head.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn spsc_in_order_across_threads_with_wakeups() {
        let q = Arc::new(EventQueue::new(8));
        let p = q.clone();
        let n = 20_000u64;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                let ev = fpga_p2p_event {
                    sequence: i,
                    ..Default::default()
                };
                while !p.push(ev) {
                    std::thread::yield_now();
                }
                if i % 1000 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        for i in 0..n {
            let ev = q.pop_wait(Duration::from_secs(5)).expect("event");
            assert_eq!(ev.sequence, i);
        }
        t.join().unwrap();
        assert!(q.pop_wait(Duration::from_millis(20)).is_none());
    }

    #[test]
    fn full_queue_refuses() {
        let q = EventQueue::new(4);
        for _ in 0..4 {
            assert!(q.push(fpga_p2p_event::default()));
        }
        assert!(!q.push(fpga_p2p_event::default()));
        q.clear();
        assert!(q.try_pop().is_none());
    }
}
