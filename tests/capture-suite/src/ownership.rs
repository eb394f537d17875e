//! `ownership`: slots the application holds are never written; with no FREE
//! slot frames are dropped at the source, counted, and reported by the next
//! delivered frame (events and counters agree); frames are never torn; and
//! releasing resumes delivery.

use std::time::Duration;

use tegra_p2p::{Frame, FrameSource, SequenceTracker, StartParams};

use crate::common::{self, Check, Ctx, Outcome, slot_hash};
use crate::{Env, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Hold-all / hold-some rounds.
    #[arg(long, default_value_t = 20)]
    pub cycles: u32,
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    #[arg(long, default_value_t = 16 << 10)]
    pub slot_bytes: usize,
    #[arg(long, default_value_t = 4 << 10)]
    pub chunk_bytes: usize,
    /// Chunk period in ns.
    #[arg(long, default_value_t = 100_000)]
    pub chunk_period_ns: u64,
    /// How long to hold every slot, ms.
    #[arg(long, default_value_t = 200)]
    pub hold_ms: u64,
    /// Frames to stream through the free slots while some are held.
    #[arg(long, default_value_t = 200)]
    pub frames_while_holding: u64,
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    ensure!(o.slots >= 3, "need at least 3 slots");
    let mut src = common::open_source(&env.device, o.slots, o.slot_bytes, o.chunk_bytes)?;
    let c_start = src.counters().ctx("counters")?;
    src.start(
        &StartParams::test_pattern().with_chunk_period(Duration::from_nanos(o.chunk_period_ns)),
    )
    .ctx("start")?;
    let chunk = o.chunk_bytes;
    let mut t = SequenceTracker::new();
    let src = &src;
    for cycle in 0..o.cycles {
        // 1. Hold every slot.
        let held: Vec<Frame<'_>> = (0..o.slots)
            .map(|_| src.next_frame(None))
            .collect::<Result<_, _>>()
            .ctx("take every slot")?;
        for f in &held {
            common::verify_frame(f, chunk, &mut t)?;
            out.frames_verified += 1;
        }
        let hashes: Vec<u32> = held
            .iter()
            .map(|f| slot_hash(src.ring(), f.slot()))
            .collect();
        let d0 = src.counters().ctx("counters")?;
        std::thread::sleep(Duration::from_millis(o.hold_ms));
        let d1 = src.counters().ctx("counters")?;
        ensure!(
            d1.frames == d0.frames,
            "cycle {cycle}: {} frames delivered while every slot was held",
            d1.frames - d0.frames
        );
        ensure!(
            d1.drops_no_slot > d0.drops_no_slot,
            "cycle {cycle}: no drop at the source counted while every slot was held"
        );
        let p = src.poll(0).ctx("poll")?;
        ensure!(
            !p.readable,
            "cycle {cycle}: an event is pending while every slot is held"
        );
        for (f, h) in held.iter().zip(&hashes) {
            ensure!(
                slot_hash(src.ring(), f.slot()) == *h,
                "cycle {cycle}: held slot {} was written",
                f.slot()
            );
            tegra_p2p::verify_test_pattern(f.data(), f.sequence(), chunk)
                .map_err(|m| format!("cycle {cycle}: held frame torn: {m}"))?;
        }
        let reported_before = t.dropped;
        let counted_before = d1.drops_no_slot + d1.drops_fault;
        drop(held);
        src.flush_release().ctx("release")?;
        // 2. Delivery resumes; the next frame reports every drop counted so far.
        let f = src.next_frame(None).ctx("wait after release")?;
        common::verify_frame(&f, chunk, &mut t)?;
        out.frames_verified += 1;
        let d2 = src.counters().ctx("counters")?;
        let base = c_start.drops_no_slot + c_start.drops_fault;
        ensure!(
            f.dropped_before() > 0,
            "cycle {cycle}: the first frame after holding reports no drops"
        );
        ensure!(
            t.dropped >= counted_before - base
                && t.dropped <= d2.drops_no_slot + d2.drops_fault - base,
            "cycle {cycle}: events report {} drops (+{}), counters {}..{}",
            t.dropped,
            t.dropped - reported_before,
            counted_before - base,
            d2.drops_no_slot + d2.drops_fault - base
        );
        drop(f);
        // 3. Hold some (all but two), stream through the rest.
        let keep = (o.slots - 2) as usize;
        let held: Vec<Frame<'_>> = (0..keep)
            .map(|_| src.next_frame(None))
            .collect::<Result<_, _>>()
            .ctx("take some slots")?;
        let held_slots: Vec<u32> = held.iter().map(|f| f.slot()).collect();
        let hashes: Vec<u32> = held_slots
            .iter()
            .map(|&s| slot_hash(src.ring(), s))
            .collect();
        for f in &held {
            common::verify_frame(f, chunk, &mut t)?;
            out.frames_verified += 1;
        }
        // Released slots go back to the engine in release order, so the held
        // ones do not hold up the others: frames keep flowing through the rest.
        for _ in 0..o.frames_while_holding {
            let f = src.next_frame(None).ctx("wait while holding some")?;
            ensure!(
                !held_slots.contains(&f.slot()),
                "cycle {cycle}: slot {} delivered while the application holds it",
                f.slot()
            );
            common::verify_frame(&f, chunk, &mut t)?;
            out.frames_verified += 1;
        }
        for (s, h) in held_slots.iter().zip(&hashes) {
            ensure!(
                slot_hash(src.ring(), *s) == *h,
                "cycle {cycle}: held slot {s} was written while others streamed"
            );
        }
        for f in &held {
            tegra_p2p::verify_test_pattern(f.data(), f.sequence(), chunk)
                .map_err(|m| format!("cycle {cycle}: held frame torn: {m}"))?;
        }
        drop(held);
        src.flush_release().ctx("release")?;
        let f = src.next_frame(None).ctx("wait after releasing some")?;
        common::verify_frame(&f, chunk, &mut t)?;
        out.frames_verified += 1;
        drop(f);
        eprintln!(
            "ownership: cycle {cycle} ok ({} verified, {} dropped so far)",
            out.frames_verified, t.dropped
        );
    }
    out.frames_dropped = t.dropped;
    out.detail = format!(
        "{} cycles: with every slot held no frame was delivered and drops at the source were counted, \
         with all but two held the rest streamed; held slots never written (hash) nor torn; \
         {} frames verified, {} dropped and reported by the next frame",
        o.cycles, out.frames_verified, t.dropped
    );
    Ok(())
}
