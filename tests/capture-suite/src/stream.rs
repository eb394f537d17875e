//! `stream`: the test pattern through the real kernel path, every byte of
//! every frame verified, the CRC checked, the sequence continuous or
//! explained by drops, the counters consistent, and the wait/release loop
//! free of allocations.

use std::time::Duration;

use tegra_p2p::{FrameSource, SequenceTracker, StartParams};

use crate::common::{self, Check, Ctx, Outcome, allocations, now_s};
use crate::{Env, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Frames of the small geometry.
    #[arg(long, default_value_t = 100_000)]
    pub small_frames: u64,
    #[arg(long, default_value_t = 16 << 10)]
    pub small_slot_bytes: usize,
    #[arg(long, default_value_t = 4 << 10)]
    pub small_chunk_bytes: usize,
    /// Chunk period of the small phase in ns (0 = the device default).
    #[arg(long, default_value_t = 20_000)]
    pub small_chunk_period_ns: u64,
    /// Frames of the full geometry (4 MiB in 16 chunks).
    #[arg(long, default_value_t = 500)]
    pub full_frames: u64,
    #[arg(long, default_value_t = 4 << 20)]
    pub full_slot_bytes: usize,
    #[arg(long, default_value_t = 256 << 10)]
    pub full_chunk_bytes: usize,
    /// Chunk period of the full phase in ns (0 = the device default, 2 kHz).
    #[arg(long, default_value_t = 0)]
    pub full_chunk_period_ns: u64,
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
}

pub struct Phase {
    pub frames: u64,
    pub slot_bytes: usize,
    pub chunk_bytes: usize,
    pub period_ns: u64,
    pub slots: u32,
}

/// Streams one phase; returns (frames verified, frames dropped, frames/s).
pub fn phase(env: &Env, p: &Phase, out: &mut Outcome, label: &str) -> Check<(u64, u64, f64)> {
    let mut src = common::open_source(&env.device, p.slots, p.slot_bytes, p.chunk_bytes)?;
    let c0 = src.counters().ctx("counters")?;
    let mut sp = StartParams::test_pattern();
    if p.period_ns > 0 {
        sp = sp.with_chunk_period(Duration::from_nanos(p.period_ns));
    }
    src.start(&sp).ctx("start")?;
    let mut t = SequenceTracker::new();
    let warmup = 16.min(p.frames);
    let mut allocs_before = 0;
    let mut t0 = now_s();
    for i in 0..p.frames {
        if i == warmup {
            allocs_before = allocations();
            t0 = now_s();
        }
        let f = src
            .next_frame(None)
            .map_err(|e| format!("{label}: frame {i}: {e}"))?;
        common::verify_frame(&f, p.chunk_bytes, &mut t).map_err(|e| format!("{label}: {e}"))?;
        ensure!(
            f.len() == p.slot_bytes,
            "{label}: frame {} has {} bytes",
            f.sequence(),
            f.len()
        );
        // Released on drop: the next wait hands the slot back (one ioctl per frame).
    }
    let dt = now_s() - t0;
    let allocs = allocations() - allocs_before;
    src.stop().ctx("stop")?;
    let c1 = src.counters().ctx("counters")?;
    let fps = (p.frames - warmup) as f64 / dt.max(1e-9);
    ensure!(
        allocs == 0,
        "{label}: {allocs} heap allocations in the wait/verify/release loop"
    );
    let delivered = c1.frames - c0.frames;
    let counted_drops = (c1.drops_no_slot - c0.drops_no_slot) + (c1.drops_fault - c0.drops_fault);
    ensure!(
        delivered >= p.frames,
        "{label}: counters say {delivered} frames delivered, we verified {}",
        p.frames
    );
    ensure!(
        t.dropped <= counted_drops,
        "{label}: events report {} drops, counters only {counted_drops}",
        t.dropped
    );
    ensure!(
        c1.crc_errors == c0.crc_errors && c1.desc_errors == c0.desc_errors,
        "{label}: CRC or descriptor errors counted"
    );
    eprintln!(
        "{label}: {} frames verified, {} dropped, {fps:.0} frames/s, 0 allocations",
        p.frames, t.dropped
    );
    out.note(&format!("{label}_fps"), fps);
    Ok((p.frames, t.dropped, fps))
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let small = Phase {
        frames: o.small_frames,
        slot_bytes: o.small_slot_bytes,
        chunk_bytes: o.small_chunk_bytes,
        period_ns: o.small_chunk_period_ns,
        slots: o.slots,
    };
    let full = Phase {
        frames: o.full_frames,
        slot_bytes: o.full_slot_bytes,
        chunk_bytes: o.full_chunk_bytes,
        period_ns: o.full_chunk_period_ns,
        slots: o.slots,
    };
    for (label, p) in [("small", &small), ("full", &full)] {
        if p.frames == 0 {
            continue;
        }
        let (v, d, _) = phase(env, p, out, label)?;
        out.frames_verified += v;
        out.frames_dropped += d;
    }
    Ok(())
}
