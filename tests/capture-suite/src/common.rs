//! Shared pieces of the suites: the result record, checks, the seeded RNG,
//! ring and source helpers, frame verification, the allocation counter.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tegra_p2p::{
    Frame, KmodSource, MemoryKind, RingConfig, RingMemory, SequenceTracker, verify_test_pattern,
};

/// What an invocation found: its verdict, counts and detail (the figures
/// line of its KTAP report, [`crate::ktap`]).
#[derive(Debug, Default, Serialize)]
pub struct Outcome {
    pub suite: String,
    pub passed: bool,
    pub frames_verified: u64,
    pub frames_dropped: u64,
    pub revocations: u64,
    pub kill_cycles: u64,
    pub fuzz_calls: u64,
    pub detail: String,
    /// Suite-specific numbers (rates, seeds, counters).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Outcome {
    pub fn note(&mut self, key: &str, v: impl Into<serde_json::Value>) {
        self.extra.insert(key.to_string(), v.into());
    }
}

/// A failed check: the first failure ends the suite.
pub type Check<T = ()> = Result<T, String>;

/// `ensure!(cond, "message {}", x)`: fail the suite with the message.
#[macro_export]
macro_rules! ensure {
    ($c:expr, $($fmt:tt)+) => {
        let ok: bool = $c;
        if !ok {
            return Err(format!($($fmt)+));
        }
    };
}

/// Turns a library error into a check failure with context.
pub trait Ctx<T> {
    fn ctx(self, what: &str) -> Check<T>;
}
impl<T, E: std::fmt::Display> Ctx<T> for Result<T, E> {
    fn ctx(self, what: &str) -> Check<T> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// Deterministic RNG for the seeded suites.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0xA076_1D64_78BD_642F)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// Locked host memory for a ring (the static test programs have no CUDA).
pub fn host_ring(nr_slots: u32, slot_bytes: usize) -> Check<RingMemory> {
    RingMemory::new(&RingConfig {
        nr_slots,
        slot_bytes,
        memory: MemoryKind::Host,
        require_locked: false,
    })
    .ctx("allocate ring")
}

/// Opens the device and registers a fresh capture ring.
pub fn open_source(
    dev: &Path,
    nr_slots: u32,
    slot_bytes: usize,
    chunk_bytes: usize,
) -> Check<KmodSource> {
    KmodSource::open_path(dev, host_ring(nr_slots, slot_bytes)?, chunk_bytes)
        .ctx("open and register")
}

/// Every byte of the pattern, the CRC, flags and sequence continuity.
pub fn verify_frame(f: &Frame<'_>, chunk_bytes: usize, t: &mut SequenceTracker) -> Check {
    ensure!(
        f.flags() == 0,
        "frame {} has flags {:#x}",
        f.sequence(),
        f.flags()
    );
    verify_test_pattern(f.data(), f.sequence(), chunk_bytes)
        .map_err(|m| format!("frame {} slot {}: {m}", f.sequence(), f.slot()))?;
    f.check_crc()
        .map_err(|e| format!("frame {}: {e}", f.sequence()))?;
    t.observe(f.sequence(), f.dropped_before())
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// CRC of a whole slot's memory (to prove nobody wrote it).
pub fn slot_hash(ring: &RingMemory, slot: u32) -> u32 {
    let Some(p) = ring.slot_ptr(slot) else {
        return 0;
    };
    // SAFETY: reads a slot of a live ring; the caller holds the slot (or
    // wants to prove the engine does not write it).
    crc32fast::hash(unsafe { std::slice::from_raw_parts(p, ring.slot_bytes()) })
}

fn parse_number(t: &str) -> Option<u64> {
    match t.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    }
}

/// The value of `key` in a "key value" per line debugfs file (decimal or 0x hex).
pub fn read_key(path: &Path, key: &str) -> Check<u64> {
    let s = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v = s
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .ok_or_else(|| format!("{}: no {key} line", path.display()))?;
    parse_number(v.trim()).ok_or_else(|| format!("{}: {key}: bad number {v:?}", path.display()))
}

/// Counts allocations of the whole process (the hot-loop rule).
pub struct CountingAlloc;
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged, only counting calls.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Monotonic seconds.
pub fn now_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: out-pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// What the nv-p2p shim still holds: live page tables, DMA mappings, and
/// registrations (from its debugfs `stats` and `registrations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShimLive {
    pub page_tables: u64,
    pub mappings: u64,
    pub registrations: u64,
}

impl ShimLive {
    pub fn is_clean(&self) -> bool {
        self.page_tables == 0 && self.mappings == 0 && self.registrations == 0
    }
}

pub fn shim_live(dir: &Path) -> Check<ShimLive> {
    let stats_path = dir.join("stats");
    let field = |name: &str| read_key(&stats_path, name);
    let regs_path = dir.join("registrations");
    let regs =
        std::fs::read_to_string(&regs_path).map_err(|e| format!("{}: {e}", regs_path.display()))?;
    Ok(ShimLive {
        page_tables: field("page_tables")?,
        mappings: field("mappings")?,
        registrations: regs.lines().filter(|l| !l.trim().is_empty()).count() as u64,
    })
}

/// Nothing left registered, pinned or mapped in the nv-p2p module. The shim
/// counts what it holds; NVIDIA's module keeps no count, so there this check
/// has nothing to read: its leaks show as kmemleak reports (debug kernel) and
/// as memory that does not come back ([`mem_available`]).
pub fn p2p_clean(env: &crate::Env, what: &str) -> Check {
    if env.p2p == crate::P2p::Shim {
        let live = shim_live(&env.shim_debugfs)?;
        ensure!(live.is_clean(), "{what}: the shim still holds {live:?}");
    }
    Ok(())
}

/// Memory not in use, bytes: `MemAvailable` plus `SUnreclaim` of
/// /proc/meminfo. Unreclaimable slab is counted as free because the debug
/// kernel keeps freed slab objects for a while (KASAN's quarantine, up to
/// 1/32 of RAM, and kmemleak's metadata), which made tens of MiB look lost
/// after the revocation cycles; slab leaks are kmemleak's to report. Pages
/// pinned and never given back, the leak this measures, are not slab.
pub fn mem_available() -> Check<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").map_err(|e| format!("/proc/meminfo: {e}"))?;
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .ok_or_else(|| format!("/proc/meminfo: no {name} line"))
    };
    Ok(field("MemAvailable:")? + field("SUnreclaim:")?)
}

/// Memory came back: after `cycles` cycles that each pinned `per_cycle`
/// bytes, `MemAvailable` is less than half of what leaking every cycle's
/// pages would cost below `mem0` (a leak check that works whichever nv-p2p
/// module pins the pages). Too few cycles to tell from noise: not checked.
/// Returns what it found, for the suite's detail line.
pub fn mem_kept(mem0: u64, cycles: u64, per_cycle: u64, what: &str) -> Check<String> {
    let would_leak = cycles * per_cycle;
    if would_leak < 8 << 20 {
        return Ok(format!(
            "memory not compared ({} KiB pinned in all)",
            would_leak >> 10
        ));
    }
    let lost = mem0.saturating_sub(mem_available()?);
    ensure!(
        lost < would_leak / 2,
        "{what}: {} KiB of memory did not come back after {cycles} cycles \
         (leaking each cycle's pinned pages would be {} KiB)",
        lost >> 10,
        would_leak >> 10
    );
    Ok(format!(
        "{} KiB of memory not back after {} KiB pinned in all",
        lost >> 10,
        would_leak >> 10
    ))
}

/// What the suites' leak checks read, for detail lines.
pub fn leak_source(env: &crate::Env) -> &'static str {
    match env.p2p {
        crate::P2p::Shim => "the shim's counts",
        crate::P2p::Nvidia => "memory that comes back and kmemleak",
    }
}
