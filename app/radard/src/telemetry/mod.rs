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
pub mod sysfs;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::seqlock::SeqLock;

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

/// Why a value is not in the sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Absent {
    /// No thermal zone of type `gpu-thermal`.
    NoGpuThermalZone,
    /// No devfreq node whose device tree node is the GPU.
    NoGpuDevfreq,
    /// The file exists but could not be read.
    Unreadable,
    /// The file's content is not what the kernel writes there.
    Malformed,
    /// The file is not there.
    Missing,
    /// The reader has no such value (Jetson sysfs has no throttle reasons).
    NotReported,
    /// NVML said "not supported" or failed for this value.
    NvmlUnsupported,
    NvmlError,
}

impl Absent {
    pub fn why(self) -> &'static str {
        match self {
            Absent::NoGpuThermalZone => "no gpu-thermal zone",
            Absent::NoGpuDevfreq => "no GPU devfreq node",
            Absent::Unreadable => "unreadable",
            Absent::Malformed => "malformed",
            Absent::Missing => "file missing",
            Absent::NotReported => "not reported",
            Absent::NvmlUnsupported => "not supported by NVML",
            Absent::NvmlError => "NVML error",
        }
    }
    fn code(self) -> u64 {
        self as u64 + 1
    }
    fn from_code(c: u64) -> Absent {
        const ALL: [Absent; 8] = [
            Absent::NoGpuThermalZone,
            Absent::NoGpuDevfreq,
            Absent::Unreadable,
            Absent::Malformed,
            Absent::Missing,
            Absent::NotReported,
            Absent::NvmlUnsupported,
            Absent::NvmlError,
        ];
        ALL.get((c as usize).wrapping_sub(1))
            .copied()
            .unwrap_or(Absent::Malformed)
    }
}

/// A value present, or absent and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reading<T> {
    Present(T),
    Absent(Absent),
}

impl<T: Copy> Reading<T> {
    pub fn value(&self) -> Option<T> {
        match self {
            Reading::Present(v) => Some(*v),
            Reading::Absent(_) => None,
        }
    }
}

/// The governor's name, as a fixed-size string (the cell holds no heap data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Governor(heapless::String<16>);

impl Governor {
    /// None when `name` is longer than 16 bytes.
    pub fn new(name: &str) -> Option<Self> {
        let mut s = heapless::String::new();
        s.push_str(name).ok()?;
        Some(Governor(s))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Governor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Governor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Which reader produced a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SourceName {
    #[default]
    None,
    Nvml,
    Sysfs,
}

impl SourceName {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceName::None => "none",
            SourceName::Nvml => "nvml",
            SourceName::Sysfs => "sysfs",
        }
    }
}

/// One telemetry sample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sample {
    pub source: SourceName,
    /// Samples taken since start (this one included).
    pub count: u64,
    /// GPU temperature, milli-degrees Celsius.
    pub temp_mc: Reading<i64>,
    /// Current SM (GPU core) clock, Hz.
    pub sm_clock_hz: Reading<u64>,
    /// The clock range the governor may use (sysfs), or the maximum (NVML).
    pub min_clock_hz: Reading<u64>,
    pub max_clock_hz: Reading<u64>,
    /// GPU load, per mille.
    pub load_permille: Reading<u64>,
    /// NVML's clocks-event (throttle) reason bits.
    pub throttle_reasons: Reading<u64>,
    pub governor: Reading<Governor>,
}

impl Sample {
    pub fn absent(source: SourceName, why: Absent) -> Self {
        Sample {
            source,
            count: 0,
            temp_mc: Reading::Absent(why),
            sm_clock_hz: Reading::Absent(why),
            min_clock_hz: Reading::Absent(why),
            max_clock_hz: Reading::Absent(why),
            load_permille: Reading::Absent(why),
            throttle_reasons: Reading::Absent(why),
            governor: Reading::Absent(why),
        }
    }
}

impl Sample {
    /// The sample as the diagnostics link reports it (docs/diagnostics.md):
    /// absent values are `None`, and a sample with no value at all is no
    /// telemetry; "throttled" is any NVML reason but the GPU being idle
    /// (Jetson sysfs reports none).
    pub fn gpu_telemetry(&self) -> Option<diag_proto::GpuTelemetry> {
        let g = diag_proto::GpuTelemetry {
            source: diag_proto::Text::truncate_from(self.source.as_str()),
            temperature_c: self.temp_mc.value().map(|mc| mc as f32 / 1000.0),
            sm_clock_mhz: self
                .sm_clock_hz
                .value()
                .map(|hz| u32::try_from(hz / 1_000_000).unwrap_or(u32::MAX)),
            load_pct: self.load_permille.value().map(|pm| pm as f32 / 10.0),
            throttled: self.throttle_reasons.value().map(|r| r & !GPU_IDLE != 0),
        };
        let known = g.temperature_c.is_some()
            || g.sm_clock_mhz.is_some()
            || g.load_pct.is_some()
            || g.throttled.is_some();
        known.then_some(g)
    }
}

/// NVML's "the GPU is idle" clocks-event reason: not a limit on the work.
const GPU_IDLE: u64 = 0x1;

/// NVML's throttle reason bits by name (nvmlClocksEventReason*).
const THROTTLE_NAMES: [(u64, &str); 9] = [
    (0x1, "gpu-idle"),
    (0x2, "app-clocks"),
    (0x4, "sw-power-cap"),
    (0x8, "hw-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "sw-thermal"),
    (0x40, "hw-thermal"),
    (0x80, "hw-power-brake"),
    (0x100, "display-clocks"),
];

struct Throttle(u64);

impl fmt::Display for Throttle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return write!(f, "none");
        }
        let mut first = true;
        let mut rest = self.0;
        for (bit, name) in THROTTLE_NAMES {
            if self.0 & bit != 0 {
                write!(f, "{}{name}", if first { "" } else { "+" })?;
                first = false;
                rest &= !bit;
            }
        }
        if rest != 0 {
            write!(f, "{}{rest:#x}", if first { "" } else { "+" })?;
        }
        Ok(())
    }
}

impl fmt::Display for Sample {
    /// `gpu[sysfs] temp=47.5C sm=1300MHz min=306MHz max=1300MHz
    /// governor=nvhost_podgov load=37.5% throttle=absent(not reported)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn mhz(f: &mut fmt::Formatter<'_>, key: &str, r: Reading<u64>) -> fmt::Result {
            match r {
                Reading::Present(hz) => write!(f, " {key}={}MHz", hz / 1_000_000),
                Reading::Absent(a) => write!(f, " {key}=absent({})", a.why()),
            }
        }
        write!(f, "gpu[{}] temp=", self.source.as_str())?;
        match self.temp_mc {
            Reading::Present(t) => write!(f, "{:.1}C", t as f64 / 1000.0)?,
            Reading::Absent(a) => write!(f, "absent({})", a.why())?,
        }
        mhz(f, "sm", self.sm_clock_hz)?;
        mhz(f, "min", self.min_clock_hz)?;
        mhz(f, "max", self.max_clock_hz)?;
        match &self.governor {
            Reading::Present(g) => write!(f, " governor={g}")?,
            Reading::Absent(a) => write!(f, " governor=absent({})", a.why())?,
        }
        match self.load_permille {
            Reading::Present(p) => write!(f, " load={:.1}%", p as f64 / 10.0)?,
            Reading::Absent(a) => write!(f, " load=absent({})", a.why())?,
        }
        match self.throttle_reasons {
            Reading::Present(bits) => write!(f, " throttle={}", Throttle(bits)),
            Reading::Absent(a) => write!(f, " throttle=absent({})", a.why()),
        }
    }
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

/// A source of samples.
pub trait Reader: Send {
    fn source(&self) -> SourceName;
    fn sample(&mut self) -> Sample;
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

/// Leaves the real-time class and the loop's CPU that a thread created
/// after the real-time set-up inherits: telemetry must never compete with
/// the loop. Best effort: without the privilege to change it, the thread
/// keeps what it has (it sleeps almost all the time).
fn become_normal_priority() {
    // SAFETY: plain syscalls on the calling thread with local arguments;
    // sched_param and cpu_set_t are plain integers, all-zero is valid
    // (priority 0 for SCHED_OTHER; musl's sched_param has more fields).
    unsafe {
        let param: libc::sched_param = std::mem::zeroed();
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).clamp(1, 1024) as usize;
        for cpu in 0..cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Samples `reader` every `interval` into `cell` until `stop` is set.
/// Runs on its own normal-priority thread.
pub fn run(reader: &mut dyn Reader, cell: &TelemetryCell, interval: Duration, stop: &AtomicBool) {
    become_normal_priority();
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
    fn throttle_reasons_by_name() {
        assert_eq!(Throttle(0).to_string(), "none");
        assert_eq!(Throttle(0x1).to_string(), "gpu-idle");
        assert_eq!(Throttle(0x44).to_string(), "sw-power-cap+hw-thermal");
        assert_eq!(Throttle(0x1001).to_string(), "gpu-idle+0x1000");
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
