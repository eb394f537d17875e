//! radard as a service, run as a process: the systemd notifications through
//! a stub NOTIFY_SOCKET listener (READY, STATUS, WATCHDOG pings that stop
//! while the source stalls), the health verdict file (after N good frames,
//! never before), and sinks that fail without stalling the loop (a jsonl
//! file on a full filesystem, udp to a closed port).

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// One radard at a time: the deadline figures must not depend on the
/// other tests of this file running beside it.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Notifications as received: time since the start, message.
type Log = Arc<Mutex<Vec<(Duration, String)>>>;

fn listen(path: &Path, t0: Instant) -> (Log, Arc<std::sync::atomic::AtomicBool>) {
    let sock = UnixDatagram::bind(path).expect("bind the notify socket");
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let log: Log = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (l, s) = (log.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(n) = sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).to_string();
                for line in msg.lines() {
                    l.lock()
                        .expect("log")
                        .push((t0.elapsed(), line.to_string()));
                }
            }
        }
    });
    (log, stop)
}

/// Frames of 4 ms; after 750 frames the simulator produces nothing for
/// 2.5 s; the watchdog interval is 400 ms. (A deadline miss on this shared
/// machine may skip a ping and makes radard exit 3; neither is what this
/// test is about, so both are tolerated and printed.)
#[test]
fn watchdog_pings_stop_while_the_source_stalls_and_health_waits_for_n_good_frames() {
    let _serial = serial();
    let dir = scratch("watchdog");
    let health = dir.join("run/health");
    // Small beside the 1300 frames: every deadline miss starts the count
    // again, and a slow phase of this shared machine gave 7 misses in one
    // run, none 300 frames from the next (CI, 2026-11-28).
    let good_frames = 100u64;
    let cfg = config(
        &dir,
        &format!(
            r#"
[source]
chunk_period_us = 1000
event_timeout_ms = 300
[backend]
kind = "cpu"
[output]
print_every = 0
status_interval_ms = 100
[health]
good_frames = {good_frames}
state_file = "{}"
[simulator]
stall_at = 750
stall_ms = 2500
{SMALL_GEOMETRY}"#,
            health.display()
        ),
    );
    let sock = dir.join("notify.sock");
    let t0 = Instant::now();
    let (log, stop) = listen(&sock, t0);
    let stats = dir.join("stats.json");
    let mut child = radard()
        .args(["--frames", "1300", "--config"])
        .arg(&cfg)
        .arg("--stats-json")
        .arg(&stats)
        .env("NOTIFY_SOCKET", &sock)
        .env("WATCHDOG_USEC", "400000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start radard");
    // Watch for the health file: when it appears, how many frames had
    // been processed by then (the last STATUS said).
    let mut appeared: Option<Duration> = None;
    while child.try_wait().expect("wait").is_none() {
        if appeared.is_none() && health.exists() {
            appeared = Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child.wait_with_output().expect("output");
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let text = show(&out);
    assert!(matches!(out.status.code(), Some(0) | Some(3)), "{text}");
    let log = log.lock().expect("log").clone();
    let s = summary(&stats);
    check_ledger(&s);
    println!("deadline misses: {}", s["deadline_misses"]);
    // How the run was scheduled: the loop thread (the main thread, named
    // after the program) and the simulator's are listed with their CPU
    // time, and the simulator's pacing is reported.
    let threads = s["threads"].as_array().expect("threads in the summary");
    for name in ["radard", "fpga-sim"] {
        let t = threads
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no thread {name}: {threads:?}"));
        assert!(t["cpu_ms"].as_f64().is_some_and(|c| c > 0.0), "{t}");
    }
    assert!(s["simulator_pacing"]["chunks_late"].is_u64(), "{s}");

    // READY once frames flow, STATUS with rate and misses.
    let ready = log.iter().find(|(_, m)| m == "READY=1").map(|(t, _)| *t);
    assert!(ready.is_some(), "no READY=1: {log:?}");
    let statuses: Vec<(Duration, u64)> = log
        .iter()
        .filter_map(|(t, m)| {
            let rest = m.strip_prefix("STATUS=")?;
            assert!(
                rest.contains("frames/s") && rest.contains("deadline misses"),
                "{m}"
            );
            // "R frames/s, N processed, ..."
            let n = rest.split(", ").nth(1)?.split(' ').next()?.parse().ok()?;
            Some((*t, n))
        })
        .collect();
    assert!(statuses.len() > 20, "STATUS lines: {statuses:?}");
    assert!(log.iter().any(|(_, m)| m == "STOPPING=1"), "no STOPPING=1");

    // The stall: the last STATUS before processing stopped advancing, the
    // last that still showed no progress, and the first after it advanced
    // again. Frames resumed somewhere between the last two: a ping there
    // may be the first of the new frames' (on a slow machine, emulated
    // aarch64, the two STATUS lines are far apart).
    let mut stall_from = None;
    let mut still_stalled = None;
    let mut stall_to = None;
    for w in statuses.windows(2) {
        let ((t_a, n_a), (t_b, n_b)) = (w[0], w[1]);
        if stall_from.is_none() && n_b == n_a && n_a > 500 {
            stall_from = Some(t_a);
        }
        if stall_from.is_some() && stall_to.is_none() && n_b > n_a {
            still_stalled = Some(t_a);
            stall_to = Some(t_b);
        }
    }
    let (from, to) = (
        stall_from.expect("the stall shows in STATUS"),
        stall_to.expect("frames flow again after the stall"),
    );
    let still_stalled = still_stalled.unwrap_or(to);
    let pings: Vec<Duration> = log
        .iter()
        .filter(|(_, m)| m == "WATCHDOG=1")
        .map(|(t, _)| *t)
        .collect();
    let interval = Duration::from_millis(400);
    let before = pings.iter().filter(|t| **t < from).count();
    let during: Vec<&Duration> = pings.iter().filter(|t| **t >= from && **t < to).collect();
    let after = pings.iter().filter(|t| **t >= to).count();
    println!(
        "READY at {:?}; {} STATUS; stall seen {from:?}..{to:?}; WATCHDOG=1 pings: {before} before, {} during ({during:?}), {after} after",
        ready.unwrap_or_default(),
        statuses.len(),
        during.len()
    );
    assert!(before >= 3, "periodic pings while frames flow: {pings:?}");
    assert!(after >= 1, "pings resume once frames flow: {pings:?}");
    for t in &during {
        assert!(
            **t <= from + interval || **t > still_stalled,
            "a ping at {t:?}, more than one watchdog interval after the stall began (by {from:?}) \
             and before the last STATUS that showed no progress ({still_stalled:?})"
        );
    }
    assert!(
        to - from > 3 * interval,
        "the stall ({from:?}..{to:?}) is long enough to show the pings stop"
    );

    // The health verdict: written once, after N consecutive good frames.
    let appeared = appeared.expect("the health file appeared");
    let first_status_past_n = statuses
        .iter()
        .find(|(_, n)| *n >= good_frames)
        .map(|(t, _)| *t)
        .expect("N frames processed");
    // It may come later than N frames after the start: a deadline miss
    // (this machine is shared) starts the count again.
    let verdict = std::fs::read_to_string(&health).expect("health file");
    println!(
        "health file appeared at {appeared:?} (N = {good_frames} frames reached by STATUS at {first_status_past_n:?}):\n{verdict}"
    );
    let kv = |k: &str| {
        verdict
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
    };
    assert_eq!(kv("verdict").as_deref(), Some("good"));
    let gf: u64 = kv("good_frames")
        .and_then(|v| v.parse().ok())
        .expect("good_frames");
    assert!(gf >= good_frames, "{verdict}");
    assert!(
        kv("sequence")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|s| s + 1 >= gf)
    );
    assert!(
        kv("unix_time")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|t| t > 1_600_000_000)
    );
    if Path::new("/proc/sys/kernel/random/boot_id").exists() {
        assert!(kv("boot_id").is_some_and(|b| b.len() == 36), "{verdict}");
    }
    // Not written before N frames: the status thread writes the file and
    // sends STATUS, in that order, so every STATUS sent after the file
    // reports at least N frames processed. (Allowance: 100 ms between a
    // STATUS being sent and this test's listener stamping it. Comparing
    // with READY instead would measure the status thread's first wake-up.)
    let after_file: Vec<&(Duration, u64)> = statuses
        .iter()
        .filter(|(t, _)| *t > appeared + Duration::from_millis(100))
        .collect();
    assert!(!after_file.is_empty(), "no STATUS after the health file");
    assert!(
        after_file.iter().all(|(_, n)| *n >= good_frames),
        "the file appeared at {appeared:?}, before N = {good_frames} frames: {statuses:?}"
    );
    assert_eq!(s["health"], "good");
    // No temporary file left beside it.
    let names: Vec<_> = std::fs::read_dir(health.parent().expect("dir"))
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

/// A unit that never reaches N good frames never writes the verdict.
#[test]
fn no_health_verdict_before_n_good_frames() {
    let _serial = serial();
    let dir = scratch("no-health");
    let health = dir.join("health");
    let cfg = config(
        &dir,
        &format!(
            "[source]\nchunk_period_us = 250\n[backend]\nkind = \"cpu\"\n[output]\nprint_every = 0\n[health]\ngood_frames = 600\nstate_file = \"{}\"\n{SMALL_GEOMETRY}",
            health.display()
        ),
    );
    let stats = dir.join("stats.json");
    let out = radard()
        .args(["--frames", "500", "--config"])
        .arg(&cfg)
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .expect("run radard");
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "{}",
        show(&out)
    );
    let s = summary(&stats);
    assert_eq!(u(&s["frames"]), 500);
    assert!(!health.exists(), "verdict written after 500 of 600 frames");
    assert_eq!(s["health"], "pending");
}

/// Makes `dir` a full filesystem: a 64 KiB tmpfs filled up (root), else
/// None (the caller uses /dev/full, which fails every write with ENOSPC).
fn full_tmpfs(dir: &Path) -> Option<()> {
    std::fs::create_dir_all(dir).ok()?;
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).ok()?;
    let block = [0u8; 4096];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    Some(())
}

#[test]
fn failing_sinks_never_stall_the_loop() {
    let _serial = serial();
    let dir = scratch("sinks-stall");
    let mnt = dir.join("full");
    let mounted = full_tmpfs(&mnt).is_some();
    // Mounted: the file is created before the filesystem fills? No: the
    // filler took every block, so the sink's file is created (an inode)
    // but every write fails with ENOSPC.
    let jsonl = if mounted {
        mnt.join("detections.jsonl")
    } else {
        Path::new("/dev/full").to_path_buf()
    };
    println!(
        "jsonl sink on {} ({})",
        jsonl.display(),
        if mounted {
            "a full 64 KiB tmpfs"
        } else {
            "/dev/full: not root, no tmpfs"
        }
    );
    // A closed loopback port: bind one, note it, close it.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("port")
        .port();
    // The unit's 8 ms frames: the simulator (the FPGA's stand-in) is a
    // normal thread sharing the other CPU with the failing sinks' threads
    // here, and its wake-ups can come a few milliseconds late; at 4 ms
    // frames one such late frame counted as a miss on a loaded machine
    // (its summary said the simulator was late, not the loop).
    let cfg = config(
        &dir,
        &format!(
            r#"
[source]
chunk_period_us = 2000
[backend]
kind = "cpu"
[output]
print_every = 0
[rt]
cpu = 0
[[sink]]
kind = "jsonl"
path = "{}"
[[sink]]
kind = "udp"
address = "127.0.0.1:{port}"
[[sink]]
kind = "fpga"
{SMALL_GEOMETRY}"#,
            jsonl.display()
        ),
    );
    // Every run must count the sinks' failures and keep the FPGA's records
    // flowing. Deadlines: one run of the three with none missed. Sinks that
    // reach the loop (a blocking write, a shared lock) do so in every run;
    // the development VM's own stalls, which miss deadlines with no sink at
    // all, come a few times a minute and rarely in consecutive runs.
    let mut runs = Vec::new();
    for run in 1..=3 {
        let stats = dir.join(format!("stats-{run}.json"));
        let (out, text, s) = run_with_summary(&["--frames", "600"], &cfg, &stats);
        check_ledger(&s);
        let sinks = s["sinks"].as_array().expect("sinks");
        for k in sinks {
            println!(
                "run {run}: sink {}: sent {} queue_full {} errors {}",
                k["name"], k["sent"], k["queue_full"], k["errors"]
            );
        }
        let line = format!(
            "run {run}: deadline misses {} in {} frames (period 8 ms); latency p99.9 {} ms",
            s["deadline_misses"], s["frames"], s["latency_ms"]["p99_9"]
        );
        println!("{line}");
        assert_eq!(u(&s["frames"]), 600, "{text}");
        assert!(
            u(&sinks[0]["errors"]) >= 540,
            "jsonl on a full filesystem: {text}"
        );
        assert!(u(&sinks[1]["errors"]) >= 60, "udp to a closed port: {text}");
        assert_eq!(u(&sinks[2]["sent"]), 600, "fpga records: {text}");
        let misses = u(&s["deadline_misses"]);
        // Exit 3 is "deadlines missed"; anything else is a failure.
        let want_exit = if misses == 0 { 0 } else { 3 };
        assert_eq!(out.status.code(), Some(want_exit), "{text}");
        runs.push(line);
        if misses == 0 {
            break;
        }
    }
    if mounted {
        let _ = std::process::Command::new("umount").arg(&mnt).status();
    }
    assert!(
        runs.last()
            .is_some_and(|l| l.contains("deadline misses 0 ")),
        "deadline misses in every run: {}",
        runs.join("; ")
    );
}

#[test]
fn sinks_with_bad_values_are_config_errors_naming_the_key() {
    let _serial = serial();
    let dir = scratch("bad-sinks");
    let cases = [
        (
            vec!["--sink", "fpga", "--sink", "smtp:x"],
            "unknown sink kind",
        ),
        (
            vec!["--sink", "udp:no-such-host.invalid:5"],
            "sink[0].address",
        ),
        (vec!["--sink", "udp:127.0.0.1"], "sink[0].address"),
        (
            vec![
                "--sink",
                "fpga",
                "--sink",
                "asterix:no-such-host.invalid:8600",
            ],
            "sink[1].address",
        ),
    ];
    for (args, want) in cases {
        let out = radard()
            .args(["--no-rt", "--frames", "1"])
            .args(&args)
            .current_dir(&dir)
            .output()
            .expect("run radard");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The output failure policy (docs/outputs.md): an output that cannot be
/// created at start (here a jsonl file under /proc) does not stop the unit.
/// radard runs degraded: it processes every frame, earns a good health
/// verdict that names the output down, says so in the status line and the
/// summary, counts the frames the output missed, and exits 0.
#[test]
fn an_output_that_cannot_be_created_runs_degraded() {
    let _serial = serial();
    let dir = scratch("degraded");
    let cfg = config(
        &dir,
        &format!(
            "{SMALL_GEOMETRY}\n[health]\ngood_frames = 20\n[output]\nstatus_interval_ms = 100\n"
        ),
    );
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let good = format!("asterix:{}", rx.local_addr().expect("addr"));
    let out = radard()
        .args([
            "--no-rt",
            "--backend",
            "cpu",
            "--frames",
            "60",
            "--print-every",
            "0",
        ])
        // 32 ms frames: this test is about outputs, and a deadline miss on a
        // loaded machine would end the run with exit 3.
        .args(["--chunk-period-us", "8000", "--config"])
        .arg(&cfg)
        .args(["--sink", "jsonl:/proc/nope/d.jsonl", "--sink", &good])
        .arg("--health-file")
        .arg(dir.join("health"))
        .arg("--stats-json")
        .arg(dir.join("stats.json"))
        .output()
        .expect("run radard");
    let text = show(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("sink[0]: jsonl /proc/nope/d.jsonl: DOWN: sink[0].path: /proc/nope")
            && stdout.contains("running degraded"),
        "{text}"
    );
    assert!(
        stdout.contains("sink[0](jsonl /proc/nope/d.jsonl) DOWN sent=0")
            && stdout.contains("outputs=degraded(1 down)"),
        "the status line: {text}"
    );
    let health = std::fs::read_to_string(dir.join("health")).expect("a health verdict");
    assert!(health.starts_with("verdict=good\n"), "{health}");
    assert!(
        health.contains("\noutputs=degraded\noutputs_down=sink[0]\n"),
        "{health}"
    );
    let s = summary(&dir.join("stats.json"));
    assert_eq!(s["frames"], 60, "{text}");
    let sinks = s["sinks"].as_array().expect("sinks");
    assert_eq!(sinks[0]["down"], true);
    assert!(
        sinks[0]["down_at_start"]
            .as_str()
            .is_some_and(|w| w.contains("sink[0].path")),
        "{text}"
    );
    assert_eq!(sinks[0]["errors"], 60, "every frame missed is counted");
    assert_eq!(sinks[1]["down"], false);
    assert_eq!(sinks[1]["sent"], 60, "{text}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}
