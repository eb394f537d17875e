//! The frames' time: which clock stamps them, how far it can be trusted,
//! and the thread that finds out (docs/detections-format.md, "Time").
//!
//! A card stamps each frame's first sample with its clock, a PTP hardware
//! clock that linuxptp keeps on the site's time (TAI); the simulator stamps
//! frames with the host's CLOCK_TAI the same way. A normal-priority thread
//! reads that clock against the system clock once a second
//! (`PTP_SYS_OFFSET_EXTENDED`, the tightest of several readings), asks the
//! kernel whether the system clock is synchronised (adjtimex, read only),
//! judges the time's quality ([`judge`]) and publishes it through a
//! sequence lock on the status board: the loop reads it with each frame and
//! never waits for it. Steps of either clock and changes of quality are
//! logged as events and printed.

pub mod judge;
mod reader;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};
use tegra_p2p::CaptureClock;

use crate::status::{EventKind, StatusBoard};
pub use judge::{Judge, JudgeConfig, Reading, SystemClock, Verdict};
pub use reader::{ClockReader, system_clock};

/// `[time]` in the configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeConfig {
    /// The card's PTP hardware clock: "auto" (the one the card's sysfs node
    /// names) or a device path (`/dev/ptp-fpga`).
    pub phc: String,
    /// Time between readings.
    pub interval_ms: u32,
    /// Readings of the card's clock per look (the tightest is kept).
    pub samples: u32,
    /// Locked: the card within this of the system clock, ns.
    pub lock_threshold_ns: u64,
    /// ... for this many readings in a row.
    pub lock_readings: u32,
    /// Holdover lasts this long before it is free-running, s.
    pub holdover_s: u64,
    /// In holdover the bound grows this much per second, ppb of the time.
    pub holdover_ppb: u64,
    /// A jump of a clock past its drift by more than this is a step, ns.
    pub step_threshold_ns: u64,
    /// TAI - UTC, s; left out: the kernel's (CLOCK_TAI - CLOCK_REALTIME),
    /// which phc2sys sets from ptp4l.
    pub utc_offset_s: Option<i32>,
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig {
            phc: "auto".into(),
            interval_ms: 1000,
            samples: 5,
            lock_threshold_ns: 100_000,
            lock_readings: 3,
            holdover_s: 600,
            holdover_ppb: 10_000,
            step_threshold_ns: 1_000_000,
            utc_offset_s: None,
        }
    }
}

impl TimeConfig {
    /// Checks the values; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(100..=60_000).contains(&self.interval_ms) {
            return Err((
                "time.interval_ms",
                format!("{} is outside 100..=60000", self.interval_ms),
            ));
        }
        if !(1..=25).contains(&self.samples) {
            return Err((
                "time.samples",
                format!("{} is outside 1..=25", self.samples),
            ));
        }
        if self.lock_readings == 0 {
            return Err(("time.lock_readings", "must be at least 1".into()));
        }
        if self.step_threshold_ns == 0 {
            return Err(("time.step_threshold_ns", "must be at least 1".into()));
        }
        if self.phc != "auto" && !self.phc.starts_with('/') {
            return Err((
                "time.phc",
                format!("{:?} is neither \"auto\" nor a device path", self.phc),
            ));
        }
        if self.utc_offset_s.is_some_and(|o| !(0..=100).contains(&o)) {
            return Err((
                "time.utc_offset_s",
                format!("{:?} is outside 0..=100", self.utc_offset_s),
            ));
        }
        Ok(())
    }

    pub fn judge(&self) -> JudgeConfig {
        JudgeConfig {
            lock_threshold_ns: self.lock_threshold_ns,
            lock_readings: self.lock_readings,
            holdover_s: self.holdover_s,
            holdover_ppb: self.holdover_ppb,
            step_threshold_ns: self.step_threshold_ns,
        }
    }
}

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

/// One line of text for a state (status line, console, logs).
pub fn describe(s: &TimeState, phc: Option<&str>) -> String {
    let mut t = format!("{} {}", s.source().name(), s.quality().name());
    if let Some(b) = s.bound() {
        t += &format!(" within {}", ns_text(b as i128));
    }
    if let Some(p) = phc {
        t += &format!(" ({p})");
    }
    if let Some(o) = s.offset() {
        t += &format!(" offset {:+}", ns_text(i128::from(o)));
    }
    if let Some(d) = s.drift() {
        t += &format!(" drift {d:+} ppb");
    }
    t += &format!(
        " tai-utc {} s system {}",
        s.utc_offset_s,
        match s.system_synchronised {
            0 => "unsynchronised",
            1 => "synchronised",
            _ => "sync unknown",
        }
    );
    if s.card_steps + s.system_steps > 0 {
        t += &format!(" steps card={} system={}", s.card_steps, s.system_steps);
    }
    if s.read_errors > 0 {
        t += &format!(" read_errors={}", s.read_errors);
    }
    t
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

/// The clock thread's work: a reader, the judge, and what it last said.
pub struct Clockwork {
    reader: ClockReader,
    judge: Judge,
    state: TimeState,
    cfg: TimeConfig,
    phc_name: Option<String>,
}

impl Clockwork {
    /// For a source's capture clock under `cfg`.
    pub fn new(cfg: &TimeConfig, capture: &CaptureClock) -> Self {
        let source = TimeSource::of(capture);
        let reader = ClockReader::for_capture(cfg, capture);
        let phc_name = reader.phc_path().map(|p| p.display().to_string());
        let mut state = TimeState::initial(source, 0);
        state.phc_index = reader.phc_index().map_or(-1, i64::from);
        Clockwork {
            reader,
            judge: Judge::new(cfg.judge()),
            state,
            cfg: cfg.clone(),
            phc_name,
        }
    }

    /// The device of the card's clock read (None: no card clock).
    pub fn phc_path(&self) -> Option<PathBuf> {
        self.reader.phc_path()
    }

    pub fn state(&self) -> TimeState {
        self.state
    }

    /// One look: read, judge, publish on `board`, log what changed to the
    /// events and `log`.
    pub fn look(&mut self, board: &StatusBoard, log: &mut dyn Write) {
        let tai = match self.cfg.utc_offset_s {
            Some(o) => i64::from(o),
            None => reader::kernel_tai_offset_s(),
        };
        let sys = system_clock();
        let mut s = self.state;
        s.generation += 1;
        s.utc_offset_s = tai;
        s.system_synchronised = match sys.synchronised {
            Some(true) => 1,
            Some(false) => 0,
            None => 2,
        };
        if s.source() == TimeSource::FrameEvent {
            s.quality = Quality::Unknown as u64;
            board.publish_time(&s);
            self.state = s;
            return;
        }
        let now = tegra_p2p::clock::monotonic_ns();
        let reading = match self.reader.read(self.cfg.samples) {
            Ok(r) => Some(r),
            Err(e) => {
                s.read_errors += 1;
                let errno = e.raw_os_error().unwrap_or(0) as u64;
                if s.last_errno != errno || s.read_errors == 1 {
                    let _ = writeln!(
                        log,
                        "radard: time: cannot read {}: {e}",
                        self.phc_name.as_deref().unwrap_or("the frames' clock")
                    );
                }
                s.last_errno = errno;
                None
            }
        };
        if let Some(i) = self.reader.phc_index() {
            s.phc_index = i64::from(i);
        }
        let v = self.judge.update(reading, sys, tai, now);
        if let Some(r) = reading {
            s.window_ns = r.window_ns;
            s.last_errno = 0;
        }
        if let Some(o) = v.offset_ns {
            s.offset_ns = o;
            s.offset_known = 1;
        }
        if let Some(d) = v.drift_ppb {
            s.drift_ppb = d;
            s.drift_known = 1;
        }
        if let Some(step) = v.card_step_ns {
            s.card_steps += 1;
            s.last_card_step_ns = step;
            board.post(EventKind::ClockStep, step as u64, STEP_CARD);
            let _ = writeln!(
                log,
                "radard: time: the frames' clock ({}) stepped by {}",
                self.phc_name.as_deref().unwrap_or(s.source().name()),
                ns_text(i128::from(step))
            );
        }
        if let Some(step) = v.system_step_ns {
            s.system_steps += 1;
            s.last_system_step_ns = step;
            board.post(EventKind::ClockStep, step as u64, STEP_SYSTEM);
            let _ = writeln!(
                log,
                "radard: time: the system clock stepped by {}",
                ns_text(i128::from(step))
            );
        }
        let before = s.quality();
        s.quality = v.quality as u64;
        s.bound_ns = v.bound_ns.unwrap_or(NO_BOUND);
        if v.quality != before {
            s.quality_since_ns = board.uptime_ns();
            board.post(EventKind::TimeQuality, v.quality as u64, s.bound_ns);
            let _ = writeln!(
                log,
                "radard: time: {}",
                describe(&s, self.phc_name.as_deref())
            );
        }
        board.publish_time(&s);
        self.state = s;
    }
}

/// [`EventKind::ClockStep`]'s b: which clock stepped.
pub const STEP_CARD: u64 = 1;
pub const STEP_SYSTEM: u64 = 2;

/// The clock thread: a look every `interval` until `stop`. What changed goes
/// to stderr (the journal): stdout is the status printer's, which holds it.
pub fn run(work: &mut Clockwork, board: &StatusBoard, interval: Duration, stop: &AtomicBool) {
    let mut next = Instant::now();
    let stderr = std::io::stderr();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            work.look(board, &mut stderr.lock());
            next += interval;
            if next < now {
                next = now + interval;
            }
        }
        std::thread::sleep((next - Instant::now().min(next)).min(Duration::from_millis(100)));
    }
}
