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

/// `clock` minus CLOCK_MONOTONIC now, ns: `clock` read between two
/// CLOCK_MONOTONIC readings and set against their midpoint. A thread
/// preempted between the reads would see the offset off by the time it
/// was away (a loaded machine: milliseconds, more than a frame), so the
/// narrowest of a few brackets counts; a first one under 20 us is taken at
/// once (vDSO reads: usually well under 1 us).
pub fn offset_from_monotonic_ns(clock: libc::clockid_t) -> i128 {
    const TIGHT_NS: i128 = 20_000;
    let mut best: Option<(i128, i128)> = None;
    for _ in 0..5 {
        let before = read_ns(libc::CLOCK_MONOTONIC);
        let t = read_ns(clock);
        let after = read_ns(libc::CLOCK_MONOTONIC);
        let window = after - before;
        let offset = t - before - window / 2;
        if best.is_none_or(|(w, _)| window < w) {
            best = Some((window, offset));
        }
        if window < TIGHT_NS {
            break;
        }
    }
    best.map_or(0, |(_, offset)| offset)
}

/// The time on `clock` of the CLOCK_MONOTONIC instant `mono_ns`: the
/// instant plus the clocks' offset now (offset_from_monotonic_ns), as ns
/// since 1970 (0 if that would be before 1970).
pub fn of_monotonic_ns(clock: libc::clockid_t, mono_ns: u64) -> u64 {
    let t = i128::from(mono_ns) + offset_from_monotonic_ns(clock);
    u64::try_from(t.max(0)).unwrap_or(u64::MAX)
}

/// The CLOCK_TAI time of the CLOCK_MONOTONIC instant `mono_ns`.
pub fn tai_of_monotonic(mono_ns: u64) -> u64 {
    of_monotonic_ns(libc::CLOCK_TAI, mono_ns)
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

    #[test]
    fn a_monotonic_instant_maps_to_the_clock_it_is_asked_for() {
        // CLOCK_MONOTONIC against itself: the bracket's midpoint, within a
        // tight bracket's half width.
        assert!(offset_from_monotonic_ns(libc::CLOCK_MONOTONIC).abs() <= 20_000);
        // CLOCK_TAI: the instant now, on the TAI clock read around it.
        let before = tai_ns();
        let tai = tai_of_monotonic(monotonic_ns());
        let after = tai_ns();
        assert!(
            i128::from(tai) >= before - 20_000 && i128::from(tai) <= after + 20_000,
            "{before} <= {tai} <= {after}"
        );
        // Instants 80 us apart (a fast test stream's frames) stay in order,
        // whatever the scheduler does between the reads.
        let t0 = monotonic_ns();
        for i in 0..1000u64 {
            let a = tai_of_monotonic(t0 + i * 80_000);
            let b = tai_of_monotonic(t0 + (i + 1) * 80_000);
            assert!(b > a, "{a} then {b}");
        }
    }
}
