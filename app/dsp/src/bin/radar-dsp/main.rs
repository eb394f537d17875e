//! `radar-dsp`: synthesise raw frames and run the processing chain offline.
//!
//! ```text
//! radar-dsp scene  --output f.raw [--scene s.toml] [--target range=20,velocity=3,azimuth=10,snr=-20]...
//!                  [--noise-rms 32] [--seed 1] [--frames 1] [--config chain.toml]
//! radar-dsp detect --input f.raw [--output d.jsonl] [--backend auto|cuda|cpu] [--config chain.toml]
//! radar-dsp bench  [--backend cuda|cpu|auto] [--config chain.toml] [--frames N] [--slots N]
//!                  [--period-us 8000 [--wake-us 300]] [--samples] [--json out.json]
//! radar-dsp tail   out.json [--threshold-us 150] [--gap 50]
//! radar-dsp profile [--config chain.toml] [--frames 3]   # for ncu --profile-from-start off
//! ```

mod bench;
mod detect;
mod files;
mod profile;
mod scene;
mod tail;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Scene(scene::Args),
    /// Run a backend over a raw frame file; detections as JSON Lines.
    Detect(detect::Args),
    /// Latency and throughput of a backend on generated frames (table, JSON).
    Bench(bench::Args),
    /// Where the slow frames of a `bench --samples` report are (stretches, p99.9 without them).
    Tail(tail::Args),
    /// A resident frame through the CUDA graph inside a profiler range (for ncu).
    Profile(profile::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Scene(a) => scene::run(a),
        Command::Detect(a) => detect::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Tail(a) => tail::run(a),
        Command::Profile(a) => profile::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("radar-dsp: {e}");
            ExitCode::FAILURE
        }
    }
}
