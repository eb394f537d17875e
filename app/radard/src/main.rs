//! `radard`: the radar appliance program.
//!
//! Frames arrive from the FPGA (`--source kmod`) or its simulator
//! (`--source sim`, the default); each goes through the processing chain on
//! the GPU or CPU within the frame period; a line per frame and a status line
//! per second go to stdout; a summary at exit (SIGINT/SIGTERM or `--frames`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use radar_dsp::Detections;
use radard::config::{Content, LoopPolicy, RadardConfig, ReplayRate, SinkConfig, SourceKind};
use radard::diag::{self, answers::UnitInfo, params::Params};
use radard::frame_loop::param_queue as live;
use radard::frame_loop::{self, FpgaSink, LatencyLog, LoopContext, LoopEnd, LoopOptions};
use radard::report::{FrameLineQueue, run_printer};
use radard::service::{ServiceReporter, ThreadCpuClock, rss_kib};
use radard::sinks::{DetectionFeed, Sink, create_sinks, run_writer};
use radard::status::{DropReason, PowerMapSnapshot, StatusBoard};
use radard::telemetry::{self, TelemetryCell};
use radard::threads;
use radard::{rt, setup};
use serde::Serialize;

#[derive(Parser, Debug)]
#[command(
    name = "radard",
    version,
    about = "Radar appliance: capture frames, run the processing chain every frame period, report detections",
    after_help = "Examples:\n  radard                                  simulator, synthetic scene, 8 ms frames, best backend\n  radard --frames 500 --backend cpu      500 frames on the CPU backend, then a summary\n  radard --content test-pattern          verify every byte of every frame instead of DSP\n  radard --source kmod --device 0        frames from /dev/fpga-p2p0\n  radard --print-config                  the effective configuration as TOML\n  radard record --frames 100 --output run.raw     record 100 frames (+ run.raw.meta.jsonl)\n  radard replay --input run.raw --rate max        process a recording as fast as possible\n\nDetection sinks (--sink, repeatable, or [[sink]] tables in the TOML; docs/detections-format.md):\n  --sink jsonl:/var/lib/radard/detections.jsonl   one JSON object per frame, rotated by size\n                                                  ([[sink]] kind = \"jsonl\", path, rotate_bytes, keep)\n  --sink udp:192.168.1.10:5005                   one datagram (the same JSON line) per frame\n                                                  ([[sink]] kind = \"udp\", address)\n  --sink fpga                                     a binary record per frame to the FPGA's transmit\n                                                  channel ([[sink]] kind = \"fpga\"; board/fpga/detections-record.md)\n\nsystemd: READY=1 once frames flow, STATUS= every status interval, WATCHDOG=1 while frames\narrive and deadlines hold (WatchdogSec=); after health.good_frames consecutive good frames\nthe verdict goes to health.state_file (default /run/radard/health; docs/health-verdict.md).\n\nExit status: 0 clean; 1 start-up or source failure; 2 bad configuration or arguments;\n3 the run completed but frames had payload errors, sequence breaks or deadline misses."
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
    backend: Option<radar_dsp::BackendKind>,
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
    /// Chunk period in nanoseconds (overrides --chunk-period-us; 62500 = 1 ms frames).
    #[arg(long, global = true)]
    chunk_period_ns: Option<u64>,
    /// Print a frame line every N frames (0: status lines only).
    #[arg(long, global = true)]
    print_every: Option<u32>,
    /// Detection sink, repeatable: jsonl:PATH, udp:HOST:PORT or fpga (added
    /// to the configuration's [[sink]] tables).
    #[arg(long = "sink", value_name = "KIND[:WHERE]", global = true)]
    sinks: Vec<String>,
    /// Falling behind: process-all or skip-to-newest ([loop] policy).
    #[arg(long, global = true)]
    policy: Option<LoopPolicy>,
    /// Where the health verdict goes (health.state_file).
    #[arg(long, global = true)]
    health_file: Option<PathBuf>,
    /// Write the run's summary as JSON to this file at exit.
    #[arg(long, global = true)]
    stats_json: Option<PathBuf>,
    /// Refuse to run without real-time scheduling, locked memory and affinity.
    #[arg(long, global = true)]
    strict_rt: bool,
    /// Skip the real-time set-up (development).
    #[arg(long, global = true)]
    no_rt: bool,
    /// Serial device of the diagnostics link ([diag] port).
    #[arg(long, global = true)]
    diag_port: Option<PathBuf>,
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
    /// Decode a detections record as the `fpga` sink sends it
    /// (board/fpga/detections-record.md) and print it as a detections line
    /// (docs/detections-format.md; latency_ns null).
    DecodeRecord {
        /// The record's bytes (e.g. a copy of what the FPGA received).
        #[arg(long)]
        input: PathBuf,
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
    policy: String,
    /// Frames processed.
    frames: u64,
    /// The ledger: produced = processed + dropped by reason.
    frames_produced: u64,
    dropped: Dropped,
    ledger_closed: bool,
    dropped_at_source: u64,
    deadline_misses: u64,
    source_timeouts: u64,
    payload_errors: u64,
    sequence_errors: u64,
    short_frames: u64,
    log_records_lost: u64,
    frame_period_ms: Option<f64>,
    /// Capture timestamp to detections published.
    latency_ms: Percentiles,
    /// Frame event to detections published.
    processing_ms: Percentiles,
    /// Loop thread CPU time per frame (us) over the run.
    loop_cpu_us_per_frame: Option<f64>,
    rss_warm_kib: Option<u64>,
    rss_end_kib: Option<u64>,
    health: String,
    watchdog_pings: u64,
    sinks: Vec<SinkSummary>,
    source_counters: Option<SourceCounters>,
    /// The last GPU telemetry sample (None: off, or none taken).
    telemetry: Option<telemetry::Sample>,
    /// Each thread's CPU time, wait for a CPU and preemptions over the run.
    threads: Vec<threads::ThreadUsage>,
    /// CPU time the hypervisor took from this machine during the run (ms,
    /// all CPUs; None where /proc/stat has no steal column).
    steal_ms: Option<f64>,
    /// The simulator's chunk cadence (None: another source).
    simulator_pacing: Option<SimulatorPacing>,
}

#[derive(Serialize)]
struct SimulatorPacing {
    /// Chunks the simulator wrote more than one chunk period late.
    chunks_late: u64,
    max_lateness_ms: f64,
}

#[derive(Serialize)]
struct Dropped {
    at_source: u64,
    late: u64,
    short: u64,
    crc: u64,
    error: u64,
}

#[derive(Serialize)]
struct SinkSummary {
    name: String,
    sent: u64,
    queue_full: u64,
    errors: u64,
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

/// Percentiles of values sorted ascending, in ms.
fn percentiles(sorted: &[u64]) -> Percentiles {
    let Some(&max) = sorted.last() else {
        return Percentiles::default();
    };
    let at = |q: f64| {
        sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)] as f64
            / 1e6
    };
    Percentiles {
        samples: sorted.len(),
        p50: at(0.5),
        p99: at(0.99),
        p99_9: at(0.999),
        max: max as f64 / 1e6,
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
    if let Some(b) = cli.backend {
        cfg.backend.kind = b;
    }
    if cli.whole_frames {
        cfg.backend.stream_chunks = false;
    }
    if let Some(c) = cli.content {
        cfg.source.content = c;
    }
    if let Some(p) = cli.chunk_period_us {
        cfg.source.chunk_period_us = p;
        cfg.source.chunk_period_ns = None;
    }
    if let Some(p) = cli.chunk_period_ns {
        cfg.source.chunk_period_ns = Some(p);
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
    if let Some(p) = &cli.diag_port {
        cfg.diag.port = Some(p.clone());
    }
    for a in &cli.sinks {
        cfg.sinks
            .push(SinkConfig::from_arg(a).map_err(|e| e.to_string())?);
    }
    if let Some(p) = cli.policy {
        cfg.frame_loop.policy = p;
    }
    if let Some(p) = &cli.health_file {
        cfg.health.state_file = p.clone();
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::DecodeRecord { input }) = &cli.command {
        return decode_record(input);
    }
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
        Ok(RunEnd::Clean) => ExitCode::SUCCESS,
        Ok(RunEnd::WithErrors) => ExitCode::from(3),
        Ok(RunEnd::BadConfig(e)) => {
            eprintln!("radard: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("radard: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `radard decode-record`: one FPGA detections record as a detections line.
fn decode_record(input: &std::path::Path) -> ExitCode {
    let bytes = match std::fs::read(input) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("radard decode-record: {}: {e}", input.display());
            return ExitCode::FAILURE;
        }
    };
    match radard::sinks::detections_record::decode(&bytes) {
        Ok(r) => {
            let mut line = Vec::new();
            radar_dsp::detection::DetectionsLine {
                sequence: r.sequence,
                timestamp_ns: Some(r.timestamp_ns),
                latency_ns: None,
                detections: &r.detections,
                cut: r.cut,
            }
            .write_to(&mut line);
            let mut out = std::io::stdout().lock();
            if out.write_all(&line).and_then(|()| out.flush()).is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "radard decode-record: {}: not a detections record: {e}",
                input.display()
            );
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
    match radard::recorder::record_frames(cfg, frames, output, &STOP, &mut note) {
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

/// How a run ended (errors of start-up or the source are `Err`).
enum RunEnd {
    Clean,
    /// Ran, but frames had errors or misses.
    WithErrors,
    /// A sink could not be created.
    BadConfig(String),
}

fn run(cli: &Cli, cfg: &RadardConfig) -> Result<RunEnd, String> {
    install_signal_handlers();
    // Sinks first: one that cannot be created is a configuration error.
    let sinks = match create_sinks(&cfg.sinks) {
        Ok(s) => s,
        Err(e) => return Ok(RunEnd::BadConfig(e.to_string())),
    };
    // The FPGA leaves reset before its device is opened; the line stays
    // held, released, until radard exits.
    let fpga_reset = radard::fpga_reset::pulse(&cfg.fpga_reset).map_err(|e| e.to_string())?;
    if let Some(r) = &fpga_reset {
        println!("radard: {}", r.description);
    }
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

    // A replay ends with its recording.
    let max_frames = match &source {
        setup::Source::Replay(r) => Some(cli.frames.map_or(r.frames(), |n| n.min(r.frames()))),
        _ => cli.frames,
    };
    let fpga_index = cfg.fpga_sink_index();
    if fpga_index.is_some() {
        setup::attach_fpga_tx(
            &mut source,
            radard::sinks::detections_record::record_bytes(cfg.chain.max_detections),
        )
        .map_err(|e| format!("sink fpga: {e}"))?;
    }
    let opts = LoopOptions {
        period: cfg.frame_period(),
        max_frames,
        warmup_frames: 4,
        print_every: cfg.output.print_every,
        slots_prepared,
        chunk_streaming,
        policy: cfg.frame_loop.policy,
        power_map_every: cfg.frame_loop.power_map_every,
        backend_error_every: cfg.simulator.backend_error_every,
        ..LoopOptions::new(cfg.source.content)
    };
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let mut latencies =
        LatencyLog::with_capacity(cli.frames.map_or(1 << 16, |n| n.min(1 << 20) as usize));
    let board = Arc::new(StatusBoard::new());
    board.set_sink_count(sinks.len());
    let sink_names: Vec<String> = sinks.iter().map(|s| s.name().to_string()).collect();
    for (i, n) in sink_names.iter().enumerate() {
        println!("radard: sink[{i}]: {n}");
    }
    let feed = sinks
        .iter()
        .any(|s| matches!(s, Sink::Threaded { .. }))
        .then(|| DetectionFeed::new(cfg.chain.max_detections));
    let mut fpga = fpga_index.map(|i| FpgaSink::new(i, cfg.chain.max_detections));
    let g = &cfg.geometry;
    let mut power_raw: Vec<f32> = Vec::with_capacity(g.n_loops * g.n_samples);
    let mut power_map = Box::new(PowerMapSnapshot::default());
    let done = AtomicBool::new(false);
    let sinks_done = AtomicBool::new(false);
    let mut queue = FrameLineQueue::new();
    let (producer, consumer) = queue.split();
    // The loop runs on this thread: its CPU clock is read by the status thread.
    let cpu_clock = ThreadCpuClock::of_current_thread();
    let telemetry_cell = Arc::new(TelemetryCell::default());
    let mut supervisor = ServiceReporter::new(board.clone(), cfg.health.clone(), cpu_clock, 10_000);
    if let Some(w) = supervisor.watchdog() {
        println!(
            "radard: systemd watchdog every {:.1} s (pinged while frames flow and deadlines hold)",
            w.as_secs_f64()
        );
    }

    // The diagnostics link: opened now, so that a wrong port is named at start-up.
    let diag_port = match &cfg.diag.port {
        Some(path) => {
            let port = diag::open(&cfg.diag, path).map_err(|e| e.to_string())?;
            println!(
                "radard: diagnostics on {} at {} baud (radarctl, or a terminal: type help)",
                path.display(),
                cfg.diag.baud
            );
            Some(port)
        }
        None => None,
    };
    let unit_info = UnitInfo {
        kmod: diag::kmod_version(cfg.source.kind == SourceKind::Sim),
        fpga: match cfg.source.kind {
            SourceKind::Sim => "simulator".into(),
            SourceKind::Kmod => "unknown".into(),
            SourceKind::Replay => "none (a replay)".into(),
        },
        boot_slot: diag::boot_slot(),
        source: source.as_dyn().name().to_string(),
        backend: backend_name.clone(),
        frame_period_ns: cfg.frame_period().map(|p| p.as_nanos() as u64),
        sink_names: sink_names.clone(),
    };
    let mut change_queue = live::ChangeQueue::new();
    let mut reply_queue = live::ReplyQueue::new();
    let (param_link, server_link) = live::split(&mut change_queue, &mut reply_queue);

    // Before the stream starts: opening NVML takes tens of milliseconds,
    // which the first frames would otherwise wait out (late from the start).
    let telemetry_stop = AtomicBool::new(false);
    let telemetry_reader = cfg.telemetry.enabled.then(|| {
        let (reader, line) = telemetry::open_reader(&cfg.telemetry);
        println!("radard: {line}");
        reader
    });
    if !cfg.telemetry.enabled {
        println!("radard: telemetry: off (telemetry.enabled = false)");
    }
    supervisor.show_telemetry(telemetry_cell.clone());

    if !cli.no_rt {
        rt::apply_memory(&cfg.rt, &mut rt_report).map_err(|e| e.to_string())?;
    }
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
                "{:.3} ms",
                p.as_secs_f64() * 1e3
            )),
    );

    // Pinned only now: the simulator's thread (the FPGA's stand-in) was
    // started above and keeps the other CPUs; threads started below leave the
    // loop's CPU themselves (rt::normal_thread).
    if cli.no_rt {
        println!("radard: real-time set-up skipped (--no-rt)");
    } else {
        rt::apply_affinity(&cfg.rt, &mut rt_report).map_err(|e| e.to_string())?;
        for o in &rt_report.obtained {
            println!("radard: rt: {o}");
        }
        for m in &rt_report.missing {
            println!("radard: rt: NOT obtained: {m}; continuing best-effort (rt.strict refuses)");
        }
    }

    let status_every = Duration::from_millis(u64::from(cfg.output.status_interval_ms));
    let threads_start = threads::sample();
    let (result, figures, threads_end) = std::thread::scope(|scope| {
        if let Some(mut reader) = telemetry_reader {
            let (cell, stop) = (&telemetry_cell, &telemetry_stop);
            let interval = Duration::from_millis(u64::from(cfg.telemetry.interval_ms));
            let spawned = std::thread::Builder::new()
                .name("telemetry".into())
                .spawn_scoped(scope, move || {
                    rt::normal_thread();
                    telemetry::run(reader.as_mut(), cell, interval, stop)
                });
            if let Err(e) = spawned {
                println!("radard: telemetry: no thread ({e}); running without");
            }
        }
        let mut writers = Vec::new();
        for (i, sink) in sinks.into_iter().enumerate() {
            if let (Sink::Threaded { target, .. }, Some(feed)) = (sink, feed.as_ref()) {
                let (board, sinks_done) = (&*board, &sinks_done);
                let spawned = std::thread::Builder::new()
                    .name(format!("sink{i}"))
                    .spawn_scoped(scope, move || {
                        rt::normal_thread();
                        run_writer(i, target, feed, board, sinks_done, 0)
                    });
                match spawned {
                    Ok(h) => writers.push(h),
                    Err(e) => eprintln!("radard: sink[{i}]: cannot start its thread: {e}"),
                }
            }
        }
        let printer = scope.spawn(|| {
            rt::normal_thread();
            threads::name_this_thread(c"status");
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            run_printer(
                consumer,
                &board,
                &done,
                status_every,
                &sink_names,
                &mut supervisor,
                &mut out,
            );
            supervisor
        });
        let diag_thread = diag_port.map(|port| {
            let board = board.clone();
            let params = Params::new(cfg.chain_config(), cfg.output.print_every > 0);
            let done = &done;
            let cell = telemetry_cell.clone();
            let gpu: diag::answers::GpuReader =
                Box::new(move || cell.latest().and_then(|t| t.gpu_telemetry()));
            scope.spawn(move || {
                rt::normal_thread();
                threads::name_this_thread(c"diag");
                let mut server =
                    diag::Server::new(board, unit_info, params, Some(server_link), Some(gpu));
                diag::serve(&cfg.diag, port, &mut server, done);
            })
        });
        let mut on_warm = || {};
        let mut ctx = LoopContext {
            frame_lines: producer,
            board: &board,
            stop: &STOP,
            latencies: &mut latencies,
            feed: feed.as_ref(),
            fpga: fpga.as_mut(),
            power_raw: &mut power_raw,
            power_map: &mut power_map,
            range_bin_m: cfg.physical.range_bin_m(g),
            velocity_bin_mps: cfg.physical.velocity_bin_mps(g),
            n_loops: g.n_loops,
            n_samples: g.n_samples,
            on_warm: &mut on_warm,
            params: cfg.diag.port.is_some().then_some(param_link),
        };
        let backend = selected
            .as_mut()
            .map(|s| s.backend.as_mut() as &mut dyn radar_dsp::Backend);
        let r = frame_loop::run(source.as_dyn(), backend, &mut dets, &opts, &mut ctx);
        // While every thread of the run is still there.
        let threads_end = threads::sample();
        sinks_done.store(true, Ordering::Release);
        for w in writers {
            let _ = w.join();
        }
        done.store(true, Ordering::Release);
        telemetry_stop.store(true, Ordering::Relaxed);
        let figures = printer.join().ok().map(|mut s| s.finish(&board.snapshot()));
        if let Some(t) = diag_thread {
            let _ = t.join();
        }
        (r, figures.unwrap_or_default(), threads_end)
    });
    let (thread_usage, steal_ms) = threads::usage(&threads_start, &threads_end);
    let counters = source.as_dyn().counters().ok();
    let _ = source.as_dyn_mut().stop();

    let end = match &result {
        Ok(LoopEnd::FrameLimit) => "frame limit reached".to_string(),
        Ok(LoopEnd::StopRequested) => "stopped by signal".to_string(),
        Err(e) => format!("error: {e}"),
    };
    // Before anything at the end allocates.
    let rss_end_kib = rss_kib();
    let (latency_sorted, processing_sorted) = latencies.sorted();
    let snap = board.snapshot();
    let summary = Summary {
        source: source.as_dyn().name().to_string(),
        backend: backend_name,
        backend_reason,
        chunk_streaming,
        chunks_streamed: snap.chunks_streamed,
        chunk_errors: snap.chunk_errors,
        frames_streamed: selected.as_ref().map_or(0, |s| s.backend.frames_streamed()),
        content: format!("{:?}", cfg.source.content),
        end: end.clone(),
        policy: format!("{:?}", cfg.frame_loop.policy),
        frames: snap.frames_processed,
        frames_produced: snap.frames_produced,
        dropped: Dropped {
            at_source: snap.dropped(DropReason::AtSource),
            late: snap.dropped(DropReason::Late),
            short: snap.dropped(DropReason::Short),
            crc: snap.dropped(DropReason::Crc),
            error: snap.dropped(DropReason::Error),
        },
        ledger_closed: snap.ledger_closes(),
        dropped_at_source: snap.dropped(DropReason::AtSource),
        deadline_misses: snap.deadline_misses,
        source_timeouts: snap.source_timeouts,
        payload_errors: if cfg.source.content == Content::TestPattern {
            snap.dropped(DropReason::Crc)
        } else {
            0
        },
        sequence_errors: snap.sequence_errors,
        short_frames: snap.dropped(DropReason::Short),
        log_records_lost: snap.frame_lines_lost,
        frame_period_ms: cfg.frame_period().map(|p| p.as_secs_f64() * 1e3),
        latency_ms: percentiles(latency_sorted),
        processing_ms: percentiles(processing_sorted),
        loop_cpu_us_per_frame: (figures.loop_cpu_frames > 0)
            .then(|| figures.loop_cpu_total_ns as f64 / 1e3 / figures.loop_cpu_frames as f64),
        rss_warm_kib: figures.rss_warm_kib,
        rss_end_kib,
        health: snap.health().name().to_string(),
        watchdog_pings: figures.watchdog_pings,
        sinks: sink_names
            .iter()
            .zip(&snap.sinks)
            .map(|(n, c)| SinkSummary {
                name: n.clone(),
                sent: c.sent,
                queue_full: c.queue_full,
                errors: c.errors,
            })
            .collect(),
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
        telemetry: telemetry_cell.latest(),
        threads: thread_usage,
        steal_ms,
        simulator_pacing: match &source {
            setup::Source::Sim(sim) => {
                let p = sim.pacing();
                Some(SimulatorPacing {
                    chunks_late: p.chunks_late,
                    max_lateness_ms: p.max_lateness_ns as f64 / 1e6,
                })
            }
            _ => None,
        },
    };
    print_summary(&summary);
    if let Some(path) = &cfg.output.stats_json {
        let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        println!("radard: summary written to {}", path.display());
    }
    result.map_err(|e| e.to_string())?;
    let clean =
        summary.payload_errors == 0 && summary.sequence_errors == 0 && summary.deadline_misses == 0;
    Ok(if clean {
        RunEnd::Clean
    } else {
        RunEnd::WithErrors
    })
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
    let d = &s.dropped;
    let _ = writeln!(
        out,
        "summary: ledger produced={} = processed {} + dropped {} (at_source={} late={} short={} crc={} error={}): {}",
        s.frames_produced,
        s.frames,
        d.at_source + d.late + d.short + d.crc + d.error,
        d.at_source,
        d.late,
        d.short,
        d.crc,
        d.error,
        if s.ledger_closed { "closed" } else { "OPEN" }
    );
    let _ = writeln!(
        out,
        "summary: policy={} deadline_misses={} source_timeouts={} payload_errors={} sequence_errors={} log_lost={}",
        s.policy,
        s.deadline_misses,
        s.source_timeouts,
        s.payload_errors,
        s.sequence_errors,
        s.log_records_lost
    );
    for (what, l) in [
        ("capture to detections", &s.latency_ms),
        ("event to detections", &s.processing_ms),
    ] {
        let _ = writeln!(
            out,
            "summary: latency ms ({what}, {} frames): p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}{}",
            l.samples,
            l.p50,
            l.p99,
            l.p99_9,
            l.max,
            s.frame_period_ms
                .map_or(String::new(), |p| format!("  (period {p:.3})"))
        );
    }
    let kib = |v: Option<u64>| v.map_or("-".to_string(), |k| format!("{k} KiB"));
    let _ = writeln!(
        out,
        "summary: loop_cpu={} rss_warm={} rss_end={} health={} watchdog_pings={}",
        s.loop_cpu_us_per_frame
            .map_or("-".to_string(), |c| format!("{c:.1} us/frame")),
        kib(s.rss_warm_kib),
        kib(s.rss_end_kib),
        s.health,
        s.watchdog_pings
    );
    for (i, k) in s.sinks.iter().enumerate() {
        let _ = writeln!(
            out,
            "summary: sink[{i}] {} sent={} queue_full={} errors={}",
            k.name, k.sent, k.queue_full, k.errors
        );
    }
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
    for t in &s.threads {
        let _ = writeln!(
            out,
            "summary: thread {} cpu={:.1}ms waited_for_cpu={:.1}ms preempted={} sleeps={}",
            t.name, t.cpu_ms, t.runq_wait_ms, t.involuntary, t.voluntary
        );
    }
    if let Some(p) = &s.simulator_pacing {
        let _ = writeln!(
            out,
            "summary: simulator chunks_late={} max_lateness={:.3}ms (chunks it wrote more than a chunk period after they were due: frames late from the source)",
            p.chunks_late, p.max_lateness_ms
        );
    }
    if let Some(steal) = s.steal_ms {
        let _ = writeln!(
            out,
            "summary: steal={steal:.1}ms (CPU time the hypervisor took)"
        );
    }
}
