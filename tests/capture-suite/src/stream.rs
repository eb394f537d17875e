//! `stream`: the test pattern through the real kernel path, every byte of
//! every frame verified, the CRC checked, the sequence continuous or
//! explained by drops, the counters consistent, and the wait/release loop
//! free of allocations; with chunk events on, every chunk announced in
//! order before its frame, with its bytes final when announced; with
//! completion records (GPU-triggered processing), every chunk's bytes there
//! the moment its record says it landed, across drops, short frames and a
//! revocation.

use std::time::Duration;

use tegra_p2p::source::Event;
use tegra_p2p::{FrameSource, SequenceTracker, StartParams};

use crate::card::{Card, Knob};
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
    #[arg(long, default_value_t = 100_000)]
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
    /// Slots of the small phase (more slots let the engine run ahead of a
    /// slow guest, so fewer waits sleep).
    #[arg(long, default_value_t = 16)]
    pub small_slots: u32,
    /// Frames of the fault phase (the emulated card's drop/short/corrupt/late-metadata faults).
    #[arg(long, default_value_t = 600)]
    pub fault_frames: u64,
    /// Frames of the chunk-event phase (small geometry, an event per chunk).
    #[arg(long, default_value_t = 3000)]
    pub chunk_event_frames: u64,
    /// Frames of the completion-record phase (small geometry, records in
    /// the ring's status page, drops and short frames, then a revocation).
    #[arg(long, default_value_t = 1000)]
    pub completion_frames: u64,
}

/// The emulated card's fault injection through the real kernel path: every
/// Nth sequence dropped (counted as a fault), short (flag, CRC over what
/// came), or corrupted after the CRC, each detected exactly where the card
/// puts it; and every Nth frame's metadata arriving after its last
/// descriptor completed, which the driver must wait for, not fault on.
fn fault_phase(env: &Env, o: &Opts, card: &Card, out: &mut Outcome) -> Check {
    let (drop_n, short_n, corrupt_n, late_n) = (7u64, 5u64, 3u64, 4u64);
    let (slot, chunk) = (o.small_slot_bytes, o.small_chunk_bytes);
    let mut src = common::open_source(&env.device, o.slots, slot, chunk)?;
    let c0 = src.counters().ctx("counters")?;
    let late0 = card.stat("meta_late")?;
    card.set(Knob::DropEvery, drop_n as u32);
    card.set(Knob::ShortEvery, short_n as u32);
    card.set(Knob::CorruptEvery, corrupt_n as u32);
    card.set(Knob::MetaLateEvery, late_n as u32);
    let r = (|| -> Check {
        src.start(
            &StartParams::test_pattern()
                .with_chunk_period(Duration::from_micros(100))
                .with_event_timeout(Duration::from_secs(5)),
        )
        .ctx("start")?;
        let mut t = SequenceTracker::new();
        let (mut shorts, mut corrupt, mut clean) = (0u64, 0u64, 0u64);
        for _ in 0..o.fault_frames {
            let f = src.next_frame(None).ctx("wait (faults)")?;
            let seq = f.sequence();
            t.observe(seq, f.dropped_before())
                .map_err(|e| e.to_string())?;
            ensure!(
                seq % drop_n != drop_n - 1,
                "frame {seq} should have been dropped"
            );
            let is_short = seq % short_n == short_n - 1;
            let is_corrupt = seq % corrupt_n == corrupt_n - 1;
            ensure!(
                f.meta().is_short() == is_short,
                "frame {seq}: SHORT flag {} (expected {is_short})",
                f.meta().is_short()
            );
            if is_short {
                ensure!(
                    f.len() == (slot / 2) & !3,
                    "frame {seq}: short frame of {} bytes",
                    f.len()
                );
                shorts += 1;
            } else {
                ensure!(f.len() == slot, "frame {seq}: {} bytes", f.len());
            }
            let crc_ok = f.check_crc().is_ok();
            let pattern = tegra_p2p::verify_test_pattern(f.data(), seq, chunk);
            ensure!(
                crc_ok != is_corrupt,
                "frame {seq}: CRC {} (corrupted: {is_corrupt})",
                if crc_ok { "matches" } else { "differs" }
            );
            ensure!(
                pattern.is_ok() != is_corrupt,
                "frame {seq}: pattern check {pattern:?} (corrupted: {is_corrupt})"
            );
            if is_corrupt {
                corrupt += 1;
            } else if !is_short {
                clean += 1;
            }
            out.frames_verified += 1;
        }
        src.stop().ctx("stop")?;
        let c1 = src.counters().ctx("counters")?;
        let fault_drops = c1.drops_fault - c0.drops_fault;
        ensure!(
            fault_drops >= t.started() / drop_n,
            "{fault_drops} fault drops counted, {} sequences were every {drop_n}th",
            t.started() / drop_n
        );
        ensure!(
            c1.short_frames - c0.short_frames >= shorts,
            "short_frames counter below what was delivered"
        );
        ensure!(
            shorts > 0 && corrupt > 0 && clean > 0,
            "not every fault kind seen"
        );
        let late = card.stat("meta_late")? - late0;
        ensure!(
            late * late_n * 2 >= o.fault_frames,
            "only {late} frames had late metadata"
        );
        ensure!(
            c1.desc_errors == c0.desc_errors,
            "late metadata was treated as a fault"
        );
        out.frames_dropped += t.dropped;
        eprintln!(
            "faults: {} frames: {clean} clean, {shorts} short, {corrupt} corrupted (detected), {} dropped ({fault_drops} by the fault knob), {late} with late metadata (waited for)",
            o.fault_frames, t.dropped
        );
        Ok(())
    })();
    // Leave the card clean for whatever runs next.
    card.clear_faults();
    r
}

/// Chunk events through the real kernel path (radard's chunk-streamed mode
/// relies on them): for every frame, one event per chunk, in order, all of
/// the slot of the frame event that follows them, each chunk's bytes final
/// when its event arrives (copied then, checked against the frame's pattern
/// once its sequence is known), and the loop free of allocations.
fn chunk_event_phase(env: &Env, o: &Opts, out: &mut Outcome) -> Check<String> {
    let (slot_bytes, chunk) = (o.small_slot_bytes, o.small_chunk_bytes);
    let nchunks = (slot_bytes / chunk.max(1)) as u32;
    let mut src = common::open_source(&env.device, o.slots, slot_bytes, chunk)?;
    let sp = StartParams::test_pattern()
        .with_chunk_period(Duration::from_nanos(o.small_chunk_period_ns.max(1)))
        .with_event_timeout(Duration::from_secs(5))
        .with_chunk_events();
    src.start(&sp).ctx("start (chunk events)")?;
    let mut t = SequenceTracker::new();
    let mut landed = vec![0u8; slot_bytes];
    let (mut next_chunk, mut chunk_slot) = (0u32, None);
    let (mut frames, mut chunk_events) = (0u64, 0u64);
    let mut allocs_before = 0;
    while frames < o.chunk_event_frames {
        if frames == 16 && next_chunk == 0 {
            allocs_before = allocations();
        }
        match src.next_event(None).ctx("wait (chunk events)")? {
            Event::Chunk(c) => {
                ensure!(
                    c.chunk == next_chunk,
                    "chunk event {} where chunk {next_chunk} was due (frame after {frames})",
                    c.chunk
                );
                ensure!(
                    next_chunk == 0 || chunk_slot == Some(c.slot),
                    "chunk {} in slot {}, the frame's earlier chunks in {chunk_slot:?}",
                    c.chunk,
                    c.slot
                );
                ensure!(
                    c.offset == c.chunk as usize * chunk,
                    "chunk {} at offset {}",
                    c.chunk,
                    c.offset
                );
                chunk_slot = Some(c.slot);
                ensure!(
                    c.bytes().len() == chunk && c.landed().len() == c.offset + chunk,
                    "chunk {}: {} bytes, {} landed",
                    c.chunk,
                    c.bytes().len(),
                    c.landed().len()
                );
                landed[c.offset..c.offset + chunk].copy_from_slice(c.bytes());
                next_chunk += 1;
                chunk_events += 1;
            }
            Event::Frame(f) => {
                ensure!(
                    next_chunk == nchunks && chunk_slot == Some(f.slot()),
                    "frame {} in slot {}: {next_chunk} of {nchunks} chunks announced, in slot {chunk_slot:?}",
                    f.sequence(),
                    f.slot()
                );
                common::verify_frame(&f, chunk, &mut t)?;
                tegra_p2p::verify_test_pattern(&landed, f.sequence(), chunk).map_err(|m| {
                    format!(
                        "frame {}: a chunk's bytes when announced: {m}",
                        f.sequence()
                    )
                })?;
                next_chunk = 0;
                frames += 1;
            }
            Event::TxDone { .. } => return Err("a transmit event without a transmit ring".into()),
        }
    }
    let allocs = allocations() - allocs_before;
    src.stop().ctx("stop")?;
    ensure!(
        allocs == 0,
        "chunk events: {allocs} heap allocations in the event loop"
    );
    out.frames_verified += frames;
    out.frames_dropped += t.dropped;
    out.note("chunk_events", chunk_events);
    eprintln!(
        "chunk events: {frames} frames, {chunk_events} chunk events, each in order before its frame, bytes final when announced, {} dropped at the source",
        t.dropped
    );
    Ok(format!(
        "{frames} frames with chunk events: all {chunk_events} in order before their frame, each chunk's bytes final when announced"
    ))
}

/// Completion records through the real kernel path (GPU-triggered
/// processing waits on them): the ring registered with its status page, a
/// checker thread reads each slot's record as the GPU would and checks a
/// chunk's bytes the moment the record says it landed; each frame event
/// finds its slot's record complete (its sequence, every chunk counted);
/// the consumer resets the count before it releases the slot. The card
/// drops and shortens frames (its test port) and a slow consumer makes it
/// drop more; at the end the ring is revoked while streaming, after which
/// no record changes.
fn completion_phase(env: &Env, o: &Opts, card: Option<&Card>, out: &mut Outcome) -> Check<String> {
    use tegra_p2p::record_check::RecordChecker;
    use tegra_p2p::uapi::{FPGA_P2P_COMPLETION_MAGIC, FPGA_P2P_EVF_SHORT};

    let (slot_bytes, chunk) = (o.small_slot_bytes, o.small_chunk_bytes);
    let chunks = (slot_bytes / chunk.max(1)) as u32;
    let (drop_n, short_n) = (7u64, 5u64);
    let mut src = tegra_p2p::KmodSource::open_path_with_records(
        &env.device,
        common::host_ring(o.slots, slot_bytes)?,
        chunk,
    )
    .ctx("open and register (completion records)")?;
    if src.completion().is_none() {
        let why = "the card does not write them, or its DMA path needs syncs (swiotlb): REGISTER refused the flag";
        eprintln!("completion records: skipped: {why}");
        out.note("completion_records", format!("skipped: {why}"));
        return Ok(format!("completion records skipped ({why})"));
    }
    let words = src.completion().expect("checked above");
    for slot in 0..o.slots {
        ensure!(
            words.landed(slot) == 0,
            "slot {slot}: a fresh ring's record says {} chunks",
            words.landed(slot)
        );
    }
    if let Some(card) = card {
        card.set(Knob::DropEvery, drop_n as u32);
        card.set(Knob::ShortEvery, short_n as u32);
    }
    // SAFETY: the checker is stopped before the source and its ring go
    // (it is declared after them, and stopped explicitly below); each slot
    // is released only after its frame was checked.
    let mut checker =
        unsafe { RecordChecker::start(src.ring(), chunk) }.ctx("start the record checker")?;
    let t0 = now_s();
    let r = (|| -> Check<String> {
        src.start(
            &StartParams::test_pattern()
                .with_chunk_period(Duration::from_nanos(o.small_chunk_period_ns.max(1)))
                .with_event_timeout(Duration::from_secs(5)),
        )
        .ctx("start (completion records)")?;
        let words = src.completion().expect("checked above");
        let mut t = SequenceTracker::new();
        let (mut frames, mut shorts) = (0u64, 0u64);
        let mut revoked_after = None;
        let end = loop {
            if frames == o.completion_frames && revoked_after.is_none() {
                revoked_after = Some(frames);
                revoke(env, src.ring())?;
            }
            let f = match src.next_frame(None) {
                Ok(f) => f,
                Err(e) => break e,
            };
            let (slot, seq) = (f.slot(), f.sequence());
            t.observe(seq, f.dropped_before())
                .map_err(|e| e.to_string())?;
            let rec = words.snapshot(slot);
            ensure!(
                rec.magic == FPGA_P2P_COMPLETION_MAGIC
                    && rec.sequence == seq
                    && rec.chunks == chunks
                    && rec.chunk == chunks - 1,
                "frame {seq} slot {slot}: its record at the frame event: {rec:?}"
            );
            checker.wait_verified(slot, seq, Duration::from_secs(10))?;
            let short = f.flags() & FPGA_P2P_EVF_SHORT != 0;
            ensure!(
                card.is_none() || short == (seq % short_n == short_n - 1),
                "frame {seq}: SHORT flag {short}"
            );
            if short {
                shorts += 1;
            } else {
                tegra_p2p::verify_test_pattern(f.data(), seq, chunk)
                    .map_err(|m| format!("frame {seq}: {m}"))?;
                ensure!(
                    !checker.padded(slot, seq),
                    "frame {seq}: a chunk of zeros in a whole frame"
                );
            }
            // A slow consumer now and then: the card drops frames.
            if frames % 13 == 12 {
                std::thread::sleep(Duration::from_millis(2));
            }
            words.reset(slot);
            drop(f);
            frames += 1;
        };
        ensure!(
            matches!(end, tegra_p2p::Error::Revoked { .. }),
            "after {frames} frames: {end} (the revocation was due)"
        );
        // Nothing is written to the status page after the revocation.
        let before: Vec<_> = (0..o.slots).map(|s| words.snapshot(s)).collect();
        std::thread::sleep(Duration::from_millis(30));
        let after: Vec<_> = (0..o.slots).map(|s| words.snapshot(s)).collect();
        ensure!(
            before == after,
            "completion records written after the revocation"
        );
        checker.stop();
        if let Some(m) = checker.first_failure() {
            return Err(format!("{} chunks missing: {m}", checker.failures()));
        }
        ensure!(
            checker.checked() >= frames * u64::from(chunks),
            "{} chunks checked for {frames} frames",
            checker.checked()
        );
        ensure!(
            card.is_none() || (shorts > 0 && t.dropped > 0),
            "{shorts} short frames, {} dropped: the faults did not show",
            t.dropped
        );
        out.frames_verified += frames;
        out.frames_dropped += t.dropped;
        out.note("completion_chunks_checked", checker.checked());
        out.note("completion_s", now_s() - t0);
        eprintln!(
            "completion records: {frames} frames ({shorts} short), {} dropped, {} chunks checked the moment their records said they landed, then revoked ({} more frames): no record written after it; {:.1} s",
            t.dropped,
            checker.checked(),
            frames - revoked_after.unwrap_or(frames),
            now_s() - t0
        );
        Ok(format!(
            "{frames} frames with completion records: {} chunks there when their records said so, across {} drops, {shorts} short frames and a revocation",
            checker.checked(),
            t.dropped
        ))
    })();
    checker.stop();
    if let Some(card) = card {
        card.clear_faults();
    }
    r
}

/// Revokes the ring's memory while the card streams into it: the shim's
/// knob, or (NVIDIA's module, which has none) an mprotect of the ring.
fn revoke(env: &Env, ring: &tegra_p2p::RingMemory) -> Check {
    let addr = ring.base();
    if env.p2p == crate::P2p::Nvidia {
        let len = ring.len() + tegra_p2p::ring::STATUS_BYTES;
        // SAFETY: our own mapping; back to writable at once; no Rust
        // reference writes it meanwhile.
        let r = unsafe { libc::mprotect(addr.cast(), len, libc::PROT_READ) };
        ensure!(r == 0, "mprotect: {}", std::io::Error::last_os_error());
        // SAFETY: as above.
        let r = unsafe { libc::mprotect(addr.cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        ensure!(r == 0, "mprotect: {}", std::io::Error::last_os_error());
        return Ok(());
    }
    let knob = env.shim_debugfs.join("revoke");
    let what = format!("{} {:x}", std::process::id(), addr as u64);
    std::fs::write(&knob, &what).map_err(|e| format!("write {what:?} to {}: {e}", knob.display()))
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
    // Generous: under TCG with a KASAN kernel a 4 MiB frame takes the
    // emulated card hundreds of ms; a real stall still fails.
    let mut sp = StartParams::test_pattern().with_event_timeout(Duration::from_secs(5));
    if p.period_ns > 0 {
        sp = sp.with_chunk_period(Duration::from_nanos(p.period_ns));
    }
    src.start(&sp).ctx("start")?;
    let mut t = SequenceTracker::new();
    let warmup = 16.min(p.frames);
    let mut allocs_before = 0;
    let mut t0 = now_s();
    // Where the time goes (under TCG the checks are not free): waiting vs checking.
    let (mut wait_s, mut check_s) = (0.0f64, 0.0f64);
    for i in 0..p.frames {
        if i == warmup {
            allocs_before = allocations();
            t0 = now_s();
            (wait_s, check_s) = (0.0, 0.0);
        }
        let ta = now_s();
        let f = src
            .next_frame(None)
            .map_err(|e| format!("{label}: frame {i}: {e}"))?;
        let tb = now_s();
        common::verify_frame(&f, p.chunk_bytes, &mut t).map_err(|e| format!("{label}: {e}"))?;
        let tc = now_s();
        wait_s += tb - ta;
        check_s += tc - tb;
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
        "{label}: {} frames verified, {} dropped, {fps:.0} frames/s, {:.0}% waiting, {:.0}% checking, 0 allocations",
        p.frames,
        t.dropped,
        100.0 * wait_s / dt.max(1e-9),
        100.0 * check_s / dt.max(1e-9)
    );
    out.note(&format!("{label}_fps"), fps);
    out.note(&format!("{label}_wait_s"), wait_s);
    out.note(&format!("{label}_check_s"), check_s);
    Ok((p.frames, t.dropped, fps))
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let small = Phase {
        frames: o.small_frames,
        slot_bytes: o.small_slot_bytes,
        chunk_bytes: o.small_chunk_bytes,
        period_ns: o.small_chunk_period_ns,
        slots: o.small_slots,
    };
    let full = Phase {
        frames: o.full_frames,
        slot_bytes: o.full_slot_bytes,
        chunk_bytes: o.full_chunk_bytes,
        period_ns: o.full_chunk_period_ns,
        slots: o.slots,
    };
    let mut summary = Vec::new();
    for (label, p) in [("small", &small), ("full", &full)] {
        if p.frames == 0 {
            continue;
        }
        let (v, d, fps) = phase(env, p, out, label)?;
        out.frames_verified += v;
        out.frames_dropped += d;
        summary.push(format!(
            "{v} frames of {} KiB ({} chunks) verified, {d} dropped at the source and explained, {fps:.0} frames/s",
            p.slot_bytes >> 10,
            p.slot_bytes / p.chunk_bytes.max(1)
        ));
    }
    if o.chunk_event_frames > 0 {
        summary.push(chunk_event_phase(env, o, out)?);
    }
    if o.completion_frames > 0 {
        let card = Card::find()?;
        summary.push(completion_phase(env, o, card.as_ref(), out)?);
    }
    if o.fault_frames > 0 {
        match Card::find()? {
            Some(card) => fault_phase(env, o, &card, out)?,
            None => {
                eprintln!("faults: skipped: no emulated card (its test port is what injects them)");
                out.note("faults", "skipped: no emulated card");
            }
        }
    }
    out.detail = summary.join("; ");
    Ok(())
}
