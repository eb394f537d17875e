//! The frame loop allocates nothing after warm-up (docs/requirements.md,
//! real time): a global allocator counts the allocations made by the loop's thread
//! between the end of warm-up and the end of the run, for the verified test
//! pattern, for the scene content through the CPU backend, for the scene
//! with chunk events on through the best backend here: CUDA in
//! chunk-streamed mode where a GPU is (the device machine; with
//! RADAR_REQUIRE_CUDA=1 it must be), else the CPU backend passing over the
//! chunk events ("skipped: no CUDA" for the streamed part), and for the
//! scene in GPU-triggered mode (`backend.trigger = "auto"`): CUDA waiting on
//! the simulator's completion records where a GPU is, else the CPU backend
//! as radard falls back to it ("skipped: no CUDA" for the triggered part). The loop is set
//! up as radard sets it up (`Unit`, `LoopResources`). Every sink is on: the
//! detections feed (jsonl/udp sinks), the fpga sink's transmit, the status
//! board and a power map every 10 frames; three CFAR Pfa changes from the
//! diagnostics server are applied in the counted frames.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use radar_dsp::BackendKind;
use radard::config::{Content, RadardConfig, SinkConfig, Trigger};
use radard::frame_loop::param_queue::{ParamChange, ParamSender};
use radard::frame_loop::{self, LoopEnd, LoopEnds, LoopOptions, LoopResources};
use radard::sinks::{FeedRead, FrameDetections};
use radard::status::DropReason;
use radard::unit::Unit;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Where the first counted allocation came from, so a failure names the
/// code that allocated (the GPU machine has no debugger).
static FIRST_ALLOCATION: OnceLock<String> = OnceLock::new();

fn counting() -> bool {
    COUNTING.try_with(|c| c.get()).unwrap_or(false)
}

/// Count one allocation; the first one's backtrace is kept (captured with
/// counting off, since capturing allocates).
fn count_allocation() {
    if ALLOCATIONS.fetch_add(1, Ordering::Relaxed) == 0 {
        COUNTING.with(|c| c.set(false));
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        let _ = FIRST_ALLOCATION.set(trace);
        COUNTING.with(|c| c.set(true));
    }
}

// SAFETY: forwards to the system allocator; counting has no side effects on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
            count_allocation();
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if counting() {
            count_allocation();
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counting() {
            count_allocation();
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A small geometry so the test is quick in debug builds.
const SMALL: &str = r#"
[source]
slots = 4
chunk_period_us = 0
scene_frames = 3
[geometry]
n_tx = 2
n_rx = 4
n_loops = 32
n_samples = 64
chunks_per_frame = 4
[cfar]
train_doppler = 2
train_range = 4
[rt]
priority = 0
lock_memory = false
"#;

/// One run of the loop.
struct Case {
    content: Content,
    backend: BackendKind,
    /// Ask the source for chunk events (whatever the backend does with them).
    chunk_events: bool,
    /// `backend.trigger`.
    trigger: Trigger,
}

/// What a run did: allocations after warm-up, records queued, records
/// lost, the backend's name, the chunks handed to the backend and the
/// frames it finished from the work they started.
struct Outcome {
    allocs: u64,
    lines: u64,
    lost: u64,
    backend: String,
    chunks_streamed: u64,
    frames_streamed: u64,
    /// GPU-triggered mode was armed, and the frames its stop flushed.
    gpu_triggered: bool,
    flushed: Option<u64>,
}

fn run_case(case: &Case) -> Outcome {
    let content = case.content;
    let mut cfg = RadardConfig::parse(SMALL, "test").expect("config");
    cfg.source.content = content;
    cfg.backend.kind = case.backend;
    cfg.backend.stream_chunks = case.chunk_events;
    cfg.backend.trigger = case.trigger;
    // Every sink on: a jsonl sink's feed (its thread is not started: one
    // reader here drains the feed after the run), the fpga sink's transmit;
    // the power map every 10 frames.
    cfg.sinks = vec![
        SinkConfig::Jsonl {
            path: "/dev/null".into(),
            rotate_bytes: None,
            keep: None,
        },
        SinkConfig::Fpga,
    ];
    let mut unit = Unit::open(&cfg, &mut |l| {
        if l.starts_with("GPU-triggered") {
            println!("  {l}");
        }
    })
    .expect("sim source and backend");
    let gpu_triggered = unit.gpu_triggered;
    // The source is asked for chunk events whatever the backend does with
    // them (the CPU backend passes over them).
    unit.start(&cfg, case.chunk_events).expect("start");
    let opts = LoopOptions {
        max_frames: Some(200),
        warmup_frames: 8,
        print_every: 1,
        power_map_every: 10,
        ..unit.loop_options(&cfg, None)
    };
    let mut resources = LoopResources::new(&cfg, 1024);
    ALLOCATIONS.store(0, Ordering::Relaxed);
    // Parameter changes from the diagnostics server, applied by the loop in
    // the counted frames: queued (tables built off the loop) when warm-up
    // ends, taken at the top of the next frame.
    let diag_params = radard::diag::params::Params::new(cfg.chain_config(), true);
    let mut changes: Vec<ParamChange> = [1e-3, 1e-5, 1e-6]
        .iter()
        .enumerate()
        .map(|(i, &pfa)| {
            let v = diag_params
                .validate("cfar.pfa", diag_proto::ParamValue::Real(pfa))
                .expect("a valid Pfa");
            ParamChange {
                id: i as u64 + 1,
                param: v.param,
                alpha: v.alpha,
            }
        })
        .collect();
    let stop = AtomicBool::new(false);
    let server = std::cell::RefCell::new(None::<ParamSender<'_>>);
    let mut on_warm = || {
        if let Some(s) = server.borrow_mut().as_mut() {
            for c in changes.drain(..) {
                assert!(s.changes.enqueue(c).is_ok(), "change queue full");
            }
        }
        COUNTING.with(|c| c.set(true))
    };
    let LoopEnds {
        context: mut ctx,
        frame_lines: mut consumer,
        params: sender,
    } = resources.context(&stop, &mut on_warm, true);
    *server.borrow_mut() = Some(sender);
    let (source, backend) = unit.parts();
    let end = frame_loop::run(source, backend, &opts, &mut ctx);
    COUNTING.with(|c| c.set(false));
    // The source stops at once: in GPU-triggered mode the frames queued
    // beyond the last one are then still waiting for chunks (flushed
    // below), not finished by the simulator's next frames meanwhile.
    let _ = unit.source.as_dyn_mut().stop();
    assert_eq!(end.expect("loop ran"), LoopEnd::FrameLimit);
    let mut applied = 0;
    let mut sender = server.borrow_mut().take().expect("the sender's end");
    while let Some(r) = sender.replies.dequeue() {
        assert!(r.at_frame > 8, "change {} applied in warm-up", r.id);
        if content == Content::Scene {
            assert_eq!(r.refused, None, "change {} refused", r.id);
        }
        applied += 1;
    }
    assert_eq!(applied, 3, "the loop answered every parameter change");
    let mut lines = 0;
    while consumer.dequeue().is_some() {
        lines += 1;
    }
    // No GPU stream is left waiting for frames that will not come.
    let flushed = unit
        .disarm()
        .map(|r| r.expect("GPU-triggered work ends after the stop"));
    let board = resources.board.clone();
    let snap = board.snapshot();
    assert_eq!(snap.frames_processed, 200);
    assert!(snap.ledger_closes());
    assert_eq!(
        snap.dropped(DropReason::Crc),
        0,
        "{content:?}: payload errors"
    );
    // The sinks got every frame: the fpga sink's records were submitted,
    // the feed holds the last FEED_FRAMES of them.
    assert_eq!(snap.sinks[1].sent, 200, "fpga records submitted");
    let feed = resources.feed.as_ref().expect("the jsonl sink's feed");
    assert_eq!(feed.head(), 200);
    let mut cursor = 0;
    let mut rec = FrameDetections::with_capacity(cfg.chain.max_detections);
    let (mut read, mut lost) = (0, 0);
    loop {
        match feed.read(&mut cursor, &mut rec) {
            FeedRead::Copied => read += 1,
            FeedRead::Lost(n) => lost += n,
            FeedRead::Empty => break,
        }
    }
    assert_eq!(read + lost, 200);
    if content == Content::Scene {
        assert_eq!(rec.sequence, snap.latest.sequence);
        assert_eq!(board.power_map().map(|m| m.generation), Some(20));
    }
    Outcome {
        allocs: ALLOCATIONS.load(Ordering::Relaxed),
        lines,
        lost: snap.frame_lines_lost,
        frames_streamed: unit
            .backend
            .as_ref()
            .map_or(0, |s| s.backend.frames_streamed()),
        backend: unit.backend_description().0,
        chunks_streamed: snap.chunks_streamed,
        gpu_triggered,
        flushed,
    }
}

fn main() {
    let mut failed = false;
    let require_cuda = std::env::var("RADAR_REQUIRE_CUDA").is_ok_and(|v| v == "1");
    let cases = [
        Case {
            content: Content::TestPattern,
            backend: BackendKind::Cpu,
            chunk_events: false,
            trigger: Trigger::Cpu,
        },
        Case {
            content: Content::Scene,
            backend: BackendKind::Cpu,
            chunk_events: false,
            trigger: Trigger::Cpu,
        },
        Case {
            content: Content::Scene,
            backend: BackendKind::Auto,
            chunk_events: true,
            trigger: Trigger::Cpu,
        },
        Case {
            content: Content::Scene,
            backend: BackendKind::Auto,
            chunk_events: false,
            trigger: Trigger::Auto,
        },
    ];
    for case in &cases {
        let o = run_case(case);
        let Outcome {
            allocs,
            lines,
            lost,
            ..
        } = o;
        println!(
            "{:?}, {} backend, chunk events {}, trigger {} ({}): {allocs} allocations on the loop thread after warm-up ({lines} frame lines queued, {lost} lost, {} chunks streamed to the backend, {} frames finished from them)",
            case.content,
            o.backend,
            if case.chunk_events { "on" } else { "off" },
            case.trigger,
            if o.gpu_triggered {
                "GPU-triggered"
            } else {
                "CPU-triggered"
            },
            o.chunks_streamed,
            o.frames_streamed
        );
        if case.trigger == Trigger::Auto {
            if o.gpu_triggered {
                // The backend keeps two frames per slot queued; at the stop
                // the ones waiting for frames that never came were flushed.
                let flushed = o.flushed.unwrap_or(u64::MAX);
                println!("  GPU-triggered: {flushed} queued frames flushed at the stop");
                if flushed == 0 || flushed > 8 {
                    eprintln!("FAILED: {flushed} frames flushed at the stop (1 to 8 expected)");
                    failed = true;
                }
            } else if require_cuda {
                eprintln!(
                    "FAILED: RADAR_REQUIRE_CUDA=1 but GPU-triggered mode did not run ({} backend)",
                    o.backend
                );
                failed = true;
            } else {
                println!(
                    "skipped: no CUDA (GPU-triggered mode fell back to CPU-triggered on the {} backend)",
                    o.backend
                );
            }
        }
        if allocs != 0 {
            if let Some(trace) = FIRST_ALLOCATION.get() {
                eprintln!("the first allocation after warm-up:\n{trace}");
            }
            failed = true;
        }
        if case.chunk_events {
            // 200 frames, 4 chunks each: every frame's chunks reach the
            // backend (CPU or CUDA: both stream) and every frame is finished
            // from their work (the first may have begun before the loop
            // listened).
            if o.chunks_streamed < 4 * 199 || o.frames_streamed < 199 {
                eprintln!(
                    "FAILED: {} chunks streamed, {} frames finished from them",
                    o.chunks_streamed, o.frames_streamed
                );
                failed = true;
            }
            if o.backend != "cuda" {
                if require_cuda {
                    eprintln!(
                        "FAILED: RADAR_REQUIRE_CUDA=1 but the {} backend ran",
                        o.backend
                    );
                    failed = true;
                } else {
                    println!(
                        "skipped: no CUDA (the chunk-streamed hot loop ran on the {} backend)",
                        o.backend
                    );
                }
            }
        }
        // The queue holds 256 records and nobody drained it: the rest are
        // counted as lost, never blocking the loop.
        assert_eq!(
            lines + lost,
            200,
            "every frame is either queued or counted lost"
        );
    }
    if failed {
        // Not always an allocation: each failed check said what it was.
        eprintln!("FAILED: the hot-loop test (the FAILED lines above say which checks)");
        std::process::exit(1);
    }
    println!("ok: no allocation in the hot loop after warm-up");
}
