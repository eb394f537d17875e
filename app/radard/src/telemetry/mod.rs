//! GPU telemetry at 1 Hz from a normal-priority thread: temperature, SM
//! clock (with the governor's limits), load and throttle reasons.
//!
//! Two readers: NVML (`nvml-wrapper`) where `libnvidia-ml.so.1` loads and
//! reports (a discrete GPU), else the Jetson sysfs files (`sysfs`): on Orin
//! NVML ships but reports little. Every value is either present or absent
//! with the reason ([`Reading`]); no file or library the unit lacks makes
//! the reader panic. The latest sample is published in a sequence lock
//! ([`TelemetryCell`]) that the status line and the summary read.

pub mod nvml;
mod sample;
pub mod sysfs;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::seqlock::SeqLock;

pub use sample::{Absent, Governor, Reader, Reading, Sample, SourceName};

/// `[telemetry]` in the configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    pub enabled: bool,
    /// Where NVML is tried first: auto (NVML, then sysfs), nvml, sysfs.
    pub reader: ReaderKind,
    /// Root of the sysfs tree (`/` on the unit; a fixture tree in tests).
    pub sysfs_root: PathBuf,
    /// Time between samples.
    pub interval_ms: u32,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            enabled: true,
            reader: ReaderKind::Auto,
            sysfs_root: PathBuf::from("/"),
            interval_ms: 1000,
        }
    }
}

impl TelemetryConfig {
    /// Checks the values; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(10..=60_000).contains(&self.interval_ms) {
            return Err((
                "telemetry.interval_ms",
                format!("{} is outside 10..=60000", self.interval_ms),
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReaderKind {
    #[default]
    Auto,
    Nvml,
    Sysfs,
}

/// Words of a sample in the cell: source, count, then (tag, value) per
/// reading; the governor's 16 bytes take two value words.
const WORDS: usize = 2 + 6 * 2 + 3;

fn put<T: Copy + Into<u64>>(w: &mut [u64], i: usize, r: Reading<T>) {
    match r {
        Reading::Present(v) => {
            w[i] = 0;
            w[i + 1] = v.into();
        }
        Reading::Absent(a) => {
            w[i] = a.code();
            w[i + 1] = 0;
        }
    }
}

fn get(w: &[u64], i: usize) -> Reading<u64> {
    if w[i] == 0 {
        Reading::Present(w[i + 1])
    } else {
        Reading::Absent(Absent::from_code(w[i]))
    }
}

fn encode(s: &Sample) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    w[0] = s.source as u64;
    w[1] = s.count;
    put(&mut w, 2, s.temp_mc.map_i64());
    put(&mut w, 4, s.sm_clock_hz);
    put(&mut w, 6, s.min_clock_hz);
    put(&mut w, 8, s.max_clock_hz);
    put(&mut w, 10, s.load_permille);
    put(&mut w, 12, s.throttle_reasons);
    match &s.governor {
        Reading::Present(g) => {
            let mut bytes = [0u8; 16];
            bytes[..g.as_str().len()].copy_from_slice(g.as_str().as_bytes());
            w[14] = 0;
            w[15] = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
            w[16] = u64::from_le_bytes(bytes[8..].try_into().unwrap_or([0; 8]));
        }
        Reading::Absent(a) => w[14] = a.code(),
    }
    w
}

fn decode(w: &[u64; WORDS]) -> Sample {
    let source = match w[0] {
        1 => SourceName::Nvml,
        2 => SourceName::Sysfs,
        _ => SourceName::None,
    };
    let governor = if w[14] == 0 {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&w[15].to_le_bytes());
        bytes[8..].copy_from_slice(&w[16].to_le_bytes());
        let len = bytes.iter().position(|b| *b == 0).unwrap_or(16);
        match Governor::new(std::str::from_utf8(&bytes[..len]).unwrap_or("?")) {
            Some(g) => Reading::Present(g),
            None => Reading::Absent(Absent::Malformed),
        }
    } else {
        Reading::Absent(Absent::from_code(w[14]))
    };
    Sample {
        source,
        count: w[1],
        temp_mc: match get(w, 2) {
            Reading::Present(v) => Reading::Present(v as i64),
            Reading::Absent(a) => Reading::Absent(a),
        },
        sm_clock_hz: get(w, 4),
        min_clock_hz: get(w, 6),
        max_clock_hz: get(w, 8),
        load_permille: get(w, 10),
        throttle_reasons: get(w, 12),
        governor,
    }
}

impl Reading<i64> {
    /// Two's complement in a word (temperatures below 0 C exist).
    fn map_i64(self) -> Reading<u64> {
        match self {
            Reading::Present(v) => Reading::Present(v as u64),
            Reading::Absent(a) => Reading::Absent(a),
        }
    }
}

/// The latest sample, published without locks.
#[derive(Default)]
pub struct TelemetryCell(SeqLock<[u64; WORDS]>);

impl fmt::Debug for TelemetryCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TelemetryCell")
            .field(&self.latest())
            .finish()
    }
}

impl TelemetryCell {
    pub fn publish(&self, s: &Sample) {
        self.0.write(&encode(s));
    }
    /// The latest sample; None before the first.
    pub fn latest(&self) -> Option<Sample> {
        self.0.read().map(|w| decode(&w))
    }
}

/// Picks the reader for `cfg`: NVML when asked for or (auto) when the
/// library loads and has a GPU, else sysfs. Returns the reader and a line
/// for the start-up log saying which and why.
pub fn open_reader(cfg: &TelemetryConfig) -> (Box<dyn Reader>, String) {
    let nvml_why = match cfg.reader {
        ReaderKind::Sysfs => "telemetry.reader = sysfs".to_string(),
        ReaderKind::Auto | ReaderKind::Nvml => match nvml::NvmlReader::open() {
            Ok(r) => {
                let line = format!("telemetry: NVML ({})", r.describe());
                return (Box::new(r), line);
            }
            Err(e) => e,
        },
    };
    let r = sysfs::SysfsReader::new(&cfg.sysfs_root);
    let line = format!(
        "telemetry: Jetson sysfs under {} ({}); NVML not used: {nvml_why}",
        cfg.sysfs_root.display(),
        r.describe()
    );
    (Box::new(r), line)
}

/// Samples `reader` every `interval` into `cell` until `stop` is set.
/// Runs on its own thread, which should first leave the loop's real-time
/// class and CPU (`rt::normal_thread`): telemetry must never compete with
/// the loop.
pub fn run(reader: &mut dyn Reader, cell: &TelemetryCell, interval: Duration, stop: &AtomicBool) {
    let mut count = 0u64;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            count += 1;
            let mut s = reader.sample();
            s.count = count;
            cell.publish(&s);
            next += interval;
            if next < now {
                next = now + interval;
            }
        }
        // Short naps so that a stop request is seen quickly.
        std::thread::sleep(Duration::from_millis(20).min(interval));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_survives_the_cell() {
        let g = Governor::new("nvhost_podgov").expect("fits");
        let s = Sample {
            source: SourceName::Sysfs,
            count: 3,
            temp_mc: Reading::Present(-5_300),
            sm_clock_hz: Reading::Present(1_300_500_000),
            min_clock_hz: Reading::Present(306_000_000),
            max_clock_hz: Reading::Absent(Absent::Malformed),
            load_permille: Reading::Present(375),
            throttle_reasons: Reading::Absent(Absent::NotReported),
            governor: Reading::Present(g),
        };
        let cell = TelemetryCell::default();
        assert_eq!(cell.latest(), None);
        cell.publish(&s);
        assert_eq!(cell.latest(), Some(s.clone()));
        let line = s.to_string();
        assert_eq!(
            line,
            "gpu[sysfs] temp=-5.3C sm=1300MHz min=306MHz max=absent(malformed) governor=nvhost_podgov load=37.5% throttle=absent(not reported)"
        );
    }

    #[test]
    fn interval_is_checked() {
        let cfg = TelemetryConfig {
            interval_ms: 0,
            ..TelemetryConfig::default()
        };
        assert_eq!(cfg.validate().expect_err("0").0, "telemetry.interval_ms");
    }
}
