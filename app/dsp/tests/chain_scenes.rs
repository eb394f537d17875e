//! Special scenes and what spec v1 implies for each (written out per test).
//!
//! Several scenes put targets on integer bins on purpose: the periodic Hann
//! window then leaks into exactly the two neighbouring bins (amplitude
//! -1/2, power -6.02 dB) and nowhere else, so the expected maps are exact.

mod common;

use common::{cyclic_dist, detect, near_all};
use radar_dsp::scene::Target;
use radar_dsp::{ChainConfig, CpuBackend};

const NL: usize = 256;
const NS: usize = 256;

fn setup() -> (ChainConfig, CpuBackend) {
    let cfg = ChainConfig::default();
    let b = CpuBackend::new(&cfg).unwrap();
    (cfg, b)
}

/// Range edges. Spec: range is not cyclic for CFAR (truncated, smaller
/// N_eff), for peak grouping and for refinement (no refinement at bins 0
/// and N_s-1). But the range FFT of complex samples *is* circular: a target
/// on bin 0 leaks -6 dB into bin N_s-1 (a negative beat frequency), and
/// since bin N_s-1 is not a range neighbour of bin 0, that leak is its own
/// local peak: the spec implies a second detection at bin N_s-1, 6 dB down.
/// The same holds mirrored for a target on bin N_s-1. A target on bin 1
/// leaks into bin 0, which is a neighbour: one detection.
#[test]
fn targets_at_the_range_edges() {
    let (cfg, mut b) = setup();
    for (bin, ghost) in [
        (0.0, Some(NS as u32 - 1)),
        (255.0, Some(0)),
        (1.0, None),
        (254.0, None),
    ] {
        let t = Target::at_bins(&cfg, bin, 100.0, 10.0, -15.0);
        let (dets, truth) = detect(&cfg, &mut b, vec![t], 11, 0);
        let main = near_all(&dets, &truth[0], NL);
        assert_eq!(main.len(), 1, "bin {bin}: {dets:?}");
        let d = main[0];
        assert_eq!(f64::from(d.range_bin), bin);
        if bin == 0.0 || bin == 255.0 {
            assert_eq!(d.range_bin_refined, bin as f32, "no refinement at the edge");
        }
        assert!((d.azimuth_deg - 10.0).abs() < 1.0);
        let others: Vec<_> = dets.list.iter().filter(|x| !main.contains(x)).collect();
        match ghost {
            Some(gbin) => {
                assert_eq!(others.len(), 1, "bin {bin}: {others:?}");
                let g = others[0];
                assert_eq!((g.range_bin, g.doppler_bin), (gbin, d.doppler_bin));
                let down = d.power_db - g.power_db;
                assert!((down - 6.02).abs() < 0.5, "ghost {down} dB down");
            }
            None => assert!(others.is_empty(), "bin {bin}: {others:?}"),
        }
    }
}

/// Doppler wrap. Spec: Doppler is cyclic for CFAR, peak grouping and
/// refinement, so a target on bin 0 or N_l-1 gives exactly one detection
/// (its leak across the wrap is a neighbour). The TDM compensation uses the
/// detected bin: correct on the true side of the wrap. A target between
/// bin N_l-1 and the wrap, nearer to bin 0 (here 255.6), peaks on bin 0:
/// its velocity reads aliased by -N_l dv, and the compensation for that
/// aliased velocity is wrong by 2 pi i/N_tx * 255.6/256 per TX, so the
/// azimuth is off: the spec implies both (velocity ambiguity of TDM MIMO).
#[test]
fn targets_at_the_doppler_wrap() {
    let (cfg, mut b) = setup();
    let dv = cfg.physical.velocity_bin_mps(&cfg.geometry);
    for &bin in &[0.0, 255.0, 255.4] {
        let t = Target::at_bins(&cfg, 60.0, bin, -25.0, -15.0);
        let (dets, truth) = detect(&cfg, &mut b, vec![t], 12, 0);
        assert_eq!(dets.list.len(), 1, "bin {bin}: {dets:?}");
        let d = &dets.list[0];
        assert!(near_all(&dets, &truth[0], NL).len() == 1);
        assert!(cyclic_dist(f64::from(d.doppler_bin_refined), bin, 256.0) < 0.2);
        assert!(
            (f64::from(d.velocity_mps) - truth[0].velocity_mps).abs() < 0.2 * dv,
            "bin {bin}: {} vs {}",
            d.velocity_mps,
            truth[0].velocity_mps
        );
        assert!(
            (d.azimuth_deg + 25.0).abs() < 1.0,
            "bin {bin}: az {}",
            d.azimuth_deg
        );
    }
    // Across the wrap.
    let t = Target::at_bins(&cfg, 60.0, 255.6, -25.0, -15.0);
    let (dets, truth) = detect(&cfg, &mut b, vec![t], 13, 0);
    assert_eq!(dets.list.len(), 1, "{dets:?}");
    let d = &dets.list[0];
    assert_eq!(d.doppler_bin, 0);
    let aliased = truth[0].velocity_mps - NL as f64 * dv;
    assert!((f64::from(d.velocity_mps) - aliased).abs() < 0.2 * dv);
    println!(
        "across the wrap: azimuth {} for a target at -25",
        d.azimuth_deg
    );
    assert!((d.azimuth_deg + 25.0).abs() > 3.0, "az {}", d.azimuth_deg);
}

/// Two close targets. Spec: peak grouping keeps local maxima only, and the
/// Hann main lobe spans +-2 bins. Equal targets 3 bins apart (range or
/// Doppler) give two peaks (the bins between hold only the -6 dB leaks),
/// and each target lies in the other's training set but raises its mu by
/// about P/165 only, so both are detected.
///
/// Targets 1 range bin apart are not resolved. With amplitudes A (bin 80,
/// phase 0) and A/2 (bin 81, phase phi) and the -1/2 leak:
/// `P80 = A^2 |1 - e^(j phi)/4|^2`, `P81 = A^2 |e^(j phi) - 1|^2 / 4`,
/// `P82 = A^2 / 16`. P80 > P81 for every phi, so there is never a
/// detection at the weaker target's bin; the stronger bin is detected; and
/// when the two interfere destructively in bin 81 (phi = 0: P81 = 0) the
/// weaker target's outer leak at bin 82 becomes a local maximum, P80/P82 = 0.5625 * 16 = 9 (9.5 dB) down:
/// a second detection the spec implies, two bins from the truth.
#[test]
fn two_close_targets() {
    let (cfg, mut b) = setup();
    for (a, c) in [
        ((80.0, 100.0), (83.0, 100.0)),
        ((80.0, 100.0), (80.0, 103.0)),
    ] {
        let t1 = Target::at_bins(&cfg, a.0, a.1, 5.0, -15.0);
        let t2 = Target::at_bins(&cfg, c.0, c.1, 5.0, -15.0);
        let (dets, truth) = detect(&cfg, &mut b, vec![t1, t2], 14, 0);
        assert_eq!(dets.list.len(), 2, "{a:?} {c:?}: {dets:?}");
        for (d, t) in dets.list.iter().zip(&truth) {
            assert_eq!(f64::from(d.range_bin), t.range_bin);
            assert_eq!(f64::from(d.doppler_bin), t.doppler_bin);
        }
    }
    for (phase, bins) in [
        (0.0, &[80u32, 82][..]),
        (90.0, &[80][..]),
        (180.0, &[80][..]),
        (270.0, &[80][..]),
    ] {
        let t1 = Target::at_bins(&cfg, 80.0, 100.0, 5.0, -10.0).with_phase_deg(0.0);
        let t2 = Target::at_bins(&cfg, 81.0, 100.0, 5.0, -16.0206).with_phase_deg(phase);
        let (dets, _) = detect(&cfg, &mut b, vec![t1, t2], 15, 0);
        let got: Vec<u32> = dets.list.iter().map(|d| d.range_bin).collect();
        assert_eq!(got, bins, "phase {phase}: {dets:?}");
        assert!(dets.list.iter().all(|d| d.doppler_bin == 100));
        if bins.len() == 2 {
            let down = dets.list[0].power_db - dets.list[1].power_db;
            assert!((down - 9.54).abs() < 1.0, "{down}");
        }
    }
}

/// A 40 dB strong/weak pair (+10 dB and -30 dB per sample; the weak one is
/// 14.6 dB above the noise after processing and detected on its own).
/// Spec: cell-averaging CFAR. When the strong target (or its -6 dB leak)
/// falls in the weak one's training set, mu rises by about P_strong/248,
/// some 16 dB above the weak target's power: the weak target is masked.
/// Outside the training window (beyond 10 range bins or 6 Doppler bins,
/// leaks included) both are detected. The strong one is always detected.
#[test]
fn strong_and_weak_pair_40_db_apart() {
    let (cfg, mut b) = setup();
    let weak_alone = Target::at_bins(&cfg, 120.0, 140.0, 0.0, -30.0);
    let (dets, truth) = detect(&cfg, &mut b, vec![weak_alone], 16, 0);
    assert_eq!(
        near_all(&dets, &truth[0], NL).len(),
        1,
        "weak alone: {dets:?}"
    );
    // (strong range offset, strong Doppler offset, weak detected?)
    let cases = [
        (10.0, 0.0, false), // in the training set (range side)
        (12.0, 0.0, true),  // leak at offset 11: outside
        (0.0, 6.0, false),  // in the training set (Doppler rows)
        (0.0, 8.0, true),   // leak at offset 7: outside
        (-9.0, -5.0, false),
        (-12.0, -8.0, true),
    ];
    for (dr, dd, weak_seen) in cases {
        let weak = Target::at_bins(&cfg, 120.0, 140.0, 0.0, -30.0);
        let strong = Target::at_bins(&cfg, 120.0 + dr, 140.0 + dd, 20.0, 10.0);
        let (dets, truth) = detect(&cfg, &mut b, vec![weak, strong], 17, 0);
        let w = near_all(&dets, &truth[0], NL);
        let s = near_all(&dets, &truth[1], NL);
        assert_eq!(s.len(), 1, "strong at ({dr}, {dd}): {dets:?}");
        assert_eq!(
            !w.is_empty(),
            weak_seen,
            "weak with strong at ({dr}, {dd}): {dets:?}"
        );
        assert_eq!(
            dets.list.len(),
            usize::from(weak_seen) + 1,
            "({dr}, {dd}): {dets:?}"
        );
    }
}

/// The cap (spec v1 step 7): with max_detections 4 and 7 targets of
/// distinct SNR, the 4 highest P/mu are kept, 3 are reported cut, and the
/// list is ordered by range bin then Doppler bin.
#[test]
fn detection_cap_keeps_the_strongest() {
    let mut cfg = ChainConfig::default();
    cfg.chain.max_detections = 4;
    let mut b = CpuBackend::new(&cfg).unwrap();
    let spots = [
        (200.0, 30.0),
        (30.0, 200.0),
        (30.0, 60.0),
        (120.0, 120.0),
        (60.0, 90.0),
        (170.0, 220.0),
        (90.0, 20.0),
    ];
    let targets: Vec<Target> = spots
        .iter()
        .enumerate()
        .map(|(i, &(r, d))| Target::at_bins(&cfg, r, d, 0.0, -20.0 + 3.0 * i as f64))
        .collect();
    let (dets, truth) = detect(&cfg, &mut b, targets, 18, 0);
    assert_eq!(dets.cut, 3);
    assert_eq!(dets.list.len(), 4);
    for t in &truth[3..] {
        assert_eq!(near_all(&dets, t, NL).len(), 1, "strong target {t:?} kept");
    }
    let keys: Vec<_> = dets
        .list
        .iter()
        .map(|d| (d.range_bin, d.doppler_bin))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(keys[0], (60, 90));
}
