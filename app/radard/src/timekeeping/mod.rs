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

use serde::{Deserialize, Serialize};
use tegra_p2p::CaptureClock;

pub use crate::status::time::{NO_BOUND, Quality, TimeSource, TimeState, ns_text};
use crate::status::{EventKind, StatusBoard};
pub use judge::{Judge, JudgeConfig, Reading, SystemClock, Verdict};
pub use reader::{ClockReader, system_clock};

/// `[time]` in the configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeConfig {
    /// The card's PTP hardware clock: "auto" (the one the card's sysfs node
    /// names) or a device path (`/dev/fpga-ptp`).
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
