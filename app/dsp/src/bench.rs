//! `radar-dsp bench`: latency and throughput of a backend on one geometry.
//!
//! What it measures (all on generated frames, several different ones, each
//! in its own ring slot, used in rotation so no frame is processed twice in
//! a row):
//! - end to end, from "frame complete in the slot" to "detections readable
//!   on the host" (the `process` call: graph launch on the slot, stream
//!   sync, detections copied out of mapped memory), host clock, per frame;
//!   slots in mapped pinned memory for CUDA, plain memory for the CPU;
//! - CUDA only, chunk-streamed mode (DESIGN.md section 3, what radard runs):
//!   the same, with every chunk but the last handed to `chunk_landed`
//!   before the frame completes (back to back: just before, their work
//!   finished untimed; paced: evenly over the period, as the FPGA delivers
//!   them), so the timed part is the last chunk's range work and the rest;
//! - CUDA only: the same with the frames already resident in device memory,
//!   the GPU time of one graph replay (events around the launch) for both
//!   inputs, once as launched and once queued behind a gate kernel that
//!   opens after the launch is queued (device time without the host's
//!   submission of the graph), the per-stage GPU time from a separate instrumented run that
//!   launches the stages one by one with events between them, the kernels
//!   per frame (kernel nodes in the captured graph), and the device-to-device
//!   copy bandwidth for the "bytes over bandwidth" floor, and what one
//!   kernel boundary costs in a graph (chains of empty kernels, with and
//!   without programmatic dependent launch).
//!
//! `RADAR_CUDA_OPTIONS` (for experiments; see `CudaOptions::parse`) picks
//! launch choices other than the defaults; the report names them.
//!
//! Percentiles are nearest-rank over the timed frames after a warm-up.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::backend::{Backend, FrameInput, SlotAddr, SlotFrame};
use crate::config::ChainConfig;
use crate::cpu::CpuBackend;
use crate::cuda::{CudaBackend, CudaOptions, GraphSet, MappedHostBuffer, Mapping};
use crate::detection::Detections;
use crate::error::DspError;
use crate::scene::{Scene, SceneGenerator, Target};
use crate::select::BackendKind;

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub backend: BackendKind,
    pub cfg: ChainConfig,
    /// Timed frames (after the warm-up); `None`: 10000 for CUDA, 200 for the CPU.
    pub frames: Option<usize>,
    pub warmup: usize,
    /// Ring slots, each holding a different generated frame.
    pub slots: usize,
    /// Instrumented stage-by-stage runs (CUDA).
    pub stage_reps: usize,
    pub seed: u64,
    /// Also time the slot end to end with frames paced at this period, as
    /// they arrive in operation (the default geometry's frame is 8000 us),
    /// instead of back to back only.
    pub period_us: Option<f64>,
    /// Keep every per-frame end-to-end time in the report (JSON), to see
    /// whether slow frames come alone or in stretches.
    pub keep_samples: bool,
    /// CUDA, with `period_us`: time the paced runs once more, with an empty
    /// kernel queued this many microseconds before each frame is due (does
    /// a GPU woken ahead of the frame lose the cost of idling?).
    pub wake_us: Option<f64>,
}

impl BenchOptions {
    fn period(&self) -> Option<Duration> {
        self.period_us.map(|p| Duration::from_secs_f64(p * 1e-6))
    }

    fn wake(&self) -> Option<Duration> {
        self.wake_us.map(|w| Duration::from_secs_f64(w * 1e-6))
    }
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            backend: BackendKind::Cuda,
            cfg: ChainConfig::default(),
            frames: None,
            warmup: 50,
            slots: 8,
            stage_reps: 1000,
            seed: 1,
            period_us: None,
            keep_samples: false,
            wake_us: None,
        }
    }
}

/// Summary of a set of per-frame times, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyStats {
    pub frames: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Frames per second when frames are processed back to back.
    pub throughput_fps: f64,
}

impl LatencyStats {
    /// `wall_s`: the wall time of the whole timed loop (for throughput).
    pub fn from_samples(samples_us: &[f64], wall_s: f64) -> Self {
        let mut v = samples_us.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let rank = |q: f64| -> f64 {
            if n == 0 {
                return f64::NAN;
            }
            let k = ((q * n as f64).ceil() as usize).clamp(1, n);
            v[k - 1]
        };
        LatencyStats {
            frames: n,
            mean_us: if n == 0 {
                f64::NAN
            } else {
                v.iter().sum::<f64>() / n as f64
            },
            p50_us: rank(0.50),
            p99_us: rank(0.99),
            p999_us: rank(0.999),
            max_us: v.last().copied().unwrap_or(f64::NAN),
            throughput_fps: if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 },
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct StageStats {
    pub stage: String,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// METHOD.md's "two numbers" for this geometry.
#[derive(Clone, Debug, Serialize)]
pub struct Floors {
    /// The frame, read once (the least any implementation must move).
    pub input_bytes: usize,
    /// What this chain moves through device memory per frame, counted per
    /// stage from the buffer sizes (each stage reads its inputs once and
    /// writes its outputs once).
    pub chain_bytes: usize,
    /// Floating-point operations of the FFTs (5 N log2 N per transform) and
    /// the power sum.
    pub flops: f64,
    /// Measured device-to-device copy bandwidth (bytes read + written / s).
    pub device_bandwidth_gbps: Option<f64>,
    /// chain_bytes / device bandwidth.
    pub chain_floor_us: Option<f64>,
    /// input_bytes / device bandwidth (resident frame, ideal fused chain).
    pub input_floor_us: Option<f64>,
    /// Mapped-memory read bandwidth seen by the first stage (frame bytes /
    /// median time of convert+window from the mapped slot).
    pub mapped_read_gbps: Option<f64>,
}

/// GPU time of one kernel boundary inside a graph, from replays of chains
/// of empty one-warp kernels: (time of 9 kernels - time of 1) / 8.
#[derive(Clone, Debug, Serialize)]
pub struct LaunchGap {
    pub chain_1_us: f64,
    pub chain_9_us: f64,
    pub per_boundary_us: f64,
    /// The same with programmatic dependent launch (sm_90 and later).
    pub chain_9_pdl_us: Option<f64>,
    pub per_boundary_pdl_us: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub backend: String,
    pub device: String,
    /// CUDA launch choices (`RADAR_CUDA_OPTIONS`, empty for the defaults).
    pub cuda_options: Option<String>,
    /// Whether the chain used programmatic dependent launch (CUDA).
    pub pdl: Option<bool>,
    pub launch_gap: Option<LaunchGap>,
    pub n_tx: usize,
    pub n_rx: usize,
    pub n_loops: usize,
    pub n_samples: usize,
    pub frame_bytes: usize,
    pub slots: usize,
    pub kernels_per_frame: Option<usize>,
    /// Chunk-streamed mode (CUDA): DMA chunks per frame, and the kernel
    /// launches of one frame over all its graphs.
    pub chunks_per_frame: Option<usize>,
    pub kernels_per_streamed_frame: Option<usize>,
    /// ... of which in the finishing graph, once the frame is complete.
    pub kernels_after_frame_complete: Option<usize>,
    /// Detections per frame, averaged over the slots' frames.
    pub mean_detections: f64,
    /// Slot in mapped pinned memory (CUDA) or host memory (CPU) to
    /// detections on the host.
    pub end_to_end: LatencyStats,
    /// The slot end to end again, one frame every `period_us` (`--period-us`).
    pub end_to_end_paced: Option<LatencyStats>,
    pub period_us: Option<f64>,
    /// Per-frame times of `end_to_end` and `end_to_end_paced` in the order
    /// they were taken (`--samples`).
    pub end_to_end_samples_us: Option<Vec<f64>>,
    pub end_to_end_paced_samples_us: Option<Vec<f64>>,
    /// Wall clock (seconds since the epoch) when each of those two timed
    /// loops began, to line the samples up with other logs (`--samples`).
    pub end_to_end_started_unix_s: Option<f64>,
    pub end_to_end_paced_started_unix_s: Option<f64>,
    /// Chunk-streamed mode (CUDA; DESIGN.md section 3): each chunk's range
    /// work launched as the chunk lands, so that from "frame complete" only
    /// the last chunk's and the rest of the chain remain; back to back (the
    /// chunks' work done, untimed, before each frame's time starts) and,
    /// with `period_us`, paced (chunks landing evenly over the period).
    pub end_to_end_streamed: Option<LatencyStats>,
    pub end_to_end_streamed_paced: Option<LatencyStats>,
    pub end_to_end_streamed_samples_us: Option<Vec<f64>>,
    pub end_to_end_streamed_paced_samples_us: Option<Vec<f64>>,
    /// The same with the frame resident in device memory (CUDA).
    pub end_to_end_resident: Option<LatencyStats>,
    /// ... and paced at `period_us`.
    pub end_to_end_resident_paced: Option<LatencyStats>,
    /// The two paced runs again with the GPU woken `wake_us` before each frame.
    pub wake_us: Option<f64>,
    pub end_to_end_paced_woken: Option<LatencyStats>,
    pub end_to_end_resident_paced_woken: Option<LatencyStats>,
    /// GPU time of one graph replay, frame in the mapped slot.
    pub gpu_graph_mapped: Option<LatencyStats>,
    /// GPU time of one graph replay, frame resident in device memory.
    pub gpu_graph_resident: Option<LatencyStats>,
    /// The same two with each launch queued behind a gate kernel, so that
    /// the host's submission of the graph is not timed: device time alone.
    pub gpu_graph_mapped_gated: Option<LatencyStats>,
    pub gpu_graph_resident_gated: Option<LatencyStats>,
    /// Chunk-streamed mode: GPU time of what is left once the frame is
    /// complete (the finishing graph), behind a gate.
    pub gpu_finish_mapped_gated: Option<LatencyStats>,
    pub stages_mapped: Vec<StageStats>,
    pub stages_resident: Vec<StageStats>,
    pub floors: Floors,
    pub unix_time: u64,
}

/// The frames the benchmark rotates through: a few targets at varied
/// ranges, velocities, angles and SNRs over 32 LSB noise, different per slot.
fn bench_scene(cfg: &ChainConfig, k: usize) -> Scene {
    let g = &cfg.geometry;
    let n = 4 + (k * 5) % 13;
    let targets = (0..n)
        .map(|t| {
            let u = |salt: usize| {
                // A cheap deterministic spread in [0, 1).
                let x = ((k * 7919 + t * 104_729 + salt * 1_299_709) % 10_007) as f64;
                x / 10_007.0
            };
            Target::at_bins(
                cfg,
                2.0 + u(1) * (g.n_samples as f64 - 4.0),
                1.0 + u(2) * (g.n_loops as f64 - 2.0),
                -60.0 + 120.0 * u(3),
                -25.0 + 30.0 * u(4),
            )
        })
        .collect();
    Scene {
        noise_rms_lsb: 32.0,
        targets,
    }
}

fn generate(cfg: &ChainConfig, k: usize, seed: u64, out: &mut [u8]) -> Result<(), DspError> {
    let generator = SceneGenerator::new(cfg, &bench_scene(cfg, k), seed + k as u64)?;
    generator.frame_into(k as u64, out)?;
    Ok(())
}

fn chain_floors(cfg: &ChainConfig) -> Floors {
    let g = &cfg.geometry;
    let samples = g.n_chirps() * g.n_rx * g.n_samples;
    let cells = g.n_loops * g.n_samples;
    let complex = samples * 8;
    let input = g.frame_bytes();
    let chain_bytes = input + complex // convert: read int16, write complex
        + 2 * complex // range FFT in place
        + if cfg.chain.clutter_removal { 2 * complex } else { 0 }
        + 2 * complex // Doppler FFT in place
        + complex + cells * 4 // power: read X, write P
        + cells * 4; // CFAR: read P
    let log2 = |n: usize| n.trailing_zeros() as f64;
    let flops = 5.0 * g.n_samples as f64 * log2(g.n_samples) * (g.n_chirps() * g.n_rx) as f64
        + 5.0 * g.n_loops as f64 * log2(g.n_loops) * (g.n_virtual() * g.n_samples) as f64
        + 4.0 * samples as f64;
    Floors {
        input_bytes: input,
        chain_bytes,
        flops,
        device_bandwidth_gbps: None,
        chain_floor_us: None,
        input_floor_us: None,
        mapped_read_gbps: None,
    }
}

fn stage_stats(t: &[crate::cuda::StageTiming]) -> Vec<StageStats> {
    t.iter()
        .map(|s| {
            let l = LatencyStats::from_samples(&s.samples_us, 0.0);
            StageStats {
                stage: s.name.to_string(),
                p50_us: l.p50_us,
                p99_us: l.p99_us,
                max_us: l.max_us,
            }
        })
        .collect()
}

/// The frames a timing loop rotates through (by slot index), with the
/// detection count each gave the first time (a different count later
/// means a broken backend).
#[derive(Clone, Copy)]
struct Rotation<'a> {
    expect: &'a [usize],
    warmup: usize,
    frames: usize,
}

/// Per-frame times of one timing loop.
struct Timed {
    /// Microseconds, in the order taken.
    samples: Vec<f64>,
    /// Summed busy time, seconds.
    busy_s: f64,
    /// Wall clock when the first timed frame began.
    started_unix_s: f64,
}

/// What a timing loop asks of the code under test.
#[derive(Clone, Copy)]
enum Step {
    /// Process this frame, complete in its slot; returns its detection count.
    Frame(SlotFrame),
    /// Chunk-streamed mode: this chunk of the frame has landed (untimed).
    Chunk(SlotFrame, usize),
    /// Chunk-streamed mode, back to back: let the chunks' work finish
    /// before the frame's time starts, as it would have while the rest of
    /// the frame was being captured (untimed).
    Settle,
    /// Wake the GPU (`--wake-us`): the frame is due shortly.
    Wake,
}

/// How a timing loop hands out frames.
#[derive(Clone, Copy, Default)]
struct Pacing {
    /// One frame every `period`; None: back to back.
    period: Option<Duration>,
    /// With a period: `Step::Wake` this long before each frame is due.
    wake: Option<Duration>,
    /// Chunk-streamed mode with this many chunks a frame: the chunks but
    /// the last land before the frame completes, evenly over the period
    /// when paced, just before the frame (then `Step::Settle`) otherwise.
    chunks: Option<usize>,
}

/// Sleep until shortly before `due`, then spin until it.
fn wait_until(due: Instant) {
    // Sleeping closer than this to a deadline risks waking late.
    const SPIN: Duration = Duration::from_micros(500);
    let now = Instant::now();
    if due > now + SPIN {
        std::thread::sleep(due - now - SPIN);
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Time `frame(Step::Frame(..))` on the slots in rotation: back to back,
/// or with one frame every `period` (the thread sleeps until shortly before
/// each frame's time and spins the rest, so the frame starts on time; the
/// GPU and the bus idle in between as they do in operation), with `wake`
/// calling `frame(Step::Wake)` that long before each frame is due, and in
/// chunk-streamed mode `frame(Step::Chunk(..))` as each chunk lands. Only
/// the frame step is timed: from "frame complete in the slot" to
/// "detections readable on the host".
fn time_frames(
    rot: &Rotation,
    pacing: Pacing,
    what: &str,
    mut frame: impl FnMut(Step) -> Result<usize, DspError>,
) -> Result<Timed, DspError> {
    let mut t = Timed {
        samples: Vec::with_capacity(rot.frames),
        busy_s: 0.0,
        started_unix_s: 0.0,
    };
    let start = Instant::now();
    for k in 0..rot.warmup + rot.frames {
        let s = k % rot.expect.len();
        let this = SlotFrame {
            index: s,
            capture: k as u64,
        };
        let chunks = pacing.chunks.unwrap_or(1);
        if let Some(p) = pacing.period {
            let due = start + p * u32::try_from(k).unwrap_or(u32::MAX);
            // Chunk c of C lands (C - 1 - c) chunk periods before the frame
            // completes with the last one.
            for c in 0..chunks - 1 {
                let before = p * u32::try_from(chunks - 1 - c).unwrap_or(u32::MAX)
                    / u32::try_from(chunks).unwrap_or(u32::MAX);
                wait_until(due.checked_sub(before).unwrap_or(due));
                frame(Step::Chunk(this, c))?;
            }
            if let Some(lead) = pacing.wake {
                wait_until(due.checked_sub(lead).unwrap_or(due));
                frame(Step::Wake)?;
            }
            wait_until(due);
        } else if chunks > 1 {
            for c in 0..chunks - 1 {
                frame(Step::Chunk(this, c))?;
            }
            frame(Step::Settle)?;
        }
        if k == rot.warmup {
            t.started_unix_s = unix_time_f64();
        }
        let t0 = Instant::now();
        let n = frame(Step::Frame(this))?;
        let dt = t0.elapsed().as_secs_f64();
        if n != rot.expect[s] {
            return Err(DspError::Backend(format!(
                "{what} {s}: {n} detections, {} the first time: the backend is not deterministic",
                rot.expect[s]
            )));
        }
        if k >= rot.warmup {
            t.samples.push(dt * 1e6);
            t.busy_s += dt;
        }
    }
    Ok(t)
}

/// Waits until the work started for the landed chunks is done (`Step::Settle`).
type Settle<B> = fn(&B) -> Result<(), DspError>;

/// `process` on the slots, back to back and, with `--period-us`, paced;
/// whole frames, or with `streamed` (chunks per frame, and what waits for
/// the landed chunks' work: `Step::Settle`) chunk-streamed; into the report.
fn time_slots<B: Backend>(
    opts: &BenchOptions,
    report: &mut BenchReport,
    backend: &mut B,
    slots: &[&[u8]],
    rot: &Rotation,
    dets: &mut Detections,
    streamed: Option<(usize, Settle<B>)>,
) -> Result<(), DspError> {
    let chunks = streamed.map(|(c, _)| c);
    let mut frame = |step: Step| -> Result<usize, DspError> {
        match step {
            Step::Wake => Ok(0),
            Step::Chunk(f, c) => backend.chunk_landed(f, c).map(|()| 0),
            Step::Settle => streamed
                .map_or(Ok(()), |(_, settle)| settle(backend))
                .map(|()| 0),
            Step::Frame(f) => process_slot(backend, slots, f, dets),
        }
    };
    let what = if chunks.is_some() {
        "slot (chunk-streamed)"
    } else {
        "slot"
    };
    let pacing = Pacing {
        chunks,
        ..Pacing::default()
    };
    let t = time_frames(rot, pacing, what, &mut frame)?;
    let stats = LatencyStats::from_samples(&t.samples, t.busy_s);
    let samples = opts.keep_samples.then_some((t.samples, t.started_unix_s));
    let paced = match opts.period() {
        Some(period) => {
            let pacing = Pacing {
                period: Some(period),
                ..pacing
            };
            let t = time_frames(rot, pacing, what, &mut frame)?;
            Some((
                LatencyStats::from_samples(&t.samples, t.busy_s),
                opts.keep_samples.then_some((t.samples, t.started_unix_s)),
            ))
        }
        None => None,
    };
    let (paced_stats, paced_samples) = match paced {
        Some((s, samples)) => (Some(s), samples),
        None => (None, None),
    };
    if chunks.is_some() {
        report.end_to_end_streamed = Some(stats);
        report.end_to_end_streamed_paced = paced_stats;
        report.end_to_end_streamed_samples_us = samples.map(|(v, _)| v);
        report.end_to_end_streamed_paced_samples_us = paced_samples.map(|(v, _)| v);
    } else {
        report.end_to_end = stats;
        report.end_to_end_paced = paced_stats;
        if let Some((v, at)) = samples {
            report.end_to_end_samples_us = Some(v);
            report.end_to_end_started_unix_s = Some(at);
        }
        if let Some((v, at)) = paced_samples {
            report.end_to_end_paced_samples_us = Some(v);
            report.end_to_end_paced_started_unix_s = Some(at);
        }
    }
    Ok(())
}

pub fn run(opts: &BenchOptions) -> Result<BenchReport, DspError> {
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
        BackendKind::Auto => match crate::cuda::probe() {
            Ok(_) => BackendKind::Cuda,
            Err(_) => BackendKind::Cpu,
        },
        k => k,
    };
    match kind {
        BackendKind::Cuda => run_cuda(opts),
        _ => run_cpu(opts),
    }
}

fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn unix_time_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn report_base(opts: &BenchOptions, backend: &str, device: String) -> BenchReport {
    let g = &opts.cfg.geometry;
    BenchReport {
        backend: backend.to_string(),
        device,
        cuda_options: None,
        pdl: None,
        launch_gap: None,
        n_tx: g.n_tx,
        n_rx: g.n_rx,
        n_loops: g.n_loops,
        n_samples: g.n_samples,
        frame_bytes: g.frame_bytes(),
        slots: opts.slots,
        kernels_per_frame: None,
        chunks_per_frame: None,
        kernels_per_streamed_frame: None,
        kernels_after_frame_complete: None,
        mean_detections: 0.0,
        end_to_end: LatencyStats::from_samples(&[], 0.0),
        end_to_end_paced: None,
        period_us: opts.period_us,
        end_to_end_samples_us: None,
        end_to_end_paced_samples_us: None,
        end_to_end_started_unix_s: None,
        end_to_end_paced_started_unix_s: None,
        end_to_end_streamed: None,
        end_to_end_streamed_paced: None,
        end_to_end_streamed_samples_us: None,
        end_to_end_streamed_paced_samples_us: None,
        end_to_end_resident: None,
        end_to_end_resident_paced: None,
        wake_us: opts.wake_us,
        end_to_end_paced_woken: None,
        end_to_end_resident_paced_woken: None,
        gpu_graph_mapped: None,
        gpu_graph_resident: None,
        gpu_graph_mapped_gated: None,
        gpu_graph_resident_gated: None,
        gpu_finish_mapped_gated: None,
        stages_mapped: Vec::new(),
        stages_resident: Vec::new(),
        floors: chain_floors(&opts.cfg),
        unix_time: unix_time(),
    }
}

fn run_cpu(opts: &BenchOptions) -> Result<BenchReport, DspError> {
    let cfg = &opts.cfg;
    let fb = cfg.geometry.frame_bytes();
    let mut slots = vec![vec![0u8; fb]; opts.slots];
    for (k, s) in slots.iter_mut().enumerate() {
        generate(cfg, k, opts.seed, s)?;
    }
    let mut backend = CpuBackend::new(cfg)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut report = report_base(opts, "cpu", format!("{threads} CPU threads (rustfft)"));
    let views: Vec<&[u8]> = slots.iter().map(|s| s.as_slice()).collect();
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let expect = first_counts(&mut backend, &views, &mut dets)?;
    report.mean_detections = mean(&expect);
    let frames = opts.frames.unwrap_or(200);
    let rot = Rotation {
        expect: &expect,
        warmup: opts.warmup.min(20),
        frames,
    };
    time_slots(
        opts,
        &mut report,
        &mut backend,
        &views,
        &rot,
        &mut dets,
        None,
    )?;
    Ok(report)
}

fn first_counts(
    backend: &mut dyn Backend,
    views: &[&[u8]],
    dets: &mut Detections,
) -> Result<Vec<usize>, DspError> {
    (0..views.len())
        .map(|s| {
            let f = SlotFrame {
                index: s,
                capture: s as u64,
            };
            process_slot(backend, views, f, dets)
        })
        .collect()
}

/// `process` on `frame`, complete in its slot; its detection count.
fn process_slot(
    backend: &mut dyn Backend,
    slots: &[&[u8]],
    frame: SlotFrame,
    dets: &mut Detections,
) -> Result<usize, DspError> {
    backend.process(
        FrameInput {
            bytes: slots[frame.index],
            slot: Some(frame),
        },
        dets,
    )?;
    Ok(dets.list.len())
}

fn mean(v: &[usize]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<usize>() as f64 / v.len() as f64
    }
}

fn run_cuda(opts: &BenchOptions) -> Result<BenchReport, DspError> {
    let cfg = &opts.cfg;
    let fb = cfg.geometry.frame_bytes();
    let option_text = std::env::var("RADAR_CUDA_OPTIONS").unwrap_or_default();
    let cuda_opts = CudaOptions::parse(&option_text)?;
    let mut backend = CudaBackend::with_options(cfg, &cuda_opts)?;
    let mut report = report_base(opts, "cuda", backend.device().to_string());
    report.kernels_per_frame = Some(backend.kernels_per_frame());
    report.cuda_options = Some(option_text);
    report.pdl = Some(backend.pdl());

    // The ring: one mapped pinned allocation per slot, each a different frame.
    let ctx = cuda_mem::primary_context()?;
    let mut ring = Vec::with_capacity(opts.slots);
    for k in 0..opts.slots {
        let mut buf = MappedHostBuffer::new(&ctx, fb, Mapping::default())?;
        generate(cfg, k, opts.seed, &mut buf.as_mut_slice()[..fb])?;
        ring.push(buf);
    }
    let addrs: Vec<SlotAddr> = ring
        .iter()
        .map(|b: &MappedHostBuffer| SlotAddr {
            host_ptr: b.host_ptr() as usize,
            device_ptr: Some(b.device_ptr()),
            bytes: fb,
        })
        .collect();
    backend.prepare_slots(&addrs)?;
    for b in &ring {
        backend.add_resident_frame(&b.as_slice()[..fb])?;
    }
    let views: Vec<&[u8]> = ring.iter().map(|b| &b.as_slice()[..fb]).collect();
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    let expect = first_counts(&mut backend, &views, &mut dets)?;
    report.mean_detections = mean(&expect);
    let frames = opts.frames.unwrap_or(10_000);

    let rot = Rotation {
        expect: &expect,
        warmup: opts.warmup,
        frames,
    };
    time_slots(
        opts,
        &mut report,
        &mut backend,
        &views,
        &rot,
        &mut dets,
        None,
    )?;
    if let Some(chunks) = backend.streamed_chunks() {
        report.chunks_per_frame = Some(chunks);
        if let Some((all, finish)) = backend.kernels_per_streamed_frame() {
            report.kernels_per_streamed_frame = Some(all);
            report.kernels_after_frame_complete = Some(finish);
        }
        let streamed_before = backend.frames_streamed();
        time_slots(
            opts,
            &mut report,
            &mut backend,
            &views,
            &rot,
            &mut dets,
            Some((chunks, CudaBackend::synchronize)),
        )?;
        // Every frame of those loops must have finished from its chunks'
        // work, or the figures would be whole frames under another name.
        let loops = if opts.period().is_some() { 2 } else { 1 };
        let want = (loops * (rot.warmup + rot.frames)) as u64;
        let got = backend.frames_streamed() - streamed_before;
        if got != want {
            return Err(DspError::Backend(format!(
                "chunk-streamed timing: {got} of {want} frames finished from their chunks' work"
            )));
        }
    }

    // Resident frames: launch, wait, read, host-timed.
    let mut resident = |step: Step| -> Result<usize, DspError> {
        match step {
            Step::Wake => backend.wake().map(|()| 0),
            Step::Chunk(..) | Step::Settle => Ok(0),
            Step::Frame(f) => {
                backend.launch_resident(f.index)?;
                backend.wait()?;
                backend.read_detections(&mut dets);
                Ok(dets.list.len())
            }
        }
    };
    let t = time_frames(&rot, Pacing::default(), "resident frame", &mut resident)?;
    report.end_to_end_resident = Some(LatencyStats::from_samples(&t.samples, t.busy_s));
    if let Some(period) = opts.period() {
        let paced = Pacing {
            period: Some(period),
            ..Pacing::default()
        };
        let t = time_frames(&rot, paced, "resident frame", &mut resident)?;
        report.end_to_end_resident_paced = Some(LatencyStats::from_samples(&t.samples, t.busy_s));
        if let Some(wake) = opts.wake() {
            let woken = Pacing {
                wake: Some(wake),
                ..paced
            };
            let t = time_frames(&rot, woken, "resident frame", &mut resident)?;
            report.end_to_end_resident_paced_woken =
                Some(LatencyStats::from_samples(&t.samples, t.busy_s));
        }
    }
    if let (Some(period), Some(wake)) = (opts.period(), opts.wake()) {
        let mut slot = |step: Step| -> Result<usize, DspError> {
            match step {
                Step::Wake => backend.wake().map(|()| 0),
                Step::Chunk(..) | Step::Settle => Ok(0),
                Step::Frame(f) => process_slot(&mut backend, &views, f, &mut dets),
            }
        };
        let woken = Pacing {
            period: Some(period),
            wake: Some(wake),
            chunks: None,
        };
        let t = time_frames(&rot, woken, "slot", &mut slot)?;
        report.end_to_end_paced_woken = Some(LatencyStats::from_samples(&t.samples, t.busy_s));
    }

    let gpu_reps = frames.min(5000);
    let n = ring.len();
    let gpu = |set, gated| -> Result<Option<LatencyStats>, DspError> {
        let t = backend.graph_gpu_times(set, n, gpu_reps, gated)?;
        Ok(Some(LatencyStats::from_samples(&t, 0.0)))
    };
    report.gpu_graph_mapped = gpu(GraphSet::Slots, false)?;
    report.gpu_graph_resident = gpu(GraphSet::Resident, false)?;
    report.gpu_graph_mapped_gated = gpu(GraphSet::Slots, true)?;
    report.gpu_graph_resident_gated = gpu(GraphSet::Resident, true)?;
    if report.chunks_per_frame.is_some() {
        report.gpu_finish_mapped_gated = gpu(GraphSet::Finish, true)?;
    }

    report.stages_mapped = stage_stats(&backend.stage_times(Some(0), None, opts.stage_reps)?);
    report.stages_resident = stage_stats(&backend.stage_times(None, Some(0), opts.stage_reps)?);

    let gap_reps = 2000;
    let chain_1_us = backend.empty_chain_us(1, false, gap_reps)?;
    let chain_9_us = backend.empty_chain_us(9, false, gap_reps)?;
    let chain_9_pdl_us = if backend.device().compute_capability.0 >= 9 {
        Some(backend.empty_chain_us(9, true, gap_reps)?)
    } else {
        None
    };
    report.launch_gap = Some(LaunchGap {
        chain_1_us,
        chain_9_us,
        per_boundary_us: (chain_9_us - chain_1_us) / 8.0,
        chain_9_pdl_us,
        per_boundary_pdl_us: chain_9_pdl_us.map(|t| (t - chain_1_us) / 8.0),
    });

    let bw = backend.copy_bandwidth_gbps(256 << 20, 20)?;
    let f = &mut report.floors;
    f.device_bandwidth_gbps = Some(bw);
    f.chain_floor_us = Some(f.chain_bytes as f64 / (bw * 1e3));
    f.input_floor_us = Some(f.input_bytes as f64 / (bw * 1e3));
    if let Some(conv) = report.stages_mapped.first() {
        f.mapped_read_gbps = Some(f.input_bytes as f64 / (conv.p50_us * 1e3));
    }
    Ok(report)
}

fn fmt_lat(name: &str, l: &LatencyStats) -> String {
    format!(
        "{name:<44} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.0}\n",
        l.mean_us, l.p50_us, l.p99_us, l.p999_us, l.max_us, l.throughput_fps
    )
}

/// The human-readable table.
pub fn table(r: &BenchReport) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "backend {} on {}; geometry {} TX x {} RX x {} loops x {} samples ({} bytes/frame), {} slots\n",
        r.backend, r.device, r.n_tx, r.n_rx, r.n_loops, r.n_samples, r.frame_bytes, r.slots
    ));
    if let Some(k) = r.kernels_per_frame {
        s.push_str(&format!("kernels per frame (graph kernel nodes): {k}\n"));
    }
    if let (Some(c), Some(k), Some(f)) = (
        r.chunks_per_frame,
        r.kernels_per_streamed_frame,
        r.kernels_after_frame_complete,
    ) {
        s.push_str(&format!(
            "chunk-streamed: {c} chunks per frame; {k} kernels per frame in {c} graphs, {f} of them after the frame completes\n"
        ));
    }
    if let Some(pdl) = r.pdl {
        let o = r.cuda_options.as_deref().unwrap_or("");
        s.push_str(&format!(
            "options: {}; programmatic dependent launch {}\n",
            if o.is_empty() { "defaults" } else { o },
            if pdl { "on" } else { "off" }
        ));
    }
    s.push_str(&format!(
        "detections per frame (mean over the slots' frames): {:.1}\n\n",
        r.mean_detections
    ));
    s.push_str(&format!(
        "{:<44} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
        "per frame, microseconds", "mean", "p50", "p99", "p99.9", "max", "frames/s"
    ));
    let slot_kind = if r.backend == "cuda" {
        "end to end, mapped pinned slot"
    } else {
        "end to end, host memory slot"
    };
    s.push_str(&fmt_lat(
        &format!("{slot_kind} (n={})", r.end_to_end.frames),
        &r.end_to_end,
    ));
    if let (Some(l), Some(p)) = (&r.end_to_end_paced, r.period_us) {
        s.push_str(&fmt_lat(
            &format!("... one frame every {p:.0} us (n={})", l.frames),
            l,
        ));
    }
    if let Some(l) = &r.end_to_end_streamed {
        s.push_str(&fmt_lat(&format!("... chunk-streamed (n={})", l.frames), l));
    }
    if let (Some(l), Some(p)) = (&r.end_to_end_streamed_paced, r.period_us) {
        s.push_str(&fmt_lat(
            &format!("... chunk-streamed, one every {p:.0} us (n={})", l.frames),
            l,
        ));
    }
    if let Some(l) = &r.end_to_end_resident {
        s.push_str(&fmt_lat(
            &format!("end to end, resident frame (n={})", l.frames),
            l,
        ));
    }
    if let (Some(l), Some(p)) = (&r.end_to_end_resident_paced, r.period_us) {
        s.push_str(&fmt_lat(
            &format!("... one frame every {p:.0} us (n={})", l.frames),
            l,
        ));
    }
    if let (Some(l), Some(w)) = (&r.end_to_end_paced_woken, r.wake_us) {
        s.push_str(&fmt_lat(
            &format!(
                "... slot, paced, GPU woken {w:.0} us ahead (n={})",
                l.frames
            ),
            l,
        ));
    }
    if let (Some(l), Some(w)) = (&r.end_to_end_resident_paced_woken, r.wake_us) {
        s.push_str(&fmt_lat(
            &format!(
                "... resident, paced, woken {w:.0} us ahead (n={})",
                l.frames
            ),
            l,
        ));
    }
    if let Some(l) = &r.gpu_graph_mapped {
        s.push_str(&fmt_lat(
            &format!("GPU graph, mapped slot (n={})", l.frames),
            l,
        ));
    }
    if let Some(l) = &r.gpu_graph_resident {
        s.push_str(&fmt_lat(
            &format!("GPU graph, resident frame (n={})", l.frames),
            l,
        ));
    }
    if let Some(l) = &r.gpu_graph_mapped_gated {
        s.push_str(&fmt_lat(
            &format!("GPU graph behind a gate, mapped (n={})", l.frames),
            l,
        ));
    }
    if let Some(l) = &r.gpu_graph_resident_gated {
        s.push_str(&fmt_lat(
            &format!("GPU graph behind a gate, resident (n={})", l.frames),
            l,
        ));
    }
    if let Some(l) = &r.gpu_finish_mapped_gated {
        s.push_str(&fmt_lat(
            &format!("GPU finishing graph behind a gate (n={})", l.frames),
            l,
        ));
    }
    if !r.stages_resident.is_empty() {
        s.push_str(&format!(
            "\n{:<28} {:>12} {:>12} {:>12} {:>12}\n",
            "stage (instrumented run)", "mapped p50", "mapped p99", "resident p50", "resident p99"
        ));
        for (m, d) in r.stages_mapped.iter().zip(&r.stages_resident) {
            s.push_str(&format!(
                "{:<28} {:>12.2} {:>12.2} {:>12.2} {:>12.2}\n",
                m.stage, m.p50_us, m.p99_us, d.p50_us, d.p99_us
            ));
        }
    }
    let f = &r.floors;
    s.push_str(&format!(
        "\nbytes: frame {:.2} MiB (the least that must move), this chain {:.2} MiB through device memory; {:.1} MFLOP\n",
        f.input_bytes as f64 / 1048576.0,
        f.chain_bytes as f64 / 1048576.0,
        f.flops / 1e6
    ));
    if let (Some(bw), Some(cf), Some(inf)) =
        (f.device_bandwidth_gbps, f.chain_floor_us, f.input_floor_us)
    {
        s.push_str(&format!(
            "device copy bandwidth {bw:.0} GB/s: floor {cf:.1} us for this chain, {inf:.1} us for one read of the frame\n"
        ));
    }
    if let Some(g) = &r.launch_gap {
        s.push_str(&format!(
            "kernel boundary in a graph (empty kernels): {:.2} us (chain of 1: {:.2} us, of 9: {:.2} us)",
            g.per_boundary_us, g.chain_1_us, g.chain_9_us
        ));
        if let (Some(p), Some(t)) = (g.per_boundary_pdl_us, g.chain_9_pdl_us) {
            s.push_str(&format!("; with PDL {p:.2} us (chain of 9: {t:.2} us)"));
        }
        s.push('\n');
    }
    if let Some(m) = f.mapped_read_gbps {
        s.push_str(&format!(
            "mapped slot read by convert+window: {m:.1} GB/s\n"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let r = run(&small_cpu(Some(period_us))).expect("bench on the CPU");
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
        assert!(table(&r).contains("one frame every 3000 us (n=40)"));
    }

    /// Chunk-streamed pacing: before each frame, chunks 0..C-1 of that
    /// frame (same slot and capture), in order; paced, spread over the
    /// period so the last lands one chunk period before the frame; back to
    /// back, followed by a settle step. Only frames are timed.
    #[test]
    fn streamed_pacing_hands_over_the_chunks_before_each_frame() {
        let expect = [0usize; 3];
        let rot = Rotation {
            expect: &expect,
            warmup: 2,
            frames: 6,
        };
        let period = Duration::from_millis(4);
        for paced in [false, true] {
            let pacing = Pacing {
                period: paced.then_some(period),
                wake: None,
                chunks: Some(4),
            };
            let start = Instant::now();
            let mut log: Vec<(char, usize, u64, usize, Duration)> = Vec::new();
            let t = time_frames(&rot, pacing, "test", |step| {
                let at = start.elapsed();
                match step {
                    Step::Chunk(f, c) => log.push(('c', f.index, f.capture, c, at)),
                    Step::Settle => log.push(('s', 0, 0, 0, at)),
                    Step::Frame(f) => log.push(('f', f.index, f.capture, 0, at)),
                    Step::Wake => log.push(('w', 0, 0, 0, at)),
                }
                Ok(0)
            })
            .expect("timing loop");
            assert_eq!(t.samples.len(), 6);
            let per_frame = if paced { 4 } else { 5 };
            assert_eq!(log.len(), 8 * per_frame, "paced {paced}: {log:?}");
            for (k, steps) in log.chunks(per_frame).enumerate() {
                let (slot, seq) = (k % 3, k as u64);
                for (c, step) in steps[..3].iter().enumerate() {
                    assert_eq!((step.0, step.1, step.2, step.3), ('c', slot, seq, c));
                }
                let last = steps[per_frame - 1];
                assert_eq!((last.0, last.1, last.2), ('f', slot, seq));
                if paced {
                    // Frame k is due k periods after the start; chunk c
                    // (3 - c) quarter periods before it.
                    let due = period * k as u32;
                    assert!(last.4 >= due, "frame {k} at {:?}, due {due:?}", last.4);
                    for (c, step) in steps[..3].iter().enumerate() {
                        let lands = due.saturating_sub(period * (3 - c as u32) / 4);
                        assert!(step.4 >= lands, "chunk {c} of {k} early");
                    }
                } else {
                    assert_eq!(steps[3].0, 's');
                }
            }
        }
    }

    #[test]
    fn back_to_back_only_without_a_period() {
        let mut o = small_cpu(None);
        o.keep_samples = false;
        let r = run(&o).expect("bench on the CPU");
        assert!(r.end_to_end_paced.is_none() && r.end_to_end_samples_us.is_none());
        assert_eq!(r.end_to_end.frames, 40);
    }

    #[test]
    fn a_bad_period_names_the_option() {
        for p in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e12] {
            let e = run(&small_cpu(Some(p))).expect_err("bad period accepted");
            assert!(e.to_string().contains("--period-us"), "{p}: {e}");
        }
        // Waking needs a period longer than the lead, and the GPU.
        for (period, wake) in [(None, 100.0), (Some(3000.0), 3000.0), (Some(3000.0), 100.0)] {
            let mut o = small_cpu(period);
            o.wake_us = Some(wake);
            let e = run(&o).expect_err("bad wake accepted");
            assert!(
                e.to_string().contains("--wake-us"),
                "{period:?} {wake}: {e}"
            );
        }
    }
}
