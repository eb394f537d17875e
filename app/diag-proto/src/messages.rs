//! The messages of the diagnostics protocol. Every one is bounded: its
//! largest postcard encoding is `MaxSize::POSTCARD_MAX_SIZE`, checked at
//! compile time against the frame size in `icd`.

use postcard::experimental::max_size::MaxSize;
use postcard_schema::Schema;
use serde::{Deserialize, Serialize};

use crate::bounded::{List, Text};

/// A parameter's name ("cfar.pfa").
pub type ParamName = Text<24>;
/// A unit of measure ("m", "1", "dB").
pub type Unit = Text<8>;
/// A short reason or description.
pub type Note = Text<64>;

/// Answer of the version endpoint, whose types never change, so that two
/// ends of different protocol versions can still say which they speak.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct VersionInfo {
    /// Protocol version the unit speaks.
    pub protocol: u16,
    /// Oldest client protocol version the unit answers.
    pub oldest_supported: u16,
    /// radard's version.
    pub radard: Text<24>,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct Identity {
    pub radard: Text<24>,
    /// The kernel module's version, or "none" when frames come from the simulator.
    pub kmod: Text<24>,
    /// The FPGA bitstream's version ("simulator" without a card).
    pub fpga: Text<24>,
    pub protocol: u16,
    /// The boot slot the system runs from (A/B), or "unknown".
    pub boot_slot: Text<8>,
    pub uptime_ms: u64,
    pub source: Text<8>,
    pub backend: Text<8>,
}

/// radard's health verdict.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Warming up: not yet enough frames to judge.
    Starting,
    Healthy,
    /// Running, but something is wrong (misses, drops, a sink failing).
    Degraded,
    /// The loop stopped or fails.
    Failed,
}

/// One counter of dropped frames or records, by reason.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct DropCount {
    pub reason: Text<16>,
    pub count: u64,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Default)]
pub struct DetectionSummary {
    pub range_m: f32,
    pub velocity_mps: f32,
    pub azimuth_deg: f32,
    pub snr_db: f32,
}

/// An output of detections (file, transmit channel, diagnostics link).
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct SinkStatus {
    pub name: Text<12>,
    pub enabled: bool,
    pub written: u64,
    pub failed: u64,
}

/// The GPU's temperature, clock, load and throttling, when known.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq, Default)]
pub struct GpuTelemetry {
    /// Where the figures come from ("sysfs", "nvml").
    pub source: Text<8>,
    pub temperature_c: Option<f32>,
    pub sm_clock_mhz: Option<u32>,
    pub load_pct: Option<f32>,
    pub throttled: Option<bool>,
}

/// `source: temperature, clock, load, throttling`, each "n/a" when the
/// unit has no such figure (the console and radarctl say the same).
impl core::fmt::Display for GpuTelemetry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: ", self.source.as_str())?;
        match self.temperature_c {
            Some(t) => write!(f, "{t:.1} C, ")?,
            None => f.write_str("temperature n/a, ")?,
        }
        match self.sm_clock_mhz {
            Some(c) => write!(f, "{c} MHz, ")?,
            None => f.write_str("clock n/a, ")?,
        }
        match self.load_pct {
            Some(l) => write!(f, "load {l:.0} %, ")?,
            None => f.write_str("load n/a, ")?,
        }
        f.write_str(match self.throttled {
            Some(true) => "THROTTLED",
            Some(false) => "not throttled",
            None => "throttle n/a",
        })
    }
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct Status {
    pub uptime_ms: u64,
    pub frames: u64,
    /// Frames per second over the last second or so.
    pub frame_rate_hz: f32,
    pub deadline_misses: u64,
    pub drops: List<DropCount, 6>,
    pub health: Health,
    pub health_reason: Note,
    pub latency_last_us: f32,
    pub latency_max_us: f32,
    /// The loop thread's CPU time per frame period, in percent.
    pub loop_cpu_pct: f32,
    /// Detections in the newest frame, and the first of them.
    pub detections_last: u32,
    pub detections: List<DetectionSummary, 8>,
    pub sinks: List<SinkStatus, 4>,
    pub gpu: Option<GpuTelemetry>,
}

/// One bin of the loop-latency histogram: frames whose latency was below
/// `upper_us` and at or above the previous bin's bound.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq)]
pub struct HistogramBin {
    pub upper_us: f32,
    pub count: u64,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct Stats {
    pub frames: u64,
    pub deadline_misses: u64,
    pub deadline_us: Option<f32>,
    /// Percentiles of the histogram by nearest rank: the upper edge of the
    /// bin holding the rank, never above `latency_max_us`.
    pub latency_p50_us: f32,
    pub latency_p99_us: f32,
    pub latency_p999_us: f32,
    pub latency_max_us: f32,
    /// Frames whose latency exceeded the last bin's bound.
    pub overflow: u64,
    pub histogram: List<HistogramBin, 56>,
    pub loop_cpu_pct: f32,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Startup,
    Fault,
    Drop,
    DeadlineMiss,
    ParamChange,
    Health,
    Other,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct LogEvent {
    /// Numbers every event since start-up; the cursor of the log endpoint.
    pub id: u64,
    pub uptime_ms: u64,
    pub kind: EventKind,
    pub text: Text<80>,
}

/// Events with an id of at least `from`, at most `max` of them.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq)]
pub struct LogRequest {
    pub from: u64,
    pub max: u8,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct LogPage {
    pub events: List<LogEvent, 8>,
    /// Ask for this id next.
    pub next: u64,
    /// Events before `from` that the ring no longer holds.
    pub lost: u64,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Real(f64),
}

/// A value as a person reads it (the text console and radarctl): on/off,
/// an integer, a real in exponent form.
/// Width and alignment apply (`{:<8}`).
impl core::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        use core::fmt::Write;
        // An i64 or an f64 in exponent form fits in 32 bytes.
        let mut text = heapless::String::<32>::new();
        match self {
            ParamValue::Bool(b) => text
                .push_str(if *b { "on" } else { "off" })
                .map_err(|_| core::fmt::Error)?,
            ParamValue::Int(i) => write!(text, "{i}")?,
            ParamValue::Real(r) => write!(text, "{r:e}")?,
        }
        f.pad(&text)
    }
}

impl ParamValue {
    /// A value as a person types it: on/off (true/false, yes/no), an
    /// integer, a finite real; None for anything else.
    pub fn parse_text(s: &str) -> Option<ParamValue> {
        match s {
            "on" | "true" | "yes" => return Some(ParamValue::Bool(true)),
            "off" | "false" | "no" => return Some(ParamValue::Bool(false)),
            _ => {}
        }
        if let Ok(i) = s.parse::<i64>() {
            return Some(ParamValue::Int(i));
        }
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(ParamValue::Real)
    }
}

/// The type of a parameter (the variant of its value).
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Bool,
    Int,
    Real,
}

impl ParamValue {
    pub fn kind(&self) -> ParamKind {
        match self {
            ParamValue::Bool(_) => ParamKind::Bool,
            ParamValue::Int(_) => ParamKind::Int,
            ParamValue::Real(_) => ParamKind::Real,
        }
    }
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct ParamInfo {
    pub name: ParamName,
    pub value: ParamValue,
    pub min: ParamValue,
    pub max: ParamValue,
    pub unit: Unit,
    pub writable: bool,
    pub help: Note,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq)]
pub struct ParamListRequest {
    pub first: u8,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct ParamPage {
    pub total: u8,
    pub first: u8,
    pub params: List<ParamInfo, 4>,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct SetParam {
    pub name: ParamName,
    pub value: ParamValue,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct Applied {
    /// The parameter as it is now.
    pub param: ParamInfo,
    /// Frames the loop had finished when it applied the change.
    pub at_frame: u64,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub enum ParamError {
    Unknown,
    WrongType {
        expected: ParamKind,
    },
    OutOfRange {
        min: ParamValue,
        max: ParamValue,
        unit: Unit,
    },
    ReadOnly {
        reason: Note,
    },
    /// Valid, but the unit could not apply it (busy, or the loop is not running).
    NotApplied {
        reason: Note,
    },
}

impl ParamError {
    /// The refusal as a person reads it, for parameter `name` (the text
    /// console and radarctl say the same).
    pub fn describe<'a>(&'a self, name: &'a str) -> impl core::fmt::Display + 'a {
        ParamErrorText { name, error: self }
    }
}

struct ParamErrorText<'a> {
    name: &'a str,
    error: &'a ParamError,
}

impl core::fmt::Display for ParamErrorText<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = self.name;
        match self.error {
            ParamError::Unknown => write!(f, "unknown parameter {name:?}"),
            ParamError::WrongType { expected } => write!(f, "{name} takes a {expected:?} value"),
            ParamError::OutOfRange { min, max, unit } => {
                write!(f, "{name}: value out of range, allowed {min} .. {max}")?;
                // "1" is the unit of a dimensionless value: not shown.
                if !unit.is_empty() && unit.as_str() != "1" {
                    write!(f, " {}", unit.as_str())?;
                }
                Ok(())
            }
            ParamError::ReadOnly { reason } => {
                write!(f, "{name} is read-only: {}", reason.as_str())
            }
            ParamError::NotApplied { reason } => {
                write!(f, "{name} not applied: {}", reason.as_str())
            }
        }
    }
}

/// Cells in one snapshot piece.
pub const PIECE_CELLS: usize = 512;

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Default)]
pub struct SnapshotDetection {
    pub range_m: f32,
    pub velocity_mps: f32,
    pub azimuth_deg: f32,
    pub snr_db: f32,
}

/// The downsampled range-Doppler power map of one frame: `doppler_bins`
/// rows (velocity) of `range_bins` cells (range), row-major, each cell a
/// level `q` meaning `db_floor + q * db_step` dB, sent in pieces of
/// [`PIECE_CELLS`]. Cell `(d, r)` is centred on range
/// `range_first_m + r * range_step_m` and velocity
/// `velocity_first_mps + d * velocity_step_mps`.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct SnapshotInfo {
    pub generation: u64,
    pub frame: u64,
    pub doppler_bins: u16,
    pub range_bins: u16,
    pub range_first_m: f32,
    pub range_step_m: f32,
    pub velocity_first_mps: f32,
    pub velocity_step_mps: f32,
    pub db_floor: f32,
    pub db_step: f32,
    pub pieces: u16,
    pub detections: List<SnapshotDetection, 16>,
    /// Detections of the frame beyond the 16 listed.
    pub detections_more: u32,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq)]
pub struct PieceRequest {
    pub generation: u64,
    pub index: u16,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct Piece {
    pub generation: u64,
    pub index: u16,
    pub cells: List<u8, PIECE_CELLS>,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// No frame has been processed yet (or the content has no power map).
    NoMap,
    /// The snapshot of that generation is no longer held: ask for the info again.
    Gone,
    BadIndex,
}

/// Periodic pushes: 0 turns a topic off. Periods below 100 ms are raised to it.
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq)]
pub struct Subscribe {
    pub status_period_ms: u32,
    pub telemetry_period_ms: u32,
}

#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct Telemetry {
    pub uptime_ms: u64,
    pub frame_rate_hz: f32,
    pub loop_cpu_pct: f32,
    pub gpu: Option<GpuTelemetry>,
}

/// How good the frames' time is (docs/detections-format.md, "Time").
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeQuality {
    /// The frames carry no clock of the site's time (a replay, a card
    /// without a clock): the system clock at each frame event.
    Unknown,
    /// Never locked, or holdover ran out: no bound.
    FreeRunning,
    /// Was locked; running on the card's last trim; the bound grows.
    Holdover,
    /// The card on the synchronised system clock within the bound.
    Locked,
}

impl TimeQuality {
    /// As the outputs name it (`time_quality`).
    pub fn name(self) -> &'static str {
        match self {
            TimeQuality::Unknown => "unknown",
            TimeQuality::FreeRunning => "free-running",
            TimeQuality::Holdover => "holdover",
            TimeQuality::Locked => "locked",
        }
    }
}

/// The frames' clock and how good its time is (`radar/time`).
#[derive(Serialize, Deserialize, Schema, MaxSize, Clone, Debug, PartialEq)]
pub struct TimeStatus {
    /// Where the frames' UTC comes from: "card-clock", "host-clock" (the
    /// simulator) or "frame-event".
    pub source: Text<12>,
    /// The card's PTP clock device ("/dev/ptp0"); empty without one.
    pub clock: Text<16>,
    pub quality: TimeQuality,
    /// The bound on the frames' time error, ns (None: no bound).
    pub bound_ns: Option<u64>,
    /// The card's clock less the system clock less (TAI - UTC), ns, and its
    /// rate against the system clock, ppb, at the last reading.
    pub offset_ns: Option<i64>,
    pub drift_ppb: Option<i64>,
    /// TAI - UTC in force, s.
    pub utc_offset_s: i16,
    /// What the kernel says of the system clock (None: unknown).
    pub system_synchronised: Option<bool>,
    /// Steps of the card's clock and of the system clock seen since start.
    pub card_steps: u32,
    pub system_steps: u32,
    /// Readings of the card's clock that failed since start.
    pub read_errors: u32,
    /// How long the quality has been what it is, ms.
    pub quality_for_ms: u64,
}

/// `source QUALITY [within BOUND] (clock) offset ... drift ... ppb ...`,
/// as the console and radarctl say it.
impl core::fmt::Display for TimeStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {}", self.source.as_str(), self.quality.name())?;
        if let Some(b) = self.bound_ns {
            f.write_str(" within ")?;
            ns(f, i128::from(b))?;
        }
        if !self.clock.is_empty() {
            write!(f, " ({})", self.clock.as_str())?;
        }
        if let Some(o) = self.offset_ns {
            f.write_str(", offset ")?;
            if o >= 0 {
                f.write_str("+")?;
            }
            ns(f, i128::from(o))?;
        }
        if let Some(d) = self.drift_ppb {
            write!(f, ", frequency {d:+} ppb")?;
        }
        write!(
            f,
            ", TAI-UTC {} s, system clock {}",
            self.utc_offset_s,
            match self.system_synchronised {
                Some(true) => "synchronised",
                Some(false) => "UNSYNCHRONISED",
                None => "sync unknown",
            }
        )?;
        if self.card_steps + self.system_steps > 0 {
            write!(
                f,
                ", steps: card {} system {}",
                self.card_steps, self.system_steps
            )?;
        }
        if self.read_errors > 0 {
            write!(f, ", {} failed reads", self.read_errors)?;
        }
        write!(f, ", for {:.0} s", self.quality_for_ms as f64 / 1e3)
    }
}

/// A duration in ns, us or ms.
fn ns(f: &mut core::fmt::Formatter<'_>, v: i128) -> core::fmt::Result {
    let a = v.unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    if a < 10_000 {
        write!(f, "{sign}{a} ns")
    } else if a < 10_000_000 {
        write!(f, "{sign}{:.1} us", a as f64 / 1e3)
    } else {
        write!(f, "{sign}{:.3} ms", a as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::ParamValue;
    use std::format;

    /// What a person types reads back as the value shown, padding included.
    #[test]
    fn param_values_as_text() {
        let cases = [
            ("on", ParamValue::Bool(true), "on"),
            ("no", ParamValue::Bool(false), "off"),
            ("-12", ParamValue::Int(-12), "-12"),
            ("1e-6", ParamValue::Real(1e-6), "1e-6"),
            ("0.25", ParamValue::Real(0.25), "2.5e-1"),
        ];
        for (typed, value, shown) in cases {
            assert_eq!(ParamValue::parse_text(typed), Some(value), "{typed}");
            assert_eq!(format!("{value}"), shown);
        }
        assert_eq!(format!("[{:<5}]", ParamValue::Int(7)), "[7    ]");
        assert_eq!(
            format!("{}", ParamValue::Int(i64::MIN)),
            "-9223372036854775808"
        );
        assert_eq!(
            format!("{}", ParamValue::Real(-f64::MAX)),
            "-1.7976931348623157e308"
        );
        for bad in ["", "nan", "inf", "1e999", "ten", "0x10"] {
            assert_eq!(ParamValue::parse_text(bad), None, "{bad:?}");
        }
    }
}

#[cfg(test)]
mod gpu_text_tests {
    extern crate std;
    use super::GpuTelemetry;
    use crate::bounded::Text;
    use std::format;

    #[test]
    fn gpu_telemetry_as_text() {
        let mut g = GpuTelemetry {
            source: Text::truncate_from("nvml"),
            temperature_c: Some(37.04),
            sm_clock_mhz: Some(1980),
            load_pct: Some(52.0),
            throttled: Some(false),
        };
        assert_eq!(
            format!("{g}"),
            "nvml: 37.0 C, 1980 MHz, load 52 %, not throttled"
        );
        (g.temperature_c, g.sm_clock_mhz, g.load_pct, g.throttled) = (None, None, None, None);
        assert_eq!(
            format!("{g}"),
            "nvml: temperature n/a, clock n/a, load n/a, throttle n/a"
        );
    }
}

#[cfg(test)]
mod time_text_tests {
    extern crate std;
    use super::{TimeQuality, TimeStatus};
    use crate::bounded::Text;
    use std::format;

    #[test]
    fn the_clock_as_text() {
        let mut t = TimeStatus {
            source: Text::truncate_from("card-clock"),
            clock: Text::truncate_from("/dev/ptp0"),
            quality: TimeQuality::Locked,
            bound_ns: Some(1_500),
            offset_ns: Some(-230),
            drift_ppb: Some(12),
            utc_offset_s: 37,
            system_synchronised: Some(true),
            card_steps: 1,
            system_steps: 0,
            read_errors: 0,
            quality_for_ms: 42_000,
        };
        assert_eq!(
            format!("{t}"),
            "card-clock locked within 1500 ns (/dev/ptp0), offset -230 ns, frequency +12 ppb, \
             TAI-UTC 37 s, system clock synchronised, steps: card 1 system 0, for 42 s"
        );
        (t.quality, t.bound_ns, t.offset_ns, t.drift_ppb) =
            (TimeQuality::FreeRunning, None, Some(5_000_000_123), None);
        t.system_synchronised = Some(false);
        t.card_steps = 0;
        t.clock = Text::truncate_from("");
        assert_eq!(
            format!("{t}"),
            "card-clock free-running, offset +5000.000 ms, TAI-UTC 37 s, system clock UNSYNCHRONISED, for 42 s"
        );
    }
}
