//! One telemetry sample and its values, each present or absent with the
//! reason; and the [`Reader`] trait the NVML and sysfs readers implement.

use std::fmt;

use serde::Serialize;

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
    pub(super) fn code(self) -> u64 {
        self as u64 + 1
    }
    pub(super) fn from_code(c: u64) -> Absent {
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

/// A source of samples.
pub trait Reader: Send {
    fn source(&self) -> SourceName;
    fn sample(&mut self) -> Sample;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_reasons_by_name() {
        assert_eq!(Throttle(0).to_string(), "none");
        assert_eq!(Throttle(0x1).to_string(), "gpu-idle");
        assert_eq!(Throttle(0x44).to_string(), "sw-power-cap+hw-thermal");
        assert_eq!(Throttle(0x1001).to_string(), "gpu-idle+0x1000");
    }
}
