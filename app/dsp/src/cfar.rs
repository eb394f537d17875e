//! 2D cell-averaging CFAR and peak grouping (spec v1 steps 5 and 6), the
//! host-side part every backend shares.
//!
//! # Training set
//! For the cell under test (CUT) at Doppler bin `d`, range bin `r`, with
//! guard `G_d x G_r` and training `T_d x T_r` on each side, the training set
//! is the rectangle `|dd| <= G_d + T_d`, `|dr| <= G_r + T_r` minus the guard
//! block `|dd| <= G_d`, `|dr| <= G_r` (which holds the CUT). Doppler indices
//! wrap (`(d + dd) mod N_l`); range indices outside `0..N_s` are dropped, so
//!
//! ```text
//! N_eff(r) = 2 T_d * nfull(r) + (2 G_d + 1) * nside(r)
//! nfull(r) = #{ r' in 0..N_s : |r' - r| <= G_r + T_r }
//! nside(r) = #{ r' in 0..N_s : G_r < |r' - r| <= G_r + T_r }
//! ```
//!
//! `N_eff` depends on the range bin only (Doppler never truncates); with the
//! default 2/2 guard and 4/8 training it is 248 inside and 128 at `r = 0`.
//!
//! # Threshold
//! `mu = S / N_eff` with `S` the sum of the training cells, and the cell is a
//! hit when `P > alpha(N_eff) * mu`. `alpha(N) = N u / (1 - u)` with `u` the
//! inverse regularized incomplete beta function, `I_u(K, N K) = 1 - Pfa`,
//! `K` = number of virtual channels. This is exact for a cell that is the sum
//! of `K` independent complex Gaussian channels (`P ~ Gamma(K)`) and `N`
//! independent training cells of the same law: `P / (P + N mu)` is then
//! `Beta(K, N K)`.
//!
//! # Arithmetic (what other backends must reproduce)
//! The power map is float32. `S` is accumulated in float64 from the float32
//! cells, as sums of non-negative terms only (no "rectangle minus guard"
//! subtraction, which cancels catastrophically next to a strong target), in
//! an order this module does not promise: any order gives the same `S` to
//! about 1e-15 relative. `mu = S / N_eff` in float64; the test is
//! `(P as f64) > alpha * mu` in float64, `alpha` from [`alpha`].
//!
//! # Peak grouping
//! A hit is kept only when its `P` is `>=` the `P` of all 8 neighbours
//! (float32 comparison), Doppler neighbours cyclic, range neighbours outside
//! `0..N_s` ignored. Neighbours need not be hits themselves.

use crate::config::{CfarConfig, ChainConfig, Geometry};
use crate::error::DspError;

/// `N_eff` of the training set at range bin `r` (see the module docs).
pub fn n_eff(cfar: &CfarConfig, g: &Geometry, r: usize) -> u32 {
    let w = cfar.guard_range + cfar.train_range;
    let ns = g.n_samples as isize;
    let r = r as isize;
    let mut full = 0u32;
    let mut side = 0u32;
    for dr in -(w as isize)..=(w as isize) {
        let rr = r + dr;
        if rr < 0 || rr >= ns {
            continue;
        }
        full += 1;
        if dr.unsigned_abs() > cfar.guard_range {
            side += 1;
        }
    }
    (2 * cfar.train_doppler as u32) * full + (2 * cfar.guard_doppler as u32 + 1) * side
}

/// CFAR scale `alpha(N_eff) = N_eff u / (1 - u)` with `I_u(K, N_eff K) = 1 - pfa`.
///
/// Errors (naming `cfar.pfa`) when the result is not a finite number above
/// zero, which happens only for a `pfa` so small that `u` rounds to 1.
pub fn alpha(n_eff: u32, k: usize, pfa: f64) -> Result<f64, DspError> {
    if n_eff == 0 || k == 0 {
        return Err(DspError::config(
            "cfar",
            format!("empty training set (N_eff {n_eff}) or no channels (K {k})"),
        ));
    }
    if !(pfa > 0.0 && pfa < 1.0) {
        return Err(DspError::config(
            "cfar.pfa",
            format!("{pfa} is outside (0, 1)"),
        ));
    }
    let kf = k as f64;
    let n = f64::from(n_eff);
    let u = statrs::function::beta::inv_beta_reg(kf, n * kf, 1.0 - pfa);
    let a = n * u / (1.0 - u);
    if !(a.is_finite() && a > 0.0) {
        return Err(DspError::config(
            "cfar.pfa",
            format!("{pfa} gives no usable threshold for N_eff {n_eff}, K {k} (u = {u})"),
        ));
    }
    Ok(a)
}

/// Refuses a scale-factor table that does not fit `n_samples` range bins
/// or holds a value that is not a finite number above zero.
pub fn check_alpha(alpha: &[f64], n_samples: usize) -> Result<(), DspError> {
    if alpha.len() != n_samples {
        return Err(DspError::config(
            "cfar.pfa",
            format!(
                "a table of {} scale factors for {n_samples} range bins",
                alpha.len()
            ),
        ));
    }
    if let Some(a) = alpha.iter().find(|a| !(a.is_finite() && **a > 0.0)) {
        return Err(DspError::config(
            "cfar.pfa",
            format!("scale factor {a} is not a finite number above zero"),
        ));
    }
    Ok(())
}

/// Per-range-bin CFAR constants, computed once per configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct CfarTables {
    /// `N_eff(r)` for every range bin.
    pub n_eff: Vec<u32>,
    /// `alpha(N_eff(r))` for every range bin.
    pub alpha: Vec<f64>,
}

impl CfarTables {
    pub fn new(cfg: &ChainConfig) -> Result<Self, DspError> {
        let g = &cfg.geometry;
        let k = g.n_virtual();
        let n_eff: Vec<u32> = (0..g.n_samples).map(|r| n_eff(&cfg.cfar, g, r)).collect();
        // One inverse-beta evaluation per distinct N_eff (a dozen or so).
        let mut distinct: Vec<(u32, f64)> = Vec::new();
        let mut alpha_r = Vec::with_capacity(n_eff.len());
        for &n in &n_eff {
            let a = match distinct.iter().find(|(m, _)| *m == n) {
                Some(&(_, a)) => a,
                None => {
                    let a = alpha(n, k, cfg.cfar.pfa)?;
                    distinct.push((n, a));
                    a
                }
            };
            alpha_r.push(a);
        }
        Ok(CfarTables {
            n_eff,
            alpha: alpha_r,
        })
    }

    /// The distinct `(N_eff, alpha)` pairs, ascending in `N_eff`.
    pub fn distinct(&self) -> Vec<(u32, f64)> {
        let mut v: Vec<(u32, f64)> = self
            .n_eff
            .iter()
            .copied()
            .zip(self.alpha.iter().copied())
            .collect();
        v.sort_by_key(|&(n, _)| n);
        v.dedup_by_key(|&mut (n, _)| n);
        v
    }
}

/// Training sum and count of one cell by direct enumeration of the training
/// set. Slow; the reference the fast paths are tested against.
pub fn training_sum_reference(
    power: &[f32],
    g: &Geometry,
    cfar: &CfarConfig,
    d: usize,
    r: usize,
) -> (f64, u32) {
    let (nl, ns) = (g.n_loops as isize, g.n_samples as isize);
    let wd = (cfar.guard_doppler + cfar.train_doppler) as isize;
    let wr = (cfar.guard_range + cfar.train_range) as isize;
    let mut sum = 0.0f64;
    let mut count = 0u32;
    for dd in -wd..=wd {
        let dn = (d as isize + dd).rem_euclid(nl) as usize;
        for dr in -wr..=wr {
            if dd.unsigned_abs() <= cfar.guard_doppler && dr.unsigned_abs() <= cfar.guard_range {
                continue;
            }
            let rn = r as isize + dr;
            if rn < 0 || rn >= ns {
                continue;
            }
            sum += f64::from(power[dn * g.n_samples + rn as usize]);
            count += 1;
        }
    }
    (sum, count)
}

/// `true` when `P[d][r]` is `>=` its 8 neighbours (Doppler cyclic, range truncated).
pub fn is_local_peak(power: &[f32], g: &Geometry, d: usize, r: usize) -> bool {
    let (nl, ns) = (g.n_loops, g.n_samples);
    let p = power[d * ns + r];
    let rows = [(d + nl - 1) % nl, d, (d + 1) % nl];
    let r_lo = r.saturating_sub(1);
    let r_hi = (r + 1).min(ns - 1);
    for (i, &dn) in rows.iter().enumerate() {
        for rn in r_lo..=r_hi {
            if i == 1 && rn == r {
                continue;
            }
            if power[dn * ns + rn] > p {
                return false;
            }
        }
    }
    true
}

/// A cell that passed CFAR and peak grouping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CfarPeak {
    pub doppler_bin: u32,
    pub range_bin: u32,
    /// `P` of the cell.
    pub power: f32,
    /// Noise estimate `mu = S / N_eff`.
    pub mu: f64,
}

impl CfarPeak {
    /// `P / mu`, the quantity the detection cap ranks by (infinite when mu is 0).
    pub fn ratio(&self) -> f64 {
        f64::from(self.power) / self.mu
    }
}

/// The CFAR stage on the host: buffers sized once, no allocation per run.
///
/// Training sums are computed separably: per Doppler row, the side sums
/// (`G_r < |dr| <= G_r + T_r`) and full sums (`|dr| <= G_r + T_r`) over a
/// zero-padded float64 copy of the row (padding contributes exact zeros,
/// which is the range truncation); then per cell, the full sums of the
/// `2 T_d` outer rows plus the side sums of the `2 G_d + 1` guard rows.
pub struct CfarEngine {
    geom: Geometry,
    nl: usize,
    ns: usize,
    guard_d: usize,
    train_d: usize,
    guard_r: usize,
    train_r: usize,
    tables: CfarTables,
    padded_width: usize,
    padded: Vec<f64>,
    side: Vec<f64>,
    full: Vec<f64>,
    acc: Vec<f64>,
}

impl CfarEngine {
    pub fn new(cfg: &ChainConfig) -> Result<Self, DspError> {
        cfg.validate()?;
        let g = &cfg.geometry;
        let c = &cfg.cfar;
        let (nl, ns) = (g.n_loops, g.n_samples);
        let w = c.guard_range + c.train_range;
        let padded_width = ns + 2 * w;
        Ok(CfarEngine {
            geom: g.clone(),
            nl,
            ns,
            guard_d: c.guard_doppler,
            train_d: c.train_doppler,
            guard_r: c.guard_range,
            train_r: c.train_range,
            tables: CfarTables::new(cfg)?,
            padded_width,
            padded: vec![0.0; nl * padded_width],
            side: vec![0.0; nl * ns],
            full: vec![0.0; nl * ns],
            acc: vec![0.0; ns],
        })
    }

    pub fn tables(&self) -> &CfarTables {
        &self.tables
    }

    /// Replaces the scale factors (a new Pfa, same window): `alpha[r]` per
    /// range bin. Copies; never allocates.
    pub fn set_alpha(&mut self, alpha: &[f64]) -> Result<(), DspError> {
        check_alpha(alpha, self.ns)?;
        self.tables.alpha.copy_from_slice(alpha);
        Ok(())
    }

    /// Run CFAR and peak grouping on a Doppler-major power map `P[d][r]`.
    /// `peaks` is cleared and filled in ascending (Doppler, range) order;
    /// reserve `N_l * N_s` in it once and this never allocates. Returns the
    /// number of CFAR hits before peak grouping.
    ///
    /// # Panics
    /// When `power` is not `N_l * N_s` long (a caller bug, not an input error).
    pub fn run(&mut self, power: &[f32], peaks: &mut Vec<CfarPeak>) -> u32 {
        let (nl, ns) = (self.nl, self.ns);
        assert_eq!(power.len(), nl * ns, "power map size");
        let w = self.guard_r + self.train_r;
        let pw = self.padded_width;
        peaks.clear();

        // Row stage: padded float64 copy, then side and full sums per row.
        for d in 0..nl {
            let prow = &mut self.padded[d * pw..(d + 1) * pw];
            for (dst, &src) in prow[w..w + ns].iter_mut().zip(&power[d * ns..(d + 1) * ns]) {
                *dst = f64::from(src);
            }
            let prow = &self.padded[d * pw..(d + 1) * pw];
            let side = &mut self.side[d * ns..(d + 1) * ns];
            side.fill(0.0);
            for c in self.guard_r + 1..=w {
                let left = &prow[w - c..w - c + ns];
                let right = &prow[w + c..w + c + ns];
                for ((s, &a), &b) in side.iter_mut().zip(left).zip(right) {
                    *s += a + b;
                }
            }
            let full = &mut self.full[d * ns..(d + 1) * ns];
            full.copy_from_slice(side);
            for c in 0..=2 * self.guard_r {
                let mid = &prow[w - self.guard_r + c..w - self.guard_r + c + ns];
                for (f, &a) in full.iter_mut().zip(mid) {
                    *f += a;
                }
            }
        }

        // Column stage: outer rows contribute full sums, guard rows side sums.
        let mut hits = 0u32;
        for d in 0..nl {
            self.acc.fill(0.0);
            // Validation keeps 2 (G_d + T_d) + 1 <= N_l, so no row is visited twice.
            for dd in self.guard_d + 1..=self.guard_d + self.train_d {
                for dn in [(d + dd) % nl, (d + nl - dd) % nl] {
                    let row = &self.full[dn * ns..(dn + 1) * ns];
                    for (a, &v) in self.acc.iter_mut().zip(row) {
                        *a += v;
                    }
                }
            }
            for dd in 0..=2 * self.guard_d {
                let dn = (d + nl - self.guard_d + dd) % nl;
                let row = &self.side[dn * ns..(dn + 1) * ns];
                for (a, &v) in self.acc.iter_mut().zip(row) {
                    *a += v;
                }
            }
            let prow = &power[d * ns..(d + 1) * ns];
            for (r, &p) in prow.iter().enumerate() {
                let mu = self.acc[r] / f64::from(self.tables.n_eff[r]);
                if f64::from(p) > self.tables.alpha[r] * mu {
                    hits += 1;
                    if is_local_peak(power, &self.geom, d, r) {
                        peaks.push(CfarPeak {
                            doppler_bin: d as u32,
                            range_bin: r as u32,
                            power: p,
                            mu,
                        });
                    }
                }
            }
        }
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn n_eff_counts_the_truncated_training_set() {
        let cfg = ChainConfig::default();
        let t = CfarTables::new(&cfg).unwrap();
        let edge = [128, 136, 144, 157, 170, 183, 196, 209, 222, 235, 248];
        for (r, &want) in edge.iter().enumerate() {
            assert_eq!(t.n_eff[r], want, "r = {r}");
            assert_eq!(t.n_eff[255 - r], want, "r = {}", 255 - r);
        }
        assert!(t.n_eff[11..245].iter().all(|&n| n == 248));
        assert_eq!(t.distinct().len(), 11);
    }

    /// Oracle: mpmath (40 digits), bisection on the regularized incomplete
    /// beta function, `alpha = N u / (1 - u)`, K = 16.
    #[test]
    fn alpha_matches_an_independent_high_precision_evaluation() {
        let oracle = [
            (1e-6, 128, 2.681_492_267_817_742),
            (1e-6, 157, 2.678_158_910_210_841),
            (1e-6, 248, 2.672_767_354_277_237),
            (1e-3, 128, 1.960_476_464_164_779),
            (1e-3, 248, 1.956_724_319_091_801),
        ];
        for (pfa, n, want) in oracle {
            let got = alpha(n, 16, pfa).unwrap();
            assert!(
                ((got - want) / want).abs() < 1e-9,
                "pfa {pfa} N {n}: {got} vs {want}"
            );
        }
        assert!(alpha(248, 16, 1e-320).is_err());
        assert!(alpha(0, 16, 1e-6).is_err());
    }

    fn check_against_reference(cfg: &ChainConfig, seed: u64) {
        let g = &cfg.geometry;
        let (nl, ns) = (g.n_loops, g.n_samples);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Exponential noise with a few very strong cells (120 dB range), so
        // the threshold test and the sums see realistic dynamic range.
        let mut power: Vec<f32> = (0..nl * ns)
            .map(|_| {
                let u: f64 = rng.random();
                (-(1.0 - u).ln() * 1e3) as f32
            })
            .collect();
        for _ in 0..(nl * ns / 50).max(3) {
            let i = rng.random_range(0..nl * ns);
            power[i] = rng.random_range(1e4f32..1e15);
        }
        let mut engine = CfarEngine::new(cfg).unwrap();
        let mut peaks = Vec::with_capacity(nl * ns);
        let hits = engine.run(&power, &mut peaks);
        let tables = CfarTables::new(cfg).unwrap();
        let mut want_hits = 0;
        let mut want = Vec::new();
        for d in 0..nl {
            for r in 0..ns {
                let (sum, count) = training_sum_reference(&power, g, &cfg.cfar, d, r);
                assert_eq!(count, tables.n_eff[r], "N_eff at r = {r}");
                let mu = sum / f64::from(count);
                let p = power[d * ns + r];
                if f64::from(p) > tables.alpha[r] * mu {
                    want_hits += 1;
                    if is_local_peak(&power, g, d, r) {
                        want.push((d as u32, r as u32, mu));
                    }
                }
            }
        }
        assert_eq!(hits, want_hits);
        assert_eq!(peaks.len(), want.len());
        for (p, (d, r, mu)) in peaks.iter().zip(want) {
            assert_eq!((p.doppler_bin, p.range_bin), (d, r));
            assert!(((p.mu - mu) / mu).abs() < 1e-12, "mu {} vs {mu}", p.mu);
        }
        assert!(want_hits > 0, "the test map must produce hits");
    }

    #[test]
    fn new_alpha_acts_like_an_engine_built_with_that_pfa() {
        let mut cfg = ChainConfig::default();
        cfg.cfar.pfa = 1e-6;
        let mut engine = CfarEngine::new(&cfg).unwrap();
        cfg.cfar.pfa = 1e-2;
        let fresh = CfarEngine::new(&cfg).unwrap();
        let tables = CfarTables::new(&cfg).unwrap();
        engine.set_alpha(&tables.alpha).unwrap();
        assert_eq!(engine.tables(), fresh.tables());
        assert!(engine.set_alpha(&tables.alpha[1..]).is_err());
        let mut bad = tables.alpha.clone();
        bad[3] = f64::NAN;
        assert!(engine.set_alpha(&bad).is_err());
        assert_eq!(
            engine.tables(),
            fresh.tables(),
            "a refused table changes nothing"
        );
    }

    #[test]
    fn fast_cfar_equals_the_direct_definition() {
        let mut cfg = ChainConfig::default();
        cfg.cfar.pfa = 1e-3;
        check_against_reference(&cfg, 1);
        // A small map with asymmetric guard/training, so every Doppler row
        // wraps and most range bins are truncated.
        let mut small = ChainConfig::default();
        small.geometry.n_loops = 16;
        small.geometry.n_samples = 32;
        small.geometry.chunks_per_frame = 4;
        small.cfar = CfarConfig {
            guard_doppler: 1,
            guard_range: 3,
            train_doppler: 5,
            train_range: 4,
            pfa: 1e-2,
        };
        small.chain.angle_fft_size = 16;
        small.validate().unwrap();
        for seed in 2..6 {
            check_against_reference(&small, seed);
        }
    }

    #[test]
    fn peak_grouping_uses_cyclic_doppler_and_truncated_range() {
        let cfg = ChainConfig::default();
        let g = &cfg.geometry;
        let (nl, ns) = (g.n_loops, g.n_samples);
        let mut p = vec![1.0f32; nl * ns];
        // A peak at d = 0 whose Doppler neighbour is d = N_l - 1.
        p[5] = 10.0;
        p[(nl - 1) * ns + 5] = 11.0;
        assert!(!is_local_peak(&p, g, 0, 5));
        assert!(is_local_peak(&p, g, nl - 1, 5));
        // Range does not wrap: r = 0 ignores r = N_s - 1.
        p[3 * ns] = 10.0;
        p[3 * ns + ns - 1] = 20.0;
        assert!(is_local_peak(&p, g, 3, 0));
        // Ties count as peaks (>=).
        p[7 * ns + 9] = 4.0;
        p[7 * ns + 10] = 4.0;
        assert!(is_local_peak(&p, g, 7, 9) && is_local_peak(&p, g, 7, 10));
    }
}
