//! `radard`: the radar appliance program.
//!
//! Frames arrive from the FPGA (`--source kmod`) or its simulator
//! (`--source sim`, the default); each goes through the processing chain on
//! the GPU or CPU within the frame period; a line per frame and a status line
//! per second go to stdout; a summary at exit (SIGINT/SIGTERM or `--frames`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use radar_dsp::Detections;
use radard::config::{Content, RadardConfig, ReplayRate, SourceKind};
use radard::frame_loop::{self, LatencyLog, LoopContext, LoopEnd, LoopOptions};
use radard::report::{LiveStats, LogQueue, run_printer};
use radard::{rt, setup, telemetry};
use serde::Serialize;

#[derive(Parser, Debug)]
#[command(
    name = "radard",
    version,
    about = "Radar appliance: capture frames, run the processing chain every frame period, report detections",
    after_help = "Examples:\n  radard                                  simulator, synthetic scene, 8 ms frames, best backend\n  radard --frames 500 --backend cpu      500 frames on the CPU backend, then a summary\n  radard --content test-pattern          verify every byte of every frame instead of DSP\n  radard --source kmod --device 0        frames from /dev/fpga-p2p0\n  radard --print-config                  the effective configuration as TOML\n  radard record --frames 100 --output run.raw     record 100 frames (+ run.raw.meta.jsonl)\n  radard replay --input run.raw --rate max        process a recording as fast as possible\n\nExit status: 0 clean; 1 start-up or source failure; 2 bad configuration or arguments;\n3 the run completed but frames had payload errors, sequence breaks or deadline misses."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Configuration file (TOML); every key has a default.
    #[arg(short, long, global = true)]
    config: Option<PathBuf>,
    /// Frame source: sim (userspace FPGA simulator) or kmod (the fpga_p2p module);
    /// for a recording, `radard replay`.
    #[arg(long, global = true)]
    source: Option<SourceKind>,
    /// Device index for --source kmod (/dev/fpga-p2p<N>).
    #[arg(long, global = true)]
    device: Option<u32>,
    /// Processing backend: auto, cuda or cpu.
    #[arg(long, global = true)]
    backend: Option<String>,
    /// Process whole frames only: no chunk events, no chunk-streamed work
    /// (backend.stream_chunks = false).
    #[arg(long, global = true)]
    whole_frames: bool,
    /// What the FPGA sends: scene (synthetic radar frames) or test-pattern.
    #[arg(long, global = true)]
    content: Option<Content>,
    /// Stop after this many frames (default: run until SIGINT/SIGTERM).
    #[arg(short = 'n', long, global = true)]
    frames: Option<u64>,
    /// Chunk period in microseconds (16 chunks per frame; 0 = as fast as possible, simulator only).
    #[arg(long, global = true)]
    chunk_period_us: Option<u32>,
    /// Print a frame line every N frames (0: status lines only).
    #[arg(long, global = true)]
    print_every: Option<u32>,
    /// Write the run's summary as JSON to this file at exit.
    #[arg(long, global = true)]
    stats_json: Option<PathBuf>,
    /// Refuse to run without real-time scheduling, locked memory and affinity.
    #[arg(long, global = true)]
    strict_rt: bool,
    /// Skip the real-time set-up (development).
    #[arg(long, global = true)]
    no_rt: bool,
    /// Print the effective configuration as TOML and exit.
    #[arg(long, global = true)]
    print_config: bool,
}

/// Besides running (no subcommand): recording frames and replaying them.
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Write --frames N frames from the source (options as for a run) to a
    /// raw frame file and its metadata sidecar FILE.meta.jsonl.
    Record {
        /// The frame file to write.
        #[arg(long)]
        output: PathBuf,
    },
    /// Run the loop, backend and outputs over a recorded frame file (or a
    /// `radar-dsp scene` file) instead of a live source.
    Replay {
        /// The frame file (its sidecar FILE.meta.jsonl is used when present).
        #[arg(long)]
        input: PathBuf,
        /// period: one frame per frame period; max: as fast as possible.
        #[arg(long, default_value = "period")]
        rate: ReplayRate,
    },
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

#[derive(Serialize)]
struct Summary {
    source: String,
    backend: String,
    backend_reason: String,
    /// Chunk-streamed mode in use, the chunk events handed to the backend
    /// and those it refused, and the frames it finished from streamed work.
    chunk_streaming: bool,
    chunks_streamed: u64,
    chunk_errors: u64,
    frames_streamed: u64,
    content: String,
    end: String,
    frames: u64,
    dropped_at_source: u64,
    deadline_misses: u64,
    payload_errors: u64,
    sequence_errors: u64,
    short_frames: u64,
    log_records_lost: u64,
    frame_period_ms: Option<f64>,
    latency_ms: Percentiles,
    source_counters: Option<SourceCounters>,
    /// The last GPU telemetry sample (None: off, or none taken).
    telemetry: Option<telemetry::Sample>,
}

#[derive(Serialize, Default)]
struct Percentiles {
    samples: usize,
    p50: f64,
    p99: f64,
    p99_9: f64,
    max: f64,
}

#[derive(Serialize)]
struct SourceCounters {
    frames: u64,
    chunks: u64,
    drops_no_slot: u64,
    drops_fault: u64,
    short_frames: u64,
    crc_errors: u64,
    desc_errors: u64,
    irqs: u64,
    revocations: u64,
    event_overflows: u64,
    dma_timeouts: u64,
}

fn percentiles(values: &[u64]) -> Percentiles {
    if values.is_empty() {
        return Percentiles::default();
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let at =
        |q: f64| v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)] as f64 / 1e6;
    Percentiles {
        samples: v.len(),
        p50: at(0.5),
        p99: at(0.99),
        p99_9: at(0.999),
        max: *v.last().unwrap_or(&0) as f64 / 1e6,
    }
}

fn load_config(cli: &Cli) -> Result<RadardConfig, String> {
    let mut cfg = match &cli.config {
        Some(path) => RadardConfig::load(path).map_err(|e| e.to_string())?,
        None => RadardConfig::default(),
    };
    if let Some(s) = cli.source {
        cfg.source.kind = s;
    }
    if let Some(Command::Replay { input, rate }) = &cli.command {
        if cli.source.is_some() {
            return Err(
                "radard replay: --source does not apply: the frames come from --input".into(),
            );
        }
        cfg.source.kind = SourceKind::Replay;
        cfg.source.replay_file = Some(input.clone());
        cfg.source.replay_rate = *rate;
    }
    if let Some(d) = cli.device {
        cfg.source.device = d;
    }
    if let Some(b) = &cli.backend {
        cfg.backend.kind = b.clone();
    }
    if cli.whole_frames {
        cfg.backend.stream_chunks = false;
    }
    if let Some(c) = cli.content {
        cfg.source.content = c;
    }
    if let Some(p) = cli.chunk_period_us {
        cfg.source.chunk_period_us = p;
    }
    if let Some(p) = cli.print_every {
        cfg.output.print_every = p;
    }
    if let Some(p) = &cli.stats_json {
        cfg.output.stats_json = Some(p.clone());
    }
    if cli.strict_rt {
        cfg.rt.strict = true;
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cfg = match load_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("radard: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.print_config {
        match toml::to_string_pretty(&cfg) {
            Ok(t) => {
                print!("{t}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("radard: cannot print the configuration: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(Command::Record { output }) = &cli.command {
        return record(&cli, &cfg, output);
    }
    match run(&cli, &cfg) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(3),
        Err(e) => {
            eprintln!("radard: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `radard record`: no processing, the frames into a file.
fn record(cli: &Cli, cfg: &RadardConfig, output: &std::path::Path) -> ExitCode {
    let Some(frames) = cli.frames else {
        eprintln!("radard record: --frames N is required (how many frames to record)");
        return ExitCode::from(2);
    };
    install_signal_handlers();
    let mut note = |n: &str| println!("radard: {n}");
    match radard::record::record(cfg, frames, output, &STOP, &mut note) {
        Ok(r) => {
            println!(
                "radard: recorded {} frames to {} (dropped at source {}, short {})",
                r.frames,
                output.display(),
                r.dropped_at_source,
                r.short_frames
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("radard: record: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ok(true): clean end; Ok(false): ran, but frames had errors or misses.
fn run(cli: &Cli, cfg: &RadardConfig) -> Result<bool, String> {
    install_signal_handlers();
    let (mut source, notes) = setup::open_source(cfg).map_err(|e| e.to_string())?;
    for n in notes {
        println!("radard: {n}");
    }
    // Scheduling first, so the backend's worker threads inherit it.
    let mut rt_report = rt::RtReport::default();
    if !cli.no_rt {
        rt::apply_scheduling(&cfg.rt, &mut rt_report).map_err(|e| e.to_string())?;
    }
    let mut selected = None;
    let mut slots_prepared = false;
    let mut chunk_streaming = false;
    if cfg.source.content == Content::Scene {
        println!(
            "radard: {}",
            setup::load_scene(cfg, &mut source).map_err(|e| e.to_string())?
        );
        let (sel, prepared) = setup::open_backend(cfg, &source).map_err(|e| e.to_string())?;
        println!("radard: backend {}: {}", sel.backend.name(), sel.reason);
        let (on, why) = setup::chunk_streaming(cfg, sel.backend.as_ref());
        println!("radard: chunk streaming {why}");
        slots_prepared = prepared;
        chunk_streaming = on;
        selected = Some(sel);
    }
    let (backend_name, backend_reason) = selected.as_ref().map_or(
        (
            "none".to_string(),
            "test-pattern content: frames verified, no DSP".to_string(),
        ),
        |s| (s.backend.name().to_string(), s.reason.clone()),
    );

    if cli.no_rt {
        println!("radard: real-time set-up skipped (--no-rt)");
    } else {
        rt::apply_memory_and_affinity(&cfg.rt, &mut rt_report).map_err(|e| e.to_string())?;
        for o in &rt_report.obtained {
            println!("radard: rt: {o}");
        }
        for m in &rt_report.missing {
            println!("radard: rt: NOT obtained: {m}; continuing best-effort (rt.strict refuses)");
        }
    }

    // A replay ends with its recording.
    let max_frames = match &source {
        setup::Source::Replay(r) => Some(cli.frames.map_or(r.frames(), |n| n.min(r.frames()))),
        _ => cli.frames,
    };
    let opts = LoopOptions {
        content: cfg.source.content,
        deadline: cfg.frame_period(),
        max_frames,
        warmup_frames: 4,
        print_every: cfg.output.print_every,
        slots_prepared,
        chunk_streaming,
    };
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let mut latencies =
        LatencyLog::with_capacity(cli.frames.map_or(1 << 16, |n| n.min(1 << 20) as usize));
    let live = LiveStats::default();
    let done = AtomicBool::new(false);
    let mut queue = LogQueue::new();
    let (producer, consumer) = queue.split();

    let params = setup::start_params(cfg, chunk_streaming);
    source
        .as_dyn_mut()
        .start(&params)
        .map_err(|e| e.to_string())?;
    println!(
        "radard: streaming {} from {} (frame period {}), Ctrl-C stops",
        match cfg.source.content {
            Content::Scene => "scene playback",
            Content::TestPattern => "test pattern",
        },
        source.as_dyn().name(),
        cfg.frame_period()
            .map_or("as fast as possible".to_string(), |p| format!(
                "{:.1} ms",
                p.as_secs_f64() * 1e3
            )),
    );

    let telemetry_stop = AtomicBool::new(false);
    let telemetry_reader = cfg.telemetry.enabled.then(|| {
        let (reader, line) = telemetry::open_reader(&cfg.telemetry);
        println!("radard: {line}");
        reader
    });
    if !cfg.telemetry.enabled {
        println!("radard: telemetry: off (telemetry.enabled = false)");
    }
    let result = std::thread::scope(|scope| {
        if let Some(mut reader) = telemetry_reader {
            let (cell, stop) = (&live.telemetry, &telemetry_stop);
            let interval = Duration::from_millis(u64::from(cfg.telemetry.interval_ms));
            let spawned = std::thread::Builder::new()
                .name("telemetry".into())
                .spawn_scoped(scope, move || {
                    telemetry::run(reader.as_mut(), cell, interval, stop)
                });
            if let Err(e) = spawned {
                println!("radard: telemetry: no thread ({e}); running without");
            }
        }
        let printer = scope.spawn(|| {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            run_printer(consumer, &live, &done, Duration::from_secs(1), &mut out);
        });
        let mut on_warm = || {};
        let mut ctx = LoopContext {
            log: producer,
            live: &live,
            stop: &STOP,
            latencies: &mut latencies,
            on_warm: &mut on_warm,
        };
        let backend = selected
            .as_mut()
            .map(|s| s.backend.as_mut() as &mut dyn radar_dsp::Backend);
        let r = frame_loop::run(source.as_dyn(), backend, &mut dets, &opts, &mut ctx);
        done.store(true, Ordering::Release);
        telemetry_stop.store(true, Ordering::Relaxed);
        let _ = printer.join();
        r
    });
    let counters = source.as_dyn().counters().ok();
    let _ = source.as_dyn_mut().stop();

    let end = match &result {
        Ok(LoopEnd::FrameLimit) => "frame limit reached".to_string(),
        Ok(LoopEnd::StopRequested) => "stopped by signal".to_string(),
        Err(e) => format!("error: {e}"),
    };
    let summary = Summary {
        source: source.as_dyn().name().to_string(),
        backend: backend_name,
        backend_reason,
        chunk_streaming,
        chunks_streamed: LiveStats::get(&live.chunks_streamed),
        chunk_errors: LiveStats::get(&live.chunk_errors),
        frames_streamed: selected.as_ref().map_or(0, |s| s.backend.frames_streamed()),
        content: format!("{:?}", cfg.source.content),
        end: end.clone(),
        frames: LiveStats::get(&live.frames),
        dropped_at_source: LiveStats::get(&live.dropped_at_source),
        deadline_misses: LiveStats::get(&live.deadline_misses),
        payload_errors: LiveStats::get(&live.payload_errors),
        sequence_errors: LiveStats::get(&live.sequence_errors),
        short_frames: LiveStats::get(&live.short_frames),
        log_records_lost: LiveStats::get(&live.records_lost),
        frame_period_ms: cfg.frame_period().map(|p| p.as_secs_f64() * 1e3),
        latency_ms: percentiles(latencies.values()),
        source_counters: counters.map(|c| SourceCounters {
            frames: c.frames,
            chunks: c.chunks,
            drops_no_slot: c.drops_no_slot,
            drops_fault: c.drops_fault,
            short_frames: c.short_frames,
            crc_errors: c.crc_errors,
            desc_errors: c.desc_errors,
            irqs: c.irqs,
            revocations: c.revocations,
            event_overflows: c.event_overflows,
            dma_timeouts: c.dma_timeouts,
        }),
        telemetry: live.telemetry.latest(),
    };
    print_summary(&summary);
    if let Some(path) = &cfg.output.stats_json {
        let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        println!("radard: summary written to {}", path.display());
    }
    result.map_err(|e| e.to_string())?;
    Ok(summary.payload_errors == 0 && summary.sequence_errors == 0 && summary.deadline_misses == 0)
}

fn print_summary(s: &Summary) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "summary: {} ({} frames)", s.end, s.frames);
    let _ = writeln!(
        out,
        "summary: source={} backend={} content={}",
        s.source, s.backend, s.content
    );
    let _ = writeln!(
        out,
        "summary: chunk_streaming={} chunks_streamed={} chunk_errors={} frames_streamed={}",
        s.chunk_streaming, s.chunks_streamed, s.chunk_errors, s.frames_streamed
    );
    let _ = writeln!(
        out,
        "summary: dropped_at_source={} deadline_misses={} payload_errors={} sequence_errors={} short_frames={} log_lost={}",
        s.dropped_at_source,
        s.deadline_misses,
        s.payload_errors,
        s.sequence_errors,
        s.short_frames,
        s.log_records_lost
    );
    let l = &s.latency_ms;
    let _ = writeln!(
        out,
        "summary: latency ms (event to detections, {} frames): p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}{}",
        l.samples,
        l.p50,
        l.p99,
        l.p99_9,
        l.max,
        s.frame_period_ms
            .map_or(String::new(), |p| format!("  (period {p:.1})"))
    );
    if let Some(c) = &s.source_counters {
        let _ = writeln!(
            out,
            "summary: counters frames={} chunks={} drops_no_slot={} drops_fault={} short={} crc_errors={} desc_errors={} irqs={} revocations={} event_overflows={} dma_timeouts={}",
            c.frames,
            c.chunks,
            c.drops_no_slot,
            c.drops_fault,
            c.short_frames,
            c.crc_errors,
            c.desc_errors,
            c.irqs,
            c.revocations,
            c.event_overflows,
            c.dma_timeouts
        );
    }
    if let Some(t) = &s.telemetry {
        let _ = writeln!(out, "summary: telemetry {t}");
    }
}
