//! The hot loop is sacred (rule 5): after the first frame, the CPU backend's
//! `process` allocates nothing, on any of its threads. A counting global
//! allocator proves it. This file holds one test so no other test thread
//! allocates while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use radar_dsp::scene::{Scene, SceneGenerator, Target};
use radar_dsp::{Backend, ChainConfig, CpuBackend, Detections, FrameInput, SlotFrame};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator, which
// upholds the GlobalAlloc contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: ptr came from this allocator (i.e. System) with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from this allocator (i.e. System) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn process_does_not_allocate_after_the_first_frame() {
    let mut cfg = ChainConfig::default();
    // A small cap so the cut path (select, truncate) runs too.
    cfg.chain.max_detections = 3;
    let targets = (0..6)
        .map(|i| {
            Target::at_bins(
                &cfg,
                20.0 + 30.0 * i as f64,
                40.0 + 25.0 * i as f64,
                -10.0,
                -12.0,
            )
        })
        .collect();
    let scene = Scene {
        noise_rms_lsb: 32.0,
        targets,
        frame_period_s: None,
    };
    let generator = SceneGenerator::new(&cfg, &scene, 4).unwrap();
    let frames: Vec<Vec<u8>> = (0..4).map(|f| generator.frame(f).0).collect();
    let mut backend = CpuBackend::with_threads(&cfg, 2).unwrap();
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let run = |backend: &mut CpuBackend, dets: &mut Detections, f: &[u8]| {
        backend
            .process(
                FrameInput {
                    bytes: f,
                    slot: None,
                },
                dets,
            )
            .unwrap();
    };
    run(&mut backend, &mut dets, &frames[0]);

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let mut cut = 0;
    let mut per = [0u64; 12];
    for (i, f) in frames.iter().cycle().take(12).enumerate() {
        let b = ALLOCATIONS.load(Ordering::SeqCst);
        run(&mut backend, &mut dets, f);
        per[i] = ALLOCATIONS.load(Ordering::SeqCst) - b;
        cut += dets.cut;
    }
    let after = ALLOCATIONS.load(Ordering::SeqCst);

    // Chunk-streamed: rows transformed as the chunks land, on the calling
    // thread and handed to the worker, then the rest of the frame.
    let chunks = cfg.geometry.chunks_per_frame;
    let cb = cfg.geometry.frame_bytes() / chunks;
    let streamed = |backend: &mut CpuBackend, dets: &mut Detections, k: usize| {
        let f = &frames[k % frames.len()];
        let slot = SlotFrame {
            index: k % 4,
            capture: k as u64,
        };
        for c in 0..chunks {
            backend.chunk_landed(slot, c, &f[..(c + 1) * cb]).unwrap();
        }
        backend
            .process(
                FrameInput {
                    bytes: f,
                    slot: Some(slot),
                },
                dets,
            )
            .unwrap();
    };
    streamed(&mut backend, &mut dets, 0);
    let streamed_before = ALLOCATIONS.load(Ordering::SeqCst);
    for k in 1..13 {
        streamed(&mut backend, &mut dets, k);
    }
    let streamed_after = ALLOCATIONS.load(Ordering::SeqCst);
    // Printing allocates: only after the counts are read.
    println!("allocations per frame after the first: {per:?}");
    assert_eq!(after - before, 0, "allocations in 12 frames");
    assert!(cut > 0 && dets.list.len() == 3, "the cap path ran");
    assert_eq!(
        streamed_after - streamed_before,
        0,
        "allocations in 12 chunk-streamed frames"
    );
    assert_eq!(backend.frames_streamed(), 13);
}
