//! Shared by the tests that run the radard binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A small geometry: 16 KiB frames in 4 chunks of 4 KiB.
pub const SMALL_GEOMETRY: &str = r#"
[geometry]
n_tx = 2
n_rx = 4
n_loops = 16
n_samples = 32
chunks_per_frame = 4
[cfar]
train_doppler = 2
train_range = 4
"#;

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("radard-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn radard() -> Command {
    Command::new(env!("CARGO_BIN_EXE_radard"))
}

/// Writes `toml` to `dir/radard.toml` and returns the path.
pub fn config(dir: &Path, toml: &str) -> PathBuf {
    let p = dir.join("radard.toml");
    std::fs::write(&p, toml).expect("write config");
    p
}

/// The summary radard wrote with --stats-json.
pub fn summary(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (radard wrote no summary)", path.display()));
    serde_json::from_str(&text).expect("summary is JSON")
}

pub fn show(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout (tail)\n{}\n--- stderr\n{}",
        out.status.code(),
        tail(&String::from_utf8_lossy(&out.stdout), 40),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Checks and prints the ledger: produced = processed + dropped by reason.
pub fn check_ledger(s: &serde_json::Value) -> u64 {
    let d = &s["dropped"];
    let dropped: u64 = ["at_source", "late", "short", "crc", "error"]
        .iter()
        .map(|k| u(&d[*k]))
        .sum();
    println!(
        "ledger: produced {} = processed {} + dropped {} (at_source {}, late {}, short {}, crc {}, error {})",
        u(&s["frames_produced"]),
        u(&s["frames"]),
        dropped,
        u(&d["at_source"]),
        u(&d["late"]),
        u(&d["short"]),
        u(&d["crc"]),
        u(&d["error"])
    );
    assert_eq!(
        u(&s["frames_produced"]),
        u(&s["frames"]) + dropped,
        "the ledger does not close"
    );
    assert_eq!(s["ledger_closed"], true);
    dropped
}

/// radard with `args`, then `--config CFG --stats-json STATS`: its output,
/// that output as the tests print it ([`show`]) and the summary JSON.
pub fn run_with_summary(
    args: &[&str],
    cfg: &Path,
    stats: &Path,
) -> (Output, String, serde_json::Value) {
    let out = radard()
        .args(args)
        .arg("--config")
        .arg(cfg)
        .arg("--stats-json")
        .arg(stats)
        .output()
        .expect("run radard");
    let text = show(&out);
    let s = summary(stats);
    (out, text, s)
}

/// A thread that receives what radard sends (datagrams) until told radard
/// has exited. `recv` returns None when a read timed out: the receiver
/// keeps waiting while radard runs (a slow start on a loaded or emulated
/// machine loses nothing) and stops at the first quiet read after.
pub struct Received<T> {
    exited: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<T>>,
}

pub fn receive<T: Send + 'static>(
    mut recv: impl FnMut() -> Option<T> + Send + 'static,
) -> Received<T> {
    let exited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = exited.clone();
    let thread = std::thread::spawn(move || {
        let mut got = Vec::new();
        loop {
            match recv() {
                Some(v) => got.push(v),
                None if seen.load(std::sync::atomic::Ordering::Acquire) => return got,
                None => {}
            }
        }
    });
    Received { exited, thread }
}

impl<T> Received<T> {
    /// Call once radard has exited: what arrived.
    pub fn after_exit(self) -> Vec<T> {
        self.exited
            .store(true, std::sync::atomic::Ordering::Release);
        self.thread.join().expect("receiver thread")
    }
}
