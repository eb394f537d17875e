//! radarctl against a running radard (simulator, CPU backend) over a
//! pseudo-terminal pair: every read command, a parameter change that shows
//! in detections and in the log, refusals, the text console typed byte by
//! byte, the PNG snapshot, a flood of garbage, and the link errors.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn read_commands_answer() {
    let _g = serial();
    let (a, b) = (Pty::open(), Pty::open());
    let _relay = Relay::join(&a, &b);
    let radard = Radard::start("read", &a.slave_path);
    let port = &b.slave_path;
    wait_ready(port, &radard);

    let id = radarctl_json(port, &["identity"]);
    assert_eq!(id["protocol"], diag_proto_version());
    assert_eq!(id["backend"], "cpu");
    assert_eq!(id["fpga"], "simulator");
    assert!(id["uptime_ms"].as_u64().unwrap() > 0);

    let s = radarctl_json(port, &["status"]);
    assert!(s["frames"].as_u64().unwrap() > 10, "{s}");
    let rate = s["frame_rate_hz"].as_f64().unwrap();
    assert!((40.0..60.0).contains(&rate), "rate {rate} for 20 ms frames");
    assert_eq!(s["drops"].as_array().unwrap().len(), 5);

    let st = radarctl_json(port, &["stats"]);
    let binned: u64 = st["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum::<u64>()
        + st["overflow"].as_u64().unwrap();
    assert!(binned >= 10, "histogram holds {binned} frames: {st}");
    assert!(st["latency_p50_us"].as_f64().unwrap() > 0.0);
    assert!((st["deadline_us"].as_f64().unwrap() - 20_000.0).abs() < 1.0);

    let log = radarctl_json(port, &["log"]);
    let kinds: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"Startup"), "{log}");

    let params = radarctl_json(port, &["params"]);
    let names: Vec<&str> = params
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"cfar.pfa") && names.contains(&"sink.console"),
        "{names:?}"
    );
    let pfa = params
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "cfar.pfa")
        .unwrap();
    assert_eq!(pfa["value"]["Real"].as_f64(), Some(1e-6));
    assert_eq!(pfa["writable"], true);

    // The readable forms too.
    let (code, out, err) = radarctl(port, &["stats"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("p99.9") && out.contains('█'), "{out}");
    let (code, out, _) = radarctl(port, &["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("health"), "{out}");
    // The frames' clock: the simulator stamps them with the host's clock.
    assert!(out.contains("\ntime       host-clock "), "{out}");
    let t = radarctl_json(port, &["time"]);
    assert_eq!(t["source"], "host-clock", "{t}");
    assert!(
        ["Locked", "FreeRunning"].contains(&t["quality"].as_str().unwrap()),
        "{t}"
    );
    assert_eq!(t["clock"], "", "no card clock on the simulator: {t}");
    assert!(t["utc_offset_s"].as_i64().unwrap() >= 0, "{t}");
    let st = radarctl_json(port, &["status"]);
    assert_eq!(st["time"]["source"], "host-clock", "{st}");
    let (code, out, _) = radarctl(port, &["time"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("host-clock "), "{out}");

    // A person's half-typed console line (echoed back) does not swallow
    // radarctl's next request.
    (&a.master).write_all(b"sta").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let id = radarctl_json(port, &["identity"]);
    assert_eq!(id["protocol"], diag_proto_version());
}

fn diag_proto_version() -> u64 {
    1
}

/// Mean detections per frame over `n` looks at the status.
fn mean_detections(port: &std::path::Path, n: usize) -> f64 {
    let mut sum = 0u64;
    for _ in 0..n {
        let s = radarctl_json(port, &["status"]);
        sum += s["detections_last"].as_u64().unwrap();
        std::thread::sleep(Duration::from_millis(60));
    }
    sum as f64 / n as f64
}

#[test]
fn set_pfa_changes_detections_and_is_logged() {
    let _g = serial();
    let (a, b) = (Pty::open(), Pty::open());
    let _relay = Relay::join(&a, &b);
    let radard = Radard::start("set", &a.slave_path);
    let port = &b.slave_path;
    wait_ready(port, &radard);

    let before = mean_detections(port, 12);
    let applied = radarctl_json(port, &["set", "cfar.pfa", "1e-2"]);
    assert_eq!(
        applied["param"]["value"]["Real"].as_f64(),
        Some(1e-2),
        "{applied}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let after = mean_detections(port, 12);
    println!("detections per frame: Pfa 1e-6 {before:.2}, Pfa 1e-2 {after:.2}");
    assert!(
        after > before + 1.0,
        "a higher Pfa must give more detections: {before} -> {after}"
    );
    let back = radarctl_json(port, &["set", "cfar.pfa", "1e-9"]);
    assert_eq!(back["param"]["value"]["Real"].as_f64(), Some(1e-9));
    std::thread::sleep(Duration::from_millis(200));
    let fewer = mean_detections(port, 12);
    println!("detections per frame: Pfa 1e-9 {fewer:.2}");
    assert!(
        fewer < after - 1.0,
        "a lower Pfa must give fewer detections: {after} -> {fewer}"
    );

    let log = radarctl_json(port, &["log", "-n", "50"]);
    let texts: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "ParamChange")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("cfar.pfa set to 1e-2")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("cfar.pfa set to 1e-9")),
        "{texts:?}"
    );
    let got = radarctl_json(port, &["get", "cfar.pfa"]);
    assert_eq!(got["value"]["Real"].as_f64(), Some(1e-9));

    // Refusals: out of range (with the allowed range), read-only, unknown, wrong type.
    let (code, _, err) = radarctl(port, &["set", "cfar.pfa", "0.5"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("out of range") && err.contains("1e-12 .. 1e-1"),
        "{err}"
    );
    let (code, _, err) = radarctl(port, &["set", "cfar.train_range", "3"]);
    assert_eq!(code, 1);
    assert!(err.contains("read-only"), "{err}");
    let (code, _, err) = radarctl(port, &["set", "cfar.nonsense", "3"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown parameter"), "{err}");
    let (code, _, err) = radarctl(port, &["set", "sink.console", "7"]);
    assert_eq!(code, 1);
    assert!(err.contains("Bool"), "{err}");
    let got = radarctl_json(port, &["get", "cfar.pfa"]);
    assert_eq!(
        got["value"]["Real"].as_f64(),
        Some(1e-9),
        "a refused change changes nothing"
    );
}

#[test]
fn text_console_answers_typed_bytes() {
    let _g = serial();
    let mut a = Pty::open();
    let radard = Radard::start("console", &a.slave_path);
    // Frames must flow before "status" says anything useful.
    let t0 = Instant::now();
    while !radard.log().contains("diagnostics on") {
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", radard.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    for (cmd, want) in [
        ("help", "set NAME VALUE"),
        ("status", "deadline misses"),
        ("time", "time host-clock "),
    ] {
        for &byte in cmd.as_bytes() {
            a.master.write_all(&[byte]).unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        a.master.write_all(b"\r").unwrap();
        let got = a.read_for(Duration::from_secs(5), |g| {
            String::from_utf8_lossy(g).contains("radar:/> ")
        });
        let text = String::from_utf8_lossy(&got);
        println!("{cmd}:\n{text}");
        assert!(text.starts_with(cmd), "the command is echoed: {text:?}");
        assert!(text.contains(want), "{cmd}: {text}");
        assert!(text.contains("\r\nDone\r\n"), "{cmd}: {text}");
        assert!(text.ends_with("radar:/> "), "{cmd}: {text:?}");
    }
    // Backspace edits; an unknown command is an error; an empty line a prompt.
    a.master.write_all(b"stx\x7fats\r").unwrap();
    let text =
        String::from_utf8_lossy(&a.read_for(Duration::from_secs(5), |g| g.ends_with(b"radar:/> ")))
            .into_owned();
    assert!(text.contains("Done"), "{text:?}");
    a.master.write_all(b"frobnicate\r").unwrap();
    let text =
        String::from_utf8_lossy(&a.read_for(Duration::from_secs(5), |g| g.ends_with(b"radar:/> ")))
            .into_owned();
    assert!(text.contains("Error -1 unknown command"), "{text:?}");
    a.master.write_all(b"set cfar.pfa 2\r").unwrap();
    let text =
        String::from_utf8_lossy(&a.read_for(Duration::from_secs(5), |g| g.ends_with(b"radar:/> ")))
            .into_owned();
    assert!(
        text.contains("Error -1 cfar.pfa: value out of range, allowed 1e-12 .. 1e-1"),
        "{text:?}"
    );
    a.master.write_all(b"\r").unwrap();
    let text =
        String::from_utf8_lossy(&a.read_for(Duration::from_secs(2), |g| g.ends_with(b"radar:/> ")))
            .into_owned();
    assert!(text.ends_with("radar:/> "), "{text:?}");
}

#[test]
fn snapshot_png_marks_the_targets() {
    let _g = serial();
    let (a, b) = (Pty::open(), Pty::open());
    let _relay = Relay::join(&a, &b);
    let radard = Radard::start("png", &a.slave_path);
    let port = &b.slave_path;
    wait_ready(port, &radard);
    let png_path = radard.dir.join("rd.png");
    let (code, out, err) = radarctl(port, &["snapshot", "--png", png_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    println!("{out}");

    let decoder = png::Decoder::new(std::fs::File::open(&png_path).unwrap());
    let mut reader = decoder.read_info().expect("a PNG");
    let mut px = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut px).expect("PNG pixels");
    let (w, h) = (frame.width as usize, frame.height as usize);
    let text = |k: &str| -> Vec<f32> {
        let t = reader
            .info()
            .uncompressed_latin1_text
            .iter()
            .find(|t| t.keyword == k)
            .unwrap_or_else(|| panic!("no {k} chunk"));
        t.text
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let plot = text("radar:plot");
    let range = text("radar:range");
    let vel = text("radar:velocity");
    let cell_w = plot[2] / range[2];
    let cell_h = plot[3] / vel[2];
    // Magenta marker pixels, grouped by nearness.
    let mut clusters: Vec<(f32, f32, u32)> = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let i = (y * w + x) * 3;
            if px[i..i + 3] == [255, 0, 255] {
                let (xf, yf) = (x as f32, y as f32);
                match clusters.iter_mut().find(|c| {
                    ((c.0 / c.2 as f32 - xf).powi(2) + (c.1 / c.2 as f32 - yf).powi(2)).sqrt()
                        < 12.0
                }) {
                    Some(c) => {
                        c.0 += xf;
                        c.1 += yf;
                        c.2 += 1;
                    }
                    None => clusters.push((xf, yf, 1)),
                }
            }
        }
    }
    let centres: Vec<(f32, f32)> = clusters
        .iter()
        .map(|c| (c.0 / c.2 as f32, c.1 / c.2 as f32))
        .collect();
    assert!(!centres.is_empty(), "no detection markers in the PNG");
    for (r, v) in TARGETS {
        let x = plot[0] + ((r - range[0]) / range[1] + 0.5) * cell_w;
        let y = plot[1] + plot[3] - ((v - vel[0]) / vel[1] + 0.5) * cell_h;
        let best = centres
            .iter()
            .map(|&(cx, cy)| ((cx - x).abs() / cell_w, (cy - y).abs() / cell_h))
            .min_by(|p, q| (p.0 + p.1).total_cmp(&(q.0 + q.1)))
            .unwrap();
        println!(
            "target {r} m {v:+} m/s: expected pixel ({x:.0}, {y:.0}); nearest marker {:.2} x {:.2} cells away",
            best.0, best.1
        );
        assert!(
            best.0 <= 1.0 && best.1 <= 1.0,
            "no marker within one bin of the target at {r} m, {v} m/s"
        );
    }
}

/// Flood windows tried before the test gives up: see below.
const FLOOD_WINDOWS: usize = 3;

#[test]
fn flood_leaves_the_loop_alone() {
    let _g = serial();
    let (mut a, b) = (Pty::open(), Pty::open());
    // The loop at its real-time priority (CPU backend), as on the unit: the
    // flood and the server that reads it run on the normal scheduler and
    // must not reach it. 20 ms frames by default; RADAR_FLOOD_UNIT_RATE=1
    // runs the unit's 8 ms frames, whose 5 ms of slack the development VM's
    // own stalls (tens of seconds of steal in 10 minutes) exceed now and
    // then, flood or not (docs/performance.md).
    let frames = if std::env::var_os("RADAR_FLOOD_UNIT_RATE").is_some() {
        Frames::UnitRate
    } else {
        Frames::Small
    };
    let radard = Radard::start_rt("flood", &a.slave_path, 50, frames);
    {
        let _relay = Relay::join(&a, &b);
        wait_ready(&b.slave_path, &radard);
    }
    let rt: Vec<String> = radard
        .log()
        .lines()
        .filter(|l| l.contains("radard: rt:"))
        .map(str::to_string)
        .collect();
    println!("flood: {}", rt.join("; "));
    // Every window must keep the frame rate and get answers. The deadline
    // counter must stay unchanged through at least one whole window: a
    // server that reaches the loop (a shared lock, CPU taken from it) does
    // so in every window, while the VM's own stalls, which miss deadlines
    // with no flood at all, come a few times a minute and rarely in
    // consecutive windows. Each window's figures are printed.
    let mut windows = Vec::new();
    for window in 1..=FLOOD_WINDOWS {
        let (before, after) = flood_window(&mut a, window as u64);
        let secs = (after.1 - before.1) as f64 / 1e3;
        let rate = (after.0 - before.0) as f64 / secs;
        let line = format!(
            "window {window}: frames {} -> {} in {secs:.1} s = {rate:.1} Hz; deadline misses {} -> {}",
            before.0, after.0, before.2, after.2
        );
        println!("flood: {line}");
        let want = frames.rate_hz();
        assert!(
            (rate - want).abs() <= want * 0.05,
            "frame rate {rate:.1} Hz under the flood ({want} Hz expected)"
        );
        windows.push(line);
        if before.2 == after.2 {
            return;
        }
    }
    panic!(
        "deadline misses in every one of {FLOOD_WINDOWS} flood windows: {}",
        windows.join("; ")
    );
}

/// 10 s of random bytes, oversize frames and half frames, straight at
/// radard, with the status (frames, uptime ms, deadline misses) asked
/// before and after; the server must have answered the flood.
fn flood_window(a: &mut Pty, seed: u64) -> ((u64, u64, u64), (u64, u64, u64)) {
    let before = status_over(a);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut reader = a.master.try_clone().unwrap();
    let drain = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut answered = 0usize;
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(11) {
            use std::io::Read;
            // Never block past the end: radard may have nothing to say.
            if poll_in(
                std::os::fd::AsRawFd::as_raw_fd(&reader),
                Duration::from_millis(50),
            ) {
                answered += reader.read(&mut buf).unwrap_or(0);
            }
        }
        answered
    });
    while t0.elapsed() < Duration::from_secs(10) {
        let mut chunk = Vec::with_capacity(4096);
        match next() % 3 {
            0 => chunk.extend((0..2048).map(|_| next() as u8)),
            1 => chunk.extend((0..3000).map(|_| (next() as u8) | 1)),
            _ => {
                chunk.push(0x20);
                chunk.push(0xE0);
                chunk.extend((0..(next() % 40)).map(|_| (next() as u8) | 1));
            }
        }
        a.master.write_all(&chunk).unwrap();
        sent += chunk.len();
        std::thread::sleep(Duration::from_millis(2));
    }
    let answered = drain.join().expect("drain thread");
    // The server was busy with the flood the whole time (error answers, echo).
    println!("flood: {sent} bytes in 10 s; radard answered {answered} bytes");
    assert!(
        answered > 10_000,
        "the server hardly answered the flood: {answered} bytes"
    );
    (before, status_over(a))
}

/// (frames, uptime ms, deadline misses) asked over the raw link after a
/// 0 byte that ends whatever garbage came before.
fn status_over(a: &mut Pty) -> (u64, u64, u64) {
    use diag_proto::{Endpoint, StatusEndpoint, VarKey, VarSeq};
    a.master.write_all(&[0]).unwrap();
    a.drain();
    let mut wire = [0u8; diag_proto::MAX_WIRE_FRAME];
    let n = diag_proto::rpc::encode_frame(
        StatusEndpoint::REQ_KEY,
        VarSeq::Seq4(77),
        &VarKey::Key8(StatusEndpoint::REQ_KEY),
        &(),
        &mut wire,
    )
    .unwrap();
    a.master.write_all(&wire[..n]).unwrap();
    let got = a.read_for(Duration::from_secs(5), |g| g.contains(&0));
    let end = got
        .iter()
        .position(|&b| b == 0)
        .expect("an answer to the status request after the flood");
    let mut frame = got[..end].to_vec();
    let m = diag_proto::cobs::decode_in_place(&mut frame).expect("COBS");
    let (hdr, body) = diag_proto::rpc::split_frame(&frame[..m]).expect("header");
    assert_eq!(hdr.seq_no, VarSeq::Seq4(77));
    let s: diag_proto::Status = postcard::from_bytes(body).expect("a Status");
    (s.frames, s.uptime_ms, s.deadline_misses)
}

#[test]
fn link_errors_are_clear() {
    let _g = serial();
    let (code, _, err) = radarctl(std::path::Path::new("/dev/ttyNOSUCH7"), &["status"]);
    assert_eq!(code, 3);
    assert!(
        err.contains("/dev/ttyNOSUCH7: no such serial port"),
        "{err}"
    );

    // A line nobody answers on.
    let quiet = Pty::open();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_radarctl"))
        .arg("--port")
        .arg(&quiet.slave_path)
        .args(["--timeout", "0.5", "status"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("did not answer") && err.contains("within 0.5 s"),
        "{err}"
    );

    // A unit of another protocol version.
    let (a, b) = (Pty::open(), Pty::open());
    let _relay = Relay::join(&a, &b);
    let radard = Radard::start("version", &a.slave_path);
    wait_ready(&b.slave_path, &radard);
    let (code, _, err) = radarctl(&b.slave_path, &["--claim-protocol", "9", "status"]);
    assert_eq!(code, 3);
    assert!(
        err.contains("radarctl speaks diagnostics protocol 9") && err.contains("speaks 1"),
        "{err}"
    );
}
