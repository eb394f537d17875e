//! The frames' time as the clock thread publishes it on the board and the
//! loop reads it with every frame (`timekeeping` judges it; docs/detections-format.md,
//! "Time"): plain data for a sequence lock, and the names outputs carry.

use bytemuck::{Pod, Zeroable};
use tegra_p2p::CaptureClock;

/// How good a frame's time is.
#[repr(u64)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Quality {
    /// The source has no clock of the site's time (a replay, a card
    /// without a clock): the time is the system clock at the frame event.
    #[default]
    Unknown = 0,
    /// Never locked, or holdover ran out: no bound.
    FreeRunning = 1,
    /// Was locked; the card runs on its last trim; the bound grows.
    Holdover = 2,
    /// On the system clock within the bound, the system clock synchronised.
    Locked = 3,
}

impl Quality {
    pub fn from_u64(v: u64) -> Self {
        match v {
            1 => Quality::FreeRunning,
            2 => Quality::Holdover,
            3 => Quality::Locked,
            _ => Quality::Unknown,
        }
    }
    /// The name outputs carry (`time_quality`).
    pub fn name(self) -> &'static str {
        match self {
            Quality::Unknown => "unknown",
            Quality::FreeRunning => "free-running",
            Quality::Holdover => "holdover",
            Quality::Locked => "locked",
        }
    }
}

/// Where a frame's UTC time comes from (`utc_source`).
#[repr(u64)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeSource {
    /// CLOCK_REALTIME at the frame event (no clock of the site's time).
    #[default]
    FrameEvent = 1,
    /// The card's PTP hardware clock at the frame's first sample.
    CardClock = 2,
    /// The host's CLOCK_TAI at the frame's first sample (the simulator).
    HostClock = 3,
}

impl TimeSource {
    pub fn from_u64(v: u64) -> Self {
        match v {
            2 => TimeSource::CardClock,
            3 => TimeSource::HostClock,
            _ => TimeSource::FrameEvent,
        }
    }
    /// The name outputs carry (`utc_source`).
    pub fn name(self) -> &'static str {
        match self {
            TimeSource::FrameEvent => "frame-event",
            TimeSource::CardClock => "card-clock",
            TimeSource::HostClock => "host-clock",
        }
    }
    /// Of a source's capture clock.
    pub fn of(clock: &CaptureClock) -> Self {
        match clock {
            CaptureClock::Phc(_) => TimeSource::CardClock,
            CaptureClock::HostTai => TimeSource::HostClock,
            CaptureClock::Monotonic | CaptureClock::CardCounter => TimeSource::FrameEvent,
        }
    }
}

/// "No bound" in [`TimeState::bound_ns`].
pub const NO_BOUND: u64 = u64::MAX;

/// What the clock thread publishes (and the loop reads with every frame).
/// Plain data for the sequence lock.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TimeState {
    /// Readings judged so far (0: none yet).
    pub generation: u64,
    /// [`TimeSource`] as a number.
    pub source: u64,
    /// [`Quality`] as a number.
    pub quality: u64,
    /// The bound on the frames' time error, ns; [`NO_BOUND`] for none.
    pub bound_ns: u64,
    /// TAI - UTC in force, s (the frames' UTC is the card's TAI less it).
    pub utc_offset_s: i64,
    /// The card's clock less the system clock less the TAI offset, ns, at
    /// the last good reading (0 and `offset_known` 0 when none).
    pub offset_ns: i64,
    pub offset_known: u64,
    /// The last reading's window (how well it was read), ns.
    pub window_ns: u64,
    /// The card's rate against the system clock, ppb; `drift_known` 0: none.
    pub drift_ppb: i64,
    pub drift_known: u64,
    /// 1 synchronised, 0 not, 2 unknown (adjtimex refused).
    pub system_synchronised: u64,
    /// Steps of the card's clock and of the system clock seen, and the last.
    pub card_steps: u64,
    pub last_card_step_ns: i64,
    pub system_steps: u64,
    pub last_system_step_ns: i64,
    /// Readings that failed, and the last failure's errno (0: none).
    pub read_errors: u64,
    pub last_errno: u64,
    /// The card's clock's index (N of /dev/ptpN), -1 for none.
    pub phc_index: i64,
    /// Board uptime at the last change of quality, ns.
    pub quality_since_ns: u64,
}

impl TimeState {
    pub fn quality(&self) -> Quality {
        Quality::from_u64(self.quality)
    }
    pub fn source(&self) -> TimeSource {
        TimeSource::from_u64(self.source)
    }
    pub fn bound(&self) -> Option<u64> {
        (self.bound_ns != NO_BOUND).then_some(self.bound_ns)
    }
    pub fn offset(&self) -> Option<i64> {
        (self.offset_known != 0).then_some(self.offset_ns)
    }
    pub fn drift(&self) -> Option<i64> {
        (self.drift_known != 0).then_some(self.drift_ppb)
    }
    /// A state for a source: no reading yet, free-running where there is
    /// a clock of the site's time to judge.
    pub fn initial(source: TimeSource, utc_offset_s: i64) -> Self {
        TimeState {
            source: source as u64,
            quality: match source {
                TimeSource::FrameEvent => Quality::Unknown,
                _ => Quality::FreeRunning,
            } as u64,
            bound_ns: NO_BOUND,
            utc_offset_s,
            system_synchronised: 2,
            phc_index: -1,
            ..TimeState::default()
        }
    }
}

/// A duration as text: ns, us or ms, signed.
pub fn ns_text(ns: i128) -> String {
    let a = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    if a < 10_000 {
        format!("{sign}{a} ns")
    } else if a < 10_000_000 {
        format!("{sign}{:.1} us", a as f64 / 1e3)
    } else {
        format!("{sign}{:.3} ms", a as f64 / 1e6)
    }
}
