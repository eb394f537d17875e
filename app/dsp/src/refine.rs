//! Sub-bin refinement and unit conversion (spec v1 steps 9 and 10), shared
//! by every backend so that the same bins give the same numbers.

use crate::cfar::CfarPeak;
use crate::config::ChainConfig;
use crate::detection::Detection;

/// Parabolic interpolation on three powers around a peak:
/// `delta = 0.5 (y- - y+) / (y- - 2 y0 + y+)`, evaluated in float64.
///
/// Returns 0 when the three points do not bend down (denominator `>= 0`, for
/// example a flat top), and clamps to `[-0.5, 0.5]` (a peak `>=` both
/// neighbours always lies there; the clamp only guards rounding).
pub fn parabolic_offset(y_minus: f32, y0: f32, y_plus: f32) -> f32 {
    let (a, b, c) = (f64::from(y_minus), f64::from(y0), f64::from(y_plus));
    let den = a - 2.0 * b + c;
    // Not bending down (also NaN): no refinement.
    if den.is_nan() || den >= 0.0 {
        return 0.0;
    }
    let delta = 0.5 * (a - c) / den;
    if !delta.is_finite() {
        return 0.0;
    }
    delta.clamp(-0.5, 0.5) as f32
}

/// Refined range bin: parabolic on `P[d][r-1..=r+1]`. At `r = 0` and
/// `r = N_s - 1` one neighbour is missing (range is not cyclic) and the
/// integer bin is returned unrefined.
pub fn refine_range(power: &[f32], ns: usize, d: usize, r: usize) -> f32 {
    if r == 0 || r + 1 >= ns {
        return r as f32;
    }
    let row = &power[d * ns..(d + 1) * ns];
    r as f32 + parabolic_offset(row[r - 1], row[r], row[r + 1])
}

/// Refined Doppler bin: parabolic on `P[d-1..=d+1][r]` with cyclic
/// neighbours. The result is not wrapped: it lies in `(-0.5, N_l - 0.5)`, so
/// a peak at `d = 0` can refine to a slightly negative bin (a velocity just
/// beyond `-N_l/2 * dv`, the ambiguity edge).
pub fn refine_doppler(power: &[f32], nl: usize, ns: usize, d: usize, r: usize) -> f32 {
    let dm = (d + nl - 1) % nl;
    let dp = (d + 1) % nl;
    d as f32 + parabolic_offset(power[dm * ns + r], power[d * ns + r], power[dp * ns + r])
}

/// Bin-to-unit conversion for one configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Units {
    /// Metres per range bin.
    pub range_bin_m: f64,
    /// Metres per second per Doppler bin.
    pub velocity_bin_mps: f64,
    /// Doppler FFT length `N_l`.
    pub n_loops: usize,
    /// Angle FFT length.
    pub angle_fft_size: usize,
}

impl Units {
    pub fn new(cfg: &ChainConfig) -> Self {
        Units {
            range_bin_m: cfg.physical.range_bin_m(&cfg.geometry),
            velocity_bin_mps: cfg.physical.velocity_bin_mps(&cfg.geometry),
            n_loops: cfg.geometry.n_loops,
            angle_fft_size: cfg.chain.angle_fft_size,
        }
    }

    pub fn range_m(&self, range_bin: f32) -> f32 {
        (f64::from(range_bin) * self.range_bin_m) as f32
    }

    /// `(d - N_l/2) * dv` on the fftshifted Doppler bin.
    pub fn velocity_mps(&self, doppler_bin: f32) -> f32 {
        ((f64::from(doppler_bin) - (self.n_loops / 2) as f64) * self.velocity_bin_mps) as f32
    }

    /// `sin(theta) = 2 (k - N/2) / N` on the fftshifted angle bin, clamped to
    /// `[-1, 1]` (a refined bin just past the end-fire wrap), in degrees.
    pub fn azimuth_deg(&self, angle_bin: f32) -> f32 {
        let n = self.angle_fft_size as f64;
        let s = (2.0 * (f64::from(angle_bin) - n / 2.0) / n).clamp(-1.0, 1.0);
        s.asin().to_degrees() as f32
    }

    /// Assemble a detection (step 10) from the CFAR cell and the refined bins.
    pub fn detection(
        &self,
        peak: &CfarPeak,
        range_refined: f32,
        doppler_refined: f32,
        angle_refined: f32,
    ) -> Detection {
        let p = f64::from(peak.power);
        let mu = peak.mu;
        Detection {
            range_bin: peak.range_bin,
            doppler_bin: peak.doppler_bin,
            range_m: self.range_m(range_refined),
            velocity_mps: self.velocity_mps(doppler_refined),
            azimuth_deg: self.azimuth_deg(angle_refined),
            snr_db: (10.0 * (p / mu).log10()) as f32,
            power_db: (10.0 * p.log10()) as f32,
            range_bin_refined: range_refined,
            doppler_bin_refined: doppler_refined,
            angle_bin_refined: angle_refined,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parabola_through_a_sampled_parabola_is_exact() {
        for &x0 in &[-0.4f64, -0.1, 0.0, 0.25, 0.49] {
            let y = |x: f64| (10.0 - 3.0 * (x - x0) * (x - x0)) as f32;
            let d = parabolic_offset(y(-1.0), y(0.0), y(1.0));
            assert!((f64::from(d) - x0).abs() < 1e-5, "{x0} -> {d}");
        }
        assert_eq!(parabolic_offset(1.0, 1.0, 1.0), 0.0);
        assert_eq!(parabolic_offset(1.0, 0.5, 1.0), 0.0);
        assert_eq!(parabolic_offset(0.0, 1.0, 1.0), 0.5);
    }

    #[test]
    fn units_follow_the_spec() {
        let cfg = ChainConfig::default();
        let u = Units::new(&cfg);
        assert_eq!(u.velocity_mps(128.0), 0.0);
        assert!((u.velocity_mps(129.0) - 0.2433).abs() < 1e-3);
        assert_eq!(u.azimuth_deg(32.0), 0.0);
        assert!((u.azimuth_deg(48.0) - 30.0).abs() < 1e-4);
        assert_eq!(u.azimuth_deg(0.0), -90.0);
        assert_eq!(u.azimuth_deg(-0.3), -90.0);
        assert!((u.range_m(10.0) - 4.8797).abs() < 1e-3);
    }
}
