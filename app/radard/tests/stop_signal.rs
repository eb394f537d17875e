//! How a run ends, as systemd and scripts see it: SIGTERM is a clean stop
//! (exit 0) even after deadline misses, with the misses in the summary;
//! a run that reaches `--frames N` with misses still exits 3.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::*;

/// Frames of 4 us (4 chunks of 1 us): more than the CPU backend can keep
/// up with anywhere, so every processed frame misses its deadline.
fn overloaded(dir: &std::path::Path) -> std::path::PathBuf {
    config(
        dir,
        &format!(
            "[source]\nchunk_period_ns = 1000\nevent_timeout_ms = 300\n\
             [backend]\nkind = \"cpu\"\n[output]\nprint_every = 0\nstatus_interval_ms = 100\n{SMALL_GEOMETRY}"
        ),
    )
}

/// `deadline_misses=N` of a status line.
fn misses_in(line: &str) -> u64 {
    line.split(' ')
        .find_map(|w| w.strip_prefix("deadline_misses="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The stop comes after the first status line that counts a miss.
#[test]
fn sigterm_after_deadline_misses_exits_0_with_the_misses_in_the_summary() {
    let dir = scratch("sigterm");
    let cfg = overloaded(&dir);
    let stats = dir.join("stats.json");
    let mut child = radard()
        .args(["--no-rt", "--config"])
        .arg(&cfg)
        .arg("--stats-json")
        .arg(&stats)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start radard");
    // Stdout line by line, so the test sees the first status line.
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut seen = Vec::new();
    let status_line = loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(l) if l.starts_with("status ") && misses_in(&l) > 0 => break Some(l),
            Ok(l) => seen.push(l),
            Err(_) => break None,
        }
    };
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    let stdout = reader.join().expect("reader");
    let stderr = std::io::read_to_string(child.stderr.take().expect("stderr")).unwrap_or_default();
    let text = format!("status {status:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(
        status_line.is_some(),
        "no status line with a miss within 30 s: {seen:?}"
    );
    assert_eq!(status.code(), Some(0), "{text}");
    let s = summary(&stats);
    assert_eq!(s["end"], "stopped by signal", "{s}");
    assert_eq!(s["stopped_by_signal"], true);
    let misses = u(&s["deadline_misses"]);
    assert!(misses > 0, "the run had misses to report: {s}");
    assert!(
        stdout.contains(&format!(
            "summary: quality {misses} deadline misses, 0 payload errors, 0 sequence errors; exit status 0 (stopped by signal)"
        )),
        "{text}"
    );
    check_ledger(&s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same load ended by `--frames N`: exit 3, as the suites expect.
#[test]
fn a_frame_limit_with_deadline_misses_still_exits_3() {
    let dir = scratch("frames-misses");
    let cfg = overloaded(&dir);
    let stats = dir.join("stats.json");
    let (out, text, s) = run_with_summary(&["--no-rt", "--frames", "200"], &cfg, &stats);
    assert!(u(&s["deadline_misses"]) > 0, "{text}");
    assert_eq!(s["stopped_by_signal"], false);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("exit status 3 (frame limit reached with errors)"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
