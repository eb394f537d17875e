//! `trigger_latency`: from a frame's last chunk landing to its detections
//! in host memory, paced at the frame period, for GPU-triggered processing
//! and CPU-triggered chunk streaming in the same run (docs/performance.md).
//!
//! The simulator (the FPGA's stand-in) writes each chunk's completion
//! record after the chunk's bytes and stamps it with CLOCK_MONOTONIC: the
//! start of the measurement is the last chunk's stamp. The end:
//!
//! - GPU-triggered (`backend.trigger = "gpu"`): the moment a thread that
//!   spins on the slot's "detections ready" flag sees it set (the GPU wrote
//!   it after the frame's last kernel). Nothing on the host launches
//!   anything for the frame.
//! - CPU-triggered (`trigger = "cpu"`, chunk-streamed, as radard ran
//!   before): the loop sleeps in the source's event wait as radard does,
//!   launches each chunk's work at its chunk event and the last chunk's and
//!   the rest at the frame event, and waits for the GPU (spinning): the end
//!   is when `process` returns with the detections.
//!
//! Both are built by radard's own set-up (`radard::unit::Unit`): simulator,
//! CUDA backend, default geometry, the built-in scene. Prints a table
//! (p50, p99, p99.9, max in microseconds) and writes JSON (`--json PATH`).
//! Options: `--frames N` per case (default 2000), `--period-us P` (default
//! 8000), `--cpu N` (pin the measuring thread), `--cases gpu,cpu`,
//! `--cuda-options TEXT` (launch choices, `CudaOptions::parse`: e.g.
//! `twait=last`).
//! Without CUDA it prints "skipped: no CUDA" and exits 0.

use std::time::Duration;

use radar_dsp::{BackendKind, Detections, FrameInput, SlotFrame};
use radar_stats::LatencyStats;
use radard::RadardConfig;
use radard::config::Trigger;
use radard::rt::{self, RtConfig, RtReport};
use radard::unit::Unit;
use serde::Serialize;
use tegra_p2p::clock::monotonic_ns;
use tegra_p2p::source::Event;

#[derive(Debug, Serialize)]
struct CaseResult {
    name: String,
    trigger: String,
    frames: u64,
    /// Frames whose detections came after their due time (capture + 2
    /// periods).
    deadline_misses: u64,
    /// Last chunk's completion record to detections seen, microseconds.
    record_to_detections: LatencyStats,
    /// GPU-triggered: the GPU's own part, from the start of the last
    /// chunk's work (its wait released) to the detections ready, on the
    /// GPU's clock; the rest of the latency is the wait's release and the
    /// host seeing the flag.
    gpu_work: Option<LatencyStats>,
    /// The start-up log's GPU-triggered line.
    armed: String,
}

#[derive(Debug, Serialize)]
struct Report {
    commit: Option<String>,
    period_us: u64,
    cases: Vec<CaseResult>,
    skipped: Vec<String>,
}

struct Args {
    frames: u64,
    period_us: u64,
    cpu: Option<usize>,
    cases: Vec<String>,
    json: Option<std::path::PathBuf>,
    /// Launch choices other than the defaults (CudaOptions::parse).
    cuda: Option<(String, radar_dsp::cuda::CudaOptions)>,
}

fn parse_args() -> Result<Args, String> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut a = Args {
        frames: 2000,
        period_us: 8000,
        cpu: (ncpu > 2).then_some(2),
        cases: vec!["gpu".into(), "cpu".into()],
        json: None,
        cuda: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "--frames" => {
                a.frames = value("a count")?
                    .parse()
                    .map_err(|e| format!("--frames: {e}"))?;
                if a.frames == 0 {
                    return Err("--frames: at least 1".into());
                }
            }
            "--period-us" => {
                a.period_us = value("microseconds")?
                    .parse()
                    .map_err(|e| format!("--period-us: {e}"))?;
                if !(160..=1_000_000).contains(&a.period_us) {
                    return Err("--period-us: 160 to 1000000".into());
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
            "--cases" => {
                a.cases = value("gpu,cpu")?.split(',').map(str::to_string).collect();
                if let Some(bad) = a.cases.iter().find(|c| *c != "gpu" && *c != "cpu") {
                    return Err(format!("--cases: '{bad}' (gpu, cpu)"));
                }
            }
            "--json" => a.json = Some(value("a path")?.into()),
            "--cuda-options" => {
                let text = value("launch choices")?;
                let o = radar_dsp::cuda::CudaOptions::parse(&text).map_err(|e| e.to_string())?;
                a.cuda = Some((text, o));
            }
            "--bench" => {}
            "-h" | "--help" => {
                println!(
                    "trigger_latency [--frames N] [--period-us P] [--cpu N|none] [--cases gpu,cpu] [--cuda-options TEXT] [--json PATH]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument '{other}' (see --help)")),
        }
    }
    Ok(a)
}

fn config(trigger: Trigger, args: &Args) -> RadardConfig {
    let period_us = args.period_us;
    let mut cfg = RadardConfig::default();
    cfg.backend.cuda_launch = args.cuda.as_ref().map(|(_, o)| o.clone());
    let chunks = cfg.geometry.chunks_per_frame as u64;
    cfg.source.chunk_period_ns = Some(period_us * 1000 / chunks);
    cfg.backend.kind = BackendKind::Cuda;
    cfg.backend.trigger = trigger;
    cfg.backend.stream_chunks = true;
    cfg
}

fn pin(cpu: Option<usize>) {
    let cfg = RtConfig {
        priority: 80,
        cpu,
        lock_memory: false,
        ..RtConfig::default()
    };
    let mut rep = RtReport::default();
    let _ = rt::apply_scheduling(&cfg, &mut rep);
    let _ = rt::apply_affinity(&cfg, &mut rep);
}

fn run(trigger: Trigger, args: &Args) -> Result<CaseResult, String> {
    let cfg = config(trigger, args);
    let mut armed = String::new();
    let mut unit = Unit::open(&cfg, &mut |l| {
        if l.starts_with("GPU-triggered") {
            armed = l.to_string();
        }
    })
    .map_err(|e| e.to_string())?;
    if unit.backend_description().0 != "cuda" || !unit.slots_prepared {
        return Err("skipped: no CUDA (mapped ring slots)".into());
    }
    let gpu = trigger == Trigger::Gpu;
    if gpu != unit.gpu_triggered {
        return Err(format!(
            "GPU-triggered mode is {}: {armed}",
            unit.gpu_triggered
        ));
    }
    unit.start(&cfg, !gpu).map_err(|e| e.to_string())?;
    pin(args.cpu);
    let period_ns = args.period_us * 1000;
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let warmup = 20u64;
    let mut lat = Vec::with_capacity(args.frames as usize);
    let mut work = Vec::with_capacity(args.frames as usize);
    let mut misses = 0u64;
    {
        let (src, backend) = unit.parts();
        let b = backend.ok_or("no backend")?;
        let words = src.completion().ok_or("no completion records")?;
        let slots = src.ring().nr_slots() as usize;
        let mut count = 0u64;
        while count < warmup + args.frames {
            let (frame, seen) = if gpu {
                // Frames land in the ring's slots in order.
                let slot = (count % slots as u64) as usize;
                let t = b.triggered().ok_or("not triggered")?;
                let t0 = monotonic_ns();
                let seen = loop {
                    if t.ready(slot) {
                        break monotonic_ns();
                    }
                    if monotonic_ns() - t0 > 2_000_000_000 {
                        return Err(format!("frame {count}: slot {slot} never ready"));
                    }
                    std::hint::spin_loop();
                };
                let f = loop {
                    if let Event::Frame(f) = src
                        .next_event(Some(Duration::from_secs(1)))
                        .map_err(|e| e.to_string())?
                    {
                        break f;
                    }
                };
                if f.slot() as usize != slot {
                    return Err(format!(
                        "frame {count} landed in slot {}, not {slot}",
                        f.slot()
                    ));
                }
                (f, seen)
            } else {
                let f = loop {
                    match src
                        .next_event(Some(Duration::from_secs(1)))
                        .map_err(|e| e.to_string())?
                    {
                        Event::Frame(f) => break f,
                        Event::Chunk(c) => {
                            let _ = b.chunk_landed(
                                SlotFrame {
                                    index: c.slot as usize,
                                    capture: count,
                                },
                                c.chunk as usize,
                                c.landed(),
                            );
                        }
                        Event::TxDone { .. } => {}
                    }
                };
                let meta = *f.meta();
                b.process(
                    FrameInput {
                        bytes: f.data(),
                        slot: Some(SlotFrame {
                            index: meta.slot as usize,
                            capture: count,
                        }),
                    },
                    &mut dets,
                )
                .map_err(|e| e.to_string())?;
                (f, monotonic_ns())
            };
            let meta = *frame.meta();
            let rec = words.snapshot(meta.slot);
            if rec.sequence != meta.sequence {
                return Err(format!(
                    "frame {}: the slot's record is frame {}'s",
                    meta.sequence, rec.sequence
                ));
            }
            let landed_ns = rec.timestamp_ns;
            if gpu {
                let t = b.triggered().ok_or("not triggered")?;
                let Some(stamp) = t
                    .take(meta.slot as usize, &mut dets)
                    .map_err(|e| e.to_string())?
                else {
                    return Err(format!("frame {count}: ready, then not"));
                };
                if count >= warmup {
                    work.push(stamp.gpu_done_ns.saturating_sub(stamp.gpu_start_ns) as f64 / 1e3);
                }
            }
            frame.release().map_err(|e| e.to_string())?;
            if count >= warmup {
                lat.push(seen.saturating_sub(landed_ns) as f64 / 1e3);
                // The first sample on CLOCK_MONOTONIC (the simulator's).
                if seen > meta.host_ns + 2 * period_ns {
                    misses += 1;
                }
            }
            count += 1;
        }
    }
    if gpu {
        unit.disarm()
            .ok_or("not armed at the end")?
            .map_err(|e| e.to_string())?;
    } else {
        unit.source.as_dyn_mut().stop().map_err(|e| e.to_string())?;
    }
    Ok(CaseResult {
        name: if gpu {
            match &args.cuda {
                Some((text, _)) => format!("GPU-triggered {text}"),
                None => "GPU-triggered".into(),
            }
        } else {
            "CPU-triggered chunk streaming".into()
        },
        trigger: trigger.to_string(),
        frames: args.frames,
        deadline_misses: misses,
        record_to_detections: LatencyStats::from_samples(&lat, 0.0),
        gpu_work: gpu.then(|| LatencyStats::from_samples(&work, 0.0)),
        armed,
    })
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("trigger_latency: {e}");
            std::process::exit(2);
        }
    };
    let mut report = Report {
        commit: std::env::var("RADAR_COMMIT").ok(),
        period_us: args.period_us,
        cases: Vec::new(),
        skipped: Vec::new(),
    };
    if let Err(why) = radar_dsp::cuda::probe() {
        println!("trigger_latency: skipped: no CUDA ({why})");
        return;
    }
    for name in &args.cases {
        let trigger = if name == "gpu" {
            Trigger::Gpu
        } else {
            Trigger::Cpu
        };
        // A thread per case: it pins itself once its source started.
        let a = &args;
        let r = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("trigger-latency".into())
                .spawn_scoped(s, move || run(trigger, a))
                .map_err(|e| e.to_string())
                .and_then(|h| h.join().map_err(|_| "the case panicked".to_string()))
        });
        match r.and_then(|r| r) {
            Ok(c) => report.cases.push(c),
            Err(e) if e.starts_with("skipped") => {
                println!("trigger_latency: {name}: {e}");
                report.skipped.push(name.clone());
            }
            Err(e) => {
                eprintln!("trigger_latency: {name}: {e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "\ntrigger_latency: last chunk's completion record -> detections in host memory, seen by the host; paced at {} us",
        args.period_us
    );
    println!(
        "{:<32} {:>7} {:>7} | {:>8} {:>8} {:>8} {:>8}",
        "case (us)", "frames", "misses", "p50", "p99", "p99.9", "max"
    );
    for c in &report.cases {
        let l = &c.record_to_detections;
        println!(
            "{:<32} {:>7} {:>7} | {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            c.name, c.frames, c.deadline_misses, l.p50_us, l.p99_us, l.p999_us, l.max_us
        );
    }
    for c in &report.cases {
        if let Some(w) = &c.gpu_work {
            println!(
                "{:<32} {:>7} {:>7} | {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                "  of which the GPU's work", c.frames, "", w.p50_us, w.p99_us, w.p999_us, w.max_us
            );
        }
    }
    for c in &report.cases {
        if !c.armed.is_empty() {
            println!("{}: {}", c.name, c.armed);
        }
    }
    if let Some(path) = &args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(t) => {
                if let Err(e) = std::fs::write(path, t) {
                    eprintln!("trigger_latency: {}: {e}", path.display());
                    std::process::exit(1);
                }
            }
            Err(e) => {
                eprintln!("trigger_latency: JSON: {e}");
                std::process::exit(1);
            }
        }
    }
}
