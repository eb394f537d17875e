//! The recent-events log: a lock-free ring of fixed-size [`Event`]s that
//! any thread may append to (the loop, the sinks, the status thread, the
//! diagnostics server) and any thread may read with a cursor. Appending
//! takes no lock and allocates nothing.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::Instant;

/// Events the ring holds.
pub const EVENT_CAPACITY: usize = 1024;

/// Kinds of [`Event`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// radard started (a: frame period ns, 0 = free running).
    Started = 1,
    /// The first frame was processed (a: its sequence).
    FramesFlowing = 2,
    /// A frame finished after its deadline (a: sequence, b: lateness ns).
    DeadlineMiss = 3,
    /// Frames were not processed (a: sequence, b: reason index).
    Drop = 4,
    /// The source timed out, overflowed or faulted (a: sequence of the last
    /// frame, b: the [`SourceFault`]).
    SourceFault = 5,
    /// The chain failed on a frame (a: sequence).
    BackendError = 6,
    /// A sink failed to write (a: sink index, b: errors so far).
    SinkError = 7,
    /// The health verdict was written (a: good frames, b: sequence).
    HealthGood = 8,
    /// A parameter changed (diagnostics; a: parameter id, b: new value).
    ParameterChange = 9,
    /// The loop stopped (a: frames processed).
    Stop = 10,
    /// A sink could not be created at start; the unit runs without it and
    /// retries (a: sink index).
    SinkDown = 11,
    /// A sink that was down was created (a: sink index, b: attempts).
    SinkUp = 12,
    /// A clock stepped (a: the step in ns as an i64's bits, b: 1 the
    /// frames' clock, 2 the system clock; `timekeeping::STEP_*`).
    ClockStep = 13,
    /// The frames' time quality changed (a: `timekeeping::Quality`, b: its
    /// bound in ns, u64::MAX for none).
    TimeQuality = 14,
    /// A frame's time would not have come after the previous frame's (its
    /// clock stepped back): it was held after it (a: sequence, b: ns held
    /// back). Once per run of such frames.
    FrameTimeHeld = 15,
}

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => EventKind::Started,
            2 => EventKind::FramesFlowing,
            3 => EventKind::DeadlineMiss,
            4 => EventKind::Drop,
            5 => EventKind::SourceFault,
            6 => EventKind::BackendError,
            7 => EventKind::SinkError,
            8 => EventKind::HealthGood,
            9 => EventKind::ParameterChange,
            10 => EventKind::Stop,
            11 => EventKind::SinkDown,
            12 => EventKind::SinkUp,
            13 => EventKind::ClockStep,
            14 => EventKind::TimeQuality,
            15 => EventKind::FrameTimeHeld,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::FramesFlowing => "frames-flowing",
            EventKind::DeadlineMiss => "deadline-miss",
            EventKind::Drop => "drop",
            EventKind::SourceFault => "source-fault",
            EventKind::BackendError => "backend-error",
            EventKind::SinkError => "sink-error",
            EventKind::HealthGood => "health-good",
            EventKind::ParameterChange => "parameter-change",
            EventKind::Stop => "stop",
            EventKind::SinkDown => "sink-down",
            EventKind::SinkUp => "sink-up",
            EventKind::ClockStep => "clock-step",
            EventKind::TimeQuality => "time-quality",
            EventKind::FrameTimeHeld => "frame-time-held",
        }
    }
}

/// What went wrong with the source ([`EventKind::SourceFault`]'s b).
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFault {
    /// No event within the source's timeout (it stalled); the loop waits on.
    Timeout = 1,
    /// The source's event queue overflowed; the loop waits on.
    Overflow = 2,
    /// An error the loop cannot go on from (revoked, engine fault).
    Fatal = 3,
}

impl SourceFault {
    pub fn from_u64(v: u64) -> Option<Self> {
        Some(match v {
            1 => SourceFault::Timeout,
            2 => SourceFault::Overflow,
            3 => SourceFault::Fatal,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            SourceFault::Timeout => "timeout",
            SourceFault::Overflow => "overflow",
            SourceFault::Fatal => "fatal error",
        }
    }
}

/// One recent event: fixed size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// Since the log was created.
    pub time_ns: u64,
    /// [`EventKind`] as a number (unknown numbers are possible from a
    /// newer writer; `EventKind::from_u32` says).
    pub kind: u32,
    pub a: u64,
    pub b: u64,
}

struct EventSlot {
    /// Index + 1 of the event in it; 0 while being written.
    stamp: AtomicU64,
    time_ns: AtomicU64,
    kind: AtomicU32,
    a: AtomicU64,
    b: AtomicU64,
}

/// The ring of the last [`EVENT_CAPACITY`] events.
pub struct EventLog {
    start: Instant,
    head: AtomicU64,
    slots: Box<[EventSlot]>,
}

impl EventLog {
    /// An empty log whose event times count from `start`.
    pub fn new(start: Instant) -> Self {
        EventLog {
            start,
            head: AtomicU64::new(0),
            slots: (0..EVENT_CAPACITY)
                .map(|_| EventSlot {
                    stamp: AtomicU64::new(0),
                    time_ns: AtomicU64::new(0),
                    kind: AtomicU32::new(0),
                    a: AtomicU64::new(0),
                    b: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// Appends an event (any thread; lock-free, no allocation).
    pub fn post(&self, kind: EventKind, a: u64, b: u64) {
        let i = self.head.fetch_add(1, Ordering::Relaxed);
        let slot = &self.slots[(i % EVENT_CAPACITY as u64) as usize];
        slot.stamp.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.time_ns
            .store(self.start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        slot.kind.store(kind as u32, Ordering::Relaxed);
        slot.a.store(a, Ordering::Relaxed);
        slot.b.store(b, Ordering::Relaxed);
        slot.stamp.store(i + 1, Ordering::Release);
    }

    /// The cursor of the next event to be posted (start here to see only
    /// new events; 0 sees everything still in the ring).
    pub fn cursor(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Copies events from `cursor` on into `out`; returns how many and the
    /// cursor to pass next time. Events overwritten before they were read
    /// are skipped (the returned cursor minus `cursor` minus n says how
    /// many). Stops at an event still being written.
    pub fn since(&self, cursor: u64, out: &mut [Event]) -> (usize, u64) {
        let head = self.head.load(Ordering::Acquire);
        let mut c = cursor.max(head.saturating_sub(EVENT_CAPACITY as u64));
        let mut n = 0;
        while c < head && n < out.len() {
            let slot = &self.slots[(c % EVENT_CAPACITY as u64) as usize];
            let s1 = slot.stamp.load(Ordering::Acquire);
            if s1 != c + 1 {
                if s1 > c + 1 {
                    // Overwritten meanwhile: jump to what the ring still holds.
                    c = self
                        .head
                        .load(Ordering::Acquire)
                        .saturating_sub(EVENT_CAPACITY as u64)
                        .max(c + 1);
                    continue;
                }
                break; // being written
            }
            let e = Event {
                time_ns: slot.time_ns.load(Ordering::Relaxed),
                kind: slot.kind.load(Ordering::Relaxed),
                a: slot.a.load(Ordering::Relaxed),
                b: slot.b.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            if slot.stamp.load(Ordering::Relaxed) != s1 {
                continue; // overwritten during the copy; the check above skips it
            }
            out[n] = e;
            n += 1;
            c += 1;
        }
        (n, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_in_order_with_a_cursor() {
        let log = EventLog::new(Instant::now());
        let mut out = [Event::default(); 8];
        assert_eq!(log.since(0, &mut out), (0, 0));
        log.post(EventKind::Started, 8_000_000, 0);
        log.post(EventKind::DeadlineMiss, 7, 100);
        let (n, c) = log.since(0, &mut out);
        assert_eq!((n, c), (2, 2));
        assert_eq!(out[0].kind, EventKind::Started as u32);
        assert_eq!((out[1].a, out[1].b), (7, 100));
        assert_eq!(log.since(c, &mut out), (0, 2));
        // Overrun: only the last EVENT_CAPACITY remain.
        for i in 0..(EVENT_CAPACITY as u64 + 10) {
            log.post(EventKind::Drop, i, 1);
        }
        let (n, c2) = log.since(c, &mut out);
        assert_eq!(n, 8);
        assert_eq!(c2, 12 + 8);
        assert_eq!(out[0].a, 10);
    }

    #[test]
    fn source_faults_round_trip_their_numbers() {
        for f in [
            SourceFault::Timeout,
            SourceFault::Overflow,
            SourceFault::Fatal,
        ] {
            assert_eq!(SourceFault::from_u64(f as u64), Some(f));
        }
        assert_eq!(SourceFault::from_u64(0), None);
    }
}
