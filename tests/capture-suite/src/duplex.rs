//! `duplex`: transmit buffers flow continuously on the host-to-card ring
//! while capture runs. Completions arrive in order with their cookies, the
//! FPGA model saw the bytes we sent (its CRC of the last buffer), and capture
//! keeps its rate and its drop rate compared with a capture-only run.

use std::path::PathBuf;

use tegra_p2p::{Event, FrameSource, SequenceTracker, StartParams, TxTarget};

use crate::common::{self, Check, Ctx, Outcome, now_s, read_key};
use crate::{Env, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Frames per phase (capture only, then capture + transmit).
    #[arg(long, default_value_t = 300)]
    pub frames: u64,
    /// Frame geometry: small enough that a TCG guest keeps up with the real
    /// cadence (16 chunks at 2 kHz, a frame every 8 ms), so that the rate
    /// measures the capture path, not the guest's CPU.
    #[arg(long, default_value_t = 256 << 10)]
    pub slot_bytes: usize,
    #[arg(long, default_value_t = 16 << 10)]
    pub chunk_bytes: usize,
    /// Chunk period in ns (0 = the device default, 2 kHz).
    #[arg(long, default_value_t = 0)]
    pub chunk_period_ns: u64,
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    /// Transmit slots and their size.
    #[arg(long, default_value_t = 4)]
    pub tx_slots: u32,
    #[arg(long, default_value_t = 16 << 10)]
    pub tx_bytes: usize,
    /// Allowed capture slow-down with transmit, percent.
    #[arg(long, default_value_t = 3.0)]
    pub max_slowdown_pct: f64,
    /// The FPGA model's debugfs directory (its `stats` has h2c_last_crc, h2c_packets).
    #[arg(long, default_value = "/sys/kernel/debug/fpga_p2p_model/0")]
    pub model_debugfs: PathBuf,
}

struct PhaseResult {
    fps: f64,
    drops: u64,
    tx_done: u64,
}

fn phase(env: &Env, o: &Opts, transmit: bool, out: &mut Outcome) -> Check<PhaseResult> {
    let mut src = common::open_source(&env.device, o.slots, o.slot_bytes, o.chunk_bytes)?;
    let stats = o.model_debugfs.join("stats");
    let packets0 = if transmit {
        read_key(&stats, "h2c_packets")?
    } else {
        0
    };
    if transmit {
        src.attach_tx(common::host_ring(
            o.tx_slots,
            o.tx_bytes.next_multiple_of(4096),
        )?)
        .ctx("attach transmit ring")?;
    }
    let mut sp = StartParams::test_pattern();
    if o.chunk_period_ns > 0 {
        sp = sp.with_chunk_period(std::time::Duration::from_nanos(o.chunk_period_ns));
    }
    src.start(&sp).ctx("start")?;
    let mut t = SequenceTracker::new();
    // A fixed body; the first 8 bytes carry the buffer number, so every
    // buffer (and its CRC) differs without per-byte work in the loop.
    let mut payload: Vec<u8> = (0..o.tx_bytes.max(8)).map(|i| (i * 7 + 3) as u8).collect();
    let (mut submitted, mut done) = (0u64, 0u64);
    let mut last_sent_crc = 0u32;
    let warm = 8.min(o.frames);
    let mut t0 = now_s();
    let mut frames = 0u64;
    while frames < o.frames {
        // Keep the transmit ring full: submit until every slot is in flight.
        while transmit && submitted - done < u64::from(o.tx_slots) {
            payload[..8].copy_from_slice(&submitted.to_le_bytes());
            src.transmit(TxTarget::Detections, &payload, submitted)
                .map_err(|e| format!("transmit {submitted}: {e}"))?;
            last_sent_crc = crc32fast::hash(&payload);
            submitted += 1;
        }
        match src.next_event(None).ctx("wait")? {
            Event::Frame(f) => {
                common::verify_frame(&f, o.chunk_bytes, &mut t)?;
                frames += 1;
                if frames == warm {
                    t0 = now_s();
                }
            }
            Event::TxDone { cookie, failed, .. } => {
                ensure!(
                    cookie == done,
                    "transmit completion {cookie}, expected {done}"
                );
                ensure!(!failed, "transmit {cookie} failed (TX_ERROR)");
                done += 1;
            }
            Event::Chunk(_) => {}
        }
    }
    let fps = (frames - warm) as f64 / (now_s() - t0).max(1e-9);
    if transmit {
        // Drain the remaining completions, then compare what the FPGA saw.
        while done < submitted {
            if let Event::TxDone { cookie, failed, .. } = src.next_event(None).ctx("wait for tx")? {
                ensure!(
                    cookie == done,
                    "transmit completion {cookie}, expected {done}"
                );
                ensure!(!failed, "transmit {cookie} failed (TX_ERROR)");
                done += 1;
            }
        }
        let seen = read_key(&stats, "h2c_last_crc")?;
        ensure!(
            seen == u64::from(last_sent_crc),
            "FPGA model saw CRC {seen:#010x} for the last buffer, we sent {last_sent_crc:#010x}"
        );
        let bytes = read_key(&stats, "h2c_last_bytes")?;
        ensure!(
            bytes == payload.len() as u64,
            "FPGA model saw {bytes} bytes, we sent {}",
            payload.len()
        );
        let packets = read_key(&stats, "h2c_packets")? - packets0;
        ensure!(
            packets == done,
            "FPGA model received {packets} buffers, {done} completed"
        );
        let errors = read_key(&stats, "h2c_errors")?;
        ensure!(errors == 0, "FPGA model counted {errors} transmit errors");
        let c = src.counters().ctx("counters")?;
        ensure!(
            c.tx_completed >= done,
            "tx_completed counter {} < {done}",
            c.tx_completed
        );
    }
    src.stop().ctx("stop")?;
    out.frames_verified += frames;
    out.frames_dropped += t.dropped;
    Ok(PhaseResult {
        fps,
        drops: t.dropped,
        tx_done: done,
    })
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let rx = phase(env, o, false, out)?;
    let dx = phase(env, o, true, out)?;
    out.note("capture_fps", rx.fps);
    out.note("duplex_fps", dx.fps);
    out.note("tx_completed", dx.tx_done);
    eprintln!(
        "duplex: capture only {:.1} fps ({} drops); with transmit {:.1} fps ({} drops), {} buffers sent",
        rx.fps, rx.drops, dx.fps, dx.drops, dx.tx_done
    );
    ensure!(dx.tx_done > 0, "no transmit completed");
    ensure!(
        dx.fps >= rx.fps * (1.0 - o.max_slowdown_pct / 100.0),
        "capture slowed from {:.1} to {:.1} frames/s with transmit",
        rx.fps,
        dx.fps
    );
    ensure!(
        dx.drops <= rx.drops + o.frames / 100,
        "drops rose from {} to {} with transmit",
        rx.drops,
        dx.drops
    );
    Ok(())
}
