//! `radar-dsp detect`: a backend over a raw frame file, detections as JSON
//! Lines (docs/detections-format.md).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use radar_dsp::detection::DetectionsLine;
use radar_dsp::framefile::FrameFile;
use radar_dsp::{BackendKind, Detections, DspError, FrameInput, select_backend_explained};

use crate::files::load_config;

#[derive(clap::Args)]
pub struct Args {
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

/// Process every frame of `a.input`; detections as JSON Lines.
pub fn run(a: Args) -> Result<(), DspError> {
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
            utc: None,
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
        let pick = |q: f64| radar_stats::percentile(&times_us, q).unwrap_or(f64::NAN);
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
