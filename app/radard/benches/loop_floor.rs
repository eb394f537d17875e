//! `loop_floor`: where the frame loop's CPU time per frame goes, part by
//! part, on this machine. radard reports one figure (the loop thread's CPU
//! clock over a status interval, divided by the frames); this bench runs
//! the same source and backend (radard's own set-up, `radard::unit::Unit`)
//! in a bare loop and
//! reads the thread's CPU clock around each part of every frame:
//!
//! - `wait`: the source's event wait (the wake-up per event), less the
//!   chunk hand-overs;
//! - `chunks`: `chunk_landed` for each chunk event (a graph launch each, in
//!   chunk-streamed mode);
//! - `process`: the frame's `process` call (launch of the frame's graph,
//!   the wait for the GPU, the detections read from mapped memory);
//! - `release`: handing the slot back.
//!
//! GPU-triggered mode (`backend.trigger`): `wait` is the loop's one sleep
//! a frame (until the GPU's work for the frame finished) and the frame
//! event that is queued by then, `process` taking the detections from host
//! memory, `release` handing the slot back and queueing its work again
//! (a graph launch); its wall time runs from the last chunk's completion
//! record (the simulator's clock) to the loop holding the detections.
//!
//! Cases: the source alone (the wake-up floor: one event per frame, or one
//! per chunk), then, where CUDA works, whole frames and chunk-streamed mode
//! with `gpu_wait` spin and block, at 8 ms and 1 ms frames; and one graph
//! launch and one GPU wait timed apart, on a frame resident in device
//! memory, paced at the same periods (the loop's CPU sleeps between
//! frames, as in radard). Every clock read is itself a system call; its
//! cost is measured and printed, and the per-part figures include it.
//!
//! Prints a table and writes JSON (`--json PATH`). Options: `--seconds S`
//! per case (default 4), `--cpu N` (pin the loop thread, default 2 when the
//! machine has more than 2 CPUs), `--only cpu` (skip the CUDA cases).
//! Without CUDA the CUDA cases print "skipped: no CUDA".

use std::time::Instant;

use radar_dsp::BackendKind;
use radar_dsp::SlotFrame;
use radar_dsp::cuda::{CudaBackend, GpuWait};
use radar_dsp::{Detections, FrameInput};
use radar_stats::LatencyStats;
use radard::RadardConfig;
use radard::config::Trigger;
use radard::rt::{self, RtConfig, RtReport};
use radard::service::ThreadCpuClock;
use radard::setup;
use radard::unit::Unit;
use serde::Serialize;
use tegra_p2p::clock::{monotonic_ns, sleep_until_ns};
use tegra_p2p::source::Event;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Work {
    /// Events only: nothing processed.
    SourceOnly,
    WholeFrames,
    ChunkStreamed,
    /// GPU-triggered mode: the GPU waits for the chunks itself.
    GpuTriggered,
    /// One launch and one wait on a resident frame, paced.
    LaunchAndWait,
}

#[derive(Clone, Debug, Serialize)]
struct Case {
    name: String,
    work: Work,
    period_ms: f64,
    /// Chunk events asked of the source.
    chunk_events: bool,
    gpu_wait: Option<GpuWait>,
    /// GPU-triggered: frames per wake-up, and the ring's slots.
    frames_per_wake: u32,
    slots: u32,
}

/// CPU microseconds per frame, by part (see the module comment).
#[derive(Debug, Default, Serialize)]
struct CpuParts {
    total: f64,
    wait: f64,
    chunks: f64,
    process: f64,
    release: f64,
    /// `LaunchAndWait` only: the launch call and the wait call.
    launch: f64,
    gpu_wait: f64,
}

#[derive(Debug, Serialize)]
struct CaseResult {
    case: Case,
    frames: u64,
    deadline_misses: u64,
    chunk_events_per_frame: f64,
    clock_reads_per_frame: f64,
    cpu_us_per_frame: CpuParts,
    /// Frame event to detections (whole-frame cases), or launch to
    /// detections (`LaunchAndWait`); wall time, microseconds.
    event_to_done: LatencyStats,
    /// Capture timestamp to detections (frame cases; none for
    /// `LaunchAndWait`).
    capture_to_done: Option<LatencyStats>,
}

#[derive(Debug, Serialize)]
struct Report {
    commit: Option<String>,
    loop_cpu: Option<usize>,
    seconds_per_case: f64,
    clock_read_ns: f64,
    notes: Vec<String>,
    cases: Vec<CaseResult>,
    skipped: Vec<String>,
}

struct Args {
    seconds: f64,
    cpu: Option<usize>,
    only_cpu: bool,
    /// Run only the cases whose names contain one of these.
    cases: Vec<String>,
    json: Option<std::path::PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut a = Args {
        seconds: 4.0,
        cpu: (ncpu > 2).then_some(2),
        only_cpu: false,
        cases: Vec::new(),
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "--seconds" => {
                a.seconds = value("a number of seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?;
                if !(a.seconds > 0.0 && a.seconds <= 600.0) {
                    return Err("--seconds: must be in (0, 600]".into());
                }
            }
            "--cpu" => {
                let v = value("a CPU number or 'none'")?;
                a.cpu = if v == "none" {
                    None
                } else {
                    Some(v.parse().map_err(|e| format!("--cpu: {e}"))?)
                };
            }
            "--only" => match value("'cpu'")?.as_str() {
                "cpu" => a.only_cpu = true,
                other => return Err(format!("--only: '{other}' (only 'cpu' is known)")),
            },
            "--json" => a.json = Some(value("a path")?.into()),
            "--cases" => {
                a.cases = value("names, ';'-separated")?
                    .split(';')
                    .map(str::to_string)
                    .collect();
            }
            // What `cargo bench` passes to every bench target.
            "--bench" => {}
            "-h" | "--help" => {
                println!(
                    "loop_floor [--seconds S] [--cpu N|none] [--only cpu] [--cases 'A;B'] [--json PATH]\n\
                     Where the frame loop's CPU time per frame goes (see the source's header)."
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument '{other}' (see --help)")),
        }
    }
    Ok(a)
}

/// The cost of one read of the thread CPU clock (mean of many).
fn clock_read_ns(clk: &ThreadCpuClock) -> f64 {
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(clk.read_ns());
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn cpu_now(clk: &ThreadCpuClock) -> u64 {
    clk.read_ns().unwrap_or(0)
}

fn config_for(case: &Case) -> RadardConfig {
    // radard's defaults (default geometry, 4 slots, scene playback), the
    // period and the GPU wait of the case.
    let mut cfg = RadardConfig::default();
    let chunks = cfg.geometry.chunks_per_frame as f64;
    cfg.source.chunk_period_ns = Some((case.period_ms * 1e6 / chunks).round() as u64);
    cfg.backend.kind = if case.work == Work::SourceOnly {
        BackendKind::Cpu
    } else {
        BackendKind::Cuda
    };
    cfg.backend.stream_chunks = case.work == Work::ChunkStreamed;
    cfg.backend.gpu_wait = case.gpu_wait.unwrap_or_default();
    cfg.backend.trigger = if case.work == Work::GpuTriggered {
        Trigger::Gpu
    } else {
        Trigger::Cpu
    };
    cfg.source.slots = case.slots;
    cfg.frame_loop.frames_per_wake = case.frames_per_wake;
    cfg
}

fn pin(cpu: Option<usize>) -> Vec<String> {
    let cfg = RtConfig {
        priority: 80,
        cpu,
        lock_memory: false,
        ..RtConfig::default()
    };
    let mut rep = RtReport::default();
    let _ = rt::apply_scheduling(&cfg, &mut rep);
    let _ = rt::apply_affinity(&cfg, &mut rep);
    rep.missing
}

/// The frame cases: radard's source and backend, a bare loop.
fn run_frames(case: &Case, seconds: f64, cpu: Option<usize>) -> Result<CaseResult, String> {
    let cfg = config_for(case);
    let period_ns = (case.period_ms * 1e6) as u64;
    let mut unit = Unit::open_source(&cfg, &mut |_| {}).map_err(|e| e.to_string())?;
    unit.load_scene(&cfg, &mut |_| {})
        .map_err(|e| e.to_string())?;
    if case.work != Work::SourceOnly {
        unit.open_backend(&cfg, &mut |_| {})
            .map_err(|e| e.to_string())?;
        if unit.backend_description().0 != "cuda" || !unit.slots_prepared {
            return Err("skipped: no CUDA (mapped ring slots)".into());
        }
    }
    if case.work == Work::GpuTriggered {
        return run_triggered(case, unit, seconds, cpu);
    }
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    unit.start(&cfg, case.chunk_events)
        .map_err(|e| e.to_string())?;
    let _ = pin(cpu);
    let clk = ThreadCpuClock::of_current_thread().ok_or("no thread CPU clock")?;
    let (src, mut backend) = unit.parts();
    let frames_wanted = (seconds * 1e3 / case.period_ms).ceil() as u64;
    let warmup = 20u64;
    let mut event_to_done = Vec::with_capacity(frames_wanted as usize);
    let mut capture_to_done = Vec::with_capacity(frames_wanted as usize);
    let (mut wait, mut chunks, mut process, mut release) = (0u64, 0u64, 0u64, 0u64);
    let (mut chunk_events, mut reads, mut misses) = (0u64, 0u64, 0u64);
    let mut total_start = 0;
    let mut count = 0u64;
    while count < warmup + frames_wanted {
        if count == warmup {
            (wait, chunks, process, release) = (0, 0, 0, 0);
            (chunk_events, reads) = (0, 0);
            total_start = cpu_now(&clk);
        }
        let c0 = cpu_now(&clk);
        let mut in_chunks = 0u64;
        let frame = loop {
            match src.next_event(None).map_err(|e| e.to_string())? {
                Event::Frame(f) => break f,
                Event::Chunk(c) => {
                    chunk_events += 1;
                    if let Some(b) = backend.as_deref_mut() {
                        let a = cpu_now(&clk);
                        let _ = b.chunk_landed(
                            SlotFrame {
                                index: c.slot as usize,
                                capture: count,
                            },
                            c.chunk as usize,
                            c.landed(),
                        );
                        in_chunks += cpu_now(&clk) - a;
                        reads += 2;
                    }
                }
                Event::TxDone { .. } => {}
            }
        };
        let c1 = cpu_now(&clk);
        let t_event = monotonic_ns();
        let meta = *frame.meta();
        if let Some(b) = backend.as_deref_mut() {
            b.process(
                FrameInput {
                    bytes: frame.data(),
                    slot: Some(SlotFrame {
                        index: meta.slot as usize,
                        capture: count,
                    }),
                },
                &mut dets,
            )
            .map_err(|e| e.to_string())?;
        }
        let finished = monotonic_ns();
        let c2 = cpu_now(&clk);
        frame.release().map_err(|e| e.to_string())?;
        let c3 = cpu_now(&clk);
        reads += 4;
        wait += (c1 - c0).saturating_sub(in_chunks);
        chunks += in_chunks;
        process += c2 - c1;
        release += c3 - c2;
        if count >= warmup {
            event_to_done.push((finished - t_event) as f64 / 1e3);
            // The first sample on CLOCK_MONOTONIC (timestamp_ns is the
            // site's time).
            let captured = meta.host_ns.min(t_event);
            capture_to_done.push((finished - captured) as f64 / 1e3);
            if finished > captured + 2 * period_ns {
                misses += 1;
            }
        }
        count += 1;
    }
    let total = cpu_now(&clk) - total_start;
    unit.source.as_dyn_mut().stop().map_err(|e| e.to_string())?;
    let n = frames_wanted as f64;
    let us = |ns: u64| ns as f64 / 1e3 / n;
    Ok(CaseResult {
        case: case.clone(),
        frames: frames_wanted,
        deadline_misses: misses,
        chunk_events_per_frame: chunk_events as f64 / n,
        clock_reads_per_frame: reads as f64 / n,
        cpu_us_per_frame: CpuParts {
            total: us(total),
            wait: us(wait),
            chunks: us(chunks),
            process: us(process),
            release: us(release),
            ..CpuParts::default()
        },
        event_to_done: LatencyStats::from_samples(&event_to_done, 0.0),
        capture_to_done: Some(LatencyStats::from_samples(&capture_to_done, 0.0)),
    })
}

/// GPU-triggered mode (armed by `Unit::open_backend`): the loop radard runs
/// in that mode, bare.
fn run_triggered(
    case: &Case,
    mut unit: Unit,
    seconds: f64,
    cpu: Option<usize>,
) -> Result<CaseResult, String> {
    let cfg = config_for(case);
    if !unit.gpu_triggered {
        return Err("GPU-triggered mode did not arm".into());
    }
    let period_ns = (case.period_ms * 1e6) as u64;
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    unit.start(&cfg, false).map_err(|e| e.to_string())?;
    let _ = pin(cpu);
    let clk = ThreadCpuClock::of_current_thread().ok_or("no thread CPU clock")?;
    let frames_wanted = (seconds * 1e3 / case.period_ms).ceil() as u64;
    let warmup = 20u64;
    let mut record_to_done = Vec::with_capacity(frames_wanted as usize);
    let mut capture_to_done = Vec::with_capacity(frames_wanted as usize);
    let (mut wait, mut process, mut release) = (0u64, 0u64, 0u64);
    let (mut reads, mut misses) = (0u64, 0u64);
    let mut total_start = 0;
    {
        let (src, backend) = unit.parts();
        let b = backend.ok_or("no backend")?;
        let words = src.completion().ok_or("no completion records")?;
        let mut count = 0u64;
        while count < warmup + frames_wanted {
            if count == warmup {
                (wait, process, release, reads) = (0, 0, 0, 0);
                total_start = cpu_now(&clk);
            }
            let c0 = cpu_now(&clk);
            let t = b.triggered().ok_or("not triggered")?;
            // One sleep for `frames_per_wake` frames, as radard's loop.
            if t.completed() <= count {
                let target = count + u64::from(case.frames_per_wake);
                match t.wait_completed(target, std::time::Duration::from_secs(2)) {
                    radar_dsp::TriggerWait::Reached(_) => {}
                    other => return Err(format!("frame {count}: {other:?}")),
                }
            }
            let frame = loop {
                if let Event::Frame(f) = src
                    .next_event(Some(std::time::Duration::from_secs(1)))
                    .map_err(|e| e.to_string())?
                {
                    break f;
                }
            };
            let c1 = cpu_now(&clk);
            let meta = *frame.meta();
            let slot = meta.slot as usize;
            // The last chunk's record, before the slot goes back.
            let landed_ns = words.timestamp_ns(meta.slot);
            let t = b.triggered().ok_or("not triggered")?;
            let Some(stamp) = t.take(slot, &mut dets).map_err(|e| e.to_string())? else {
                return Err(format!("frame {count}: detections not ready"));
            };
            // Done when the detections were in host memory (radard's rule).
            let finished = stamp.host_done_ns.min(monotonic_ns());
            let c2 = cpu_now(&clk);
            frame.release().map_err(|e| e.to_string())?;
            let c3 = cpu_now(&clk);
            reads += 4;
            wait += c1 - c0;
            process += c2 - c1;
            release += c3 - c2;
            if count >= warmup {
                record_to_done.push(finished.saturating_sub(landed_ns) as f64 / 1e3);
                let captured = meta.host_ns.min(finished);
                capture_to_done.push((finished - captured) as f64 / 1e3);
                if finished > captured + 2 * period_ns {
                    misses += 1;
                }
            }
            count += 1;
        }
    }
    let total = cpu_now(&clk) - total_start;
    let flushed = unit
        .disarm()
        .ok_or("GPU-triggered mode was not armed at the end")?
        .map_err(|e| e.to_string())?;
    if flushed == 0 {
        return Err("nothing was queued at the stop".into());
    }
    let n = frames_wanted as f64;
    let us = |ns: u64| ns as f64 / 1e3 / n;
    Ok(CaseResult {
        case: case.clone(),
        frames: frames_wanted,
        deadline_misses: misses,
        chunk_events_per_frame: 0.0,
        clock_reads_per_frame: reads as f64 / n,
        cpu_us_per_frame: CpuParts {
            total: us(total),
            wait: us(wait),
            process: us(process),
            release: us(release),
            ..CpuParts::default()
        },
        event_to_done: LatencyStats::from_samples(&record_to_done, 0.0),
        capture_to_done: Some(LatencyStats::from_samples(&capture_to_done, 0.0)),
    })
}

/// One launch and one wait apart, on a frame resident in device memory,
/// one per period.
fn run_launch_and_wait(
    case: &Case,
    seconds: f64,
    cpu: Option<usize>,
) -> Result<CaseResult, String> {
    let cfg = config_for(case);
    let opts = cfg.cuda_options();
    let mut backend = CudaBackend::with_options(&cfg.chain_config(), &opts)
        .map_err(|e| format!("skipped: no CUDA ({e})"))?;
    let scene = setup::builtin_scene();
    let (frame, _) = radar_dsp::scene::SceneGenerator::new(&cfg.chain_config(), &scene, 1)
        .map_err(|e| e.to_string())?
        .frame(0);
    let index = backend
        .add_resident_frame(&frame)
        .map_err(|e| e.to_string())?;
    let _ = pin(cpu);
    let clk = ThreadCpuClock::of_current_thread().ok_or("no thread CPU clock")?;
    let period_ns = (case.period_ms * 1e6) as u64;
    let frames_wanted = (seconds * 1e3 / case.period_ms).ceil() as u64;
    let warmup = 20u64;
    let (mut launch, mut gpu_wait) = (0u64, 0u64);
    let mut done = Vec::with_capacity(frames_wanted as usize);
    let mut total_start = 0;
    let mut t_next = monotonic_ns() + period_ns;
    for i in 0..warmup + frames_wanted {
        // The loop's CPU goes idle until the next period, as in radard.
        sleep_until_ns(t_next);
        t_next += period_ns;
        if i == warmup {
            (launch, gpu_wait) = (0, 0);
            total_start = cpu_now(&clk);
        }
        let t0 = monotonic_ns();
        let c0 = cpu_now(&clk);
        backend.launch_resident(index).map_err(|e| e.to_string())?;
        let c1 = cpu_now(&clk);
        backend.wait().map_err(|e| e.to_string())?;
        let c2 = cpu_now(&clk);
        let t1 = monotonic_ns();
        launch += c1 - c0;
        gpu_wait += c2 - c1;
        if i >= warmup {
            done.push((t1 - t0) as f64 / 1e3);
        }
    }
    let total = cpu_now(&clk) - total_start;
    let n = frames_wanted as f64;
    let us = |ns: u64| ns as f64 / 1e3 / n;
    Ok(CaseResult {
        case: case.clone(),
        frames: frames_wanted,
        deadline_misses: 0,
        chunk_events_per_frame: 0.0,
        clock_reads_per_frame: 3.0,
        cpu_us_per_frame: CpuParts {
            total: us(total),
            launch: us(launch),
            gpu_wait: us(gpu_wait),
            ..CpuParts::default()
        },
        event_to_done: LatencyStats::from_samples(&done, 0.0),
        capture_to_done: None,
    })
}

/// The GPU waits the CUDA cases run with, and their names.
const WAITS: [(GpuWait, &str); 2] = [(GpuWait::Spin, "spin"), (GpuWait::Block, "block")];

fn cases(only_cpu: bool) -> Vec<Case> {
    let chunks = RadardConfig::default().geometry.chunks_per_frame;
    let mut v = Vec::new();
    for period_ms in [8.0, 1.0] {
        for chunk_events in [false, true] {
            v.push(Case {
                name: format!(
                    "source only, {} events/frame, {period_ms} ms",
                    if chunk_events { chunks + 1 } else { 1 }
                ),
                work: Work::SourceOnly,
                period_ms,
                chunk_events,
                gpu_wait: None,
                frames_per_wake: 1,
                slots: 4,
            });
        }
    }
    if only_cpu {
        return v;
    }
    for period_ms in [8.0, 1.0] {
        for (work, chunk_events) in [(Work::WholeFrames, false), (Work::ChunkStreamed, true)] {
            for (wait, wait_name) in WAITS {
                v.push(Case {
                    name: format!(
                        "{}, {wait_name}, {period_ms} ms",
                        if work == Work::WholeFrames {
                            "whole frames"
                        } else {
                            "chunk-streamed"
                        }
                    ),
                    work,
                    period_ms,
                    chunk_events,
                    gpu_wait: Some(wait),
                    frames_per_wake: 1,
                    slots: 4,
                });
            }
        }
        for (k, slots) in [(1, 4), (4, 8)] {
            v.push(Case {
                name: format!("GPU-triggered, {k} frame(s)/wake, {slots} slots, {period_ms} ms"),
                work: Work::GpuTriggered,
                period_ms,
                chunk_events: false,
                gpu_wait: None,
                frames_per_wake: k,
                slots,
            });
        }
        for (wait, wait_name) in WAITS {
            v.push(Case {
                name: format!("one launch + one wait (resident), {wait_name}, {period_ms} ms"),
                work: Work::LaunchAndWait,
                period_ms,
                chunk_events: false,
                gpu_wait: Some(wait),
                frames_per_wake: 1,
                slots: 4,
            });
        }
    }
    v
}

fn run_case(case: &Case, seconds: f64, cpu: Option<usize>) -> Result<CaseResult, String> {
    let c = case.clone();
    // A thread per case: it pins itself after its source started, so the
    // simulator's thread (the FPGA's stand-in) keeps the other CPUs.
    std::thread::Builder::new()
        .name("loop-floor".into())
        .spawn(move || match c.work {
            Work::LaunchAndWait => run_launch_and_wait(&c, seconds, cpu),
            _ => run_frames(&c, seconds, cpu),
        })
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "the case's thread panicked".to_string())?
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loop_floor: {e}");
            std::process::exit(2);
        }
    };
    let mut notes = Vec::new();
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        notes.push("memory not locked (mlockall refused)".to_string());
    }
    let probe = ThreadCpuClock::of_current_thread();
    let clock_read = probe.as_ref().map_or(0.0, clock_read_ns);
    let missing = pin(None);
    notes.extend(missing.iter().map(|m| format!("not obtained: {m}")));
    let mut report = Report {
        commit: std::env::var("RADAR_COMMIT").ok(),
        loop_cpu: args.cpu,
        seconds_per_case: args.seconds,
        clock_read_ns: clock_read,
        notes,
        cases: Vec::new(),
        skipped: Vec::new(),
    };
    println!(
        "loop_floor: {} s a case, loop thread on CPU {}, one CPU-clock read costs {:.0} ns",
        args.seconds,
        args.cpu.map_or("(any)".to_string(), |c| c.to_string()),
        clock_read
    );
    for n in &report.notes {
        println!("loop_floor: {n}");
    }
    let mut cuda_missing = false;
    if !args.only_cpu
        && let Err(why) = radar_dsp::cuda::probe()
    {
        println!("loop_floor: CUDA cases: skipped: no CUDA ({why})");
        cuda_missing = true;
    }
    for case in cases(args.only_cpu) {
        if !args.cases.is_empty() && !args.cases.iter().any(|c| case.name.contains(c.as_str())) {
            continue;
        }
        if cuda_missing && case.work != Work::SourceOnly {
            report.skipped.push(case.name.clone());
            continue;
        }
        match run_case(&case, args.seconds, args.cpu) {
            Ok(r) => {
                report.cases.push(r);
            }
            Err(e) if e.starts_with("skipped: no CUDA") => {
                println!("loop_floor: {}: {e}", case.name);
                cuda_missing = true;
                report.skipped.push(case.name.clone());
            }
            Err(e) => {
                eprintln!("loop_floor: {}: {e}", case.name);
                std::process::exit(1);
            }
        }
    }
    print_table(&report);
    if let Some(path) = &args.json {
        let text = match serde_json::to_string_pretty(&report) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("loop_floor: JSON: {e}");
                std::process::exit(1);
            }
        };
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("loop_floor: {}: {e}", path.display());
            std::process::exit(1);
        }
        println!("loop_floor: wrote {}", path.display());
    }
}

fn print_table(r: &Report) {
    println!(
        "\n{:<52} {:>7} {:>6} {:>6} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} | {:>8} {:>8} {:>8} {:>8}",
        "case (CPU us per frame; wall us)",
        "frames",
        "misses",
        "ev/fr",
        "total",
        "wait",
        "chunks",
        "process",
        "release",
        "launch",
        "gpuwait",
        "p50",
        "p99",
        "p99.9",
        "max"
    );
    for c in &r.cases {
        let p = &c.cpu_us_per_frame;
        let e = &c.event_to_done;
        println!(
            "{:<52} {:>7} {:>6} {:>6.1} | {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} | {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            c.case.name,
            c.frames,
            c.deadline_misses,
            c.chunk_events_per_frame + f64::from(u8::from(c.case.work != Work::LaunchAndWait)),
            p.total,
            p.wait,
            p.chunks,
            p.process,
            p.release,
            p.launch,
            p.gpu_wait,
            e.p50_us,
            e.p99_us,
            e.p999_us,
            e.max_us
        );
    }
    for s in &r.skipped {
        println!("{s}: skipped: no CUDA");
    }
    println!(
        "(wall: frame event to detections, launch to detections, or GPU-triggered: the last chunk's completion record to the loop holding the detections; parts include ~{:.1} CPU-clock reads a frame)",
        r.cases
            .iter()
            .map(|c| c.clock_reads_per_frame)
            .fold(0.0, f64::max)
    );
}
