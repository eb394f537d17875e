//! The frames' wall-clock time (docs/detections-format.md, "Time"). Until
//! the FPGA's clock is disciplined to UTC, a frame's UTC time is taken at
//! its frame event: the loop's CLOCK_MONOTONIC reading of the event,
//! converted to CLOCK_REALTIME by the offset between the two clocks read
//! back to back. Both are vDSO reads: no system call in the loop.

use radar_dsp::detection::UtcTime;
use tegra_p2p::clock::monotonic_ns;

/// Where a frame's UTC time comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u64)]
pub enum TimeSource {
    /// CLOCK_REALTIME at the frame event (the system clock, as NTP or PTP
    /// keep it), converted from the monotonic event time.
    #[default]
    FrameEvent = 1,
}

impl TimeSource {
    /// The name outputs carry (`utc_source`).
    pub fn name(self) -> &'static str {
        match self {
            TimeSource::FrameEvent => "frame-event",
        }
    }

    /// As stored in a word of the detection feed.
    pub fn to_word(self) -> u64 {
        self as u64
    }

    /// From a feed word (the frame event is the only source there is yet).
    pub fn from_word(_w: u64) -> Self {
        TimeSource::FrameEvent
    }

    /// A UTC time from this source, for the detections line.
    pub fn utc(self, ns: u64) -> UtcTime {
        UtcTime {
            ns,
            source: self.name(),
        }
    }
}

/// CLOCK_REALTIME now, in nanoseconds since 1970 (0 if the clock reads
/// before 1970).
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: out-pointer to a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// The CLOCK_REALTIME time of a CLOCK_MONOTONIC instant `mono_ns`: the
/// instant plus the clocks' offset now.
pub fn utc_of_monotonic(mono_ns: u64) -> u64 {
    let real = realtime_ns();
    let mono = monotonic_ns();
    let offset = i128::from(real) - i128::from(mono);
    u64::try_from((i128::from(mono_ns) + offset).max(0)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            TimeSource::from_word(TimeSource::FrameEvent.to_word()).name(),
            "frame-event"
        );
    }
}
