//! What a `radar-dsp bench` run measures, as its command line says.

use std::time::Duration;

use radar_dsp::{BackendKind, ChainConfig};

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
    pub fn period(&self) -> Option<Duration> {
        self.period_us.map(|p| Duration::from_secs_f64(p * 1e-6))
    }

    pub fn wake(&self) -> Option<Duration> {
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
