//! `radar-dsp tail`: where the slow frames of a `radar-dsp bench --samples`
//! report are. For each end-to-end run that kept its per-frame times: how
//! many frames exceed a threshold, in how many separate stretches (slow
//! frames fewer than `--gap` frames apart count as one), the longest
//! stretch, and the p99.9 with and without the stretches' frames.

use std::path::PathBuf;

use radar_dsp::DspError;
use radar_stats::percentile;

use crate::files::read_text;

#[derive(clap::Args)]
pub struct Args {
    /// A report written by `radar-dsp bench --samples --json FILE`.
    report: PathBuf,
    /// Frames slower than this count as slow (microseconds).
    #[arg(long, default_value_t = 150.0)]
    threshold_us: f64,
    /// Slow frames fewer than this many frames apart belong to one stretch.
    #[arg(long, default_value_t = 50)]
    gap: usize,
}

/// The runs whose samples the report may hold, and how to name them.
const RUNS: [(&str, &str); 4] = [
    ("end_to_end_samples_us", "back to back"),
    ("end_to_end_paced_samples_us", "paced"),
    ("end_to_end_streamed_samples_us", "chunk-streamed"),
    (
        "end_to_end_streamed_paced_samples_us",
        "chunk-streamed, paced",
    ),
];

pub fn run(a: Args) -> Result<(), DspError> {
    let text = read_text(&a.report)?;
    let report: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad_report(&a.report, e))?;
    let mut any = false;
    for (key, label) in RUNS {
        let Some(values) = report.get(key).and_then(|v| v.as_array()) else {
            continue;
        };
        let samples: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
        if samples.len() != values.len() {
            return Err(bad_report(
                &a.report,
                format!("{key} holds a value that is not a number"),
            ));
        }
        any = true;
        println!("{label:<24} {}", describe(&samples, a.threshold_us, a.gap));
    }
    if !any {
        return Err(bad_report(
            &a.report,
            "no per-frame samples (run radar-dsp bench with --samples)",
        ));
    }
    Ok(())
}

/// A report that is not what `bench --samples --json` writes; the error
/// names the file and keeps the cause.
fn bad_report(
    path: &std::path::Path,
    why: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> DspError {
    DspError::Io {
        context: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    }
}

/// Stretches of slow frames, as (first index, last index).
fn stretches(samples: &[f64], threshold_us: f64, gap: usize) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, _) in samples
        .iter()
        .enumerate()
        .filter(|(_, t)| **t > threshold_us)
    {
        match runs.last_mut() {
            Some(last) if i - last.1 < gap => last.1 = i,
            _ => runs.push((i, i)),
        }
    }
    runs
}

fn p999(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 0.999).unwrap_or(f64::NAN)
}

fn describe(samples: &[f64], threshold_us: f64, gap: usize) -> String {
    let runs = stretches(samples, threshold_us, gap);
    let slow = samples.iter().filter(|t| **t > threshold_us).count();
    let rest: Vec<f64> = samples
        .iter()
        .enumerate()
        .filter(|(i, _)| !runs.iter().any(|(a, b)| a <= i && i <= b))
        .map(|(_, t)| *t)
        .collect();
    let longest = runs.iter().map(|(a, b)| b - a + 1).max().unwrap_or(0);
    let mut where_ = runs
        .iter()
        .take(8)
        .map(|(a, b)| format!("{a}-{b}"))
        .collect::<Vec<_>>()
        .join(", ");
    if runs.len() > 8 {
        where_.push_str(" ...");
    }
    if where_.is_empty() {
        where_.push('-');
    }
    format!(
        "n={} over {threshold_us:.0} us: {slow} frames in {} stretch(es) (longest spans {longest} frames: {where_}); p99.9 {:.1} us, outside the stretches {:.1} us",
        samples.len(),
        runs.len(),
        p999(samples),
        p999(&rest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slow frames at 3, 5 and 200 with a gap of 50: two stretches, 3-5
    /// and 200-200; the p99.9 outside them is the largest fast frame.
    #[test]
    fn stretches_and_tail() {
        let mut v = vec![10.0; 300];
        v[3] = 200.0;
        v[5] = 300.0;
        v[200] = 400.0;
        v[100] = 20.0;
        assert_eq!(stretches(&v, 150.0, 50), vec![(3, 5), (200, 200)]);
        let line = describe(&v, 150.0, 50);
        assert!(
            line.starts_with("n=300 over 150 us: 3 frames in 2 stretch(es)"),
            "{line}"
        );
        assert!(
            line.contains("longest spans 3 frames: 3-5, 200-200"),
            "{line}"
        );
        assert!(
            line.ends_with("p99.9 400.0 us, outside the stretches 20.0 us"),
            "{line}"
        );
        assert_eq!(stretches(&[1.0, 2.0], 150.0, 50), vec![]);
    }
}
