//! The frames a benchmark rotates through, one per ring slot.

use radar_dsp::scene::{Scene, SceneGenerator, Target};
use radar_dsp::{ChainConfig, DspError};

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
        frame_period_s: None,
    }
}

/// Frame `k` of the rotation (its own scene and seed) into `out`.
pub fn generate(cfg: &ChainConfig, k: usize, seed: u64, out: &mut [u8]) -> Result<(), DspError> {
    let generator = SceneGenerator::new(cfg, &bench_scene(cfg, k), seed + k as u64)?;
    generator.frame_into(k as u64, out)?;
    Ok(())
}
