//! The clock of frame timestamps: CLOCK_MONOTONIC in nanoseconds, as the
//! kernel module stamps frames (ktime_get_ns) and as the simulator, replay
//! and the frame loop read it.

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
