//! Wait and wake on an [`AtomicU32`] of this process: Linux private futexes.
//!
//! A waiter reads the word, decides to sleep, and calls [`wait`] with the
//! value it read: the kernel sleeps only while the word still holds it, so a
//! [`wake`] between the read and the call is not lost. Every return from
//! [`wait`] (woken, timed out, interrupted, or the word had changed) sends
//! the caller back to re-read the word and its deadline.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Why [`wait`] returned without being woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The timeout passed (ETIMEDOUT).
    TimedOut,
    /// The word did not hold `expected` when the kernel looked (EAGAIN).
    Changed,
    /// A signal came (EINTR).
    Interrupted,
    /// Any other errno: the call itself was refused.
    Failed(i32),
}

/// Sleeps while `word` holds `expected`, at most `timeout` (relative).
/// `Ok(())`: woken (or a spurious wake-up: re-check the word).
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) -> Result<(), WaitEnd> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 of this process (the
    // reference keeps it alive for the call), with a relative timeout that
    // lives across the call; the kernel only reads both.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        )
    };
    if r == 0 {
        return Ok(());
    }
    Err(match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ETIMEDOUT) => WaitEnd::TimedOut,
        Some(libc::EAGAIN) => WaitEnd::Changed,
        Some(libc::EINTR) => WaitEnd::Interrupted,
        e => WaitEnd::Failed(e.unwrap_or(0)),
    })
}

/// Wakes every thread sleeping in [`wait`] on `word`.
pub fn wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32 of this process; waking
    // touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    #[test]
    fn a_changed_word_returns_at_once_and_an_unchanged_one_times_out() {
        let w = AtomicU32::new(5);
        assert_eq!(wait(&w, 4, Duration::from_secs(5)), Err(WaitEnd::Changed));
        let t = Instant::now();
        assert_eq!(
            wait(&w, 5, Duration::from_millis(20)),
            Err(WaitEnd::TimedOut)
        );
        assert!(t.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_wake_ends_the_wait() {
        // The word never changes: only a wake-up ends the wait before its
        // 10 s. The waker wakes every millisecond (one before the waiter
        // sleeps is lost) until the waiter says it is back.
        let w = Arc::new(AtomicU32::new(0));
        let back = Arc::new(AtomicU32::new(0));
        let (word, done) = (w.clone(), back.clone());
        let waker = std::thread::spawn(move || {
            while done.load(Ordering::Acquire) == 0 {
                wake(&word);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let t = Instant::now();
        let r = wait(&w, 0, Duration::from_secs(10));
        back.store(1, Ordering::Release);
        waker.join().expect("waker");
        assert_eq!(r, Ok(()));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}
