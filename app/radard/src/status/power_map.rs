//! The range-Doppler power map the loop publishes every Nth frame: the
//! chain's map max-pooled to [`MAP_ROWS`] x [`MAP_COLS`] cells in dB, with
//! its axes and the frame's detections (the diagnostics link's snapshot).

use bytemuck::{Pod, Zeroable};
use radar_dsp::Detection;

/// Power map size (rows = Doppler, columns = range).
pub const MAP_ROWS: usize = 64;
pub const MAP_COLS: usize = 64;
/// Detections kept with a power map.
pub const MAP_DETECTIONS: usize = 32;

/// A range-Doppler power map, max-pooled to 64 x 64, in dB. Plain data
/// (`Pod`: no padding, checked by the derive), published through a
/// [`SeqLock`](crate::seqlock::SeqLock).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct PowerMapSnapshot {
    /// Maps published so far (1 for the first).
    pub generation: u64,
    /// The frame it is of.
    pub sequence: u64,
    /// Rows and columns actually used (fewer when the frame has fewer
    /// Doppler or range bins than 64).
    pub rows: u32,
    pub cols: u32,
    /// Source bins pooled into one cell (Doppler, range).
    pub pool_doppler: u32,
    pub pool_range: u32,
    /// `10 log10` of the largest power in the cell; row = Doppler (zero
    /// velocity in the middle), column = range.
    pub db: [[f32; MAP_COLS]; MAP_ROWS],
    /// Range in metres at the centre of each column.
    pub range_m: [f32; MAP_COLS],
    /// Radial velocity in m/s at the centre of each row.
    pub velocity_mps: [f32; MAP_ROWS],
    pub detection_count: u32,
    pub detection_cut: u32,
    pub detections: [Detection; MAP_DETECTIONS],
}

impl Default for PowerMapSnapshot {
    fn default() -> Self {
        Self::zeroed()
    }
}

/// Max-pools a Doppler-major `n_loops x n_samples` power map (linear) into
/// `out.db` (dB) and fills the axes. `range_bin_m`, `velocity_bin_mps`: one
/// bin's worth; Doppler bin `n_loops/2` is zero velocity. Allocates nothing.
pub fn pool_power_map(
    power: &[f32],
    n_loops: usize,
    n_samples: usize,
    range_bin_m: f64,
    velocity_bin_mps: f64,
    out: &mut PowerMapSnapshot,
) {
    let rows = n_loops.clamp(1, MAP_ROWS);
    let cols = n_samples.clamp(1, MAP_COLS);
    let pd = n_loops.div_ceil(rows).max(1);
    let pr = n_samples.div_ceil(cols).max(1);
    out.rows = rows as u32;
    out.cols = cols as u32;
    out.pool_doppler = pd as u32;
    out.pool_range = pr as u32;
    for row in out.db.iter_mut() {
        row.fill(f32::NEG_INFINITY);
    }
    if n_samples > 0 && power.len() >= n_loops * n_samples {
        // `line.chunks(pr)` gives one piece a column (pr = ceil(n_samples
        // / cols)). `x > m` passes over NaN as `f32::max` does, and lets the
        // compiler keep the fold in vector registers.
        for (d, line) in power.chunks_exact(n_samples).take(n_loops).enumerate() {
            let dst = &mut out.db[(d / pd).min(rows - 1)][..cols];
            for (cell, piece) in dst.iter_mut().zip(line.chunks(pr)) {
                *cell = piece.iter().fold(*cell, |m, &x| if x > m { x } else { m });
            }
        }
    }
    // 10 log10(v) as log2(v) times 10 log10(2): half the time of `log10`.
    const DB_PER_LOG2: f32 = 10.0 * std::f32::consts::LOG10_2;
    for row in out.db.iter_mut() {
        for v in row.iter_mut() {
            *v = if *v > 0.0 {
                v.log2() * DB_PER_LOG2
            } else {
                -200.0
            };
        }
    }
    for (c, v) in out.range_m.iter_mut().enumerate() {
        *v = ((c * pr) as f64 + (pr as f64 - 1.0) / 2.0) as f32 * range_bin_m as f32;
    }
    let half = (n_loops / 2) as f64;
    for (r, v) in out.velocity_mps.iter_mut().enumerate() {
        *v = (((r * pd) as f64 + (pd as f64 - 1.0) / 2.0 - half) * velocity_bin_mps) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_map_pools_the_maximum_with_axes() {
        let (nl, ns) = (128, 256);
        let mut p = vec![1.0f32; nl * ns];
        p[70 * ns + 200] = 1e6; // Doppler 70 -> row 35, range 200 -> column 50
        let mut m = PowerMapSnapshot::default();
        pool_power_map(&p, nl, ns, 0.5, 0.1, &mut m);
        assert_eq!(
            (m.rows, m.cols, m.pool_doppler, m.pool_range),
            (64, 64, 2, 4)
        );
        assert!((m.db[35][50] - 60.0).abs() < 1e-3);
        assert!(m.db[0][0].abs() < 1e-6);
        assert!((m.range_m[50] - (200.0 + 1.5) * 0.5).abs() < 1e-4);
        // Row 32 holds Doppler bins 64 and 65 (64 is zero velocity).
        assert!((m.velocity_mps[32] - 0.05).abs() < 1e-4);
    }

    #[test]
    fn every_cell_is_the_largest_of_its_bins_whatever_the_geometry() {
        // No bins at all: empty cells, no panic.
        let mut m = PowerMapSnapshot::default();
        pool_power_map(&[], 4, 0, 1.0, 1.0, &mut m);
        assert!(m.db.iter().flatten().all(|&v| v == -200.0));
        for (nl, ns) in [(256, 256), (128, 100), (32, 64), (70, 300), (1, 1)] {
            let mut p: Vec<f32> = (0..nl * ns)
                .map(|i| ((i * 7919) % 1000) as f32 * 0.5)
                .collect();
            // NaN is passed over, as f32::max does; zero power is -200 dB.
            p[0] = f32::NAN;
            if nl * ns > 3 {
                p[3] = 0.0;
            }
            let mut m = PowerMapSnapshot::default();
            pool_power_map(&p, nl, ns, 1.0, 1.0, &mut m);
            let (pd, pr) = (m.pool_doppler as usize, m.pool_range as usize);
            for r in 0..MAP_ROWS {
                for c in 0..MAP_COLS {
                    let mut want = f32::NEG_INFINITY;
                    if r < m.rows as usize && c < m.cols as usize {
                        for d in r * pd..((r + 1) * pd).min(nl) {
                            for b in c * pr..((c + 1) * pr).min(ns) {
                                want = want.max(p[d * ns + b]);
                            }
                        }
                    }
                    let want = if want > 0.0 {
                        10.0 * want.log10()
                    } else {
                        -200.0
                    };
                    let got = m.db[r][c];
                    assert!(
                        (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                        "{nl} x {ns}: cell ({r}, {c}) {got} dB, want {want}"
                    );
                }
            }
        }
    }
}
