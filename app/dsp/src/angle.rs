//! Angle estimation (spec v1 step 8 and the angle part of step 9), host side.
//!
//! For a detection at fftshifted Doppler bin `d`, the snapshot
//! `z_p = X[d, p, r]` over the virtual channels `p = i * N_rx + j` is
//! corrected for the TDM transmit-time offset,
//! `z_p *= exp(-j 2 pi (d - N_l/2) / N_l * i / N_tx)`, zero-padded to the
//! angle FFT length `N_a`, transformed (rustfft, forward), and fftshifted:
//! shifted bin `k` holds FFT bin `(k + N_a/2) mod N_a`. The peak is the
//! largest `|F|^2` (ties: the lowest `k`), refined by a parabola through its
//! cyclic neighbours (the angle spectrum is periodic in `sin(theta)`: bin 0,
//! `sin = -1`, and bin `N_a - 1` are neighbours across the end-fire wrap).
//! `sin(theta) = 2 (k' - N_a/2) / N_a` on the refined bin `k'`.

use std::sync::Arc;

use rustfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};

use crate::config::ChainConfig;
use crate::refine::parabolic_offset;

/// Result of one angle estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AngleEstimate {
    /// fftshifted peak bin.
    pub peak_bin: u32,
    /// Refined fftshifted bin, in `[-0.5, N_a - 0.5]`.
    pub refined_bin: f32,
}

/// Reusable angle estimator: plan, buffers and the TDM table made once.
pub struct AngleEstimator {
    n_tx: usize,
    n_rx: usize,
    n_a: usize,
    fft: Arc<dyn Fft<f32>>,
    /// `tdm[d * N_tx + i]`: the compensation phasor for Doppler bin `d`, TX `i`.
    tdm: Vec<Complex32>,
    buf: Vec<Complex32>,
    scratch: Vec<Complex32>,
    power: Vec<f32>,
}

impl AngleEstimator {
    pub fn new(cfg: &ChainConfig) -> Self {
        let g = &cfg.geometry;
        let n_a = cfg.chain.angle_fft_size;
        let fft = FftPlanner::<f32>::new().plan_fft_forward(n_a);
        let scratch = vec![Complex32::default(); fft.get_inplace_scratch_len()];
        let nl = g.n_loops;
        let mut tdm = Vec::with_capacity(nl * g.n_tx);
        for d in 0..nl {
            for i in 0..g.n_tx {
                let ph = -2.0 * std::f64::consts::PI * (d as f64 - (nl / 2) as f64) / nl as f64
                    * i as f64
                    / g.n_tx as f64;
                tdm.push(Complex32::new(ph.cos() as f32, ph.sin() as f32));
            }
        }
        AngleEstimator {
            n_tx: g.n_tx,
            n_rx: g.n_rx,
            n_a,
            fft,
            tdm,
            buf: vec![Complex32::default(); n_a],
            scratch,
            power: vec![0.0; n_a],
        }
    }

    /// Estimate the angle of a snapshot `z[p]` (`N_tx * N_rx` values, virtual
    /// channel order) seen at fftshifted Doppler bin `d`.
    ///
    /// # Panics
    /// When `z` is not `N_v` long or `d >= N_l` (caller bugs).
    pub fn estimate(&mut self, d: usize, z: &[Complex32]) -> AngleEstimate {
        let nv = self.n_tx * self.n_rx;
        assert_eq!(z.len(), nv, "snapshot length");
        self.buf.fill(Complex32::default());
        for (p, (dst, &zp)) in self.buf.iter_mut().zip(z).enumerate() {
            let i = p / self.n_rx;
            *dst = zp * self.tdm[d * self.n_tx + i];
        }
        self.fft
            .process_with_scratch(&mut self.buf, &mut self.scratch);
        let n = self.n_a;
        let half = n / 2;
        for (k, pw) in self.power.iter_mut().enumerate() {
            *pw = self.buf[(k + half) % n].norm_sqr();
        }
        let mut peak = 0usize;
        for k in 1..n {
            if self.power[k] > self.power[peak] {
                peak = k;
            }
        }
        let ym = self.power[(peak + n - 1) % n];
        let yp = self.power[(peak + 1) % n];
        let delta = parabolic_offset(ym, self.power[peak], yp);
        AngleEstimate {
            peak_bin: peak as u32,
            refined_bin: peak as f32 + delta,
        }
    }

    /// The fftshifted angle power spectrum of the last estimate.
    pub fn spectrum(&self) -> &[f32] {
        &self.power
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refine::Units;

    /// A plane wave from `theta` seen by the virtual array, with the TDM
    /// phase of a target at Doppler offset `v_bins` (not an integer).
    fn snapshot(cfg: &ChainConfig, sin_theta: f64, v_bins: f64) -> Vec<Complex32> {
        let g = &cfg.geometry;
        (0..g.n_virtual())
            .map(|p| {
                let i = p / g.n_rx;
                let ph = std::f64::consts::PI * p as f64 * sin_theta
                    + 2.0 * std::f64::consts::PI * v_bins / g.n_loops as f64 * i as f64
                        / g.n_tx as f64;
                Complex32::new(ph.cos() as f32, ph.sin() as f32)
            })
            .collect()
    }

    #[test]
    fn plane_waves_come_back_at_their_angle() {
        let cfg = ChainConfig::default();
        let units = Units::new(&cfg);
        let mut est = AngleEstimator::new(&cfg);
        for &deg in &[-60.0f64, -20.0, 0.0, 7.5, 35.0, 60.0] {
            for &v in &[-100i32, 0, 3, 127] {
                let z = snapshot(&cfg, deg.to_radians().sin(), f64::from(v));
                let d = (v + 128) as usize;
                let a = est.estimate(d, &z);
                let got = units.azimuth_deg(a.refined_bin);
                assert!(
                    (f64::from(got) - deg).abs() < 1.5,
                    "{deg} deg at v {v}: got {got} (bin {})",
                    a.refined_bin
                );
            }
        }
    }

    #[test]
    fn without_tdm_compensation_a_moving_target_would_be_off() {
        // The same snapshot analysed as if it were at zero Doppler: the
        // TX-time phase shifts the apparent angle, so compensation matters.
        let cfg = ChainConfig::default();
        let units = Units::new(&cfg);
        let mut est = AngleEstimator::new(&cfg);
        let z = snapshot(&cfg, 0.0, 64.0);
        let right = units.azimuth_deg(est.estimate(128 + 64, &z).refined_bin);
        let wrong = units.azimuth_deg(est.estimate(128, &z).refined_bin);
        assert!(right.abs() < 0.5, "{right}");
        // TX i lags by pi/8 i: a 1.8 degree error at broadside.
        assert!(wrong.abs() > 1.2, "{wrong}");
    }
}
