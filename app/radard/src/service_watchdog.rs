//! When radard sends systemd's service watchdog its `WATCHDOG=1`.
//!
//! systemd kills the service when two pings are more than `WatchdogSec=`
//! apart. radard pings only while frames are processed and deadlines hold,
//! so that a stalled source, loop or GPU, and a loop that keeps missing
//! deadlines, are restarted. An isolated miss must not be: the check runs
//! every quarter interval, so one check without a ping leaves a gap of half
//! an interval (plus the status thread's tick), well inside the limit.
//! Checked at half the interval, a single skipped ping would make a gap of
//! a whole interval plus the tick, and systemd would kill radard for one
//! late frame.

use std::time::{Duration, Instant};

/// The checks per watchdog interval.
const CHECKS_PER_INTERVAL: u32 = 4;

/// Decides, at each check, whether to ping.
#[derive(Debug, Clone)]
pub struct WatchdogGate {
    every: Duration,
    next_check: Instant,
    /// (frames processed, deadline misses) at the previous check.
    seen: (u64, u64),
}

impl WatchdogGate {
    /// A gate for systemd's `WatchdogSec=` `interval`; the first check is at `now`.
    pub fn new(interval: Duration, now: Instant) -> Self {
        WatchdogGate {
            every: interval / CHECKS_PER_INTERVAL,
            next_check: now,
            seen: (0, 0),
        }
    }

    /// Called as often as the status thread ticks. True when a ping is due:
    /// a check is due, frames were processed since the previous check and
    /// no deadline was missed since then.
    pub fn ping_due(&mut self, now: Instant, frames_processed: u64, deadline_misses: u64) -> bool {
        if now < self.next_check {
            return false;
        }
        // On the schedule, not from `now`: the tick's lateness must not
        // add up into the gap between pings.
        self.next_check += self.every;
        if self.next_check <= now {
            self.next_check = now + self.every;
        }
        let healthy = frames_processed > self.seen.0 && deadline_misses == self.seen.1;
        self.seen = (frames_processed, deadline_misses);
        healthy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(2);
    const TICK: Duration = Duration::from_millis(23);
    const FRAME: Duration = Duration::from_millis(8);

    /// Runs the gate over `span` with a frame every 8 ms and a tick every
    /// 23 ms; `missed(t)` says whether the frame at `t` missed. Returns the
    /// ping times.
    fn pings(
        span: Duration,
        missed: impl Fn(Duration) -> bool,
        stalled: impl Fn(Duration) -> bool,
    ) -> Vec<Duration> {
        let t0 = Instant::now();
        let mut gate = WatchdogGate::new(INTERVAL, t0);
        let (mut frames, mut misses) = (0u64, 0u64);
        let mut next_frame = Duration::ZERO;
        let mut out = Vec::new();
        let mut t = Duration::ZERO;
        while t < span {
            while next_frame <= t {
                if !stalled(next_frame) {
                    frames += 1;
                    misses += u64::from(missed(next_frame));
                }
                next_frame += FRAME;
            }
            if gate.ping_due(t0 + t, frames, misses) {
                out.push(t);
            }
            t += TICK;
        }
        out
    }

    fn largest_gap(p: &[Duration]) -> Duration {
        p.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default()
    }

    #[test]
    fn frames_on_time_are_pinged_every_quarter_interval() {
        let p = pings(Duration::from_secs(20), |_| false, |_| false);
        assert!(p.len() >= 38, "{} pings in 20 s", p.len());
        assert!(
            largest_gap(&p) <= INTERVAL / 4 + TICK,
            "gap {:?}",
            largest_gap(&p)
        );
    }

    #[test]
    fn an_isolated_miss_costs_one_ping_and_stays_inside_the_interval() {
        // One late frame, at each of these frames in turn (8 ms apart, so
        // they fall at every phase of the checks).
        for frame in (125u32..=375).step_by(7) {
            let at = FRAME * frame;
            let p = pings(Duration::from_secs(6), |t| t == at, |_| false);
            let gap = largest_gap(&p);
            assert!(
                gap > INTERVAL / 4 + TICK,
                "a miss at {at:?} held back no ping: {gap:?}"
            );
            assert!(
                gap <= INTERVAL / 2 + TICK,
                "a miss at {at:?} left {gap:?} between pings"
            );
            assert!(gap < INTERVAL, "systemd would kill radard: {gap:?}");
        }
    }

    #[test]
    fn misses_for_a_whole_interval_stop_the_pings() {
        let from = Duration::from_secs(5);
        let to = from + INTERVAL + INTERVAL / 4;
        let p = pings(Duration::from_secs(12), |t| t >= from && t < to, |_| false);
        let gap = largest_gap(&p);
        assert!(
            gap > INTERVAL,
            "misses from {from:?} to {to:?}: largest gap {gap:?}"
        );
        assert!(
            p.iter().any(|t| *t > to),
            "pings resume once deadlines hold again: {p:?}"
        );
    }

    #[test]
    fn a_stalled_source_gets_no_ping() {
        let from = Duration::from_secs(4);
        let to = Duration::from_secs(8);
        let p = pings(Duration::from_secs(12), |_| false, |t| t >= from && t < to);
        assert!(
            !p.iter().any(|t| *t > from + INTERVAL / 4 + TICK && *t < to),
            "pings during the stall: {p:?}"
        );
        assert!(largest_gap(&p) > INTERVAL, "{p:?}");
        assert!(p.iter().any(|t| *t > to), "pings resume: {p:?}");
    }
}
