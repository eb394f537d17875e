//! The card's clock as a PTP hardware clock (the ptp suite,
//! tests/qemu/ptp/suite.sh, drives linuxptp's own tools; these are the checks
//! those tools cannot make, and the harness's hands):
//!
//! - `ptp-pps`: PPS edges into the card (the emulated card's test port) come
//!   out of `/dev/ptpN` as external time stamp events carrying the card's
//!   time at the edge: between the card's time read just before and just
//!   after the edge. With the input off, an edge makes no event.
//! - `ptp-frames`: frames streamed from the card carry the card's clock at
//!   their first sample: converted to UTC with the kernel's TAI offset,
//!   each agrees with the guest's clock at the same instant (the driver's
//!   CLOCK_MONOTONIC for it, taken at the frame's interrupt), and comes one
//!   frame period (plus the delivery) before the guest's clock when the
//!   frame reached the program.
//! - `sysclock`: the kernel's TAI offset, the system clock's "synchronised"
//!   state (what phc2sys sets on a unit whose system clock follows ptp4l),
//!   and steps of the system clock.
//! - `card-clock`: the emulated card's oscillator error (test port).
//! - `pps-pulser`: an edge at the top of every second of CLOCK_REALTIME, as
//!   a GNSS receiver's PPS output (for ts2phc's generic source).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tegra_p2p::phc::{self, Phc};
use tegra_p2p::{CaptureClock, FrameSource, StartParams};

use crate::card::Card;
use crate::common::{Check, Ctx, Outcome};
use crate::ensure;

/// The card's PTP clock (`--phc`, else found from the device's sysfs node).
fn card_phc(env: &crate::Env, given: &Option<PathBuf>) -> Check<PathBuf> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    phc::of_card(&env.device).ok_or_else(|| {
        format!(
            "{}: no PTP clock under /sys/class/misc/{}/device/ptp",
            env.device.display(),
            env.device
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        )
    })
}

fn emulated_card() -> Check<Card> {
    Card::find()?.ok_or_else(|| "no emulated card (its test port drives the PPS input)".into())
}

#[derive(Args, Debug)]
pub struct PpsOpts {
    /// The card's PTP clock device (default: found from the card's node).
    #[arg(long)]
    phc: Option<PathBuf>,
    /// Edges to send.
    #[arg(long, default_value_t = 5)]
    pulses: u32,
}

/// A read of the PTP device with a time limit: the queued events, or none.
fn extts_within(clock: &mut Phc, limit: Duration) -> Check<Vec<phc::PtpExttsEvent>> {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: clock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd on the clock's open descriptor, for the given time.
    let n = unsafe { libc::poll(&mut pfd, 1, limit.as_millis() as i32) };
    ensure!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    if n == 0 {
        return Ok(Vec::new());
    }
    clock.read_extts().ctx("read external time stamps")
}

pub fn pps(env: &crate::Env, o: &PpsOpts, out: &mut Outcome) -> Check {
    let path = card_phc(env, &o.phc)?;
    let card = emulated_card()?;
    let mut clock = Phc::open_rw(&path).ctx(&path.display().to_string())?;
    let caps = clock.caps().ctx("PTP_CLOCK_GETCAPS")?;
    ensure!(
        caps.n_ext_ts == 1 && caps.n_pins == 1,
        "{}: {} external time stamp channels and {} pins, want 1 and 1",
        path.display(),
        caps.n_ext_ts,
        caps.n_pins
    );
    // Input off: an edge is not time stamped.
    card.pps_pulse();
    let stale = extts_within(&mut clock, Duration::from_millis(300))?;
    ensure!(
        stale.is_empty(),
        "an edge with the input off made an event: {stale:?}"
    );
    clock.enable_extts(0, true).ctx("PTP_EXTTS_REQUEST2 on")?;
    let (mut worst_window, mut worst_mid) = (0i128, 0i128);
    for i in 0..o.pulses {
        let before = clock.now_ns().ctx("clock_gettime(PHC)")?;
        card.pps_pulse();
        let after = clock.now_ns().ctx("clock_gettime(PHC)")?;
        // The driver looks at the card's PPS FIFO every 50 ms.
        let evs = extts_within(&mut clock, Duration::from_secs(2))?;
        ensure!(
            evs.len() == 1,
            "edge {i}: {} events within 2 s ({evs:?})",
            evs.len()
        );
        let ev = evs[0];
        let t = ev.t.ns();
        ensure!(
            ev.index == 0 && before <= t && t <= after,
            "edge {i}: event {ev:?} at {t} ns, not between the card's time before ({before}) and after ({after}) the edge"
        );
        worst_window = worst_window.max(after - before);
        worst_mid = worst_mid.max((t - (before + after) / 2).abs());
        std::thread::sleep(Duration::from_millis(100));
    }
    clock.enable_extts(0, false).ctx("PTP_EXTTS_REQUEST2 off")?;
    card.pps_pulse();
    let late = extts_within(&mut clock, Duration::from_millis(300))?;
    ensure!(
        late.is_empty(),
        "an edge after the input went off made an event"
    );
    out.note("pps_edges", o.pulses);
    out.note("pps_read_window_max_ns", worst_window as i64);
    out.note("pps_from_middle_max_ns", worst_mid as i64);
    out.detail = format!(
        "{} PPS edges, each time stamped with the card's clock between its readings around the edge \
         (the readings at most {} ns apart); none with the input off",
        o.pulses, worst_window
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct FramesOpts {
    /// Frames to stream (small test-pattern frames, 4 chunks each).
    #[arg(long, default_value_t = 200)]
    frames: u64,
    /// Chunk period, us (a frame is 4 chunks).
    #[arg(long, default_value_t = 5000)]
    chunk_period_us: u64,
    /// The largest |UTC of the first sample - the guest's clock at that
    /// instant| allowed for 99% of the frames, ns. (The rest may be off by
    /// a stall of the vCPU between the driver's two clock reads at the
    /// interrupt: under emulation on a loaded host, milliseconds.)
    #[arg(long, default_value_t = 1_000_000)]
    max_offset_p99_ns: i64,
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME back to back, ns.
/// CLOCK_MONOTONIC now and CLOCK_REALTIME at the same instant (by the
/// clocks' bracketed offset: two plain reads a preemption apart would be
/// milliseconds off on a loaded host).
fn mono_real() -> (i128, i128) {
    let m = i128::from(tegra_p2p::clock::monotonic_ns());
    (
        m,
        m + tegra_p2p::clock::offset_from_monotonic_ns(libc::CLOCK_REALTIME),
    )
}

/// The kernel's TAI offset (CLOCK_TAI - CLOCK_REALTIME), whole seconds.
fn kernel_tai_s() -> i128 {
    let d = tegra_p2p::clock::tai_ns() - tegra_p2p::clock::realtime_ns();
    (d + 500_000_000).div_euclid(1_000_000_000)
}

/// The `q` quantile of `v` by nearest rank (sorts it).
fn rank(v: &mut [i64], q: f64) -> i64 {
    v.sort_unstable();
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

pub fn frames(env: &crate::Env, o: &FramesOpts, out: &mut Outcome) -> Check {
    use tegra_p2p::source::Event;
    let (slot, chunk) = (16 << 10, 4 << 10);
    let mut src = crate::common::open_source(&env.device, 4, slot, chunk)?;
    ensure!(
        matches!(src.capture_clock(), CaptureClock::Phc(_)),
        "the card's frames are not stamped with a PTP clock: {:?}",
        src.capture_clock()
    );
    let tai = kernel_tai_s();
    src.start(
        &StartParams::test_pattern()
            .with_chunk_period(Duration::from_micros(o.chunk_period_us))
            .with_chunk_events(),
    )
    .ctx("start")?;
    let mut t = tegra_p2p::SequenceTracker::new();
    let mut last_utc = i128::MIN;
    let mut offsets: Vec<i64> = Vec::new();
    let mut abs_offsets: Vec<i64> = Vec::new();
    // CLOCK_REALTIME when the frame's first chunk, and the frame, reached
    // this program, less the frame's UTC.
    let mut first_chunk: Vec<i64> = Vec::new();
    let mut whole: Vec<i64> = Vec::new();
    let mut chunk0_at: Option<i128> = None;
    while out.frames_verified < o.frames {
        let ev = src.next_event(None).ctx("wait")?;
        let (mono, real) = mono_real();
        let f = match ev {
            Event::Chunk(c) => {
                if c.chunk == 0 {
                    chunk0_at = Some(real);
                }
                continue;
            }
            Event::Frame(f) => f,
            Event::TxDone { .. } => continue,
        };
        crate::common::verify_frame(&f, chunk, &mut t)?;
        let m = *f.meta();
        ensure!(
            m.host_ns != 0,
            "frame {}: no host time (host_ns 0)",
            m.sequence
        );
        let utc = m.timestamp_ns as i128 - tai * 1_000_000_000;
        // The first sample on the guest's clock: the driver's monotonic time
        // of it (taken at the frame's interrupt), to CLOCK_REALTIME by the
        // offset read now.
        let guest = m.host_ns as i128 + (real - mono);
        offsets.push((utc - guest) as i64);
        abs_offsets.push((utc - guest).abs() as i64);
        let c0 = chunk0_at
            .take()
            .ok_or_else(|| format!("frame {}: no event of its first chunk", m.sequence))?;
        first_chunk.push((c0 - utc) as i64);
        whole.push((real - utc) as i64);
        ensure!(
            utc > last_utc,
            "frame {}: UTC {utc} not after the previous frame's {last_utc}",
            m.sequence
        );
        last_utc = utc;
        out.frames_verified += 1;
        f.release().ctx("release")?;
    }
    src.stop().ctx("stop")?;
    out.frames_dropped = t.dropped;
    let (off_p50, off_abs_p99, off_abs_max) = (
        rank(&mut offsets, 0.5),
        rank(&mut abs_offsets, 0.99),
        rank(&mut abs_offsets, 1.0),
    );
    let (c0_min, c0_p50) = (rank(&mut first_chunk, 0.0), rank(&mut first_chunk, 0.5));
    let w_p50 = rank(&mut whole, 0.5);
    out.note("tai_offset_s", tai as i64);
    out.note("utc_vs_guest_p50_ns", off_p50);
    out.note("utc_vs_guest_abs_p99_ns", off_abs_p99);
    out.note("utc_vs_guest_max_ns", off_abs_max);
    out.note("first_chunk_after_utc_min_ns", c0_min);
    out.note("first_chunk_after_utc_p50_ns", c0_p50);
    out.note("frame_after_utc_p50_ns", w_p50);
    out.detail = format!(
        "{} frames: UTC of the first sample (card's clock less the kernel's TAI offset {tai} s) \
         against the guest's clock at that instant: median {off_p50} ns, |p99| {off_abs_p99} ns, \
         max {off_abs_max} ns; the first chunk reached the program {:.3} ms (median; at least \
         {:.3}) after it, the whole frame {:.3} ms",
        out.frames_verified,
        c0_p50 as f64 / 1e6,
        c0_min as f64 / 1e6,
        w_p50 as f64 / 1e6,
    );
    ensure!(
        off_abs_p99 <= o.max_offset_p99_ns,
        "UTC of frames' first samples up to {off_abs_p99} ns from the guest's clock (p99; limit {} ns)",
        o.max_offset_p99_ns
    );
    // Stamped at the first sample: before the first chunk could arrive (a
    // stamp at the frame's end would come after it).
    ensure!(
        c0_min > 0,
        "a frame's first chunk reached the program {:.3} ms before its first sample's time",
        -c0_min as f64 / 1e6
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct SysclockOpts {
    /// Set the kernel's TAI offset (CLOCK_TAI - CLOCK_REALTIME), s.
    #[arg(long)]
    tai: Option<i32>,
    /// Mark the system clock synchronised (clear STA_UNSYNC, max error 0),
    /// as phc2sys does when it keeps the system clock.
    #[arg(long)]
    synced: bool,
    /// Mark it unsynchronised (STA_UNSYNC).
    #[arg(long, conflicts_with = "synced")]
    unsynced: bool,
    /// Step CLOCK_REALTIME by this many ms (signed; before --synced).
    #[arg(long, allow_negative_numbers = true)]
    step_ms: Option<i64>,
}

const ADJ_NANO: u32 = 0x2000;
const ADJ_SETOFFSET: u32 = 0x0100;
const ADJ_TAI: u32 = 0x0080;
const ADJ_STATUS: u32 = 0x0010;
const ADJ_MAXERROR: u32 = 0x0004;
const STA_UNSYNC: i32 = 0x0040;

fn adjtime(tx: &mut libc::timex, what: &str) -> Check<i32> {
    // SAFETY: a timex the kernel reads and writes back.
    let rc = unsafe { libc::clock_adjtime(libc::CLOCK_REALTIME, tx) };
    ensure!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
    Ok(rc)
}

fn timex() -> libc::timex {
    // SAFETY: timex is plain integers; all zero is a valid "read" request.
    unsafe { std::mem::zeroed() }
}

pub fn sysclock(o: &SysclockOpts, out: &mut Outcome) -> Check {
    if let Some(tai) = o.tai {
        let mut tx = timex();
        tx.modes = ADJ_TAI;
        tx.constant = tai.into();
        adjtime(&mut tx, "ADJ_TAI")?;
    }
    // A step first: the kernel marks a stepped clock unsynchronised, and
    // --synced after it is what phc2sys does at the same update.
    if let Some(ms) = o.step_ms {
        let mut tx = timex();
        tx.modes = ADJ_SETOFFSET | ADJ_NANO;
        let ns = ms * 1_000_000;
        tx.time.tv_sec = ns.div_euclid(1_000_000_000) as _;
        tx.time.tv_usec = ns.rem_euclid(1_000_000_000) as _;
        adjtime(&mut tx, "ADJ_SETOFFSET")?;
    }
    if o.synced || o.unsynced {
        let mut tx = timex();
        adjtime(&mut tx, "read")?;
        let status = tx.status;
        let mut tx = timex();
        tx.modes = ADJ_STATUS | ADJ_MAXERROR;
        tx.status = if o.synced {
            status & !STA_UNSYNC
        } else {
            status | STA_UNSYNC
        };
        tx.maxerror = 0;
        adjtime(&mut tx, "ADJ_STATUS")?;
    }
    let mut tx = timex();
    let rc = adjtime(&mut tx, "read")?;
    out.note("tai_offset_s", tx.tai);
    out.note("synchronised", rc != libc::TIME_ERROR);
    out.detail = format!(
        "kernel TAI offset {} s, system clock {}{}",
        tx.tai,
        if rc == libc::TIME_ERROR {
            "unsynchronised"
        } else {
            "synchronised"
        },
        o.step_ms
            .map_or(String::new(), |ms| format!(", stepped by {ms} ms"))
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct CardClockOpts {
    /// The oscillator's frequency error, ppb.
    #[arg(long, allow_negative_numbers = true)]
    ppb: Option<i32>,
}

pub fn card_clock(o: &CardClockOpts, out: &mut Outcome) -> Check {
    let card = emulated_card()?;
    if let Some(ppb) = o.ppb {
        card.set_clock_ppb(ppb);
    }
    out.note("clock_ppb", card.clock_ppb());
    out.note("pps_pulses", card.pps_pulses());
    out.detail = format!("the card's oscillator is {} ppb off", card.clock_ppb());
    Ok(())
}

#[derive(Args, Debug)]
pub struct PulserOpts {
    /// Seconds to pulse for.
    #[arg(long, default_value_t = 10)]
    seconds: u32,
}

/// How late an edge may come: later, the pulser leaves that second out, as a
/// GNSS receiver gives a pulse on time or none. Half the board's ts2phc step
/// threshold (1 ms): a guest descheduled by a loaded host at the second
/// would otherwise hand ts2phc an edge it must step the card for.
const EDGE_LATE_LIMIT_NS: i128 = 500_000;

/// An edge at every whole second of CLOCK_REALTIME (the edge is as late as
/// the wake-up: the lateness is reported), but for a second the pulser
/// found itself past EDGE_LATE_LIMIT_NS at (counted as skipped).
pub fn pulser(o: &PulserOpts, out: &mut Outcome) -> Check {
    let card = emulated_card()?;
    let mut late: Vec<i64> = Vec::new();
    let mut skipped = 0u32;
    for _ in 0..o.seconds {
        let now = tegra_p2p::clock::realtime_ns();
        let next = (now / 1_000_000_000 + 1) * 1_000_000_000;
        // Asleep until 20 ms before the edge (a guest's timer wake-up under
        // emulation can come tens of ms late), then spinning on the clock.
        let wake = next - 20_000_000;
        let ts = libc::timespec {
            tv_sec: (wake / 1_000_000_000) as _,
            tv_nsec: (wake % 1_000_000_000) as _,
        };
        // SAFETY: an absolute sleep on CLOCK_REALTIME, no remainder output.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_REALTIME,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        let mut now = tegra_p2p::clock::realtime_ns();
        while now < next {
            std::hint::spin_loop();
            now = tegra_p2p::clock::realtime_ns();
        }
        if now - next > EDGE_LATE_LIMIT_NS {
            skipped += 1;
            continue;
        }
        card.pps_pulse();
        late.push((tegra_p2p::clock::realtime_ns() - next) as i64);
    }
    late.sort_unstable();
    let median = late.get(late.len() / 2).copied().unwrap_or(0);
    let max = late.last().copied().unwrap_or(0);
    out.note("edges", late.len());
    out.note("edges_skipped", skipped);
    out.note("edge_late_median_ns", median);
    out.note("edge_late_max_ns", max);
    out.detail = format!(
        "{} edges at whole seconds of CLOCK_REALTIME, late by {median} ns (median), {max} ns (max); {skipped} second(s) left out, the pulser {} ms or more late",
        late.len(),
        EDGE_LATE_LIMIT_NS as f64 / 1e6
    );
    Ok(())
}
