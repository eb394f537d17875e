//! Test scaffolding: pseudo-terminal pairs standing in for the serial
//! cable, a relay joining two of them (as a null-modem cable joins two
//! UARTs), and radard started on the simulator with the CPU backend.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One pseudo-terminal: the master end (the test's) and the slave's path
/// (the program's "serial port"). The slave is kept open and raw, so the
/// line discipline never echoes or edits, whoever opens it later.
pub struct Pty {
    pub master: File,
    pub slave_path: PathBuf,
    _slave: File,
}

fn check(rc: libc::c_int, what: &str) {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
}

impl Pty {
    pub fn open() -> Pty {
        // SAFETY: plain FFI calls on a descriptor we own; buffers are sized.
        unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            check(fd, "posix_openpt");
            check(libc::grantpt(fd), "grantpt");
            check(libc::unlockpt(fd), "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            check(
                libc::ptsname_r(fd, name.as_mut_ptr(), name.len()),
                "ptsname_r",
            );
            let path = std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned();
            let master = File::from_raw_fd(fd);
            let slave = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .expect("open the pty slave");
            let mut t: libc::termios = std::mem::zeroed();
            check(libc::tcgetattr(slave.as_raw_fd(), &mut t), "tcgetattr");
            libc::cfmakeraw(&mut t);
            check(
                libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t),
                "tcsetattr",
            );
            Pty {
                master,
                slave_path: PathBuf::from(path),
                _slave: slave,
            }
        }
    }

    /// Reads what arrives on the master within `wait` (returns early once
    /// `until` says the bytes so far are enough).
    pub fn read_for(&mut self, wait: Duration, until: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline && !until(&got) {
            let left = deadline.saturating_duration_since(Instant::now());
            if poll_in(self.master.as_raw_fd(), left.min(Duration::from_millis(50))) {
                match self.master.read(&mut buf) {
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        got
    }

    /// Reads and forgets whatever is pending.
    pub fn drain(&mut self) {
        let _ = self.read_for(Duration::from_millis(200), |_| false);
    }
}

pub fn poll_in(fd: i32, wait: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, wait.as_millis() as i32) };
    rc > 0 && p.revents & libc::POLLIN != 0
}

/// Copies bytes both ways between two masters (a null-modem cable).
pub struct Relay {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    pub fn join(a: &Pty, b: &Pty) -> Relay {
        let stop = Arc::new(AtomicBool::new(false));
        let mut a = a.master.try_clone().expect("dup master a");
        let mut b = b.master.try_clone().expect("dup master b");
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !s.load(Ordering::Relaxed) {
                let mut fds = [
                    libc::pollfd {
                        fd: a.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: b.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: two valid pollfds.
                let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, 20) };
                if rc <= 0 {
                    continue;
                }
                if fds[0].revents & libc::POLLIN != 0
                    && let Ok(n) = a.read(&mut buf)
                {
                    let _ = b.write_all(&buf[..n]);
                }
                if fds[1].revents & libc::POLLIN != 0
                    && let Ok(n) = b.read(&mut buf)
                {
                    let _ = a.write_all(&buf[..n]);
                }
                if (fds[0].revents | fds[1].revents) & (libc::POLLHUP | libc::POLLERR) != 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Relay {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A scene with known targets and a lot of noise.
pub const SCENE: &str = r#"
noise_rms_lsb = 96.0
[[target]]
range_m = 30.0
velocity_mps = 12.0
azimuth_deg = 10.0
snr_db = -6.0
[[target]]
range_m = 80.0
velocity_mps = -20.0
azimuth_deg = -25.0
snr_db = -6.0
"#;

/// The frames a test's radard runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frames {
    /// A small geometry at 20 ms frames (50 Hz): quick on the CPU backend.
    Small,
    /// The small geometry at the unit's frame rate: 8 ms frames (125 Hz).
    /// What reaches the loop from the diagnostics link is the same at any
    /// frame size; whether the 2-core development machine carries the
    /// unit's 4 MiB frames on the CPU backend is the main job's question
    /// (docs/performance.md), not this one's.
    UnitRate,
}

impl Frames {
    /// Frames per second.
    pub fn rate_hz(self) -> f64 {
        match self {
            Frames::Small => 50.0,
            Frames::UnitRate => 125.0,
        }
    }
}

/// The scene's targets: (range m, velocity m/s).
pub const TARGETS: [(f32, f32); 2] = [(30.0, 12.0), (80.0, -20.0)];

/// The small geometry: the sections after `[source]`'s chunk period.
const SMALL_GEOMETRY: &str = r#"[geometry]
n_tx = 2
n_rx = 4
n_loops = 32
n_samples = 64
chunks_per_frame = 4
[cfar]
train_doppler = 2
train_range = 4
"#;

pub fn config(dir: &Path, port: &Path, rt_priority: u32, frames: Frames) -> PathBuf {
    let scene = dir.join("scene.toml");
    std::fs::write(&scene, SCENE).expect("write scene");
    // Four chunks a frame: 20 ms or 8 ms frames.
    let chunk_period_us = match frames {
        Frames::Small => 5000,
        Frames::UnitRate => 2000,
    };
    let geometry = format!("chunk_period_us = {chunk_period_us}\n{SMALL_GEOMETRY}");
    let text = format!(
        r#"
[source]
slots = 4
scene_frames = 4
scene_file = "{}"
{geometry}[backend]
kind = "cpu"
[rt]
priority = {}
lock_memory = false
[output]
print_every = 0
[loop]
power_map_every = 5
[health]
good_frames = 100000
state_file = "{}"
[diag]
port = "{}"
baud = 115200
"#,
        scene.display(),
        rt_priority,
        dir.join("health").display(),
        port.display()
    );
    let path = dir.join("radard.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

pub fn bin(name: &str) -> PathBuf {
    let me = PathBuf::from(env!("CARGO_BIN_EXE_radarctl"));
    let p = me.with_file_name(name);
    assert!(
        p.exists(),
        "{} is not built: `cargo build -p radard` (cargo test --workspace builds it)",
        p.display()
    );
    p
}

/// radard on the simulator with the diagnostics link on `port`; killed on drop.
pub struct Radard {
    pub child: Child,
    pub dir: PathBuf,
}

impl Radard {
    pub fn start(tag: &str, port: &Path) -> Radard {
        Self::start_with(tag, port, None, Frames::Small)
    }

    /// As the appliance runs: the loop and the simulator (the FPGA's
    /// stand-in) at SCHED_FIFO `priority`, every other thread (the
    /// diagnostics server among them) on the normal scheduler. Where the
    /// real-time policy cannot be had, radard says so and runs best-effort.
    pub fn start_rt(tag: &str, port: &Path, priority: u32, frames: Frames) -> Radard {
        Self::start_with(tag, port, Some(priority), frames)
    }

    fn start_with(tag: &str, port: &Path, rt: Option<u32>, frames: Frames) -> Radard {
        let dir = std::env::temp_dir().join(format!("radarctl-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let cfg = config(&dir, port, rt.unwrap_or(0), frames);
        let log = File::create(dir.join("radard.log")).expect("log");
        let mut cmd = Command::new(bin("radard"));
        if rt.is_none() {
            cmd.arg("--no-rt");
        }
        let child = cmd
            .arg("--config")
            .arg(&cfg)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start radard");
        Radard { child, dir }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("radard.log")).unwrap_or_default()
    }
}

impl Drop for Radard {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// radarctl on `port`: (exit code, stdout, stderr).
pub fn radarctl(port: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_radarctl"))
        .arg("--port")
        .arg(port)
        .args(["--timeout", "5"])
        .args(args)
        .output()
        .expect("run radarctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// radarctl --json, parsed; panics with its stderr when it fails.
pub fn radarctl_json(port: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let (code, out, err) = radarctl(port, &a);
    assert_eq!(code, 0, "radarctl {args:?} failed: {err}");
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("radarctl {args:?}: not JSON ({e}): {out}"))
}

/// Waits until radard's link answers and frames flow.
pub fn wait_ready(port: &Path, radard: &Radard) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, out, _) = radarctl(port, &["--json", "status"]);
        if code == 0 {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            // The rate is measured over about a second of frames.
            if v["frames"].as_u64().unwrap_or(0) > 10
                && v["frame_rate_hz"].as_f64().unwrap_or(0.0) > 0.0
            {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "radard did not come up; its log:\n{}",
            radard.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One test at a time (each starts a radard; the machine has few cores).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
