//! `radar-dsp bench` on the CUDA backend, through its instrumented runs.

use radar_dsp::cuda::{
    CudaBackend, CudaOptions, GraphSet, KERNELS_CU_ENV, MappedHostBuffer, Mapping,
};
use radar_dsp::{Backend, BackendKind, Detections, DspError, SlotAddr};
use radar_stats::LatencyStats;

use super::frames::generate;
use super::options::BenchOptions;
use super::report::{BenchReport, LaunchGap, report_base, stage_stats};
use super::timing::{
    Pacing, Rotation, Step, first_counts, mean, process_slot, time_frames, time_slots,
};

/// Time the CUDA backend: mapped slots, chunk-streamed, resident frames,
/// GPU times of graphs and stages, launch gaps and copy bandwidth.
pub fn run(opts: &BenchOptions) -> Result<BenchReport, DspError> {
    let cfg = &opts.cfg;
    let fb = cfg.geometry.frame_bytes();
    let option_text = std::env::var("RADAR_CUDA_OPTIONS").unwrap_or_default();
    let cuda_opts = CudaOptions::parse(&option_text)?;
    let mut backend = CudaBackend::with_options(cfg, &cuda_opts)?;
    let mut report = report_base(opts, BackendKind::Cuda, backend.device().to_string());
    report.kernels_per_frame = Some(backend.kernels_per_frame()?);
    report.cuda_options = Some(option_text);
    report.pdl = Some(backend.pdl());
    report.kernels_cu = std::env::var_os(KERNELS_CU_ENV).map(|p| p.to_string_lossy().into_owned());

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
        if let Some((all, finish)) = backend.kernels_per_streamed_frame()? {
            report.kernels_per_streamed_frame = Some(all);
            report.kernels_after_frame_complete = Some(finish);
        }
        time_slots(
            opts,
            &mut report,
            &mut backend,
            &views,
            &rot,
            &mut dets,
            Some((chunks, CudaBackend::synchronize)),
        )?;
    }

    // Resident frames: launch, wait, read, host-timed.
    let mut resident = |step: Step| -> Result<usize, DspError> {
        match step {
            Step::Wake => backend.wake().map(|()| 0),
            Step::Chunk(..) | Step::Settle => Ok(0),
            Step::Frame(f) => {
                backend.launch_resident(f.index)?;
                backend.wait()?;
                backend.read_detections(&mut dets)?;
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
