//! Each frame's wall-clock time, stamped in the loop (docs/detections-format.md,
//! "Time"). A frame from a card with a clock carries the card's clock at
//! its first sample (TAI, as linuxptp keeps it): its UTC time is that less
//! the TAI offset in force. The simulator's frames carry the host's
//! CLOCK_TAI the same way. A frame without a clock of the site's time (a
//! replay, a card without a clock) gets the system clock at its frame event,
//! converted from the loop's CLOCK_MONOTONIC reading by the clocks' offset
//! read back to back.
//!
//! The quality comes from the clock thread's last judgement (the board's
//! time, read through its sequence lock: no waiting). A frame's time is
//! never at or before the previous frame's: when its clock stepped back, the
//! frame is held half a capture interval (its CLOCK_MONOTONIC first sample
//! against the previous frame's) after the previous frame and says
//! holdover, so that the frames catch up with the clock after twice the
//! step (no order of times can do it sooner without going back). All of
//! it is arithmetic and vDSO clock reads: no system call in the loop.

use radar_dsp::detection::UtcTime;
use tegra_p2p::FrameMeta;

use crate::timekeeping::{Quality, TimeSource, TimeState};

/// CLOCK_REALTIME now, in nanoseconds since 1970 (0 if the clock reads
/// before 1970).
pub fn realtime_ns() -> u64 {
    u64::try_from(tegra_p2p::clock::realtime_ns().max(0)).unwrap_or(u64::MAX)
}

/// The CLOCK_REALTIME time of a CLOCK_MONOTONIC instant `mono_ns`: the
/// instant plus the clocks' offset now.
pub fn utc_of_monotonic(mono_ns: u64) -> u64 {
    tegra_p2p::clock::of_monotonic_ns(libc::CLOCK_REALTIME, mono_ns)
}

/// A frame's time as the outputs carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameTime {
    /// UTC, ns since 1970 (leap seconds not counted).
    pub utc_ns: u64,
    pub source: TimeSource,
    pub quality: Quality,
    /// The bound on its error, ns (None: no bound).
    pub bound_ns: Option<u64>,
    /// It was held after the previous frame by this much (its clock had
    /// stepped back); None: it is the clock's own reading.
    pub held_back_ns: Option<u64>,
}

impl FrameTime {
    /// For the detections line.
    pub fn utc(&self) -> UtcTime {
        UtcTime {
            ns: self.utc_ns,
            source: self.source.name(),
            quality: self.quality.name(),
            bound_ns: self.bound_ns,
        }
    }
}

/// The loop's stamper: remembers the previous frame's time.
#[derive(Debug, Default)]
pub struct FrameClock {
    period_ns: u64,
    /// The previous frame's UTC, CLOCK_MONOTONIC first sample and sequence.
    last: Option<(u64, u64, u64)>,
    holding: bool,
    /// Frames held after their predecessor so far.
    pub held_frames: u64,
}

impl FrameClock {
    /// `period_ns`: the frame period (0: unpaced), the hold's step when a
    /// frame has no monotonic first-sample time.
    pub fn new(period_ns: u64) -> Self {
        FrameClock {
            period_ns,
            ..FrameClock::default()
        }
    }

    /// The time of a frame with `meta`, whose event the loop saw at
    /// `event_mono_ns`, under the clock thread's latest judgement `st`.
    /// Returns it and whether a hold began with this frame.
    pub fn stamp(
        &mut self,
        st: &TimeState,
        meta: &FrameMeta,
        event_mono_ns: u64,
    ) -> (FrameTime, bool) {
        let source = st.source();
        let raw = match source {
            TimeSource::CardClock | TimeSource::HostClock => {
                let utc =
                    i128::from(meta.timestamp_ns) - i128::from(st.utc_offset_s) * 1_000_000_000;
                u64::try_from(utc.max(0)).unwrap_or(u64::MAX)
            }
            TimeSource::FrameEvent => utc_of_monotonic(event_mono_ns),
        };
        let mut t = FrameTime {
            utc_ns: raw,
            source,
            quality: st.quality(),
            bound_ns: st.bound(),
            held_back_ns: None,
        };
        let mut began = false;
        if let Some((last_utc, last_host, last_seq)) = self.last {
            if raw <= last_utc {
                let interval = if meta.host_ns > last_host && last_host > 0 {
                    meta.host_ns - last_host
                } else {
                    self.period_ns
                        .saturating_mul(meta.sequence.saturating_sub(last_seq))
                };
                // Half the interval: the clock catches up after twice the step.
                t.utc_ns = last_utc.saturating_add((interval / 2).max(1));
                let back = t.utc_ns - raw;
                t.held_back_ns = Some(back);
                if t.quality == Quality::Locked {
                    t.quality = Quality::Holdover;
                }
                t.bound_ns = t.bound_ns.map(|b| b.saturating_add(back));
                self.held_frames += 1;
                began = !self.holding;
                self.holding = true;
            } else {
                self.holding = false;
            }
        }
        self.last = Some((t.utc_ns, meta.host_ns, meta.sequence));
        (t, began)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timekeeping::NO_BOUND;
    use tegra_p2p::clock::monotonic_ns;

    #[test]
    fn a_monotonic_instant_converts_to_the_realtime_clock() {
        let mono = monotonic_ns();
        let utc = utc_of_monotonic(mono);
        let now = realtime_ns();
        // Read within a few milliseconds of each other; after 2020.
        assert!(utc <= now && now - utc < 50_000_000, "{utc} vs {now}");
        assert!(utc > 1_577_836_800_000_000_000);
        // A second earlier on one clock is a second earlier on the other.
        let before = utc_of_monotonic(mono - 1_000_000_000);
        assert!((utc - before).abs_diff(1_000_000_000) < 50_000_000);
    }

    fn card_state(quality: Quality, bound: u64) -> TimeState {
        TimeState {
            generation: 1,
            source: TimeSource::CardClock as u64,
            quality: quality as u64,
            bound_ns: bound,
            utc_offset_s: 37,
            ..TimeState::default()
        }
    }

    fn meta(seq: u64, tai_ns: u64, host_ns: u64) -> FrameMeta {
        FrameMeta {
            sequence: seq,
            timestamp_ns: tai_ns,
            host_ns,
            ..FrameMeta::default()
        }
    }

    const TAI: u64 = 37_000_000_000;
    const T0: u64 = 1_795_700_000_000_000_000;
    const P: u64 = 8_000_000;

    #[test]
    fn the_cards_tai_less_the_offset_is_utc_and_carries_the_quality() {
        let mut c = FrameClock::new(P);
        let st = card_state(Quality::Locked, 2_000);
        let (t, held) = c.stamp(&st, &meta(0, T0 + TAI, 100), 0);
        assert!(!held);
        assert_eq!(
            (t.utc_ns, t.source.name(), t.quality.name(), t.bound_ns),
            (T0, "card-clock", "locked", Some(2_000))
        );
        let free = card_state(Quality::FreeRunning, NO_BOUND);
        let (t, _) = c.stamp(&free, &meta(1, T0 + TAI + P, 100 + P), 0);
        assert_eq!(
            (t.utc_ns, t.quality, t.bound_ns),
            (T0 + P, Quality::FreeRunning, None)
        );
    }

    /// The card's clock steps back 300 ms: the frames after it are held half
    /// a capture interval after their predecessor (holdover, the bound
    /// grown by the hold) until the clock passes them, after twice the
    /// step; never a time at or before the previous frame's.
    #[test]
    fn a_step_back_never_makes_a_frame_time_go_back_or_repeat() {
        let mut c = FrameClock::new(P);
        let st = card_state(Quality::Locked, 1_000);
        let mut last = 0;
        let mut held = 0;
        let mut began = 0;
        for i in 0..200u64 {
            let step_back = if i >= 50 { 300_000_000 } else { 0 };
            let tai = T0 + TAI + i * P - step_back;
            let (t, b) = c.stamp(&st, &meta(i, tai, 1_000 + i * P), 0);
            assert!(t.utc_ns > last, "frame {i}: {} after {last}", t.utc_ns);
            if let Some(back) = t.held_back_ns {
                held += 1;
                assert_eq!(t.quality, Quality::Holdover);
                assert_eq!(t.bound_ns, Some(1_000 + back));
                assert_eq!(t.utc_ns, last + P / 2, "half a capture interval on");
            } else if i > 50 {
                assert_eq!(t.quality, Quality::Locked);
            }
            began += u64::from(b);
            last = t.utc_ns;
        }
        // 300 ms back at 8 ms frames: held until the clock passes them,
        // twice the step (600 ms) less the frame that catches up.
        assert_eq!((held, began, c.held_frames), (74, 1, 74));
    }
}
