//! `duplex`: transmit buffers flow continuously on the host-to-card ring (on
//! their own open file and thread) while capture runs. Completions arrive in
//! order with their cookies, the the card saw what we sent (count, bytes,
//! CRC of the last buffer), and capture keeps its rate and its drop count
//! compared with a capture-only run.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tegra_p2p::kmod::Device;
use tegra_p2p::uapi::*;
use tegra_p2p::{FrameSource, SequenceTracker, StartParams};

use crate::card::Card;
use crate::common::{self, Check, Ctx, Outcome};
use crate::{Env, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Frames per phase (capture only, then capture + transmit).
    #[arg(long, default_value_t = 600)]
    pub frames: u64,
    /// Frame geometry: small enough that a TCG guest keeps up with the real
    /// cadence (16 chunks at 2 kHz, a frame every 8 ms), so that the rate
    /// measures the capture path, not the guest's CPU.
    #[arg(long, default_value_t = 64 << 10)]
    pub slot_bytes: usize,
    #[arg(long, default_value_t = 4 << 10)]
    pub chunk_bytes: usize,
    /// Chunk period in ns (0 = the device default, 2 kHz).
    #[arg(long, default_value_t = 0)]
    pub chunk_period_ns: u64,
    /// Capture slots: enough (128 ms at the default cadence) that a TCG
    /// guest's stall of a few frame periods is not counted as a slow-down.
    #[arg(long, default_value_t = 16)]
    pub slots: u32,
    /// Transmit slots and their size.
    #[arg(long, default_value_t = 4)]
    pub tx_slots: u32,
    #[arg(long, default_value_t = 16 << 10)]
    pub tx_bytes: usize,
    /// Transmit rate, buffers a second (0 = as fast as the ring drains).
    /// Default: two buffers per frame, twice what radard sends. The emulated
    /// card runs both channels on QEMU's main loop, so under TCG a
    /// saturating transmit slows the card's own frame clock, not the driver.
    #[arg(long, default_value_t = 250)]
    pub tx_per_s: u64,
    /// Allowed capture slow-down with transmit, percent.
    #[arg(long, default_value_t = 3.0)]
    pub max_slowdown_pct: f64,
}

struct PhaseResult {
    fps: f64,
    drops: u64,
    tx_done: u64,
}

struct TxReport {
    done: u64,
    last_crc: u32,
    bytes: usize,
}

/// The transmit side, on its own open file and thread (the uapi's advice for
/// separate consumers): keeps every transmit slot in flight until `stop`.
fn transmitter(device: PathBuf, o: TxOpts, stop: Arc<AtomicBool>) -> Check<TxReport> {
    let dev = Device::open(&device).ctx("open (transmit)")?;
    dev.check_version().ctx("info (transmit)")?;
    let slot_bytes = o.tx_bytes.next_multiple_of(4096);
    let ring = common::host_ring(o.tx_slots, slot_bytes)?;
    let mut r = fpga_p2p_ring {
        addr: ring.base() as u64,
        slot_bytes: slot_bytes as u64,
        nr_slots: o.tx_slots,
        direction: FPGA_P2P_DIR_H2C,
        ..Default::default()
    };
    // SAFETY: `ring` outlives the registration (unregistered below, and the
    // file closes before `ring` drops); the CPU writes a slot only while it
    // is not in flight.
    let h = unsafe { dev.register(&mut r) }.ctx("register transmit ring")?;
    // A fixed body; the first 8 bytes carry the buffer number, so every
    // buffer (and its CRC) differs without per-byte work in the loop.
    let mut payload: Vec<u8> = (0..o.tx_bytes.max(8)).map(|i| (i * 7 + 3) as u8).collect();
    let (mut submitted, mut done, mut busy, mut last_crc) = (0u64, 0u64, 0u64, 0u32);
    let mut w = fpga_p2p_wait {
        release_handle: h,
        release_slot: FPGA_P2P_NO_SLOT,
        timeout_ms: 2000,
        ..Default::default()
    };
    // Paced at `tx_per_s` buffers a second (0: as fast as the ring drains).
    let t0 = common::now_s();
    let due = |now: f64| -> u64 {
        if o.tx_per_s == 0 {
            u64::MAX
        } else {
            ((now - t0) * o.tx_per_s as f64) as u64 + 1
        }
    };
    while !stop.load(Ordering::Relaxed) || done < submitted {
        while !stop.load(Ordering::Relaxed)
            && submitted - done < u64::from(o.tx_slots)
            && submitted < due(common::now_s())
        {
            let slot = (0..o.tx_slots)
                .find(|s| busy & (1 << s) == 0)
                .ok_or("no free transmit slot")?;
            payload[..8].copy_from_slice(&submitted.to_le_bytes());
            let dst = ring.slot_ptr(slot).ok_or("transmit slot")?;
            // SAFETY: the slot is not in flight (busy bit clear); payload fits a slot.
            unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), dst, payload.len()) };
            dev.tx_submit(&fpga_p2p_tx {
                handle: h,
                slot,
                bytes: payload.len() as u32,
                target: FPGA_P2P_TX_DETECTIONS,
                cookie: submitted,
                ..Default::default()
            })
            .map_err(|e| format!("transmit {submitted}: {e}"))?;
            busy |= 1 << slot;
            last_crc = crc32fast::hash(&payload);
            submitted += 1;
        }
        if done == submitted {
            // Nothing in flight: wait for the next buffer's time.
            if !stop.load(Ordering::Relaxed) && o.tx_per_s > 0 {
                std::thread::sleep(std::time::Duration::from_secs_f64(1.0 / o.tx_per_s as f64));
            }
            continue;
        }
        dev.wait(&mut w).ctx("wait (transmit)")?;
        let ev = w.event;
        ensure!(
            ev.type_ == FPGA_P2P_EV_TX_DONE,
            "event {} on the transmit file",
            ev.type_
        );
        ensure!(
            ev.cookie == done,
            "transmit completion {}, expected {done}",
            ev.cookie
        );
        ensure!(
            ev.flags & FPGA_P2P_EVF_TX_ERROR == 0,
            "transmit {} failed (TX_ERROR)",
            ev.cookie
        );
        busy &= !(1 << ev.slot);
        done += 1;
    }
    dev.unregister(h).ctx("unregister transmit ring")?;
    drop(dev);
    drop(ring);
    Ok(TxReport {
        done,
        last_crc,
        bytes: payload.len(),
    })
}

#[derive(Clone, Copy)]
struct TxOpts {
    tx_slots: u32,
    tx_bytes: usize,
    tx_per_s: u64,
}

fn phase(env: &Env, o: &Opts, transmit: bool, out: &mut Outcome) -> Check<PhaseResult> {
    let mut src = common::open_source(&env.device, o.slots, o.slot_bytes, o.chunk_bytes)?;
    // The emulated card's test port: what it received.
    let card = Card::find()?.ok_or("no emulated card (its test port counts what it received)")?;
    let packets0 = card.stat("h2c_packets")?;
    let stop = Arc::new(AtomicBool::new(false));
    let tx = transmit.then(|| {
        let (dev, stop) = (env.device.clone(), stop.clone());
        let to = TxOpts {
            tx_slots: o.tx_slots,
            tx_bytes: o.tx_bytes,
            tx_per_s: o.tx_per_s,
        };
        std::thread::spawn(move || transmitter(dev, to, stop))
    });
    let mut sp = StartParams::test_pattern();
    if o.chunk_period_ns > 0 {
        sp = sp.with_chunk_period(std::time::Duration::from_nanos(o.chunk_period_ns));
    }
    // The capture rate is frames delivered per second of FPGA time (the
    // frames' own timestamps): what the capture path achieves, independent of
    // how fast this (emulated) CPU verifies them; drops lower it.
    let r = (|| -> Check<(f64, u64)> {
        src.start(&sp).ctx("start")?;
        let mut t = SequenceTracker::new();
        let warm = 8.min(o.frames);
        let (mut ts0, mut ts1) = (0u64, 0u64);
        for frames in 1..=o.frames {
            let f = src.next_frame(None).ctx("wait")?;
            common::verify_frame(&f, o.chunk_bytes, &mut t)?;
            if frames == warm {
                ts0 = f.timestamp_ns();
            }
            ts1 = f.timestamp_ns();
        }
        let fps = (o.frames - warm) as f64 / ((ts1 - ts0) as f64 * 1e-9).max(1e-9);
        src.stop().ctx("stop")?;
        Ok((fps, t.dropped))
    })();
    stop.store(true, Ordering::Relaxed);
    let txr = match tx {
        Some(h) => Some(
            h.join()
                .map_err(|_| "transmit thread panicked".to_string())??,
        ),
        None => None,
    };
    let (fps, drops) = r?;
    out.frames_verified += o.frames;
    out.frames_dropped += drops;
    let mut tx_done = 0;
    if let Some(x) = txr {
        // What the card received: the count, and the last buffer's bytes and CRC.
        let packets = card.stat("h2c_packets")? - packets0;
        ensure!(
            packets == x.done,
            "the card received {packets} buffers, {} completed",
            x.done
        );
        let seen = card.stat("h2c_last_crc")?;
        ensure!(
            seen == u64::from(x.last_crc),
            "the card saw CRC {seen:#010x} for the last buffer, we sent {:#010x}",
            x.last_crc
        );
        let bytes = card.stat("h2c_last_bytes")?;
        ensure!(
            bytes == x.bytes as u64,
            "the card saw {bytes} bytes, we sent {}",
            x.bytes
        );
        let errors = card.stat("h2c_errors")?;
        ensure!(errors == 0, "the card counted {errors} transmit errors");
        let c = src.counters().ctx("counters")?;
        ensure!(
            c.tx_completed >= x.done,
            "tx_completed counter {} < {}",
            c.tx_completed,
            x.done
        );
        tx_done = x.done;
    }
    Ok(PhaseResult {
        fps,
        drops,
        tx_done,
    })
}

/// Transmit phases tried before the suite fails: see `run`.
const DUPLEX_TRIES: usize = 3;

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    // Capture alone before and after, so that a noisy first phase (fresh
    // boot, busy host) cannot hide a slowdown: compare with the better one.
    // The phase with transmit is tried up to three times and must keep the
    // capture's rate and drops once: transmit that slows capture does so in
    // every try, while a TCG host busy with a second guest starves this one
    // for a moment now and then (6 drops in one phase of 300 frames, seen
    // with two QEMU lanes side by side).
    let a = phase(env, o, false, out)?;
    let mut tries = Vec::new();
    let mut dx = phase(env, o, true, out)?;
    let b = phase(env, o, false, out)?;
    eprintln!(
        "duplex: capture only, before {:.1} fps ({} drops), after {:.1} fps ({} drops)",
        a.fps, a.drops, b.fps, b.drops
    );
    let rx = PhaseResult {
        fps: a.fps.max(b.fps),
        drops: a.drops.min(b.drops),
        tx_done: 0,
    };
    let min_fps = rx.fps * (1.0 - o.max_slowdown_pct / 100.0);
    let max_drops = rx.drops + o.frames / 100;
    loop {
        ensure!(dx.tx_done > 0, "no transmit completed");
        eprintln!(
            "duplex: capture only (best) {:.1} fps ({} drops); with transmit (try {}) {:.1} fps ({} drops), {} buffers sent",
            rx.fps,
            rx.drops,
            tries.len() + 1,
            dx.fps,
            dx.drops,
            dx.tx_done
        );
        tries.push(format!("{:.1} frames/s ({} drops)", dx.fps, dx.drops));
        if dx.fps >= min_fps && dx.drops <= max_drops {
            break;
        }
        ensure!(
            tries.len() < DUPLEX_TRIES,
            "with transmit, every try slowed capture below {min_fps:.1} frames/s or dropped more \
             than {max_drops} frames (capture alone {:.1} frames/s, {} drops): {}",
            rx.fps,
            rx.drops,
            tries.join(", ")
        );
        dx = phase(env, o, true, out)?;
    }
    out.note("capture_fps", rx.fps);
    out.note("duplex_fps", dx.fps);
    out.note("tx_completed", dx.tx_done);
    out.detail = format!(
        "capture alone {:.1} frames/s ({} drops), with transmit {:.1} frames/s ({} drops), \
         {} transmit buffers completed ({} of {DUPLEX_TRIES} tries)",
        rx.fps,
        rx.drops,
        dx.fps,
        dx.drops,
        dx.tx_done,
        tries.len()
    );
    Ok(())
}
