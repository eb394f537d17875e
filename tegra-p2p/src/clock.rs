//! The host's clocks as the capture path reads them: CLOCK_MONOTONIC in
//! nanoseconds (the frame loop's clock, and `FrameMeta::host_ns`: the
//! kernel module converts each frame's first sample to it), and CLOCK_TAI
//! and CLOCK_REALTIME (the time of day the simulator stamps frames with,
//! as a card stamps them with its PTP hardware clock).

/// CLOCK_MONOTONIC now, in nanoseconds (vDSO: no system call).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: out-pointer to a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn read_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: out-pointer to a local timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// CLOCK_TAI now, ns (vDSO).
pub fn tai_ns() -> i128 {
    read_ns(libc::CLOCK_TAI)
}

/// CLOCK_REALTIME now, ns (vDSO).
pub fn realtime_ns() -> i128 {
    read_ns(libc::CLOCK_REALTIME)
}

/// The CLOCK_TAI time of the CLOCK_MONOTONIC instant `mono_ns`: the
/// instant plus the clocks' offset now (read back to back), as ns since
/// 1970 (0 if that would be before 1970).
pub fn tai_of_monotonic(mono_ns: u64) -> u64 {
    let tai = tai_ns();
    let mono = read_ns(libc::CLOCK_MONOTONIC);
    u64::try_from((i128::from(mono_ns) + tai - mono).max(0)).unwrap_or(u64::MAX)
}

/// Sleep until CLOCK_MONOTONIC reaches `t_ns`, or a signal interrupts the
/// sleep (callers that must not wake early check the clock and call again).
pub fn sleep_until_ns(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as _,
        tv_nsec: (t_ns % 1_000_000_000) as _,
    };
    // SAFETY: absolute sleep on a local timespec, no remaining-time output.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_the_time_given() {
        let t0 = monotonic_ns();
        sleep_until_ns(t0 + 2_000_000);
        let t1 = monotonic_ns();
        assert!(
            t1 >= t0 + 2_000_000,
            "woke {} ns early",
            t0 + 2_000_000 - t1
        );
        sleep_until_ns(t0); // in the past: returns at once
        assert!(monotonic_ns() >= t1);
    }
}
