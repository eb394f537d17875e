//! `radar-dsp scene`: raw frames (concatenated, no header) of a synthetic
//! scene, for `radar-dsp detect`, `radard replay` and the tests.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use radar_dsp::DspError;
use radar_dsp::scene::{Scene, SceneGenerator, Target};

use crate::files::{load_config, read_text};

#[derive(clap::Args)]
pub struct Args {
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
    /// Frame period in milliseconds: targets move by velocity x period per
    /// frame (overrides the scene file's `frame_period_s`).
    #[arg(long)]
    frame_period_ms: Option<f64>,
    /// Also write each frame's truth as JSON Lines: `{"frame", "targets": [{"range_m",
    /// "range_bin", "doppler_bin", "velocity_mps", "azimuth_deg", "sin_theta", "in_view"}]}`.
    #[arg(long)]
    truth: Option<PathBuf>,
}

/// Write the frames of the scene `a` describes.
pub fn run(a: Args) -> Result<(), DspError> {
    let cfg = load_config(a.config.as_deref())?;
    let mut scene = match &a.scene {
        Some(p) => Scene::from_toml(&read_text(p)?)?,
        None => Scene::default(),
    };
    scene.targets.extend(a.targets);
    if let Some(n) = a.noise_rms {
        scene.noise_rms_lsb = n;
    }
    if let Some(ms) = a.frame_period_ms {
        scene.frame_period_s = Some(ms / 1000.0);
    }
    let generator = SceneGenerator::new(&cfg, &scene, a.seed)?;
    let io = |e| DspError::Io {
        context: a.output.display().to_string(),
        source: e,
    };
    let mut w = BufWriter::new(File::create(&a.output).map_err(io)?);
    let stats = generator.write_frames(&mut w, a.frames)?;
    w.flush().map_err(io)?;
    if let Some(path) = &a.truth {
        write_truth(&generator, a.frames, path)?;
    }
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

/// One JSON line per frame: where each target is in it.
fn write_truth(generator: &SceneGenerator, frames: u64, path: &Path) -> Result<(), DspError> {
    let io = |e| DspError::Io {
        context: path.display().to_string(),
        source: e,
    };
    let mut w = BufWriter::new(File::create(path).map_err(io)?);
    for f in 0..frames {
        let targets: Vec<serde_json::Value> = generator
            .truth_at(f)
            .iter()
            .map(|t| {
                serde_json::json!({
                    "range_m": t.range_m,
                    "range_bin": t.range_bin,
                    "doppler_bin": t.doppler_bin,
                    "velocity_mps": t.velocity_mps,
                    "azimuth_deg": t.azimuth_deg,
                    "sin_theta": t.sin_theta,
                    "in_view": t.in_view,
                })
            })
            .collect();
        let line = serde_json::json!({ "frame": f, "targets": targets });
        writeln!(w, "{line}").map_err(io)?;
    }
    w.flush().map_err(io)
}
