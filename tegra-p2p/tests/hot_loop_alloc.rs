//! The hot loop allocates nothing: after start and warm-up, `next_frame` +
//! verify + `release` (explicit and by drop), chunk events included, run
//! thousands of times under a counting global allocator that sees every
//! thread of the process (the simulator's producer too).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tegra_p2p::*;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn run(chunk_events: bool) -> (u64, u64) {
    let ring =
        RingMemory::new(&RingConfig::new(4, 64 << 10).with_memory(MemoryKind::Host)).expect("ring");
    let mut src = SimSource::new(ring, SimConfig::with_chunk_bytes(16 << 10)).expect("sim");
    let mut p = StartParams::test_pattern().with_chunk_period(Duration::from_micros(10));
    p.chunk_events = chunk_events;
    src.start(&p).expect("start");
    let mut tracker = SequenceTracker::new();
    // Warm-up.
    for _ in 0..20 {
        let f = src.next_frame(None).expect("frame");
        tracker
            .observe(f.sequence(), f.dropped_before())
            .expect("seq");
    }
    let before = ALLOCS.load(Ordering::SeqCst);
    let mut n = 0u64;
    while n < 3000 {
        match src.next_event(None).expect("event") {
            Event::Frame(f) => {
                verify_test_pattern(f.data(), f.sequence(), src.chunk_bytes()).expect("pattern");
                f.check_crc().expect("crc");
                tracker
                    .observe(f.sequence(), f.dropped_before())
                    .expect("seq");
                if n.is_multiple_of(2) {
                    f.release().expect("release");
                } // else: released by drop
                n += 1;
            }
            Event::Chunk(_) => {}
            Event::TxDone { .. } => {}
        }
    }
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    src.stop().expect("stop");
    (allocs, n)
}

fn main() {
    // The counter itself works.
    let a = ALLOCS.load(Ordering::SeqCst);
    let b = std::hint::black_box(Box::new(1u64));
    assert!(
        ALLOCS.load(Ordering::SeqCst) > a,
        "counting allocator is not counting"
    );
    drop(b);
    let mut failed = 0;
    for chunk_events in [false, true] {
        let (allocs, frames) = run(chunk_events);
        let name = format!("hot loop, chunk events {chunk_events}");
        if allocs == 0 {
            println!("test {name} ... ok ({frames} frames, 0 allocations)");
        } else {
            println!("test {name} ... FAILED: {allocs} allocations in {frames} frames");
            failed += 1;
        }
    }
    println!("{} passed, {failed} failed", 2 - failed);
    if failed > 0 {
        std::process::exit(1);
    }
}
