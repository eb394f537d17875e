//! `radar-dsp`: synthesise raw frames and run the processing chain offline.
//!
//! ```text
//! radar-dsp scene  --output f.raw [--scene s.toml] [--target range=20,velocity=3,azimuth=10,snr=-20]...
//!                  [--noise-rms 32] [--seed 1] [--frames 1] [--config chain.toml]
//! radar-dsp detect --input f.raw [--output d.jsonl] [--backend auto|cuda|cpu] [--config chain.toml]
//! radar-dsp bench  [--backend cuda|cpu|auto] [--config chain.toml] [--frames N] [--slots N]
//!                  [--period-us 8000 [--wake-us 300]] [--samples] [--json out.json]
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use radar_dsp::bench::{self, BenchOptions};
use radar_dsp::framefile::FrameFile;
use radar_dsp::scene::{Scene, SceneGenerator, Target};
use radar_dsp::{
    BackendKind, ChainConfig, Detections, DspError, FrameInput, detection::DetectionsLine,
    select_backend_explained,
};

#[derive(Parser)]
#[command(
    name = "radar-dsp",
    about = "Radar processing chain (spec v1): scenes and offline detection"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a raw frame file (frames concatenated, no header) from a scene.
    Scene(SceneArgs),
    /// Run a backend over a raw frame file; detections as JSON Lines.
    Detect(DetectArgs),
    /// Latency and throughput of a backend on generated frames (table, JSON).
    Bench(BenchArgs),
}

#[derive(clap::Args)]
struct BenchArgs {
    #[arg(long, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// Chain configuration TOML (the geometry to measure).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Timed frames (default 10000 for cuda, 200 for cpu).
    #[arg(long)]
    frames: Option<usize>,
    /// Warm-up frames before timing.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Ring slots, each holding a different generated frame.
    #[arg(long, default_value_t = 8)]
    slots: usize,
    /// Instrumented stage-by-stage runs (cuda).
    #[arg(long, default_value_t = 1000)]
    stage_reps: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also time the slot end to end with one frame every PERIOD
    /// microseconds, as frames arrive in operation (8000 for the default
    /// geometry); back to back only when absent.
    #[arg(long, value_name = "PERIOD")]
    period_us: Option<f64>,
    /// Keep every frame's end-to-end time in the JSON report.
    #[arg(long)]
    samples: bool,
    /// With --period-us on cuda: time the paced runs again with an empty
    /// kernel queued LEAD microseconds before each frame is due.
    #[arg(long, value_name = "LEAD")]
    wake_us: Option<f64>,
    /// Write the full report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct SceneArgs {
    /// Raw frame file to write.
    #[arg(long, short)]
    output: PathBuf,
    /// Chain configuration TOML (geometry and physical units).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Scene TOML (`noise_rms_lsb`, `[[target]]` tables).
    #[arg(long)]
    scene: Option<PathBuf>,
    /// A target, `range=M,velocity=MPS,azimuth=DEG,snr=DB|amp=LSB[,phase=DEG]`; repeatable, added to the scene file's.
    #[arg(long = "target", short = 't')]
    targets: Vec<Target>,
    /// Complex noise RMS per sample in LSB (overrides the scene file; SNR is relative to it).
    #[arg(long)]
    noise_rms: Option<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 1)]
    frames: u64,
}

#[derive(clap::Args)]
struct DetectArgs {
    /// Raw frame file to read.
    #[arg(long, short)]
    input: PathBuf,
    /// JSON Lines output (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Chain configuration TOML.
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Scene(a) => scene(a),
        Command::Detect(a) => detect(a),
        Command::Bench(a) => bench_cmd(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("radar-dsp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_text(path: &Path) -> Result<String, DspError> {
    std::fs::read_to_string(path).map_err(|e| DspError::Io {
        context: path.display().to_string(),
        source: e,
    })
}

fn load_config(path: Option<&Path>) -> Result<ChainConfig, DspError> {
    match path {
        Some(p) => ChainConfig::from_toml(&read_text(p)?).map_err(|e| match e {
            DspError::Parse(m) => DspError::Parse(format!("{}: {m}", p.display())),
            other => other,
        }),
        None => Ok(ChainConfig::default()),
    }
}

fn scene(a: SceneArgs) -> Result<(), DspError> {
    let cfg = load_config(a.config.as_deref())?;
    let mut scene = match &a.scene {
        Some(p) => Scene::from_toml(&read_text(p)?)?,
        None => Scene::default(),
    };
    scene.targets.extend(a.targets);
    if let Some(n) = a.noise_rms {
        scene.noise_rms_lsb = n;
    }
    let generator = SceneGenerator::new(&cfg, &scene, a.seed)?;
    let io = |e| DspError::Io {
        context: a.output.display().to_string(),
        source: e,
    };
    let mut w = BufWriter::new(File::create(&a.output).map_err(io)?);
    let stats = generator.write_frames(&mut w, a.frames)?;
    w.flush().map_err(io)?;
    eprintln!(
        "radar-dsp: wrote {} frame(s) of {} bytes to {} ({} target(s), noise rms {} LSB, {} saturated components)",
        a.frames,
        generator.frame_bytes(),
        a.output.display(),
        scene.targets.len(),
        scene.noise_rms_lsb,
        stats.clipped
    );
    for (i, t) in generator.truth().iter().enumerate() {
        eprintln!(
            "  target {i}: range bin {:.3}, Doppler bin {:.3}, sin(theta) {:.4}, amplitude {:.3} LSB",
            t.range_bin, t.doppler_bin, t.sin_theta, t.amplitude_lsb
        );
    }
    Ok(())
}

fn detect(a: DetectArgs) -> Result<(), DspError> {
    let cfg = load_config(a.config.as_deref())?;
    let mut file = FrameFile::open(&a.input, cfg.geometry.frame_bytes())?;
    let selected = select_backend_explained(a.backend, &cfg)?;
    eprintln!("radar-dsp: {}", selected.reason);
    let mut backend = selected.backend;
    let out_name = a
        .output
        .as_ref()
        .map_or_else(|| "stdout".to_string(), |p| p.display().to_string());
    let io = |e| DspError::Io {
        context: out_name.clone(),
        source: e,
    };
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(BufWriter::new(File::create(p).map_err(io)?)),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let mut buf = vec![0u8; cfg.geometry.frame_bytes()];
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let mut times_us = Vec::with_capacity(file.frames() as usize);
    let mut frame = 0u64;
    let mut line = Vec::with_capacity(4096);
    while file.read_frame(&mut buf)? {
        let t0 = Instant::now();
        backend.process(
            FrameInput {
                bytes: &buf,
                slot: None,
            },
            &mut dets,
        )?;
        times_us.push(t0.elapsed().as_secs_f64() * 1e6);
        line.clear();
        DetectionsLine {
            sequence: frame,
            timestamp_ns: None,
            latency_ns: None,
            detections: &dets.list,
            cut: dets.cut,
        }
        .write_to(&mut line);
        out.write_all(&line).map_err(io)?;
        frame += 1;
    }
    out.flush().map_err(io)?;
    if !times_us.is_empty() {
        times_us.sort_by(f64::total_cmp);
        let pick = |q: f64| times_us[((times_us.len() - 1) as f64 * q).round() as usize];
        eprintln!(
            "radar-dsp: {} frame(s) on the {} backend; process() p50 {:.0} us, max {:.0} us (a timing hint, not a benchmark)",
            times_us.len(),
            backend.name(),
            pick(0.5),
            pick(1.0)
        );
    }
    Ok(())
}

fn bench_cmd(a: BenchArgs) -> Result<(), DspError> {
    let cfg = load_config(a.config.as_deref())?;
    let opts = BenchOptions {
        backend: a.backend,
        cfg,
        frames: a.frames,
        warmup: a.warmup,
        slots: a.slots,
        stage_reps: a.stage_reps,
        seed: a.seed,
        period_us: a.period_us,
        keep_samples: a.samples,
        wake_us: a.wake_us,
    };
    let report = bench::run(&opts)?;
    print!("{}", bench::table(&report));
    if let Some(p) = &a.json {
        let io = |e: std::io::Error| DspError::Io {
            context: p.display().to_string(),
            source: e,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| DspError::Io {
            context: p.display().to_string(),
            source: e.into(),
        })?;
        std::fs::write(p, text + "\n").map_err(io)?;
    }
    Ok(())
}
