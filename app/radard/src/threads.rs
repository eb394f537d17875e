//! How the process's threads were scheduled, from /proc: CPU time, time
//! spent runnable but waiting for a CPU, and how often each was preempted,
//! plus the time the hypervisor took from this machine's CPUs (steal).
//! Read at the start and at the end of a run (never in the loop) and printed
//! in the summary: a frame that reached the loop late while the loop or the
//! frame source waited for a CPU is a scheduling problem, not a processing
//! one, and these figures tell the two apart.

use std::collections::BTreeMap;

use serde::Serialize;

/// One thread's scheduling counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadSample {
    pub name: String,
    /// Time on a CPU (ns).
    pub cpu_ns: u64,
    /// Time runnable but waiting for a CPU (ns).
    pub runq_wait_ns: u64,
    /// Times it gave the CPU up itself (sleeps, waits).
    pub voluntary: u64,
    /// Times it was preempted.
    pub involuntary: u64,
}

/// The threads of this process by thread id, and the machine's steal time.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub threads: BTreeMap<u32, ThreadSample>,
    pub steal_ns: Option<u64>,
}

/// One thread's share of a run (the difference of two samples).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ThreadUsage {
    pub name: String,
    pub cpu_ms: f64,
    pub runq_wait_ms: f64,
    pub voluntary: u64,
    pub involuntary: u64,
}

/// Names the calling thread (as `comm`, at most 15 bytes), for threads
/// started without a `std::thread::Builder` name.
pub fn name_this_thread(name: &std::ffi::CStr) {
    // SAFETY: a NUL-terminated string that outlives the call; the kernel
    // copies (and cuts) it.
    unsafe { libc::pthread_setname_np(libc::pthread_self(), name.as_ptr()) };
}

/// Reads every thread of this process (threads that vanish meanwhile are
/// left out; a field the kernel does not provide reads as 0).
pub fn sample() -> Sample {
    let mut threads = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for entry in dir.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some(t) = read_thread(&entry.path()) {
                threads.insert(tid, t);
            }
        }
    }
    Sample {
        threads,
        steal_ns: std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| parse_steal_ns(&s, clock_ticks())),
    }
}

fn read_thread(dir: &std::path::Path) -> Option<ThreadSample> {
    let name = std::fs::read_to_string(dir.join("comm")).ok()?;
    let mut t = ThreadSample {
        name: name.trim().to_string(),
        ..ThreadSample::default()
    };
    if let Ok(s) = std::fs::read_to_string(dir.join("schedstat")) {
        (t.cpu_ns, t.runq_wait_ns) = parse_schedstat(&s);
    }
    if let Ok(s) = std::fs::read_to_string(dir.join("status")) {
        (t.voluntary, t.involuntary) = parse_switches(&s);
    }
    Some(t)
}

/// `/proc/<pid>/task/<tid>/schedstat`: "run_ns wait_ns timeslices".
fn parse_schedstat(text: &str) -> (u64, u64) {
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The context-switch lines of `/proc/<pid>/task/<tid>/status`.
fn parse_switches(text: &str) -> (u64, u64) {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// The `steal` column of the aggregate `cpu` line of /proc/stat, in ns.
fn parse_steal_ns(text: &str, ticks_per_s: u64) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    // cpu user nice system idle iowait irq softirq steal ...
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal.saturating_mul(1_000_000_000) / ticks_per_s.max(1))
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// What each thread of `end` did since `start` (a thread started meanwhile
/// counts from zero), busiest first; and the steal time between the two.
pub fn usage(start: &Sample, end: &Sample) -> (Vec<ThreadUsage>, Option<f64>) {
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut v: Vec<ThreadUsage> = end
        .threads
        .iter()
        .map(|(tid, e)| {
            let s = start.threads.get(tid).cloned().unwrap_or_default();
            ThreadUsage {
                name: e.name.clone(),
                cpu_ms: ms(e.cpu_ns.saturating_sub(s.cpu_ns)),
                runq_wait_ms: ms(e.runq_wait_ns.saturating_sub(s.runq_wait_ns)),
                voluntary: e.voluntary.saturating_sub(s.voluntary),
                involuntary: e.involuntary.saturating_sub(s.involuntary),
            }
        })
        .collect();
    v.sort_by(|a, b| b.cpu_ms.total_cmp(&a.cpu_ms));
    let steal = match (start.steal_ns, end.steal_ns) {
        (Some(a), Some(b)) => Some(ms(b.saturating_sub(a))),
        _ => None,
    };
    (v, steal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_files() {
        assert_eq!(parse_schedstat("123456 7890 42\n"), (123456, 7890));
        assert_eq!(parse_schedstat(""), (0, 0));
        let status = "Name:\tradard\nState:\tS\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_switches(status), (150, 7));
        assert_eq!(parse_switches("garbage"), (0, 0));
        let stat = "cpu  100 0 50 1000 5 0 2 30 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_steal_ns(stat, 100), Some(300_000_000));
        assert_eq!(parse_steal_ns("cpu0 1 2\n", 100), None);
    }

    /// A thread that burns CPU shows it, by its name, in the difference.
    /// It burns 50 ms of its own CPU time (not of wall time, which a loaded
    /// machine would share out to other threads).
    #[test]
    fn a_busy_thread_shows_in_the_usage() {
        let start = sample();
        let h = std::thread::Builder::new()
            .name("busy-probe".into())
            .spawn(|| {
                let clock = crate::service::ThreadCpuClock::of_current_thread().expect("clock");
                let t0 = clock.read_ns().expect("read");
                let mut x = 0u64;
                while clock.read_ns().expect("read") - t0 < 50_000_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                let end = sample();
                (x, end)
            })
            .expect("spawn");
        let (_, end) = h.join().expect("join");
        let (usage, _) = usage(&start, &end);
        let busy = usage
            .iter()
            .find(|u| u.name == "busy-probe")
            .expect("the thread is listed");
        assert!(busy.cpu_ms >= 20.0, "{busy:?}");
    }
}
