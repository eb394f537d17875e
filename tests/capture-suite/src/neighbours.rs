//! `neighbours`: memory operations beside a registered ring must not revoke
//! it. NVIDIA's Tegra nvidia-p2p revokes a registration on any mmu-notifier
//! invalidation whose range holds the ring's start address, its end included:
//! a munmap or an mprotect of the mapping that ends exactly where the ring
//! starts, and a `fork()` (copy-on-write protection of private memory). A ring
//! from tegra-p2p starts one guard page past its allocation and is
//! `MADV_DONTFORK`, so none of these revoke it: frames keep flowing, verified,
//! and the module counts no revocation.
//!
//! The control phase does the same to a ring without guard and fork
//! exclusion (a plain mmap, as tegra-p2p allocated rings before): with
//! NVIDIA's module each event must revoke it (so the cases do reach the harsh
//! path and the guard is what saves the real ring); the shim, which revokes
//! only when the pages themselves go, must not.

use std::time::Duration;

use nix::errno::Errno;
use tegra_p2p::kmod::Device;
use tegra_p2p::uapi::*;
use tegra_p2p::{FrameSource, SequenceTracker, StartParams};

use crate::common::{self, Check, Ctx, Outcome};
use crate::revocation::{Mapping, wait_event};
use crate::{Env, P2p, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Rounds of the three events on the guarded ring.
    #[arg(long, default_value_t = 20)]
    pub rounds: u32,
    /// Frames verified after each event.
    #[arg(long, default_value_t = 8)]
    pub frames: u64,
}

const SLOTS: u32 = 4;
const SLOT: usize = 16 << 10;
const CHUNK: usize = 4 << 10;
/// Bytes of the neighbouring mapping.
const NEIGHBOUR: usize = 16 << 10;

#[derive(Debug, Clone, Copy)]
enum Event {
    /// munmap of the mapping that ends where the allocation starts.
    Munmap,
    /// mprotect of that mapping.
    Mprotect,
    /// fork() of this process (the child exits at once).
    Fork,
}

const EVENTS: [Event; 3] = [Event::Munmap, Event::Mprotect, Event::Fork];

/// Maps `NEIGHBOUR` bytes ending exactly at `end`.
fn neighbour_below(end: usize) -> Check<Mapping> {
    Mapping::new(NEIGHBOUR, Some((end - NEIGHBOUR) as *mut u8))
        .map_err(|e| format!("a mapping ending at {end:#x}: {e}"))
}

/// Does `ev` next to memory that starts at `start`.
fn commit(ev: Event, start: usize) -> Check {
    match ev {
        Event::Munmap => {
            let mut n = neighbour_below(start)?;
            n.unmap();
        }
        Event::Mprotect => {
            let n = neighbour_below(start)?;
            // SAFETY: changes the protection of our own neighbouring mapping only.
            let r = unsafe { libc::mprotect(n.addr.cast(), NEIGHBOUR, libc::PROT_READ) };
            ensure!(r == 0, "mprotect: {}", Errno::last());
            drop(n);
        }
        Event::Fork => {
            // SAFETY: the child only calls _exit.
            let pid = unsafe { libc::fork() };
            ensure!(pid >= 0, "fork: {}", Errno::last());
            if pid == 0 {
                // SAFETY: leaves the child without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            let mut status = 0;
            // SAFETY: reaps our own child into a local.
            let w = unsafe { libc::waitpid(pid, &mut status, 0) };
            ensure!(w == pid, "waitpid: {}", Errno::last());
        }
    }
    Ok(())
}

/// The guarded ring (tegra-p2p's RingMemory through KmodSource) streams on.
fn guarded(env: &Env, o: &Opts, out: &mut Outcome) -> Check<u64> {
    // The neighbour's place, right below the ring's guard page, must be
    // free: the allocator (musl's maps its groups at the newest free spot)
    // may put its own memory there, as it may beside any mapping. A ring
    // with free room below is kept, and the room is held by a placeholder
    // of ours from then on, so nothing else lands there between events.
    let mut taken = Vec::new();
    let (ring, mut room) = loop {
        let ring = common::host_ring(SLOTS, SLOT)?;
        let start = ring.base() as usize - tegra_p2p::ring::GUARD_BYTES;
        match neighbour_below(start) {
            Ok(room) => break (ring, room),
            Err(e) if taken.len() >= 8 => return Err(format!("no ring with room below it: {e}")),
            Err(_) => taken.push(ring),
        }
    };
    drop(taken);
    let mut src = tegra_p2p::KmodSource::open_path(&env.device, ring, CHUNK)
        .ctx(&env.device.display().to_string())?;
    let start = src.ring().base() as usize - tegra_p2p::ring::GUARD_BYTES;
    src.start(&StartParams::test_pattern().with_chunk_period(Duration::from_micros(20)))
        .ctx("start")?;
    let revocations0 = src.device().counters().ctx("counters")?.revocations;
    let mut t = SequenceTracker::new();
    let mut events = 0;
    for round in 0..o.rounds {
        for ev in EVENTS {
            // The placeholder leaves; the event's own neighbour takes the
            // room at once (nothing allocates in between); the placeholder
            // comes back.
            room.unmap();
            commit(ev, start).map_err(|e| format!("round {round}, {ev:?}: {e}"))?;
            room =
                neighbour_below(start).map_err(|e| format!("round {round}: the room back: {e}"))?;
            events += 1;
            for _ in 0..o.frames {
                let f = src
                    .next_frame(Some(Duration::from_secs(2)))
                    .map_err(|e| format!("round {round}: after {ev:?}: {e}"))?;
                common::verify_frame(&f, CHUNK, &mut t)?;
                out.frames_verified += 1;
            }
            let c = src.device().counters().ctx("counters")?;
            ensure!(
                c.revocations == revocations0,
                "round {round}: {ev:?} next to the ring revoked it"
            );
        }
    }
    out.frames_dropped += t.dropped;
    src.stop().ctx("stop")?;
    Ok(events)
}

/// A ring without guard or fork exclusion: whether `ev` revokes it.
fn unguarded_revoked(env: &Env, ev: Event) -> Check<bool> {
    let dev = Device::open(&env.device).ctx("open")?;
    dev.check_version().ctx("info")?;
    // The ring right above a neighbour of ours, so nothing else is adjacent.
    let len = SLOTS as usize * SLOT;
    let place = Mapping::new(len + NEIGHBOUR, None)?;
    let at = place.addr as usize + NEIGHBOUR;
    drop(place);
    let ring = Mapping::new(len, Some(at as *mut u8))?;
    let mut r = fpga_p2p_ring {
        addr: at as u64,
        slot_bytes: SLOT as u64,
        nr_slots: SLOTS,
        direction: FPGA_P2P_DIR_C2H,
        chunk_bytes: CHUNK as u32,
        ..Default::default()
    };
    // SAFETY: the mapping outlives the registration (unregistered below) and
    // Rust holds no reference into it.
    let h = unsafe { dev.register(&mut r) }.ctx("register")?;
    dev.start(&fpga_p2p_start {
        handle: h,
        source: FPGA_P2P_SRC_TEST_PATTERN,
        chunk_period_ns: 20_000,
        event_timeout_ms: 1000,
        ..Default::default()
    })
    .ctx("start")?;
    let c0 = dev.counters().ctx("counters")?;
    commit(ev, at)?;
    // A revocation reaches the module within the event itself; give the
    // stream time to show that it goes on otherwise.
    let mut rel = FPGA_P2P_NO_SLOT;
    for _ in 0..4 {
        match wait_event(&dev, rel, h, 500) {
            Ok(e) if e.type_ == FPGA_P2P_EV_FRAME => rel = e.slot,
            Ok(_) | Err(_) => break,
        }
    }
    let c1 = dev.counters().ctx("counters")?;
    let _ = dev.stop(h);
    dev.unregister(h).ctx("unregister")?;
    drop(ring);
    Ok(c1.revocations > c0.revocations)
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let events = guarded(env, o, out)?;
    let expect = env.p2p == P2p::Nvidia;
    let mut control = Vec::new();
    for ev in EVENTS {
        let revoked = unguarded_revoked(env, ev).map_err(|e| format!("control {ev:?}: {e}"))?;
        ensure!(
            revoked == expect,
            "control: {ev:?} next to an unguarded ring {} it with the {:?} module",
            if revoked { "revoked" } else { "did not revoke" },
            env.p2p
        );
        if revoked {
            out.revocations += 1;
        }
        control.push(format!("{ev:?}"));
    }
    common::p2p_clean(env, "after the suite")?;
    out.note("events", events);
    out.detail = format!(
        "{events} munmap/mprotect/fork events beside a guarded MADV_DONTFORK ring: no \
         revocation, {} frames verified; control ({}) on an unguarded ring: {}",
        out.frames_verified,
        control.join(", "),
        if expect {
            "each revoked it (NVIDIA's module)"
        } else {
            "none revoked it (the shim revokes only when the pages go)"
        }
    );
    Ok(())
}
