//! `radar-dsp bench`: latency and throughput of a backend on one geometry.
//!
//! What it measures (all on generated frames, several different ones, each
//! in its own ring slot, used in rotation so no frame is processed twice in
//! a row):
//! - end to end, from "frame complete in the slot" to "detections readable
//!   on the host" (the `process` call: graph launch on the slot, stream
//!   sync, detections copied out of mapped memory), host clock, per frame;
//!   slots in mapped pinned memory for CUDA, plain memory for the CPU;
//! - CUDA only, chunk-streamed mode (what radard runs; docs/processing-chain.md):
//!   the same, with every chunk but the last handed to `chunk_landed`
//!   before the frame completes (back to back: just before, their work
//!   finished untimed; paced: evenly over the period, as the FPGA delivers
//!   them), so the timed part is the last chunk's range work and the rest;
//! - CUDA only, through the backend's instrumented runs (the library's
//!   `instrument` feature): the same with the frames already resident in
//!   device memory, the GPU time of one graph replay (events around the
//!   launch) for both inputs, once as launched and once queued behind a
//!   gate kernel that opens after the launch is queued (device time without
//!   the host's submission of the graph), the per-stage GPU time from a
//!   separate run that launches the stages one by one with events between
//!   them, the kernels per frame (kernel nodes in the captured graph), the
//!   device-to-device copy bandwidth for the "bytes over bandwidth" floor,
//!   and what one kernel boundary costs in a graph (chains of empty
//!   kernels, with and without programmatic dependent launch).
//!
//! `RADAR_CUDA_OPTIONS` (see `CudaOptions::parse`) picks launch choices
//! other than the defaults; the report names them.
//!
//! Percentiles are radar-stats' nearest rank over the timed frames after a
//! warm-up.

mod cpu;
mod cuda;
mod frames;
mod options;
mod report;
mod timing;

use std::path::PathBuf;

use radar_dsp::{BackendKind, DspError};

use crate::files::load_config;

use options::BenchOptions;
use report::BenchReport;

#[derive(clap::Args)]
pub struct Args {
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

/// Run the benchmark `a` asks for; print the table, write the JSON.
pub fn run(a: Args) -> Result<(), DspError> {
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
    let report = measure(&opts)?;
    print!("{}", report::table(&report));
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

/// Validate `opts`, resolve `auto`, and run the backend's measurements.
pub fn measure(opts: &BenchOptions) -> Result<BenchReport, DspError> {
    opts.cfg.validate()?;
    if opts.slots == 0 {
        return Err(DspError::config("--slots", "must be at least 1"));
    }
    if let Some(w) = opts.wake_us {
        let ok = opts
            .period_us
            .is_some_and(|p| w.is_finite() && w > 0.0 && w < p)
            && !matches!(opts.backend, BackendKind::Cpu);
        if !ok {
            return Err(DspError::config(
                "--wake-us",
                "needs --period-us, the cuda backend, and a lead above 0 and below the period",
            ));
        }
    }
    if let Some(p) = opts.period_us {
        // Up to a minute per frame: beyond that a run of 10000 frames is
        // not a benchmark anyone waits for.
        if !(p.is_finite() && p > 0.0 && p <= 60e6) {
            return Err(DspError::config(
                "--period-us",
                "must be a frame period in microseconds, above 0 and at most 60000000",
            ));
        }
    }
    let kind = match opts.backend {
        BackendKind::Auto => match radar_dsp::cuda::probe() {
            Ok(_) => BackendKind::Cuda,
            Err(_) => BackendKind::Cpu,
        },
        k => k,
    };
    match kind {
        BackendKind::Cuda => cuda::run(opts),
        _ => cpu::run(opts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    use radar_dsp::ChainConfig;

    fn small_cpu(period_us: Option<f64>) -> BenchOptions {
        let mut cfg = ChainConfig::default();
        cfg.geometry.n_tx = 2;
        cfg.geometry.n_loops = 32;
        cfg.geometry.n_samples = 64;
        cfg.geometry.chunks_per_frame = 4;
        cfg.cfar.train_range = 6;
        BenchOptions {
            backend: BackendKind::Cpu,
            cfg,
            frames: Some(40),
            warmup: 5,
            slots: 3,
            period_us,
            keep_samples: true,
            ..BenchOptions::default()
        }
    }

    #[test]
    fn paced_run_keeps_the_period_and_every_sample() {
        let period_us = 3000.0;
        let t0 = Instant::now();
        let r = measure(&small_cpu(Some(period_us))).expect("bench on the CPU");
        let elapsed = t0.elapsed().as_secs_f64() * 1e6;
        let paced = r.end_to_end_paced.as_ref().expect("paced figures");
        assert_eq!(paced.frames, 40);
        assert_eq!(r.end_to_end.frames, 40);
        let samples = r.end_to_end_paced_samples_us.as_ref().expect("samples");
        assert_eq!(samples.len(), 40);
        assert_eq!(r.end_to_end_samples_us.as_ref().map(Vec::len), Some(40));
        assert!(samples.iter().all(|&t| t > 0.0 && t <= paced.max_us));
        // 45 frames one period apart: the last starts 44 periods after the first.
        assert!(
            elapsed >= 44.0 * period_us,
            "a paced run of 45 frames took {elapsed:.0} us, less than 44 periods"
        );
        assert_eq!(r.period_us, Some(period_us));
        assert!(r.end_to_end_paced_started_unix_s.unwrap_or(0.0) > 1.7e9);
        assert!(report::table(&r).contains("one frame every 3000 us (n=40)"));
    }

    #[test]
    fn back_to_back_only_without_a_period() {
        let mut o = small_cpu(None);
        o.keep_samples = false;
        let r = measure(&o).expect("bench on the CPU");
        assert!(r.end_to_end_paced.is_none() && r.end_to_end_samples_us.is_none());
        assert_eq!(r.end_to_end.frames, 40);
    }

    #[test]
    fn a_bad_period_names_the_option() {
        for p in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e12] {
            let e = measure(&small_cpu(Some(p))).expect_err("bad period accepted");
            assert!(e.to_string().contains("--period-us"), "{p}: {e}");
        }
        // Waking needs a period longer than the lead, and the GPU.
        for (period, wake) in [(None, 100.0), (Some(3000.0), 3000.0), (Some(3000.0), 100.0)] {
            let mut o = small_cpu(period);
            o.wake_us = Some(wake);
            let e = measure(&o).expect_err("bad wake accepted");
            assert!(
                e.to_string().contains("--wake-us"),
                "{period:?} {wake}: {e}"
            );
        }
    }
}
