//! radard as a systemd service, from the status thread (normal priority):
//! `sd_notify` READY once frames flow, STATUS with rate and misses, WATCHDOG
//! pings only while frames arrive and deadlines hold; the health verdict
//! file (docs/health-verdict.md) and its optional command once
//! `health.good_frames` consecutive good frames were processed; the loop
//! thread's CPU time per frame; resident memory after warm-up and at the end.
//! Everything here reads the status board; nothing touches the loop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sd_notify::NotifyState;

use crate::config::HealthConfig;
use crate::report::StatusHook;
use crate::service_watchdog::WatchdogGate;
use crate::status::{EventKind, HealthState, StatusBoard, StatusSnapshot};
use crate::telemetry::TelemetryCell;

/// The CPU clock of one thread (the loop's), read from another thread.
#[derive(Clone, Copy, Debug)]
pub struct ThreadCpuClock(libc::clockid_t);

impl ThreadCpuClock {
    /// The calling thread's clock (call on the loop thread before the loop).
    pub fn of_current_thread() -> Option<Self> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the live calling thread; out-pointer to a local.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(ThreadCpuClock(id))
    }

    /// CPU time the thread used so far. Valid while the thread lives.
    pub fn read_ns(&self) -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: out-pointer to a local timespec.
        let rc = unsafe { libc::clock_gettime(self.0, &mut ts) };
        (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// Resident memory of this process in KiB (/proc/self/statm).
pub fn rss_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64 / 1024)
}

/// The boot id (/proc/sys/kernel/random/boot_id), if the kernel has one.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Writes the health verdict atomically: a temporary file beside it,
/// flushed to disk, renamed over the path (docs/health-verdict.md).
/// `outputs_down`: the indices of the sinks that are down (the unit runs
/// degraded; the verdict is still good).
pub fn write_health_file(
    path: &Path,
    good_frames: u64,
    sequence: u64,
    outputs_down: &[usize],
) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let unix_time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut text = format!(
        "verdict=good\ngood_frames={good_frames}\nsequence={sequence}\nunix_time={unix_time}\n"
    );
    if let Some(id) = boot_id() {
        text.push_str(&format!("boot_id={id}\n"));
    }
    if outputs_down.is_empty() {
        text.push_str("outputs=ok\n");
    } else {
        let list: Vec<String> = outputs_down.iter().map(|i| format!("sink[{i}]")).collect();
        text.push_str(&format!(
            "outputs=degraded\noutputs_down={}\n",
            list.join(",")
        ));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Figures the summary reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServiceFigures {
    pub rss_warm_kib: Option<u64>,
    /// The loop thread's CPU time and frames since the first status
    /// interval (set-up and the first frames' warm-up left out).
    pub loop_cpu_total_ns: u64,
    pub loop_cpu_frames: u64,
    pub watchdog_pings: u64,
}

/// The status thread's service work (a [`StatusHook`]): reports the
/// service's state to systemd (READY, STATUS, WATCHDOG, STOPPING), writes
/// the health verdict and runs its command, and keeps the figures the
/// summary reports (loop CPU time, resident memory, watchdog pings).
pub struct ServiceReporter {
    board: Arc<StatusBoard>,
    health: HealthConfig,
    cpu: Option<ThreadCpuClock>,
    cpu_last: (u64, u64),
    /// (CPU ns, frames) at the first status interval.
    cpu_base: Option<(u64, u64)>,
    watchdog: Option<Duration>,
    watchdog_gate: Option<WatchdogGate>,
    ready: bool,
    health_done: bool,
    /// Frames after which resident memory counts as warmed up.
    rss_warm_frames: u64,
    pub figures: ServiceFigures,
    /// Lines for the console (health verdict, its command).
    pub notes: Vec<String>,
    /// GPU telemetry, shown as a `status gpu[...]` line after each status line.
    telemetry: Option<Arc<TelemetryCell>>,
}

impl ServiceReporter {
    pub fn new(
        board: Arc<StatusBoard>,
        health: HealthConfig,
        cpu: Option<ThreadCpuClock>,
        rss_warm_frames: u64,
    ) -> Self {
        let watchdog = sd_notify::watchdog_enabled();
        ServiceReporter {
            board,
            health,
            cpu,
            cpu_last: (cpu.and_then(|c| c.read_ns()).unwrap_or(0), 0),
            cpu_base: None,
            watchdog,
            watchdog_gate: watchdog.map(|w| WatchdogGate::new(w, Instant::now())),
            ready: false,
            health_done: false,
            rss_warm_frames,
            figures: ServiceFigures::default(),
            notes: Vec::new(),
            telemetry: None,
        }
    }

    /// Shows the telemetry thread's latest sample with every status line.
    pub fn show_telemetry(&mut self, cell: Arc<TelemetryCell>) {
        self.telemetry = Some(cell);
    }

    /// The watchdog interval systemd asked for (WATCHDOG_USEC).
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    fn health_check(&mut self, snap: &StatusSnapshot) {
        if self.health_done || snap.consecutive_good < self.health.good_frames {
            return;
        }
        self.health_done = true;
        let path = self.health.state_file.clone();
        let down: Vec<usize> = snap
            .sinks
            .iter()
            .take(snap.sink_count as usize)
            .enumerate()
            .filter(|(_, c)| c.down != 0)
            .map(|(i, _)| i)
            .collect();
        match write_health_file(&path, snap.consecutive_good, snap.latest.sequence, &down) {
            Ok(()) => {
                self.board.set_health(HealthState::Good);
                self.board.post(
                    EventKind::HealthGood,
                    snap.consecutive_good,
                    snap.latest.sequence,
                );
                self.notes.push(format!(
                    "radard: health: verdict good after {} consecutive good frames, written to {}",
                    snap.consecutive_good,
                    path.display()
                ));
                if let Some((prog, args)) = self.health.command.split_first() {
                    match std::process::Command::new(prog).args(args).spawn() {
                        Ok(mut child) => {
                            self.notes.push(format!(
                                "radard: health: started {prog} (pid {})",
                                child.id()
                            ));
                            // Reaped by a thread of its own, so nothing waits here.
                            let name = prog.clone();
                            let _ = std::thread::Builder::new()
                                .name("health-command".into())
                                .spawn(move || match child.wait() {
                                    Ok(st) if st.success() => {}
                                    Ok(st) => eprintln!("radard: health: {name} exited with {st}"),
                                    Err(e) => eprintln!("radard: health: {name}: {e}"),
                                });
                        }
                        Err(e) => self.notes.push(format!(
                            "radard: health: cannot run health.command {prog}: {e}"
                        )),
                    }
                }
            }
            Err(e) => {
                self.board.set_health(HealthState::WriteFailed);
                self.notes.push(format!(
                    "radard: health: cannot write health.state_file {}: {e}",
                    path.display()
                ));
            }
        }
    }

    fn watchdog_check(&mut self, snap: &StatusSnapshot) {
        let Some(gate) = self.watchdog_gate.as_mut() else {
            return;
        };
        // A stalled source or GPU, or deadlines missed for a whole
        // interval, stop the pings and systemd restarts the service.
        let due = gate.ping_due(Instant::now(), snap.frames_processed, snap.deadline_misses);
        if due && sd_notify::notify(&[NotifyState::Watchdog]).is_ok() {
            self.figures.watchdog_pings += 1;
        }
    }

    /// The summary's figures at the end; tells systemd the service stops,
    /// with the run's figures as its last STATUS (`systemctl status`).
    pub fn finish(&mut self, snap: &StatusSnapshot) -> ServiceFigures {
        self.interval(snap);
        // The periodic STATUS's fields first, so readers of those still
        // parse it.
        let status = format!(
            "stopping: {:.1} frames/s, {} processed, {} deadline misses, {} dropped, {} sequence errors",
            snap.rate_hz,
            snap.frames_processed,
            snap.deadline_misses,
            snap.dropped_total(),
            snap.sequence_errors
        );
        let _ = sd_notify::notify(&[NotifyState::Stopping, NotifyState::Status(&status)]);
        self.figures
    }
}

impl StatusHook for ServiceReporter {
    fn tick(&mut self, snap: &StatusSnapshot) {
        if !self.ready && snap.frames_processed > 0 {
            self.ready = true;
            let _ = sd_notify::notify(&[NotifyState::Ready]);
        }
        if self.figures.rss_warm_kib.is_none() && snap.frames_processed >= self.rss_warm_frames {
            self.figures.rss_warm_kib = rss_kib();
        }
        self.watchdog_check(snap);
        self.health_check(snap);
    }

    fn interval(&mut self, snap: &StatusSnapshot) {
        if let Some(total) = self.cpu.and_then(|c| c.read_ns()) {
            let frames = snap.frames_processed + snap.dropped_total();
            let (t0, f0) = self.cpu_last;
            let per = total.saturating_sub(t0) / frames.saturating_sub(f0).max(1);
            self.cpu_last = (total, frames);
            self.board.set_loop_cpu(per, total);
            let (tb, fb) = *self.cpu_base.get_or_insert((total, frames));
            self.figures.loop_cpu_total_ns = total.saturating_sub(tb);
            self.figures.loop_cpu_frames = frames.saturating_sub(fb);
        }
        if self.ready {
            let mut status = format!(
                "{:.1} frames/s, {} processed, {} deadline misses, {} dropped",
                snap.rate_hz,
                snap.frames_processed,
                snap.deadline_misses,
                snap.dropped_total()
            );
            let down = snap.sinks_down();
            if down > 0 {
                status.push_str(&format!(", degraded: {down} output(s) down"));
            }
            let _ = sd_notify::notify(&[NotifyState::Status(&status)]);
        }
    }

    fn extend_line(&mut self, w: &mut dyn Write) {
        if let Some(t) = self.telemetry.as_ref().and_then(|c| c.latest()) {
            let _ = write!(w, "\nstatus {t}");
        }
        for n in self.notes.drain(..) {
            let _ = write!(w, "\n{n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_health_file_is_written_whole_with_every_key() {
        let dir = std::env::temp_dir().join(format!("radard-health-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub/health");
        write_health_file(&path, 250, 1234, &[]).expect("written");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("verdict=good\ngood_frames=250\nsequence=1234\nunix_time="));
        if boot_id().is_some() {
            assert!(text.contains("\nboot_id="));
        }
        assert!(text.ends_with("outputs=ok\n"), "{text}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.join("sub")).expect("dir").collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        // Outputs down: still a good verdict, and which are down.
        write_health_file(&path, 250, 1234, &[1, 3]).expect("written");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("verdict=good\n"));
        assert!(
            text.ends_with("outputs=degraded\noutputs_down=sink[1],sink[3]\n"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_loop_thread_cpu_clock_reads() {
        let c = ThreadCpuClock::of_current_thread().expect("clock");
        let a = c.read_ns().expect("read");
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(c.read_ns().expect("read") > a);
        assert!(rss_kib().is_some_and(|k| k > 0));
    }
}
