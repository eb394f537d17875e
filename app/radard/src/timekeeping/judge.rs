//! How good the frames' time is: a judge over the 1 Hz readings of the
//! card's clock against the system clock (docs/detections-format.md, "Time
//! quality").
//!
//! - **locked**: the system clock is synchronised (the kernel says so:
//!   phc2sys clears STA_UNSYNC at each update) and the card's clock has been
//!   within `lock_threshold_ns` of it (less the TAI offset) for
//!   `lock_readings` readings in a row. The bound is the largest
//!   |offset| + half the reading's window of the last readings, plus the
//!   kernel's estimated error of the system clock when someone set it.
//! - **holdover**: it was locked and no longer is (the offset grew past the
//!   threshold, the system clock lost its synchronisation or stepped, the
//!   card could not be read): the card runs on its last trim. The bound
//!   grows from the last locked one by `holdover_ppb` per second, until
//!   `holdover_s` have passed.
//! - **free-running**: never locked since start, or holdover ran out: no
//!   bound.
//!
//! Steps are told apart from drift by the clocks against CLOCK_MONOTONIC:
//! the card's clock jumping by more than `step_threshold_ns` between two
//! readings (beyond its measured drift) is a step of the card's clock; the
//! system clock's jumping, a step of the system clock.

use super::Quality;

/// The judge's settings (`[time]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JudgeConfig {
    pub lock_threshold_ns: u64,
    pub lock_readings: u32,
    pub holdover_s: u64,
    pub holdover_ppb: u64,
    pub step_threshold_ns: u64,
}

/// One reading of the card's clock against the system clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// When it was taken, CLOCK_MONOTONIC ns.
    pub mono_ns: u64,
    /// The card's clock less CLOCK_REALTIME, ns (includes the TAI offset).
    pub card_minus_real_ns: i128,
    /// The system-clock pair's window around the card's latch, ns.
    pub window_ns: u64,
    /// CLOCK_REALTIME less CLOCK_MONOTONIC, ns, read with it.
    pub real_minus_mono_ns: i128,
}

/// What the kernel says of the system clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemClock {
    /// None: unknown (adjtimex refused).
    pub synchronised: Option<bool>,
    /// The kernel's estimated error, ns, when someone set it.
    pub esterror_ns: Option<u64>,
}

/// The judge's verdict after a reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub quality: Quality,
    /// None: no bound (free-running, unknown).
    pub bound_ns: Option<u64>,
    /// The card's clock less the system clock less the TAI offset, ns.
    pub offset_ns: Option<i64>,
    /// The card's rate against the system clock, ppb (smoothed).
    pub drift_ppb: Option<i64>,
    /// A step of the card's clock seen at this reading, ns.
    pub card_step_ns: Option<i64>,
    /// A step of the system clock seen at this reading, ns.
    pub system_step_ns: Option<i64>,
}

const RECENT: usize = 8;

/// The state machine; see the module's description.
#[derive(Debug)]
pub struct Judge {
    cfg: JudgeConfig,
    quality: Quality,
    good_run: u32,
    recent: [u64; RECENT],
    recent_n: usize,
    recent_next: usize,
    last_locked_bound: u64,
    holdover_since: u64,
    prev: Option<Reading>,
    drift_ppb: Option<f64>,
}

impl Judge {
    pub fn new(cfg: JudgeConfig) -> Self {
        Judge {
            cfg,
            quality: Quality::FreeRunning,
            good_run: 0,
            recent: [0; RECENT],
            recent_n: 0,
            recent_next: 0,
            last_locked_bound: 0,
            holdover_since: 0,
            prev: None,
            drift_ppb: None,
        }
    }

    pub fn quality(&self) -> Quality {
        self.quality
    }

    /// Takes a reading (or a failed one: `None`) at `now_mono_ns`, with the
    /// system clock's state and the TAI offset in force, and says how good
    /// the card's time is now.
    pub fn update(
        &mut self,
        reading: Option<Reading>,
        sys: SystemClock,
        tai_offset_s: i64,
        now_mono_ns: u64,
    ) -> Verdict {
        let mut v = Verdict {
            quality: self.quality,
            bound_ns: None,
            offset_ns: None,
            drift_ppb: self.drift_ppb.map(|d| d as i64),
            card_step_ns: None,
            system_step_ns: None,
        };
        let mut good = false;
        if let Some(r) = reading {
            let offset = r.card_minus_real_ns - i128::from(tai_offset_s) * 1_000_000_000;
            v.offset_ns = Some(clamp_i64(offset));
            if let Some(p) = self.prev.filter(|p| r.mono_ns > p.mono_ns) {
                let dt = (r.mono_ns - p.mono_ns) as f64;
                let card = (r.card_minus_real_ns + r.real_minus_mono_ns)
                    - (p.card_minus_real_ns + p.real_minus_mono_ns);
                let sys = r.real_minus_mono_ns - p.real_minus_mono_ns;
                let expected = self.drift_ppb.unwrap_or(0.0) * dt / 1e9;
                let threshold = self.cfg.step_threshold_ns as f64;
                if (sys as f64).abs() > threshold {
                    v.system_step_ns = Some(clamp_i64(sys));
                }
                // The card against CLOCK_MONOTONIC, less its drift (against
                // the system clock, which slews at most 500 ppm: well under
                // the threshold over a reading's interval).
                let card_jump = card as f64 - expected;
                if card_jump.abs() > threshold {
                    v.card_step_ns = Some(card_jump as i64);
                }
                if v.card_step_ns.is_none() && v.system_step_ns.is_none() {
                    let d = (r.card_minus_real_ns - p.card_minus_real_ns) as f64 * 1e9 / dt;
                    self.drift_ppb = Some(match self.drift_ppb {
                        Some(old) => old + 0.3 * (d - old),
                        None => d,
                    });
                    v.drift_ppb = self.drift_ppb.map(|d| d as i64);
                }
            }
            self.prev = Some(r);
            let err = offset.unsigned_abs() + u128::from(r.window_ns / 2);
            good = sys.synchronised != Some(false) && err <= u128::from(self.cfg.lock_threshold_ns);
            if good {
                self.recent[self.recent_next] = u64::try_from(err).unwrap_or(u64::MAX);
                self.recent_next = (self.recent_next + 1) % RECENT;
                self.recent_n = (self.recent_n + 1).min(RECENT);
            }
        }
        // A step of either clock ends a lock until the readings agree again.
        if v.card_step_ns.is_some() || v.system_step_ns.is_some() {
            good = false;
        }
        if good {
            self.good_run = self.good_run.saturating_add(1);
        } else {
            self.good_run = 0;
            self.recent_n = 0;
        }
        if self.good_run >= self.cfg.lock_readings.max(1) {
            let worst = self.recent[..self.recent_n]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            let bound = worst.saturating_add(sys.esterror_ns.unwrap_or(0));
            self.quality = Quality::Locked;
            self.last_locked_bound = bound;
            v.bound_ns = Some(bound);
        } else {
            match self.quality {
                Quality::Locked => {
                    self.quality = Quality::Holdover;
                    self.holdover_since = now_mono_ns;
                    v.bound_ns = Some(self.last_locked_bound);
                }
                Quality::Holdover => {
                    let held = now_mono_ns.saturating_sub(self.holdover_since);
                    if held > self.cfg.holdover_s.saturating_mul(1_000_000_000) {
                        self.quality = Quality::FreeRunning;
                    } else {
                        let grown = (u128::from(held) * u128::from(self.cfg.holdover_ppb)
                            / 1_000_000_000) as u64;
                        v.bound_ns = Some(self.last_locked_bound.saturating_add(grown));
                    }
                }
                Quality::FreeRunning | Quality::Unknown => {}
            }
        }
        v.quality = self.quality;
        v
    }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const TAI: i64 = 37;

    fn cfg() -> JudgeConfig {
        JudgeConfig {
            lock_threshold_ns: 100_000,
            lock_readings: 3,
            holdover_s: 10,
            holdover_ppb: 10_000,
            step_threshold_ns: 1_000_000,
        }
    }

    const SYNCED: SystemClock = SystemClock {
        synchronised: Some(true),
        esterror_ns: None,
    };

    /// A reading at second `t` with the card `off` ns off the system clock
    /// (TAI offset aside) and the system clock `sys` ns off monotonic.
    fn at(t: u64, off: i128, sys: i128) -> Reading {
        Reading {
            mono_ns: t * S,
            card_minus_real_ns: i128::from(TAI) * 1_000_000_000 + off,
            window_ns: 2_000,
            real_minus_mono_ns: 1_700_000_000 * 1_000_000_000 + sys,
        }
    }

    #[test]
    fn free_running_until_three_good_readings_then_locked_with_its_bound() {
        let mut j = Judge::new(cfg());
        // Far off: free-running.
        let v = j.update(Some(at(0, 5 * 1_000_000_000, 0)), SYNCED, TAI, 0);
        assert_eq!((v.quality, v.bound_ns), (Quality::FreeRunning, None));
        // phc2sys steps the card onto the system clock: a step, not yet a
        // good reading.
        let v = j.update(Some(at(1, 1_000, 0)), SYNCED, TAI, S);
        assert!(v.card_step_ns.is_some_and(|s| s < -4_900_000_000), "{v:?}");
        assert_eq!(v.quality, Quality::FreeRunning);
        let mut last = v;
        for (i, off) in [20_000i128, -35_000, 10_000].into_iter().enumerate() {
            assert_eq!(last.quality, Quality::FreeRunning);
            last = j.update(
                Some(at(2 + i as u64, off, 0)),
                SYNCED,
                TAI,
                (2 + i as u64) * S,
            );
        }
        assert_eq!(last.quality, Quality::Locked);
        // The worst of the three (35 us) and half a 2 us window.
        assert_eq!(last.bound_ns, Some(36_000));
        assert_eq!(last.offset_ns, Some(10_000));
    }

    #[test]
    fn an_unsynchronised_system_clock_never_locks() {
        let mut j = Judge::new(cfg());
        let unsynced = SystemClock {
            synchronised: Some(false),
            esterror_ns: None,
        };
        for t in 0..10 {
            let v = j.update(Some(at(t, 0, 0)), unsynced, TAI, t * S);
            assert_eq!(v.quality, Quality::FreeRunning);
        }
    }

    #[test]
    fn a_system_step_goes_to_holdover_and_back_once_the_card_follows() {
        let mut j = Judge::new(cfg());
        for t in 0..3 {
            j.update(Some(at(t, 0, 0)), SYNCED, TAI, t * S);
        }
        assert_eq!(j.quality(), Quality::Locked);
        // The system clock steps +300 ms: the card now reads 300 ms behind it.
        let v = j.update(Some(at(3, -300_000_000, 300_000_000)), SYNCED, TAI, 3 * S);
        assert_eq!(v.quality, Quality::Holdover);
        assert_eq!(v.system_step_ns, Some(300_000_000));
        assert_eq!(v.card_step_ns, None, "the card did not move");
        assert_eq!(v.bound_ns, Some(1_000));
        // phc2sys steps the card to follow.
        let v = j.update(Some(at(4, 0, 300_000_000)), SYNCED, TAI, 4 * S);
        assert_eq!(v.card_step_ns, Some(300_000_000));
        assert_eq!(v.quality, Quality::Holdover);
        // The bound grows 10 ppm a second meanwhile.
        assert_eq!(v.bound_ns, Some(1_000 + 10_000));
        let v = j.update(Some(at(5, 0, 300_000_000)), SYNCED, TAI, 5 * S);
        assert_eq!(v.quality, Quality::Holdover);
        let v = j.update(Some(at(6, 0, 300_000_000)), SYNCED, TAI, 6 * S);
        assert_eq!(v.quality, Quality::Holdover);
        let v = j.update(Some(at(7, 0, 300_000_000)), SYNCED, TAI, 7 * S);
        assert_eq!(v.quality, Quality::Locked);
    }

    #[test]
    fn holdover_runs_out_into_free_running() {
        let mut j = Judge::new(cfg());
        for t in 0..3 {
            j.update(Some(at(t, 0, 0)), SYNCED, TAI, t * S);
        }
        // The card cannot be read any more.
        let v = j.update(None, SYNCED, TAI, 3 * S);
        assert_eq!(v.quality, Quality::Holdover);
        let v = j.update(None, SYNCED, TAI, 12 * S);
        assert_eq!(v.quality, Quality::Holdover);
        assert_eq!(v.bound_ns, Some(1_000 + 90_000));
        let v = j.update(None, SYNCED, TAI, 14 * S);
        assert_eq!((v.quality, v.bound_ns), (Quality::FreeRunning, None));
    }

    #[test]
    fn drift_is_the_cards_rate_against_the_system_clock() {
        let mut j = Judge::new(cfg());
        // +100 ppm: 100 us more each second.
        let mut v = j.update(Some(at(0, 0, 0)), SYNCED, TAI, 0);
        for t in 1..20 {
            v = j.update(Some(at(t, i128::from(t) * 100_000, 0)), SYNCED, TAI, t * S);
            assert_eq!(v.card_step_ns, None, "drift is no step");
        }
        assert_eq!(v.drift_ppb, Some(100_000));
        // 100 us off after a second: past the threshold, never locked.
        assert_eq!(v.quality, Quality::FreeRunning);
    }
}
