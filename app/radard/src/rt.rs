//! Real-time set-up of the frame loop's thread: locked memory, SCHED_FIFO,
//! CPU affinity, prefaulted stack (the real-time requirements:
//! docs/requirements.md).
//!
//! Missing privileges are reported, and the loop goes on best-effort unless
//! `strict` asks to refuse.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The CPUs the process had before the loop thread was pinned, less the
/// loop's CPU: where every other thread of radard runs.
static OTHER_CPUS: OnceLock<libc::cpu_set_t> = OnceLock::new();

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RtConfig {
    /// SCHED_FIFO priority 1..=99; 0 leaves the normal scheduler.
    pub priority: i32,
    /// CPU to pin the loop thread to (an isolated core on the unit).
    pub cpu: Option<usize>,
    /// mlockall(MCL_CURRENT | MCL_FUTURE).
    pub lock_memory: bool,
    /// Bytes of stack to touch up front so the loop never page-faults on it.
    pub stack_prefault_bytes: usize,
    /// Refuse to run when any of the above cannot be had.
    pub strict: bool,
}

impl Default for RtConfig {
    fn default() -> Self {
        RtConfig {
            priority: 80,
            cpu: None,
            lock_memory: true,
            stack_prefault_bytes: 256 << 10,
            strict: false,
        }
    }
}

#[derive(Debug, Error)]
pub enum RtError {
    #[error("rt.priority: {0} is outside 0..=99")]
    Priority(i32),
    #[error("rt.cpu: CPU {cpu} does not exist (this machine has {have})")]
    Cpu { cpu: usize, have: usize },
    #[error("real-time set-up incomplete and rt.strict is set: {0}")]
    Strict(String),
}

/// What was obtained, for the start-up log.
#[derive(Debug, Default)]
pub struct RtReport {
    pub obtained: Vec<String>,
    pub missing: Vec<String>,
}

impl RtConfig {
    pub fn validate(&self) -> Result<(), RtError> {
        if !(0..=99).contains(&self.priority) {
            return Err(RtError::Priority(self.priority));
        }
        if let Some(cpu) = self.cpu {
            let have = std::thread::available_parallelism().map_or(1, |n| n.get());
            // SAFETY: sysconf has no memory-safety preconditions.
            let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
            let have = have.max(usize::try_from(configured).unwrap_or(0));
            if cpu >= have {
                return Err(RtError::Cpu { cpu, have });
            }
        }
        Ok(())
    }
}

/// Apply the whole configuration to the calling thread.
pub fn apply(cfg: &RtConfig) -> Result<RtReport, RtError> {
    let mut rep = RtReport::default();
    apply_scheduling(cfg, &mut rep)?;
    apply_memory_and_affinity(cfg, &mut rep)?;
    Ok(rep)
}

/// First phase, before the processing backend starts its worker threads:
/// SCHED_FIFO for the calling thread, which threads created afterwards
/// inherit, so the workers that share the loop's hand-over locks are
/// real-time too.
pub fn apply_scheduling(cfg: &RtConfig, rep: &mut RtReport) -> Result<(), RtError> {
    cfg.validate()?;
    if cfg.priority > 0 {
        // SAFETY: sched_param is plain integers, all-zero is valid (musl's
        // has more fields than glibc's, so no struct literal).
        let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
        param.sched_priority = cfg.priority;
        // The calling thread only (what sched_setscheduler(0) does on
        // Linux), through pthreads: musl's sched_setscheduler is a stub
        // that always fails with ENOSYS.
        // SAFETY: pthread_self() is the live calling thread; param is a
        // valid sched_param for the call's duration.
        let rc =
            unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
        // pthread functions return the error number rather than set errno.
        let result = match rc {
            0 => Ok(()),
            e => Err(std::io::Error::from_raw_os_error(e)),
        };
        note(
            rep,
            result,
            &format!("SCHED_FIFO priority {}", cfg.priority),
            &format!("SCHED_FIFO priority {}", cfg.priority),
        );
    }
    strict(cfg, rep)
}

/// Second phase, on the loop thread once everything is allocated: lock
/// memory, pin the loop thread (only it: workers stay free to use the other
/// cores), prefault its stack.
pub fn apply_memory_and_affinity(cfg: &RtConfig, rep: &mut RtReport) -> Result<(), RtError> {
    apply_memory(cfg, rep)?;
    apply_affinity(cfg, rep)
}

/// Lock memory (before the stream starts: locking a large ring takes
/// a while, and frames would be dropped meanwhile).
pub fn apply_memory(cfg: &RtConfig, rep: &mut RtReport) -> Result<(), RtError> {
    cfg.validate()?;
    if cfg.lock_memory {
        // SAFETY: mlockall takes flags only.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
        note(rep, os_result(rc), "memory locked (mlockall)", "mlockall");
    }
    strict(cfg, rep)
}

/// Pin the calling (loop) thread and prefault its stack: last, once the
/// threads that must not share its CPU exist (they keep the others; later
/// ones leave it through [`normal_thread`]).
pub fn apply_affinity(cfg: &RtConfig, rep: &mut RtReport) -> Result<(), RtError> {
    cfg.validate()?;
    if let Some(cpu) = cfg.cpu {
        remember_other_cpus(cpu);
        // SAFETY: cpu_set_t is plain data; CPU_SET stays inside it because
        // `cpu` was validated against the CPU count (< CPU_SETSIZE here).
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        note(
            rep,
            os_result(rc),
            &format!("loop thread pinned to CPU {cpu}"),
            &format!("sched_setaffinity(CPU {cpu})"),
        );
    }
    if cfg.stack_prefault_bytes > 0 {
        prefault_stack(cfg.stack_prefault_bytes);
        rep.obtained.push(format!(
            "stack prefaulted ({} KiB)",
            cfg.stack_prefault_bytes >> 10
        ));
    }
    strict(cfg, rep)
}

/// Keep the process's CPUs, less `loop_cpu` (unless that leaves none), for
/// [`normal_thread`].
fn remember_other_cpus(loop_cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its
    // size; CPU_CLR/CPU_COUNT stay inside it (loop_cpu was validated).
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return;
        }
        let all = set;
        libc::CPU_CLR(loop_cpu, &mut set);
        if libc::CPU_COUNT(&set) == 0 { all } else { set }
    };
    let _ = OTHER_CPUS.set(set);
}

/// Nice value of radard's threads beside the loop: below the loop and the
/// backend's workers when real-time scheduling was refused (no privilege),
/// so that on a small machine they take what the loop leaves.
pub const NORMAL_THREAD_NICE: i32 = 5;

/// Called first by each of radard's other threads (sinks, status,
/// telemetry, diagnostics): the normal scheduler at nice
/// [`NORMAL_THREAD_NICE`], whatever real-time policy it inherited from the
/// loop thread, and off the loop's CPU when the loop was pinned, so none of
/// them competes with the loop for its core. Best-effort: a thread that
/// cannot change any of these keeps running.
pub fn normal_thread() {
    // SAFETY: sched_param is plain integers, all-zero (priority 0) is valid
    // (musl's has more fields than glibc's, so no struct literal).
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_self() is the live calling thread; param is a valid
    // sched_param for the call's duration; lowering the calling thread's
    // policy needs no privilege. (Not sched_setscheduler: a stub on musl.)
    let _ = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_OTHER, &param) };
    // SAFETY: gettid has no preconditions; on Linux setpriority(PRIO_PROCESS,
    // tid) sets that one thread's nice value, and raising it needs no
    // privilege.
    let _ = unsafe {
        let tid = libc::gettid();
        libc::setpriority(
            libc::PRIO_PROCESS,
            u32::try_from(tid).unwrap_or(0),
            NORMAL_THREAD_NICE,
        )
    };
    if let Some(set) = OTHER_CPUS.get() {
        // SAFETY: set is a valid cpu_set_t of the size passed.
        let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    }
}

fn strict(cfg: &RtConfig, rep: &RtReport) -> Result<(), RtError> {
    if cfg.strict && !rep.missing.is_empty() {
        return Err(RtError::Strict(rep.missing.join("; ")));
    }
    Ok(())
}

/// A libc call's result by its -1-and-errno convention.
fn os_result(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn note(rep: &mut RtReport, result: std::io::Result<()>, ok: &str, what: &str) {
    match result {
        Ok(()) => rep.obtained.push(ok.to_string()),
        Err(err) => {
            let hint = match err.raw_os_error() {
                Some(libc::EPERM) => {
                    " (needs root, CAP_SYS_NICE/CAP_IPC_LOCK, or LimitRTPRIO/LimitMEMLOCK in the unit)"
                }
                Some(libc::ENOMEM) => " (RLIMIT_MEMLOCK too small: raise LimitMEMLOCK)",
                _ => "",
            };
            rep.missing.push(format!("{what}: {err}{hint}"));
        }
    }
}

/// Touch `bytes` of stack below the current frame so later growth does not
/// fault (with mlockall(MCL_FUTURE) the pages then stay resident).
#[inline(never)]
fn prefault_stack(bytes: usize) {
    const STEP: usize = 4096;
    let mut page = [0u8; STEP];
    std::hint::black_box(&mut page);
    if bytes > STEP {
        prefault_stack(bytes - STEP);
    }
    // Keep the frame alive across the call so it is not turned into a loop.
    std::hint::black_box(&page);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_name_the_key() {
        let cfg = RtConfig {
            priority: 120,
            ..RtConfig::default()
        };
        assert!(apply(&cfg).unwrap_err().to_string().contains("rt.priority"));
        let cfg = RtConfig {
            cpu: Some(100_000),
            ..RtConfig::default()
        };
        assert!(apply(&cfg).unwrap_err().to_string().contains("rt.cpu"));
    }

    /// SCHED_FIFO is set on the calling thread (through pthreads, which
    /// musl implements), or its refusal is reported with the reason.
    #[test]
    fn fifo_is_taken_by_the_calling_thread_or_reported() {
        std::thread::spawn(|| {
            let cfg = RtConfig {
                priority: 7,
                cpu: None,
                lock_memory: false,
                stack_prefault_bytes: 0,
                strict: false,
            };
            let mut rep = RtReport::default();
            apply_scheduling(&cfg, &mut rep).expect("best effort never fails");
            // SAFETY: no preconditions; 0 is the calling thread.
            let policy = unsafe { libc::sched_getscheduler(0) };
            if rep.obtained.iter().any(|s| s == "SCHED_FIFO priority 7") {
                assert_eq!(policy, libc::SCHED_FIFO, "{rep:?}");
            } else {
                assert!(
                    rep.missing
                        .iter()
                        .any(|s| s.contains("SCHED_FIFO priority 7")),
                    "{rep:?}"
                );
                assert_ne!(policy, libc::SCHED_FIFO);
            }
            normal_thread();
            // SAFETY: as above.
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn best_effort_reports_what_it_got() {
        let cfg = RtConfig {
            priority: 0,
            cpu: Some(0),
            lock_memory: false,
            stack_prefault_bytes: 64 << 10,
            strict: false,
        };
        let rep = apply(&cfg).expect("best effort never fails");
        assert!(rep.obtained.iter().any(|s| s.contains("stack prefaulted")));
        assert_eq!(rep.obtained.len() + rep.missing.len(), 2, "{rep:?}");
    }

    /// Threads started by a pinned loop thread leave its CPU (where the
    /// machine has another) and the real-time policy.
    #[test]
    fn normal_threads_leave_the_loop_cpu() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let on_cpu0 = std::thread::spawn(move || {
            let cfg = RtConfig {
                priority: 0,
                cpu: Some(0),
                lock_memory: false,
                stack_prefault_bytes: 0,
                strict: false,
            };
            apply(&cfg).expect("best effort never fails");
            std::thread::spawn(|| {
                normal_thread();
                // SAFETY: plain data, written by the call for its size.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    assert_eq!(
                        libc::sched_getaffinity(
                            0,
                            std::mem::size_of::<libc::cpu_set_t>(),
                            &mut set
                        ),
                        0
                    );
                    (
                        libc::CPU_ISSET(0, &set),
                        libc::sched_getscheduler(0),
                        libc::getpriority(libc::PRIO_PROCESS, 0),
                    )
                }
            })
            .join()
            .expect("child thread")
        })
        .join()
        .expect("pinned thread");
        assert_eq!(on_cpu0.1, libc::SCHED_OTHER);
        assert_eq!(on_cpu0.2, NORMAL_THREAD_NICE);
        if cpus > 1 {
            assert!(!on_cpu0.0, "a normal thread stayed on the loop's CPU");
        }
    }
}
