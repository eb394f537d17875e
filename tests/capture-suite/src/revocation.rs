//! `revocation`: the ring's memory goes away while the engine streams into
//! it, alternately by `munmap` (the mmu notifier path) and by the shim's
//! debugfs revoke knob. Each time: POLLERR and a revocation notice, DMA stops
//! (counters freeze, fresh memory at the same address stays untouched),
//! unregister and close work; at the end nothing is registered.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use tegra_p2p::kmod::Device;
use tegra_p2p::uapi::*;

use crate::common::{self, Check, Ctx, Outcome};
use crate::{Env, P2p, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    #[arg(long, default_value_t = 1000)]
    pub cycles: u32,
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    #[arg(long, default_value_t = 16 << 10)]
    pub slot_bytes: usize,
    #[arg(long, default_value_t = 4 << 10)]
    pub chunk_bytes: usize,
    #[arg(long, default_value_t = 20_000)]
    pub chunk_period_ns: u32,
    /// How long fresh memory at the old address must stay untouched, ms.
    #[arg(long, default_value_t = 30)]
    pub quiet_ms: u64,
}

const CANARY: u8 = 0x5A;

/// One anonymous mapping, unmapped on drop unless already gone.
pub(crate) struct Mapping {
    pub(crate) addr: *mut u8,
    len: usize,
    mapped: bool,
}

impl Mapping {
    pub(crate) fn new(len: usize, at: Option<*mut u8>) -> Check<Self> {
        let (hint, flags) = match at {
            Some(a) => (a.cast(), libc::MAP_FIXED_NOREPLACE),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: anonymous mapping; with MAP_FIXED_NOREPLACE nothing existing is replaced.
        let p = unsafe {
            libc::mmap(
                hint,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | flags,
                -1,
                0,
            )
        };
        ensure!(p != libc::MAP_FAILED, "mmap: {}", Errno::last());
        ensure!(
            at.is_none_or(|a| a == p.cast()),
            "mmap did not map at the old address"
        );
        Ok(Self {
            addr: p.cast(),
            len,
            mapped: true,
        })
    }
    pub(crate) fn unmap(&mut self) {
        if self.mapped {
            // SAFETY: unmaps exactly this mapping, which no Rust reference points into.
            unsafe { libc::munmap(self.addr.cast(), self.len) };
            self.mapped = false;
        }
    }
    fn fill(&self, b: u8) {
        // SAFETY: the mapping is live; the engine does not own it (revoked).
        unsafe { std::ptr::write_bytes(self.addr, b, self.len) };
    }
    fn first_not(&self, b: u8) -> Option<usize> {
        // SAFETY: the mapping is live and readable.
        let s = unsafe { std::slice::from_raw_parts(self.addr, self.len) };
        s.iter().position(|&x| x != b)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        self.unmap();
    }
}

pub(crate) fn wait_event(
    dev: &Device,
    release: u32,
    handle: u32,
    ms: u32,
) -> tegra_p2p::Result<fpga_p2p_event> {
    let mut w = fpga_p2p_wait {
        release_handle: handle,
        release_slot: release,
        timeout_ms: ms,
        ..Default::default()
    };
    dev.wait(&mut w)?;
    Ok(w.event)
}

fn one_cycle(env: &Env, o: &Opts, cycle: u32, knob: bool) -> Check {
    let dev = Device::open(&env.device).ctx("open")?;
    dev.check_version().ctx("info")?;
    let len = o.slots as usize * o.slot_bytes;
    let mut ring = Mapping::new(len, None)?;
    let mut r = fpga_p2p_ring {
        addr: ring.addr as u64,
        slot_bytes: o.slot_bytes as u64,
        nr_slots: o.slots,
        direction: FPGA_P2P_DIR_C2H,
        chunk_bytes: o.chunk_bytes as u32,
        ..Default::default()
    };
    // SAFETY: the mapping is only read after revocation, through `first_not`,
    // and Rust holds no reference into it.
    let h = unsafe { dev.register(&mut r) }.ctx("register")?;
    dev.start(&fpga_p2p_start {
        handle: h,
        source: FPGA_P2P_SRC_TEST_PATTERN,
        chunk_period_ns: o.chunk_period_ns,
        event_timeout_ms: 1000,
        ..Default::default()
    })
    .ctx("start")?;
    let mut rel = FPGA_P2P_NO_SLOT;
    for _ in 0..2 {
        let ev = wait_event(&dev, rel, h, 2000).ctx("wait before revocation")?;
        ensure!(
            ev.type_ == FPGA_P2P_EV_FRAME,
            "unexpected event {}",
            ev.type_
        );
        rel = ev.slot;
    }
    let c0 = dev.counters().ctx("counters")?;
    if knob && env.p2p == P2p::Nvidia {
        // NVIDIA's module revokes for an mprotect of the ring's first page
        // (and has no knob); the memory stays where it was.
        // SAFETY: changes the protection of our own mapping; nothing reads it meanwhile.
        let r = unsafe { libc::mprotect(ring.addr.cast(), len, libc::PROT_READ) };
        ensure!(r == 0, "mprotect: {}", Errno::last());
        // SAFETY: as above, back to writable for the canary check.
        let r =
            unsafe { libc::mprotect(ring.addr.cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        ensure!(r == 0, "mprotect: {}", Errno::last());
    } else if knob {
        // The shim's knob: run the free callback of our registration now.
        let knob = env.shim_debugfs.join("revoke");
        let what = format!("{} {:x}", std::process::id(), ring.addr as u64);
        std::fs::write(&knob, &what)
            .map_err(|e| format!("write {what:?} to {}: {e}", knob.display()))?;
    } else {
        ring.unmap();
    }
    // The application learns of it: POLLERR, then a revocation notice.
    let t0 = Instant::now();
    let mut p = dev.poll(100).ctx("poll")?;
    while !p.error && t0.elapsed() < Duration::from_secs(3) {
        p = dev.poll(100).ctx("poll")?;
    }
    ensure!(
        p.error,
        "cycle {cycle}: no POLLERR within 3 s of the revocation"
    );
    let mut noticed = false;
    for _ in 0..64 {
        match wait_event(&dev, FPGA_P2P_NO_SLOT, h, 200) {
            Ok(ev) if ev.type_ == FPGA_P2P_EV_REVOKED => {
                noticed = true;
                break;
            }
            // Frames completed before the revocation may still be queued.
            Ok(ev) if ev.type_ == FPGA_P2P_EV_FRAME || ev.type_ == FPGA_P2P_EV_CHUNK => {}
            Ok(ev) => return Err(format!("cycle {cycle}: unexpected event {}", ev.type_)),
            Err(tegra_p2p::Error::Timeout { .. }) => break,
            Err(e) => {
                // An error return is the notice too, as long as it is not a timeout.
                noticed = true;
                eprintln!("revocation: wait after revoke: {e}");
                break;
            }
        }
    }
    ensure!(
        noticed,
        "cycle {cycle}: no EV_REVOKED (or error) from wait after the revocation"
    );
    // DMA has stopped: counters freeze.
    let c1 = dev.counters().ctx("counters")?;
    ensure!(
        c1.revocations > c0.revocations,
        "cycle {cycle}: revocation not counted"
    );
    // Fresh memory where the ring was (or the same pages, for the knob) stays untouched.
    let fresh = if knob {
        None
    } else {
        Some(Mapping::new(len, Some(ring.addr))?)
    };
    let target = fresh.as_ref().unwrap_or(&ring);
    target.fill(CANARY);
    std::thread::sleep(Duration::from_millis(o.quiet_ms));
    let c2 = dev.counters().ctx("counters")?;
    ensure!(
        c2.frames == c1.frames && c2.chunks == c1.chunks,
        "cycle {cycle}: DMA continued after revocation ({} frames, {} chunks more)",
        c2.frames - c1.frames,
        c2.chunks - c1.chunks
    );
    if let Some(off) = target.first_not(CANARY) {
        return Err(format!(
            "cycle {cycle}: memory at the revoked ring's address written at offset {off}"
        ));
    }
    // The ring stays until unregistered; further use says EIO.
    match dev.start(&fpga_p2p_start {
        handle: h,
        source: FPGA_P2P_SRC_TEST_PATTERN,
        ..Default::default()
    }) {
        Err(e) if e.errno() == Some(Errno::EIO) => {}
        other => {
            return Err(format!(
                "cycle {cycle}: START on a revoked ring: {other:?}, expected EIO"
            ));
        }
    }
    dev.unregister(h)
        .map_err(|e| format!("cycle {cycle}: unregister after revocation: {e}"))?;
    drop(dev);
    drop(fresh);
    common::p2p_clean(env, &format!("cycle {cycle}: after close"))?;
    Ok(())
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let mem0 = common::mem_available()?;
    let knob_kind = match env.p2p {
        P2p::Shim => "shim knob",
        P2p::Nvidia => "mprotect of the ring",
    };
    for cycle in 0..o.cycles {
        let knob = cycle % 2 == 1;
        one_cycle(env, o, cycle, knob).map_err(|e| {
            format!(
                "{} (cycle {cycle}, {})",
                e,
                if knob { knob_kind } else { "munmap" }
            )
        })?;
        out.revocations += 1;
        if cycle % 20 == 0 {
            eprintln!("revocation: {} cycles ok", cycle + 1);
        }
    }
    common::p2p_clean(env, "at the end")?;
    let mem = common::mem_kept(
        mem0,
        out.revocations,
        (o.slots as usize * o.slot_bytes) as u64,
        "revocation cycles",
    )?;
    // The device still streams.
    crate::smoke(env, 4, out)?;
    out.detail = format!(
        "{} cycles while streaming ({} munmap, {} {knob_kind}): poll reported the revocation, \
         DMA stopped, nothing left pinned or mapped ({}; {mem}); the device streams afterwards",
        out.revocations,
        o.cycles.div_ceil(2),
        o.cycles / 2,
        common::leak_source(env)
    );
    Ok(())
}
