//! `radar-dsp bench` on the CPU reference backend.

use radar_dsp::{BackendKind, CpuBackend, Detections, DspError};

use super::frames::generate;
use super::options::BenchOptions;
use super::report::{BenchReport, report_base};
use super::timing::{Rotation, first_counts, mean, time_slots};

/// Time the CPU backend on `opts.slots` host-memory slots.
pub fn run(opts: &BenchOptions) -> Result<BenchReport, DspError> {
    let cfg = &opts.cfg;
    let fb = cfg.geometry.frame_bytes();
    let mut slots = vec![vec![0u8; fb]; opts.slots];
    for (k, s) in slots.iter_mut().enumerate() {
        generate(cfg, k, opts.seed, s)?;
    }
    let mut backend = CpuBackend::new(cfg)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut report = report_base(
        opts,
        BackendKind::Cpu,
        format!("{threads} CPU threads (rustfft)"),
    );
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
    let chunks = cfg.geometry.chunks_per_frame;
    if chunks >= 2 {
        // Chunk-streamed: step 1 runs as each chunk lands (on this thread,
        // untimed, as it would between frame events), then the frame.
        report.chunks_per_frame = Some(chunks);
        time_slots(
            opts,
            &mut report,
            &mut backend,
            &views,
            &rot,
            &mut dets,
            Some((chunks, |_| Ok(()))),
        )?;
    }
    Ok(report)
}
