//! Synthetic FMCW scenes: point targets and noise, quantised to int16 frames
//! in the frame layout of docs/requirements.md.
//!
//! # Signal model
//! Target `t` with complex amplitude `A_t = a_t exp(j phi_t)` (LSB; `phi_t`
//! fixed or drawn uniformly per frame) contributes to sample `n` of chirp
//! `m = l N_tx + i` at RX `j` (virtual channel `p = i N_rx + j`):
//!
//! ```text
//! s = A_t exp(j 2 pi [ rb_t n / N_s  +  vb_t m / (N_l N_tx) ]  +  j pi p sin(theta_t))
//! ```
//!
//! with `rb_t = range / dR` (range bin) and `vb_t = velocity / dv` (Doppler
//! bins from zero velocity). So the Doppler phase advances `2 pi vb_t / N_l`
//! per loop and `2 pi vb_t / (N_l N_tx)` per chirp: TX `i` fires `i` chirp
//! periods after TX 0 of its loop, which is exactly the offset that the TDM
//! compensation of spec v1 step 8 removes. The virtual array is a uniform
//! half-wavelength line in channel order `p`. Not modelled: range-Doppler
//! coupling (the Doppler shift inside one chirp, at most 0.08 range bin in
//! the default preset), range migration within a frame, antenna patterns.
//!
//! # Motion
//! A scene with `frame_period_s` moves its targets from frame to frame: in
//! frame `f` target `t` is at `range_m + velocity_mps * frame_period_s * f`
//! (positive velocity is away from the radar), with the same velocity and
//! azimuth. A target whose range leaves `[0, N_s dR)` is out of view and
//! adds nothing to the frame. Without `frame_period_s` every frame has the
//! targets where the scene puts them. [`SceneGenerator::truth_at`] gives a
//! frame's truth.
//!
//! # Noise and SNR
//! Noise is circular complex Gaussian, independent per complex sample and RX,
//! with `E|n|^2 = sigma^2` where `sigma = noise_rms_lsb` (so I and Q each have
//! variance `sigma^2 / 2`). **The SNR of a target is per complex sample, per
//! RX channel, before any processing gain: `SNR = a_t^2 / sigma^2`**, i.e.
//! `20 log10(a_t / sigma)` dB. The sum is rounded to the nearest integer
//! (half away from zero) and saturated to int16, which adds about 1/6 LSB^2
//! of quantisation noise (negligible for `sigma` of a few LSB or more);
//! saturated components are counted.
//!
//! # Determinism
//! Chirp `m` of frame `f` draws its noise from a ChaCha8 generator keyed by
//! `(seed, f, m)`; the per-frame target phases from one keyed by `(seed, f)`.
//! A frame therefore depends only on the scene, the seed and its index, not
//! on the thread count or on which frames were generated before.

use std::io::Write;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rustfft::num_complex::Complex64;
use serde::{Deserialize, Serialize};

use crate::config::{ChainConfig, Geometry, SAMPLE_BYTES};
use crate::error::DspError;

/// One point target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Range in metres, `0 <= range < N_s * dR`.
    pub range_m: f64,
    /// Radial velocity in m/s, `-N_l/2 * dv <= v < N_l/2 * dv`. Positive
    /// means a Doppler phase that advances with the chirp index (Doppler
    /// bins above `N_l/2`).
    #[serde(default)]
    pub velocity_mps: f64,
    /// Azimuth in degrees, `-90 ..= 90`; `sin(theta)` sets the phase step
    /// `pi sin(theta)` between neighbouring virtual channels.
    #[serde(default)]
    pub azimuth_deg: f64,
    /// Sample amplitude `a_t` in LSB. Give this or `snr_db`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amplitude_lsb: Option<f64>,
    /// Per-sample SNR in dB (module docs). Give this or `amplitude_lsb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snr_db: Option<f64>,
    /// Fixed carrier phase in degrees; drawn uniformly per frame when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_deg: Option<f64>,
}

impl Target {
    /// A target at the given per-sample SNR, random phase.
    pub fn new(range_m: f64, velocity_mps: f64, azimuth_deg: f64, snr_db: f64) -> Self {
        Target {
            range_m,
            velocity_mps,
            azimuth_deg,
            amplitude_lsb: None,
            snr_db: Some(snr_db),
            phase_deg: None,
        }
    }

    /// A target placed by bins: range bin `range_bin`, fftshifted Doppler bin
    /// `doppler_bin` (`N_l/2` is zero velocity).
    pub fn at_bins(
        cfg: &ChainConfig,
        range_bin: f64,
        doppler_bin: f64,
        azimuth_deg: f64,
        snr_db: f64,
    ) -> Self {
        let g = &cfg.geometry;
        let dr = cfg.physical.range_bin_m(g);
        let dv = cfg.physical.velocity_bin_mps(g);
        Target::new(
            range_bin * dr,
            (doppler_bin - (g.n_loops / 2) as f64) * dv,
            azimuth_deg,
            snr_db,
        )
    }

    pub fn with_phase_deg(mut self, phase_deg: f64) -> Self {
        self.phase_deg = Some(phase_deg);
        self
    }
}

/// `range=20,velocity=-3.5,azimuth=10,snr=-20` (also `vel`, `az`, `amp`,
/// `amplitude`, `phase`); range is required, velocity and azimuth default
/// to 0, and exactly one of snr/amp is required.
impl FromStr for Target {
    type Err = DspError;

    fn from_str(s: &str) -> Result<Self, DspError> {
        let mut t = Target {
            range_m: f64::NAN,
            velocity_mps: 0.0,
            azimuth_deg: 0.0,
            amplitude_lsb: None,
            snr_db: None,
            phase_deg: None,
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                DspError::Parse(format!("target {s:?}: {part:?} is not key=value"))
            })?;
            let v: f64 = v.trim().parse().map_err(|_| {
                DspError::Parse(format!("target {s:?}: {k}: {v:?} is not a number"))
            })?;
            match k.trim() {
                "range" => t.range_m = v,
                "velocity" | "vel" => t.velocity_mps = v,
                "azimuth" | "az" => t.azimuth_deg = v,
                "snr" => t.snr_db = Some(v),
                "amp" | "amplitude" => t.amplitude_lsb = Some(v),
                "phase" => t.phase_deg = Some(v),
                other => {
                    return Err(DspError::Parse(format!(
                        "target {s:?}: unknown key {other:?} (range, velocity, azimuth, snr, amp, phase)"
                    )));
                }
            }
        }
        if t.range_m.is_nan() {
            return Err(DspError::Parse(format!("target {s:?}: range= is required")));
        }
        Ok(t)
    }
}

fn default_noise_rms() -> f64 {
    32.0
}

/// A scene: noise level and targets. TOML form:
///
/// ```toml
/// noise_rms_lsb = 32.0
/// [[target]]
/// range_m = 20.0
/// velocity_mps = -3.0
/// azimuth_deg = 12.0
/// snr_db = -20.0
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    /// `sigma`, the complex noise RMS per sample in LSB (`E|n|^2 = sigma^2`); 0 for none.
    #[serde(default = "default_noise_rms")]
    pub noise_rms_lsb: f64,
    #[serde(default, rename = "target")]
    pub targets: Vec<Target>,
    /// Seconds from one frame to the next; when given, targets move by
    /// `velocity_mps * frame_period_s` per frame (module docs, Motion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_period_s: Option<f64>,
}

impl Default for Scene {
    fn default() -> Self {
        Scene {
            noise_rms_lsb: default_noise_rms(),
            targets: Vec::new(),
            frame_period_s: None,
        }
    }
}

impl Scene {
    pub fn from_toml(text: &str) -> Result<Self, DspError> {
        toml::from_str(text).map_err(|e| DspError::Parse(format!("scene: {e}")))
    }
}

/// Where a target lands in the chain's bins (for checking detections).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TargetTruth {
    /// Range bin (fractional).
    pub range_bin: f64,
    /// fftshifted Doppler bin (fractional), `N_l/2` at zero velocity.
    pub doppler_bin: f64,
    pub sin_theta: f64,
    pub range_m: f64,
    pub velocity_mps: f64,
    pub azimuth_deg: f64,
    /// `a_t` in LSB.
    pub amplitude_lsb: f64,
    /// In view: the range is inside `[0, N_s dR)` (always, without motion).
    pub in_view: bool,
}

struct TargetModel {
    amplitude: f64,
    /// Fixed phase in radians, or `None` for a random phase per frame.
    phase: Option<f64>,
    /// `exp(j 2 pi rb n / N_s)`, `n` in `0..N_s`.
    range_phasor: Vec<Complex64>,
    /// `exp(j 2 pi vb m / (N_l N_tx))`, `m` in `0..N_chirps`.
    chirp_phasor: Vec<Complex64>,
    /// `exp(j pi p sin(theta))`, `p` in `0..N_v`.
    channel_phasor: Vec<Complex64>,
}

/// Per-frame counts from the generator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameStats {
    /// I or Q components that saturated int16.
    pub clipped: u64,
}

/// Domain tags in the ChaCha key, so noise and phases never share a stream.
const TAG_NOISE: u64 = 1;
const TAG_PHASE: u64 = 2;

fn rng_for(seed: u64, frame: u64, index: u64, tag: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[0..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&frame.to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    key[24..32].copy_from_slice(&tag.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// `exp(j 2 pi rb n / N_s)` for `n` in `0..N_s`: range bin `rb`'s beat tone.
fn range_phasor(rb: f64, ns: usize) -> Vec<Complex64> {
    (0..ns).map(|n| phasor(rb * n as f64 / ns as f64)).collect()
}

fn phasor(turns: f64) -> Complex64 {
    let x = 2.0 * std::f64::consts::PI * turns;
    Complex64::new(x.cos(), x.sin())
}

/// Generates frames of one scene.
pub struct SceneGenerator {
    geom: Geometry,
    noise_component_sigma: f64,
    targets: Vec<TargetModel>,
    truth: Vec<TargetTruth>,
    /// Metres per range bin.
    range_bin_m: f64,
    frame_period_s: Option<f64>,
    seed: u64,
    threads: usize,
}

impl SceneGenerator {
    /// Check the scene against the configuration and precompute the phasors.
    /// Errors name the offending key (`target[2].range_m`, `noise_rms_lsb`).
    pub fn new(cfg: &ChainConfig, scene: &Scene, seed: u64) -> Result<Self, DspError> {
        cfg.validate()?;
        let g = cfg.geometry.clone();
        let dr = cfg.physical.range_bin_m(&g);
        let dv = cfg.physical.velocity_bin_mps(&g);
        let sigma = scene.noise_rms_lsb;
        if !(sigma.is_finite() && sigma >= 0.0) {
            return Err(DspError::config(
                "noise_rms_lsb",
                format!("{sigma} must be a finite number >= 0"),
            ));
        }
        if let Some(p) = scene.frame_period_s
            && !(p.is_finite() && p > 0.0)
        {
            return Err(DspError::config(
                "frame_period_s",
                format!("{p} must be a finite number of seconds > 0"),
            ));
        }
        let (ns, nl, nt) = (g.n_samples, g.n_loops, g.n_tx);
        let max_range = ns as f64 * dr;
        let max_vel = (nl / 2) as f64 * dv;
        let mut targets = Vec::with_capacity(scene.targets.len());
        let mut truth = Vec::with_capacity(scene.targets.len());
        for (idx, t) in scene.targets.iter().enumerate() {
            let key = |k: &str| format!("target[{idx}].{k}");
            if !(t.range_m.is_finite() && t.range_m >= 0.0 && t.range_m < max_range) {
                return Err(DspError::config(
                    &key("range_m"),
                    format!("{} is outside [0, {max_range:.3}) m", t.range_m),
                ));
            }
            if !(t.velocity_mps.is_finite()
                && t.velocity_mps >= -max_vel
                && t.velocity_mps < max_vel)
            {
                return Err(DspError::config(
                    &key("velocity_mps"),
                    format!(
                        "{} is outside the unambiguous [-{max_vel:.3}, {max_vel:.3}) m/s",
                        t.velocity_mps
                    ),
                ));
            }
            if !(t.azimuth_deg.is_finite() && t.azimuth_deg.abs() <= 90.0) {
                return Err(DspError::config(
                    &key("azimuth_deg"),
                    format!("{} is outside [-90, 90] degrees", t.azimuth_deg),
                ));
            }
            let amplitude = match (t.amplitude_lsb, t.snr_db) {
                (Some(a), None) => {
                    if !(a.is_finite() && a >= 0.0) {
                        return Err(DspError::config(
                            &key("amplitude_lsb"),
                            format!("{a} must be a finite number >= 0"),
                        ));
                    }
                    a
                }
                (None, Some(snr)) => {
                    if !snr.is_finite() {
                        return Err(DspError::config(&key("snr_db"), "must be finite"));
                    }
                    if sigma == 0.0 {
                        return Err(DspError::config(
                            &key("snr_db"),
                            "an SNR needs noise: set noise_rms_lsb > 0 or give amplitude_lsb",
                        ));
                    }
                    sigma * 10f64.powf(snr / 20.0)
                }
                _ => {
                    return Err(DspError::config(
                        &key("snr_db"),
                        "give exactly one of snr_db and amplitude_lsb",
                    ));
                }
            };
            if let Some(ph) = t.phase_deg
                && !ph.is_finite()
            {
                return Err(DspError::config(&key("phase_deg"), "must be finite"));
            }
            let rb = t.range_m / dr;
            let vb = t.velocity_mps / dv;
            let sin_theta = t.azimuth_deg.to_radians().sin();
            targets.push(TargetModel {
                amplitude,
                phase: t.phase_deg.map(f64::to_radians),
                range_phasor: range_phasor(rb, ns),
                chirp_phasor: (0..g.n_chirps())
                    .map(|m| phasor(vb * m as f64 / (nl * nt) as f64))
                    .collect(),
                channel_phasor: (0..g.n_virtual())
                    .map(|p| phasor(0.5 * p as f64 * sin_theta))
                    .collect(),
            });
            truth.push(TargetTruth {
                range_bin: rb,
                doppler_bin: vb + (nl / 2) as f64,
                sin_theta,
                range_m: t.range_m,
                velocity_mps: t.velocity_mps,
                azimuth_deg: t.azimuth_deg,
                amplitude_lsb: amplitude,
                in_view: true,
            });
        }
        Ok(SceneGenerator {
            geom: g,
            noise_component_sigma: sigma / std::f64::consts::SQRT_2,
            targets,
            truth,
            range_bin_m: dr,
            frame_period_s: scene.frame_period_s,
            seed,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        })
    }

    /// Use `threads` threads per frame (the output does not depend on it).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// The targets in bins and units, in frame 0.
    pub fn truth(&self) -> &[TargetTruth] {
        &self.truth
    }

    /// The targets in frame `index`: moved by their velocity when the scene
    /// has a frame period (module docs, Motion); as in frame 0 otherwise.
    pub fn truth_at(&self, index: u64) -> Vec<TargetTruth> {
        let Some(period) = self.frame_period_s else {
            return self.truth.clone();
        };
        let max_range = self.geom.n_samples as f64 * self.range_bin_m;
        self.truth
            .iter()
            .map(|t| {
                let range_m = t.range_m + t.velocity_mps * period * index as f64;
                TargetTruth {
                    range_m,
                    range_bin: range_m / self.range_bin_m,
                    in_view: (0.0..max_range).contains(&range_m),
                    ..*t
                }
            })
            .collect()
    }

    pub fn frame_bytes(&self) -> usize {
        self.geom.frame_bytes()
    }

    /// Frame `index` into `out` (exactly one frame long).
    pub fn frame_into(&self, index: u64, out: &mut [u8]) -> Result<FrameStats, DspError> {
        let g = &self.geom;
        if out.len() != g.frame_bytes() {
            return Err(DspError::FrameSize {
                got: out.len(),
                want: g.frame_bytes(),
            });
        }
        // Per-frame carrier phases (drawn for every target, in view or
        // not, so that a target leaving view changes no other's phase).
        let mut prng = rng_for(self.seed, index, u64::MAX, TAG_PHASE);
        let truth = self.truth_at(index);
        let base: Vec<Complex64> = self
            .targets
            .iter()
            .zip(&truth)
            .map(|(t, now)| {
                let random: f64 = prng.random();
                let ph = t.phase.unwrap_or(2.0 * std::f64::consts::PI * random);
                let amplitude = if now.in_view { t.amplitude } else { 0.0 };
                Complex64::from_polar(amplitude, ph)
            })
            .collect();
        // Range phasors of this frame's ranges, when targets move.
        let moved: Vec<Vec<Complex64>> = match self.frame_period_s {
            Some(_) => truth
                .iter()
                .map(|t| range_phasor(t.range_bin, g.n_samples))
                .collect(),
            None => Vec::new(),
        };
        let ranges: Vec<&[Complex64]> = match self.frame_period_s {
            Some(_) => moved.iter().map(Vec::as_slice).collect(),
            None => self.targets.iter().map(|t| &t.range_phasor[..]).collect(),
        };
        let ranges = &ranges;

        let chirp_bytes = g.n_rx * g.n_samples * SAMPLE_BYTES;
        let n_chirps = g.n_chirps();
        let per_thread = n_chirps.div_ceil(self.threads);
        let base = &base;
        let clipped: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = out
                .chunks_mut(per_thread * chirp_bytes)
                .enumerate()
                .map(|(c, chunk)| {
                    s.spawn(move || self.fill_chirps(index, c * per_thread, chunk, base, ranges))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .sum()
        });
        Ok(FrameStats { clipped })
    }

    /// Frame `index` as a new buffer.
    pub fn frame(&self, index: u64) -> (Vec<u8>, FrameStats) {
        let mut v = vec![0u8; self.geom.frame_bytes()];
        let stats = self.frame_into(index, &mut v).unwrap_or_default();
        (v, stats)
    }

    /// Fill whole chirps starting at `first_chirp`; returns clipped components.
    fn fill_chirps(
        &self,
        frame: u64,
        first_chirp: usize,
        out: &mut [u8],
        base: &[Complex64],
        ranges: &[&[Complex64]],
    ) -> u64 {
        let g = &self.geom;
        let (ns, nrx) = (g.n_samples, g.n_rx);
        let chirp_bytes = nrx * ns * SAMPLE_BYTES;
        let mut acc = vec![Complex64::default(); ns];
        let mut clipped = 0u64;
        for (c, chirp_out) in out.chunks_exact_mut(chirp_bytes).enumerate() {
            let m = first_chirp + c;
            let i = m % g.n_tx;
            let mut rng = rng_for(self.seed, frame, m as u64, TAG_NOISE);
            for j in 0..nrx {
                let p = i * nrx + j;
                acc.fill(Complex64::default());
                for ((t, b), range) in self.targets.iter().zip(base).zip(ranges) {
                    let k = b * t.chirp_phasor[m] * t.channel_phasor[p];
                    for (a, e) in acc.iter_mut().zip(range.iter()) {
                        *a += k * e;
                    }
                }
                if self.noise_component_sigma > 0.0 {
                    let s = self.noise_component_sigma;
                    for a in acc.iter_mut() {
                        let ni: f64 = rng.sample(StandardNormal);
                        let nq: f64 = rng.sample(StandardNormal);
                        a.re += s * ni;
                        a.im += s * nq;
                    }
                }
                let row = &mut chirp_out[j * ns * SAMPLE_BYTES..(j + 1) * ns * SAMPLE_BYTES];
                for (a, o) in acc.iter().zip(row.chunks_exact_mut(SAMPLE_BYTES)) {
                    let (re, c1) = quantise(a.re);
                    let (im, c2) = quantise(a.im);
                    clipped += u64::from(c1) + u64::from(c2);
                    o[0..2].copy_from_slice(&re.to_le_bytes());
                    o[2..4].copy_from_slice(&im.to_le_bytes());
                }
            }
        }
        clipped
    }

    /// Write `count` frames (indices `0..count`) to `w`, concatenated, no header.
    pub fn write_frames(&self, w: &mut impl Write, count: u64) -> Result<FrameStats, DspError> {
        let mut buf = vec![0u8; self.geom.frame_bytes()];
        let mut total = FrameStats::default();
        for f in 0..count {
            let s = self.frame_into(f, &mut buf)?;
            total.clipped += s.clipped;
            w.write_all(&buf).map_err(|e| DspError::Io {
                context: format!("writing frame {f}"),
                source: e,
            })?;
        }
        Ok(total)
    }
}

/// Round half away from zero and saturate to int16; `true` when saturated.
fn quantise(x: f64) -> (i16, bool) {
    let r = x.round();
    if r > f64::from(i16::MAX) {
        (i16::MAX, true)
    } else if r < f64::from(i16::MIN) {
        (i16::MIN, true)
    } else {
        (r as i16, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(frame: &[u8], g: &Geometry, m: usize, j: usize, n: usize) -> (i16, i16) {
        let o = g.sample_offset(m, j, n);
        (
            i16::from_le_bytes([frame[o], frame[o + 1]]),
            i16::from_le_bytes([frame[o + 2], frame[o + 3]]),
        )
    }

    #[test]
    fn noiseless_target_has_the_documented_phases() {
        let cfg = ChainConfig::default();
        let g = &cfg.geometry;
        let scene = Scene {
            noise_rms_lsb: 0.0,
            targets: vec![Target {
                range_m: 10.0,
                velocity_mps: 5.0,
                azimuth_deg: 20.0,
                amplitude_lsb: Some(10000.0),
                snr_db: None,
                phase_deg: Some(30.0),
            }],
            frame_period_s: None,
        };
        let generator = SceneGenerator::new(&cfg, &scene, 7).unwrap();
        let (frame, stats) = generator.frame(0);
        assert_eq!(stats.clipped, 0);
        let t = generator.truth()[0];
        let vb = t.doppler_bin - 128.0;
        for &(m, j, n) in &[(0, 0, 0), (1, 2, 3), (5, 3, 255), (1023, 1, 100)] {
            let p = (m % g.n_tx) * g.n_rx + j;
            let turns = t.range_bin * n as f64 / 256.0
                + vb * m as f64 / 1024.0
                + 0.5 * p as f64 * t.sin_theta
                + 30.0 / 360.0;
            let want = Complex64::from_polar(10000.0, 2.0 * std::f64::consts::PI * turns);
            let (i, q) = sample(&frame, g, m, j, n);
            assert!((f64::from(i) - want.re).abs() <= 0.5, "I at {m},{j},{n}");
            assert!((f64::from(q) - want.im).abs() <= 0.5, "Q at {m},{j},{n}");
        }
    }

    fn one_target(range_m: f64, velocity_mps: f64, frame_period_s: Option<f64>) -> Scene {
        Scene {
            noise_rms_lsb: 0.0,
            targets: vec![Target {
                range_m,
                velocity_mps,
                azimuth_deg: -10.0,
                amplitude_lsb: Some(3000.0),
                snr_db: None,
                phase_deg: Some(45.0),
            }],
            frame_period_s,
        }
    }

    /// Frame `f` of a moving scene is the frame a still scene with the
    /// target at its frame-`f` range gives, bit for bit; the truth follows.
    #[test]
    fn moving_targets_advance_by_velocity_times_frame_period() {
        let cfg = ChainConfig::default();
        let (r0, v, period) = (30.0, -7.5, 0.008);
        let moving = SceneGenerator::new(&cfg, &one_target(r0, v, Some(period)), 3).unwrap();
        for f in [0u64, 1, 17, 400] {
            let range = r0 + v * period * f as f64;
            let truth = moving.truth_at(f);
            assert!((truth[0].range_m - range).abs() < 1e-9, "frame {f}");
            assert!(truth[0].in_view);
            let dr = cfg.physical.range_bin_m(&cfg.geometry);
            assert!((truth[0].range_bin - range / dr).abs() < 1e-9);
            assert_eq!(truth[0].velocity_mps, v);
            let still = SceneGenerator::new(&cfg, &one_target(range, v, None), 3).unwrap();
            assert!(moving.frame(f).0 == still.frame(f).0, "frame {f} differs");
        }
        // Without a frame period nothing moves.
        let still = SceneGenerator::new(&cfg, &one_target(r0, v, None), 3).unwrap();
        assert_eq!(still.truth_at(400)[0].range_m, r0);
        assert!(still.frame(400).0 == still.frame(400).0);
    }

    /// A target that has left the range window adds nothing to the frame.
    #[test]
    fn a_target_out_of_view_is_not_in_the_frame() {
        let cfg = ChainConfig::default();
        // 2 m away at 10 m/s towards the radar: out of view after 25 frames.
        let g = SceneGenerator::new(&cfg, &one_target(2.0, -10.0, Some(0.008)), 1).unwrap();
        assert!(g.truth_at(24)[0].in_view);
        assert!(!g.truth_at(26)[0].in_view);
        assert!(g.frame(24).0.iter().any(|&b| b != 0));
        assert!(
            g.frame(26).0.iter().all(|&b| b == 0),
            "an out-of-view target was drawn"
        );
    }

    #[test]
    fn a_bad_frame_period_is_refused_with_its_key() {
        let cfg = ChainConfig::default();
        for p in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = SceneGenerator::new(&cfg, &one_target(10.0, 1.0, Some(p)), 1)
                .err()
                .expect("refused");
            assert!(err.to_string().contains("frame_period_s"), "{err}");
        }
        let toml = "frame_period_s = 0.008\n[[target]]\nrange_m = 5.0\nsnr_db = 0.0\n";
        assert_eq!(Scene::from_toml(toml).unwrap().frame_period_s, Some(0.008));
    }

    #[test]
    fn noise_has_the_configured_power_and_is_deterministic() {
        let cfg = ChainConfig::default();
        let scene = Scene {
            noise_rms_lsb: 40.0,
            targets: vec![],
            frame_period_s: None,
        };
        let a = SceneGenerator::new(&cfg, &scene, 1)
            .unwrap()
            .with_threads(1);
        let b = SceneGenerator::new(&cfg, &scene, 1)
            .unwrap()
            .with_threads(3);
        let (fa, _) = a.frame(5);
        let (fb, _) = b.frame(5);
        assert!(fa == fb, "thread count changed the frame");
        let (fc, _) = a.frame(6);
        assert!(fa != fc, "frames must differ");
        let mut sum = 0.0f64;
        for s in fa.chunks_exact(2) {
            let v = f64::from(i16::from_le_bytes([s[0], s[1]]));
            sum += v * v;
        }
        // E|n|^2 per complex sample = sum over components / complex samples.
        let power = sum / (fa.len() / 4) as f64;
        let want = 40.0 * 40.0 + 1.0 / 6.0;
        assert!(
            (power / want - 1.0).abs() < 0.01,
            "noise power {power} vs {want}"
        );
    }

    #[test]
    fn bad_scenes_name_the_key() {
        let cfg = ChainConfig::default();
        let cases = [
            (
                "[[target]]\nrange_m = 200.0\nsnr_db = 0.0",
                "target[0].range_m",
            ),
            (
                "[[target]]\nrange_m = -1.0\nsnr_db = 0.0",
                "target[0].range_m",
            ),
            (
                "[[target]]\nrange_m = 1.0\nsnr_db = 0.0\n[[target]]\nrange_m = 1.0\nvelocity_mps = 40.0\nsnr_db = 0.0",
                "target[1].velocity_mps",
            ),
            (
                "[[target]]\nrange_m = 1.0\nazimuth_deg = 95.0\nsnr_db = 0.0",
                "target[0].azimuth_deg",
            ),
            ("[[target]]\nrange_m = 1.0", "target[0].snr_db"),
            (
                "[[target]]\nrange_m = 1.0\nsnr_db = 1.0\namplitude_lsb = 3.0",
                "target[0].snr_db",
            ),
            (
                "noise_rms_lsb = 0.0\n[[target]]\nrange_m = 1.0\nsnr_db = 1.0",
                "target[0].snr_db",
            ),
            ("noise_rms_lsb = -1.0", "noise_rms_lsb"),
        ];
        for (text, key) in cases {
            let scene = Scene::from_toml(text).unwrap();
            let err = SceneGenerator::new(&cfg, &scene, 0)
                .err()
                .expect(text)
                .to_string();
            assert!(err.contains(key), "{text:?}: {err}");
        }
        let err = Scene::from_toml("[[target]]\nrange = 1.0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("range"), "{err}");
    }

    #[test]
    fn target_strings_parse() {
        let t: Target = "range=20, velocity=-3.5,az=10,snr=-20".parse().unwrap();
        assert_eq!(t.range_m, 20.0);
        assert_eq!(t.velocity_mps, -3.5);
        assert_eq!(t.azimuth_deg, 10.0);
        assert_eq!(t.snr_db, Some(-20.0));
        assert!("velocity=3".parse::<Target>().is_err());
        assert!("range=3,speed=1".parse::<Target>().is_err());
        assert!("range=x".parse::<Target>().is_err());
    }

    #[test]
    fn saturation_is_counted() {
        let cfg = ChainConfig::default();
        let scene = Scene {
            noise_rms_lsb: 0.0,
            targets: vec![Target {
                range_m: 10.0,
                velocity_mps: 0.0,
                azimuth_deg: 0.0,
                amplitude_lsb: Some(40000.0),
                snr_db: None,
                phase_deg: Some(0.0),
            }],
            frame_period_s: None,
        };
        let (_, stats) = SceneGenerator::new(&cfg, &scene, 0).unwrap().frame(0);
        assert!(stats.clipped > 0);
    }
}
