//! `radar-dsp profile`: one frame resident in device memory, run through the
//! CUDA backend's whole-frame graph `--frames` times between
//! `cuProfilerStart` and `cuProfilerStop`, and nothing else in that range:
//! what `ncu --profile-from-start off` measures (the bytes a frame moves
//! between the SMs and memory, per kernel; docs/performance.md). The
//! construction, the compile and a warm-up come before the range.

use radar_dsp::cuda::CudaBackend;
use radar_dsp::scene::SceneGenerator;
use radar_dsp::{Detections, DspError};

use crate::files::load_config;

#[derive(clap::Args)]
pub struct Args {
    /// Chain configuration TOML (the geometry to measure).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Frames run inside the profiler's range.
    #[arg(long, default_value_t = 3)]
    frames: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: Args) -> Result<(), DspError> {
    let cfg = load_config(a.config.as_deref())?;
    let mut backend = CudaBackend::new(&cfg)?;
    let scene = radar_dsp::scene::Scene {
        noise_rms_lsb: 32.0,
        targets: vec![
            radar_dsp::scene::Target::new(18.0, 4.5, -20.0, -12.0),
            radar_dsp::scene::Target::new(42.5, -11.0, 8.0, -18.0),
            radar_dsp::scene::Target::new(77.0, 0.8, 35.0, -8.0),
            radar_dsp::scene::Target::new(103.0, 21.0, -45.0, -15.0),
        ],
        frame_period_s: None,
    };
    let (frame, _) = SceneGenerator::new(&cfg, &scene, a.seed)?.frame(0);
    let index = backend.add_resident_frame(&frame)?;
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    for _ in 0..5 {
        backend.launch_resident(index)?;
        backend.wait()?;
    }
    backend.read_detections(&mut dets)?;
    let kernels = backend.kernels_per_frame()?;
    let range = |start: bool| {
        // SAFETY: no arguments; the backend's context is current on this
        // thread (it launched above).
        let r = unsafe {
            if start {
                cudarc::driver::sys::cuProfilerStart()
            } else {
                cudarc::driver::sys::cuProfilerStop()
            }
        };
        r.result().map_err(|e| DspError::Cuda {
            op: if start {
                "cuProfilerStart"
            } else {
                "cuProfilerStop"
            },
            source: e,
        })
    };
    range(true)?;
    for _ in 0..a.frames {
        backend.launch_resident(index)?;
        backend.wait()?;
    }
    range(false)?;
    println!(
        "profile: {} frames of {} kernels each inside the profiler range; {} detections",
        a.frames,
        kernels,
        dets.list.len()
    );
    Ok(())
}
