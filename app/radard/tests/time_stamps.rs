//! The frames' time of day on the simulator (docs/detections-format.md,
//! "Time"): the simulator stamps each frame's first sample with the host's
//! CLOCK_TAI, as a card stamps it with its PTP clock, and radard writes it
//! as UTC (less the kernel's TAI offset). Read from outside radard: its
//! JSON lines arrive over its `udp` sink at a socket here, each stamped by
//! this host's kernel on arrival (SO_TIMESTAMPNS, CLOCK_REALTIME).
//!
//! The target (docs/requirements.md): a frame's time plus its reported
//! latency is never after the wall clock when its line is written, and the
//! median line is written within 2 ms of it; the frames' times strictly
//! increase, are never closer than one frame period (times the frames
//! between, where the source dropped some), and 99% of them are one period
//! apart within 1 ms.
//!
//! 8 ms frames of the small geometry on the CPU backend. What a loaded
//! machine changes is when things run, not the stamps: a sink thread at
//! nice 5 that waits for a CPU writes its line late (on the shared 2-core
//! development machine with the QEMU suites beside it, 1% of the lines
//! 3-5 ms late, the worst 5-10 ms), and the simulator that falls a frame
//! behind restarts its schedule, as the FPGA's clock does not catch up
//! (one gap of a period and up to 16 ms). So the late tail is printed, not
//! bounded; a wrong stamp moves the median, comes before its own line, or
//! brings two frames closer than a period. A run that misses a bound is
//! tried again, up to five runs.

mod common;

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use common::*;

const FRAMES: u64 = 500;
const PERIOD_NS: i128 = 8_000_000;

/// One datagram and the kernel's CLOCK_REALTIME when it arrived.
fn recv_stamped(sock: &UdpSocket, buf: &mut [u8]) -> Option<(usize, i128)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; all zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the header points at live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return None;
    }
    // SAFETY: walking the control messages the kernel wrote into `control`.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !c.is_null() {
        // SAFETY: c points at a control message header within `control`.
        let h = unsafe { &*c };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SO_TIMESTAMPNS {
            // SAFETY: an SO_TIMESTAMPNS message carries one timespec.
            let ts: libc::timespec = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
            return Some((
                n as usize,
                i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec),
            ));
        }
        // SAFETY: the next header after c, or null.
        c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
    }
    None
}

/// A run's figures: (written - (utc + latency)) min and max, the largest
/// deviation of consecutive frames' spacing from the period, and the lines.
struct Run {
    write_min: i128,
    write_max: i128,
    write_p50: i128,
    write_p99: i128,
    spacing_max: i128,
    spacing_p99: i128,
    /// The least of (time - previous time - period x frames between):
    /// negative when two frames came closer than their period.
    spacing_short: i128,
    frames: usize,
    sources: Vec<String>,
    qualities: Vec<String>,
    increasing: bool,
    detail: String,
}

fn one_run(attempt: u32) -> Run {
    let dir = scratch(&format!("time-stamps-{attempt}"));
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let one: libc::c_int = 1;
    // SAFETY: an int option of the socket's descriptor.
    let rc = unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as _,
        )
    };
    assert_eq!(rc, 0, "SO_TIMESTAMPNS");
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    // 2 ms chunks x 4 = 8 ms frames.
    let cfg = config(&dir, SMALL_GEOMETRY);
    let addr = rx.local_addr().expect("addr");
    let mut buf = vec![0u8; 70_000];
    let receiver =
        receive(move || recv_stamped(&rx, &mut buf).map(|(n, t)| (t, buf[..n].to_vec())));
    let stats = dir.join("stats.json");
    let out = radard()
        .args(["--no-rt", "--backend", "cpu", "--print-every", "0"])
        .arg("--stats-json")
        .arg(&stats)
        .args(["--frames", &FRAMES.to_string(), "--chunk-period-us", "2000"])
        .arg("--config")
        .arg(&cfg)
        .arg("--sink")
        .arg(format!("udp:{addr}"))
        .output()
        .expect("run radard");
    let text = show(&out);
    // 3: deadline misses on a loaded machine; the times are still checked.
    assert!(matches!(out.status.code(), Some(0 | 3)), "{text}");
    let lines = receiver.after_exit();
    // The clock thread looked at the frames' clock every second of the
    // run (4 s of frames), and the summary says what it found.
    let t = &summary(&stats)["time"];
    assert_eq!(t["source"], "host-clock", "{t}");
    assert!(u(&t["readings"]) >= 3, "the clock thread's looks: {t}");
    assert_eq!((u(&t["card_steps"]), u(&t["frames_held"])), (0, 0), "{t}");
    let mut r = Run {
        write_min: i128::MAX,
        write_max: i128::MIN,
        write_p50: 0,
        write_p99: 0,
        spacing_max: 0,
        spacing_p99: 0,
        spacing_short: 0,
        frames: lines.len(),
        sources: Vec::new(),
        qualities: Vec::new(),
        increasing: true,
        detail: String::new(),
    };
    let mut prev: Option<(i128, i128)> = None;
    let (mut writes, mut spacings) = (Vec::new(), Vec::new());
    for (written, line) in &lines {
        let v: serde_json::Value = serde_json::from_slice(line).expect("a JSON line");
        let seq = i128::from(u(&v["sequence"]));
        let utc = i128::from(u(&v["utc_ns"]));
        let latency = i128::from(u(&v["latency_ns"]));
        let d = written - (utc + latency);
        r.write_min = r.write_min.min(d);
        r.write_max = r.write_max.max(d);
        writes.push(d);
        if let Some((pseq, putc)) = prev {
            if utc <= putc {
                r.increasing = false;
                r.detail = format!("frame {seq}: {utc} not after frame {pseq}'s {putc}");
            }
            let signed = utc - putc - (seq - pseq) * PERIOD_NS;
            r.spacing_short = r.spacing_short.min(signed);
            let off = signed.abs();
            r.spacing_max = r.spacing_max.max(off);
            spacings.push(off);
        }
        prev = Some((seq, utc));
        for (list, key) in [
            (&mut r.sources, "utc_source"),
            (&mut r.qualities, "time_quality"),
        ] {
            let s = v[key].as_str().unwrap_or("null").to_string();
            if !list.contains(&s) {
                list.push(s);
            }
        }
    }
    // Nearest rank.
    let rank = |v: &mut Vec<i128>, q: f64| {
        v.sort_unstable();
        v.get(((v.len() as f64 * q).ceil() as usize).clamp(1, v.len().max(1)) - 1)
            .copied()
            .unwrap_or(0)
    };
    r.write_p50 = rank(&mut writes, 0.5);
    r.write_p99 = rank(&mut writes, 0.99);
    r.spacing_p99 = rank(&mut spacings, 0.99);
    let ms = |v: i128| v as f64 / 1e6;
    println!(
        "run {attempt}: {} frames; written - (utc + latency): min {:.3} p50 {:.3} p99 {:.3} max {:.3} ms; \
         spacing off the period: p99 {:.3} max {:.3} ms, shortest {:.3} ms; utc_source {:?}, time_quality {:?}",
        r.frames,
        ms(r.write_min),
        ms(r.write_p50),
        ms(r.write_p99),
        ms(r.write_max),
        ms(r.spacing_p99),
        ms(r.spacing_max),
        ms(r.spacing_short),
        r.sources,
        r.qualities
    );
    r
}

#[test]
fn frame_time_plus_latency_is_the_wall_clock_when_the_line_is_written() {
    let mut last = None;
    for attempt in 1..=5 {
        let r = one_run(attempt);
        assert_eq!(r.frames as u64, FRAMES, "every frame's line arrived");
        assert_eq!(
            r.sources,
            ["host-clock"],
            "the simulator's frames carry the host's clock"
        );
        assert!(r.increasing, "frame times strictly increase: {}", r.detail);
        assert!(
            r.qualities
                .iter()
                .all(|q| q == "locked" || q == "free-running"),
            "{:?}",
            r.qualities
        );
        // A line is written after its frame's latency ends (less the clocks'
        // conversion, well under 0.1 ms), never before.
        assert!(
            r.write_min > -100_000,
            "a line written before its frame was done: {:.3} ms early",
            -r.write_min as f64 / 1e6
        );
        // The simulator never brings frames closer than their period.
        assert!(
            r.spacing_short > -100_000,
            "two frames {:.3} ms closer than their period",
            -r.spacing_short as f64 / 1e6
        );
        if r.write_p50 <= 2_000_000 && r.spacing_p99 <= 1_000_000 {
            return;
        }
        last = Some(r);
    }
    let r = last.expect("a run");
    panic!(
        "five runs missed the bounds; the last: written - (utc + latency) p50 {:.3} ms (limit 2), \
         spacing off the period p99 {:.3} ms (limit 1)",
        r.write_p50 as f64 / 1e6,
        r.spacing_p99 as f64 / 1e6
    );
}
