//! A run of radard, wired: [`Radard::builder`] opens everything in order
//! (sinks, FPGA reset, source, real-time scheduling, scene and backend,
//! the loop's buffers, systemd reporting, diagnostics link, telemetry,
//! locked memory, the stream, CPU affinity), and [`Radard::run`] starts the
//! threads around the loop (telemetry, one per threaded sink, the status
//! printer, the diagnostics server), runs the loop on the calling thread,
//! and gathers what the summary reports ([`RunReport`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use radar_stats::Percentiles;
use tegra_p2p::Counters;

use crate::config::{RadardConfig, SourceKind};
use crate::diag;
use crate::diag::answers::{GpuReader, UnitInfo};
use crate::diag::params::Params;
use crate::error::RadardError;
use crate::fpga_reset::{self, FpgaReset};
use crate::frame_loop::{self, LoopEnd, LoopEnds, LoopError, LoopOptions, LoopResources};
use crate::report::run_printer;
use crate::rt::{self, RtReport};
use crate::service::{ServiceFigures, ServiceReporter, ThreadCpuClock, rss_kib};
use crate::setup::Source;
use crate::sinks::{REOPEN_INTERVAL, Sink, create_sinks, detections_record, run_writer};
use crate::status::{EventKind, SinkCounter, StatusSnapshot};
use crate::telemetry::{self, Reader, TelemetryCell};
use crate::threads::{self, ThreadUsage};
use crate::timekeeping::{self, Clockwork, TimeState};
use crate::unit::Unit;

/// Frames processed before resident memory counts as warmed up.
const RSS_WARM_FRAMES: u64 = 10_000;
/// Latencies kept for the summary's percentiles when no frame count is set.
const LATENCY_LOG_DEFAULT: usize = 1 << 16;
/// The most latencies kept (the summary's percentiles are of the last ones).
const LATENCY_LOG_MAX: u64 = 1 << 20;

/// How a run is started; see [`Radard::builder`].
pub struct RadardBuilder<'c> {
    cfg: &'c RadardConfig,
    real_time: bool,
    frames: Option<u64>,
    stop: &'c AtomicBool,
}

/// A run, set up and ready to start its threads.
pub struct Radard<'c> {
    cfg: &'c RadardConfig,
    stop: &'c AtomicBool,
    unit: Unit,
    opts: LoopOptions,
    sinks: Vec<Sink>,
    sink_names: Vec<String>,
    sinks_down: Vec<Option<String>>,
    resources: LoopResources,
    reporter: Option<ServiceReporter>,
    telemetry: Arc<TelemetryCell>,
    telemetry_reader: Option<Box<dyn Reader>>,
    /// The frames' time: read against the system clock by its own thread.
    clockwork: Clockwork,
    diag: Option<(serialport::TTYPort, UnitInfo)>,
    backend: (String, String),
    /// Held, released from reset, until the run is dropped.
    _fpga_reset: Option<FpgaReset>,
}

/// What a run did, for the summary.
pub struct RunReport {
    pub result: Result<LoopEnd, LoopError>,
    /// The board's last snapshot, with the sinks' counters.
    pub snapshot: StatusSnapshot,
    pub figures: ServiceFigures,
    pub source: String,
    pub source_counters: Option<Counters>,
    /// The backend's name and why it was chosen.
    pub backend: (String, String),
    pub chunk_streaming: bool,
    /// Frames the backend finished from streamed chunks.
    pub frames_streamed: u64,
    /// GPU-triggered processing ran, and how it ended: the frames its
    /// cancellation flushed at the stop (they are no frames), or why the
    /// GPU did not finish them.
    pub gpu_triggered: bool,
    pub gpu_triggered_end: Option<Result<u64, String>>,
    pub sink_names: Vec<String>,
    /// Why each sink was down at start (None: created).
    pub sinks_down_at_start: Vec<Option<String>>,
    /// Capture to detections and frame event to detections, in ns, of the
    /// last frames the latency log kept (None: no frame processed).
    pub latency_ns: Option<Percentiles<u64>>,
    pub processing_ns: Option<Percentiles<u64>>,
    pub rss_end_kib: Option<u64>,
    pub telemetry: Option<telemetry::Sample>,
    /// The frames' time as last judged, its clock's device, and the frames
    /// whose time was held after their predecessor's.
    pub time: TimeState,
    pub time_clock: Option<String>,
    pub frames_time_held: u64,
    pub threads: Vec<ThreadUsage>,
    pub steal_ms: Option<f64>,
    /// The simulator's late chunks and its largest lateness in ns (None:
    /// another source).
    pub simulator_pacing: Option<(u64, u64)>,
}

static NEVER: AtomicBool = AtomicBool::new(false);

impl<'c> Radard<'c> {
    /// A run of `cfg`: real-time set-up on, no frame limit, no stop flag.
    pub fn builder(cfg: &'c RadardConfig) -> RadardBuilder<'c> {
        RadardBuilder {
            cfg,
            real_time: true,
            frames: None,
            stop: &NEVER,
        }
    }
}

impl<'c> RadardBuilder<'c> {
    /// Whether to ask for real-time scheduling, locked memory and affinity
    /// (off: development, `--no-rt`).
    pub fn real_time(mut self, on: bool) -> Self {
        self.real_time = on;
        self
    }

    /// Stop after this many frames (a replay also ends with its recording).
    pub fn frames(mut self, frames: Option<u64>) -> Self {
        self.frames = frames;
        self
    }

    /// Stop when this flag is set (the signal handlers' flag).
    pub fn stop_flag(mut self, stop: &'c AtomicBool) -> Self {
        self.stop = stop;
        self
    }

    /// Sets everything up, in order, and starts the stream; `note` gets
    /// the start-up log's lines. Call [`Radard::run`] on the same thread:
    /// its CPU clock is the loop's, taken here.
    pub fn start(self, note: &mut dyn FnMut(&str)) -> Result<Radard<'c>, RadardError> {
        let cfg = self.cfg;
        // Sinks first. Their keys were checked with the configuration; one
        // that cannot be created now (no route, a data directory not
        // writable yet) leaves the unit running degraded, and its thread
        // tries again (docs/outputs.md).
        let simulated = cfg.source.kind == SourceKind::Sim
            || cfg.source.content == crate::config::Content::Scene;
        let sinks = create_sinks(&cfg.sinks, simulated);
        // The FPGA leaves reset before its device is opened; the line stays
        // held, released, until the run ends.
        let fpga_reset = fpga_reset::pulse(&cfg.fpga_reset)?;
        if let Some(r) = &fpga_reset {
            note(&r.description);
        }
        let mut unit = Unit::open_source(cfg, note)?;
        // Scheduling first, so the backend's worker threads inherit it.
        let mut rt_report = RtReport::default();
        if self.real_time {
            rt::apply_scheduling(&cfg.rt, &mut rt_report)?;
            if cfg.rt.priority > 0 {
                unit.put_simulator_above(cfg.rt.priority);
            }
        }
        unit.open_chain(cfg, note)?;
        let backend = unit.backend_description();
        if cfg.fpga_sink_index().is_some() {
            unit.attach_fpga_tx(detections_record::record_bytes(cfg.chain.max_detections))
                .map_err(RadardError::FpgaSinkTx)?;
        }
        let opts = unit.loop_options(cfg, unit.frame_limit(self.frames));
        let latency_frames = self
            .frames
            .map_or(LATENCY_LOG_DEFAULT, |n| n.min(LATENCY_LOG_MAX) as usize);
        let resources = LoopResources::new(cfg, latency_frames);
        let sink_names: Vec<String> = sinks.iter().map(|s| s.name().to_string()).collect();
        let sinks_down: Vec<Option<String>> = sinks
            .iter()
            .map(|s| s.down_reason().map(|e| e.to_string()))
            .collect();
        for (i, (n, down)) in sink_names.iter().zip(&sinks_down).enumerate() {
            match down {
                None => note(&format!("sink[{i}]: {n}")),
                Some(why) => {
                    resources.board.sink_set(i, SinkCounter::Down, 1);
                    resources.board.post(EventKind::SinkDown, i as u64, 0);
                    note(&format!(
                        "sink[{i}]: {n}: DOWN: {why}; running degraded without it, retrying every {} s",
                        REOPEN_INTERVAL.as_secs()
                    ));
                }
            }
        }
        // The loop runs on this thread: its CPU clock is read by the status thread.
        let cpu_clock = ThreadCpuClock::of_current_thread();
        let mut reporter = ServiceReporter::new(
            resources.board.clone(),
            cfg.health.clone(),
            cpu_clock,
            RSS_WARM_FRAMES,
        );
        if let Some(w) = reporter.watchdog() {
            note(&format!(
                "systemd watchdog every {:.1} s (pinged while frames flow and deadlines hold)",
                w.as_secs_f64()
            ));
        }
        // The diagnostics link: opened now, so that a wrong port is named at start-up.
        let mut diag = match &cfg.diag.port {
            Some(path) => {
                let port = diag::open(&cfg.diag, path)?;
                note(&format!(
                    "diagnostics on {} at {} baud (radarctl, or a terminal: type help)",
                    path.display(),
                    cfg.diag.baud
                ));
                Some((port, unit_info(cfg, &unit, &backend.0, &sink_names)))
            }
            None => None,
        };
        // Before the stream starts: opening NVML takes tens of milliseconds,
        // which the first frames would otherwise wait out (late from the start).
        let telemetry = Arc::new(TelemetryCell::default());
        let telemetry_reader = cfg.telemetry.enabled.then(|| {
            let (reader, line) = telemetry::open_reader(&cfg.telemetry);
            note(&line);
            reader
        });
        if !cfg.telemetry.enabled {
            note("telemetry: off (telemetry.enabled = false)");
        }
        // The frames' clock, read once now so that the first frame has a
        // judgement; then every time.interval_ms by its thread.
        let mut clockwork = Clockwork::new(&cfg.time, &unit.source.as_dyn().capture_clock());
        clockwork.look(&resources.board, &mut std::io::sink());
        let phc = clockwork.phc_path().map(|p| p.display().to_string());
        if let Some((_, info)) = diag.as_mut() {
            info.time_clock = phc.clone();
        }
        note(&format!(
            "time: {}",
            timekeeping::describe(&clockwork.state(), phc.as_deref())
        ));
        reporter.show_telemetry(telemetry.clone());
        if self.real_time {
            rt::apply_memory(&cfg.rt, &mut rt_report)?;
        }
        unit.start(cfg, unit.chunk_streaming)
            .map_err(RadardError::Start)?;
        if let Some(s) = unit.simulator_scheduling() {
            let why = match s {
                tegra_p2p::ProducerScheduling::Fifo(_) => {
                    " (above the loop: the FPGA it stands for takes no CPU)"
                }
                _ => "",
            };
            note(&format!("simulator: producer thread at {s}{why}"));
        }
        note(&format!(
            "streaming {} from {} (frame period {}), Ctrl-C stops",
            match cfg.source.content {
                crate::config::Content::Scene => "scene playback",
                crate::config::Content::TestPattern => "test pattern",
                crate::config::Content::Adc => "the front end's ADC frames",
            },
            unit.source.as_dyn().name(),
            cfg.frame_period()
                .map_or("as fast as possible".to_string(), |p| format!(
                    "{:.3} ms",
                    p.as_secs_f64() * 1e3
                )),
        ));
        // Pinned only now: the simulator's thread (the FPGA's stand-in) was
        // started above and keeps the other CPUs; threads started later
        // leave the loop's CPU themselves (rt::normal_thread).
        if self.real_time {
            rt::apply_affinity(&cfg.rt, &mut rt_report)?;
            for o in &rt_report.obtained {
                note(&format!("rt: {o}"));
            }
            for m in &rt_report.missing {
                note(&format!(
                    "rt: NOT obtained: {m}; continuing best-effort (rt.strict refuses)"
                ));
            }
        } else {
            note("real-time set-up skipped (--no-rt)");
        }
        Ok(Radard {
            cfg,
            stop: self.stop,
            unit,
            opts,
            sinks,
            sink_names,
            sinks_down,
            resources,
            reporter: Some(reporter),
            telemetry,
            telemetry_reader,
            clockwork,
            diag,
            backend,
            _fpga_reset: fpga_reset,
        })
    }
}

/// What the diagnostics link says of the unit besides the board.
fn unit_info(cfg: &RadardConfig, unit: &Unit, backend: &str, sink_names: &[String]) -> UnitInfo {
    UnitInfo {
        kmod: diag::kmod_version(cfg.source.kind == SourceKind::Sim),
        fpga: match cfg.source.kind {
            SourceKind::Sim => "simulator".into(),
            SourceKind::Kmod => "unknown".into(),
            SourceKind::Replay => "none (a replay)".into(),
        },
        boot_slot: diag::boot_slot(),
        source: unit.source.as_dyn().name().to_string(),
        backend: backend.to_string(),
        frame_period_ns: cfg.frame_period().map(|p| p.as_nanos() as u64),
        sink_names: sink_names.to_vec(),
        time_clock: None,
    }
}

impl Radard<'_> {
    /// Starts the threads around the loop, runs the loop on this thread
    /// until the frame limit, the stop flag or a fatal error, stops
    /// everything and reports. Once per run.
    pub fn run(&mut self) -> RunReport {
        let cfg = self.cfg;
        let status_every = Duration::from_millis(u64::from(cfg.output.status_interval_ms));
        let done = AtomicBool::new(false);
        let sinks_done = AtomicBool::new(false);
        let telemetry_stop = AtomicBool::new(false);
        let Radard {
            stop,
            unit,
            opts,
            sinks,
            sink_names,
            sinks_down,
            resources,
            reporter,
            telemetry: telemetry_cell,
            telemetry_reader,
            clockwork,
            diag: diag_link,
            backend: backend_description,
            ..
        } = self;
        let board = resources.board.clone();
        let mut reporter = reporter.take();
        let threads_start = threads::sample();
        let mut on_warm = || {};
        let LoopEnds {
            context: mut ctx,
            frame_lines: consumer,
            params: sender,
        } = resources.context(stop, &mut on_warm, cfg.diag.port.is_some());
        let feed = ctx.feed;
        let (result, figures, threads_end) = std::thread::scope(|scope| {
            if let Some(mut reader) = telemetry_reader.take() {
                let (cell, stop) = (&**telemetry_cell, &telemetry_stop);
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
            {
                let (board, stop) = (&*board, &telemetry_stop);
                let interval = Duration::from_millis(u64::from(cfg.time.interval_ms));
                let work = &mut *clockwork;
                let spawned = std::thread::Builder::new()
                    .name("clock".into())
                    .spawn_scoped(scope, move || {
                        rt::normal_thread();
                        timekeeping::run(work, board, interval, stop)
                    });
                if let Err(e) = spawned {
                    println!(
                        "radard: time: no clock thread ({e}); the frames' quality stays as judged at start"
                    );
                }
            }
            let mut writers = Vec::new();
            for (i, sink) in std::mem::take(sinks).into_iter().enumerate() {
                if let (Sink::Threaded(target), Some(feed)) = (sink, feed) {
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
            let (board_ref, done_ref, names) = (&*board, &done, &*sink_names);
            let printer = scope.spawn(move || {
                rt::normal_thread();
                threads::name_this_thread(c"status");
                let stdout = std::io::stdout();
                let mut out = stdout.lock();
                if let Some(r) = reporter.as_mut() {
                    run_printer(
                        consumer,
                        board_ref,
                        done_ref,
                        status_every,
                        names,
                        r,
                        &mut out,
                    );
                }
                reporter
            });
            let diag_thread = diag_link.take().map(|(port, unit_info)| {
                let board = board.clone();
                let diag_params = Params::new(cfg.chain_config(), cfg.output.print_every > 0);
                let cell = telemetry_cell.clone();
                let gpu: GpuReader =
                    Box::new(move || cell.latest().and_then(|t| t.gpu_telemetry()));
                scope.spawn(move || {
                    rt::normal_thread();
                    threads::name_this_thread(c"diag");
                    let mut server =
                        diag::Server::new(board, unit_info, diag_params, Some(sender), Some(gpu));
                    diag::serve(&cfg.diag, port, &mut server, done_ref);
                })
            });
            let (source, backend) = unit.parts();
            let r = frame_loop::run(source, backend, opts, &mut ctx);
            // While every thread of the run is still there.
            let threads_end = threads::sample();
            sinks_done.store(true, Ordering::Release);
            for w in writers {
                let _ = w.join();
            }
            done.store(true, Ordering::Release);
            telemetry_stop.store(true, Ordering::Relaxed);
            let figures = printer
                .join()
                .ok()
                .flatten()
                .map(|mut r| r.finish(&board.snapshot()));
            if let Some(t) = diag_thread {
                let _ = t.join();
            }
            (r, figures.unwrap_or_default(), threads_end)
        });
        let (thread_usage, steal_ms) = threads::usage(&threads_start, &threads_end);
        let source_counters = unit.source.as_dyn().counters().ok();
        let gpu_triggered = unit.gpu_triggered;
        let _ = unit.source.as_dyn_mut().stop();
        // GPU-triggered: the source is quiet now; the work queued for the
        // frames that will not come runs out (no stream is left waiting).
        let gpu_triggered_end = unit.disarm().map(|r| r.map_err(|e| e.to_string()));
        // Before anything at the end allocates.
        let rss_end_kib = rss_kib();
        let frames_time_held = resources.frames_time_held();
        let (latency_sorted, processing_sorted) = resources.latencies.sorted();
        RunReport {
            result,
            snapshot: board.snapshot(),
            figures,
            source: unit.source.as_dyn().name().to_string(),
            source_counters,
            backend: backend_description.clone(),
            chunk_streaming: unit.chunk_streaming,
            gpu_triggered,
            gpu_triggered_end,
            frames_streamed: unit
                .backend
                .as_ref()
                .map_or(0, |s| s.backend.frames_streamed()),
            sink_names: sink_names.clone(),
            sinks_down_at_start: sinks_down.clone(),
            latency_ns: Percentiles::of_sorted(latency_sorted),
            processing_ns: Percentiles::of_sorted(processing_sorted),
            rss_end_kib,
            telemetry: telemetry_cell.latest(),
            time: clockwork.state(),
            time_clock: clockwork.phc_path().map(|p| p.display().to_string()),
            frames_time_held,
            threads: thread_usage,
            steal_ms,
            simulator_pacing: match &unit.source {
                Source::Sim(sim) => {
                    let p = sim.pacing();
                    Some((p.chunks_late, p.max_lateness_ns))
                }
                _ => None,
            },
        }
    }
}
