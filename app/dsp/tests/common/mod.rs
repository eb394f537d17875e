//! Helpers shared by the chain tests.
#![allow(dead_code)]

use radar_dsp::scene::{Scene, SceneGenerator, Target, TargetTruth};
use radar_dsp::{Backend, ChainConfig, CpuBackend, Detection, Detections, FrameInput};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Generate frame `index` of `targets` (noise 32 LSB) and run it through `backend`.
pub fn detect(
    cfg: &ChainConfig,
    backend: &mut CpuBackend,
    targets: Vec<Target>,
    seed: u64,
    index: u64,
) -> (Detections, Vec<TargetTruth>) {
    let scene = Scene {
        noise_rms_lsb: 32.0,
        targets,
        frame_period_s: None,
    };
    let generator = SceneGenerator::new(cfg, &scene, seed).expect("valid scene");
    let (frame, stats) = generator.frame(index);
    assert_eq!(stats.clipped, 0, "test scenes must not saturate");
    let mut dets = Detections::with_capacity(cfg.chain.max_detections);
    backend
        .process(
            FrameInput {
                bytes: &frame,
                slot: None,
            },
            &mut dets,
        )
        .expect("process");
    (dets, generator.truth().to_vec())
}

/// Distance on a circle of `n` bins.
pub fn cyclic_dist(a: f64, b: f64, n: f64) -> f64 {
    let d = (a - b).rem_euclid(n);
    d.min(n - d)
}

/// A detection within +-1 bin of the truth in range and (cyclic) Doppler.
pub fn near(det: &Detection, truth: &TargetTruth, n_loops: usize) -> bool {
    (f64::from(det.range_bin) - truth.range_bin).abs() <= 1.0
        && cyclic_dist(
            f64::from(det.doppler_bin),
            truth.doppler_bin,
            n_loops as f64,
        ) <= 1.0
}

/// The detections near `truth`.
pub fn near_all<'a>(
    dets: &'a Detections,
    truth: &TargetTruth,
    n_loops: usize,
) -> Vec<&'a Detection> {
    dets.list
        .iter()
        .filter(|d| near(d, truth, n_loops))
        .collect()
}

/// Mean, RMS and largest absolute value.
pub fn stats(v: &[f64]) -> (f64, f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let rms = (v.iter().map(|x| x * x).sum::<f64>() / n).sqrt();
    let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    (mean, rms, max)
}

/// Up to `max_targets` targets anywhere in the bins, at random speeds,
/// angles and SNRs, over random noise.
pub fn random_scene(cfg: &ChainConfig, rng: &mut ChaCha8Rng, max_targets: usize) -> Scene {
    let g = &cfg.geometry;
    let n = rng.random_range(0..=max_targets);
    let targets = (0..n)
        .map(|_| {
            Target::at_bins(
                cfg,
                rng.random_range(1.0..(g.n_samples as f64 - 1.0)),
                rng.random_range(0.0..(g.n_loops as f64 - 0.001)),
                rng.random_range(-70.0..70.0),
                rng.random_range(-32.0..12.0),
            )
        })
        .collect();
    Scene {
        noise_rms_lsb: rng.random_range(4.0..64.0),
        targets,
        frame_period_s: None,
    }
}

/// Frame `seed` of `scene`, generated with `seed`.
pub fn frame(cfg: &ChainConfig, scene: &Scene, seed: u64) -> Vec<u8> {
    let generator = SceneGenerator::new(cfg, scene, seed).expect("scene");
    let mut buf = vec![0u8; cfg.geometry.frame_bytes()];
    generator.frame_into(seed, &mut buf).expect("frame");
    buf
}
