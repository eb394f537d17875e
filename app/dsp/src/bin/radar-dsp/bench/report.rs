//! The report of a `radar-dsp bench` run: every figure in its JSON, the
//! main ones in its table.

use radar_dsp::cuda::{KERNELS_CU_ENV, StageTiming};
use radar_dsp::spectra::PACKED_BYTES;
use radar_dsp::{BackendKind, ChainConfig};
use radar_stats::LatencyStats;
use serde::Serialize;

use super::options::BenchOptions;

#[derive(Clone, Debug, Serialize)]
pub struct StageStats {
    pub stage: String,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// The two numbers that bound this geometry's chain from below, each over
/// the device's bandwidth: the bytes that must move (the frame, once) and
/// the least the CUDA chain moves.
#[derive(Clone, Debug, Serialize)]
pub struct Floors {
    /// The frame, read once (the least any implementation must move).
    pub input_bytes: usize,
    /// What the CUDA backend's fused chain moves through device memory per
    /// frame at the least, from the buffer sizes: the frame read, the
    /// packed range spectra written and read, the power map written and
    /// read (docs/processing-chain.md, section 9).
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
    /// The backend measured (`cpu` or `cuda`).
    pub backend: BackendKind,
    pub device: String,
    /// CUDA launch choices (`RADAR_CUDA_OPTIONS`, empty for the defaults).
    pub cuda_options: Option<String>,
    /// Whether the chain used programmatic dependent launch (CUDA).
    pub pdl: Option<bool>,
    /// The kernels.cu compiled instead of the built-in one
    /// (`RADAR_KERNELS_CU`; None for the built-in source).
    pub kernels_cu: Option<String>,
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
    /// Chunk-streamed mode (CUDA; docs/processing-chain.md): each chunk's range
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

pub fn chain_floors(cfg: &ChainConfig) -> Floors {
    let g = &cfg.geometry;
    let samples = g.n_chirps() * g.n_rx * g.n_samples;
    let cells = g.n_loops * g.n_samples;
    let input = g.frame_bytes();
    let spectra = samples * PACKED_BYTES;
    let chain_bytes = input + 2 * spectra + 2 * cells * 4;
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

pub fn stage_stats(t: &[StageTiming]) -> Vec<StageStats> {
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

pub fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn unix_time_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub fn report_base(opts: &BenchOptions, backend: BackendKind, device: String) -> BenchReport {
    let g = &opts.cfg.geometry;
    BenchReport {
        backend,
        device,
        cuda_options: None,
        pdl: None,
        kernels_cu: None,
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
        if let Some(path) = &r.kernels_cu {
            s.push_str(&format!(
                "kernels: {path} ({KERNELS_CU_ENV}), not the built-in kernels.cu\n"
            ));
        }
    }
    s.push_str(&format!(
        "detections per frame (mean over the slots' frames): {:.1}\n\n",
        r.mean_detections
    ));
    s.push_str(&format!(
        "{:<44} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
        "per frame, microseconds", "mean", "p50", "p99", "p99.9", "max", "frames/s"
    ));
    let slot_kind = if r.backend == BackendKind::Cuda {
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
        "\nbytes: frame {:.2} MiB (the least that must move), the CUDA chain's floor {:.2} MiB through device memory; {:.1} MFLOP\n",
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
