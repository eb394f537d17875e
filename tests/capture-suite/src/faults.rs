//! `p2p-suite faults`: the card's failures that only the emulated card can
//! inject (its test port, [`crate::card`]), through the real driver:
//!
//! - lost interrupts: the card drops its next N MSI-X messages; frames keep
//!   flowing (the driver's watchdog runs the completion path) and the driver
//!   counts what the watchdog found (`lost_irqs`);
//! - a C2H engine that never goes idle (and keeps writing): STOP reports the
//!   timeout, UNREGISTER quarantines the ring (counted); the card's writes
//!   after that still land in mapped memory (no IOMMU fault: nothing was
//!   unmapped or freed under it); once the engine is quiet a fresh ring on
//!   the same device streams normally;
//! - all-ones register reads (as after a completion timeout): the owner gets
//!   a fault, not a hang; UNREGISTER while the card still answers all ones
//!   quarantines (the engine may still run) instead of freeing; afterwards a
//!   fresh ring works.
//!
//! - (`--probe`) a probe onto a card whose engine does not stop: no device,
//!   no bus mastering; once the engine is quiet, a probe works.
//!
//! The quarantined rings are reaped when the module unloads (the harness
//! unloads it after the suite, and on the debug kernel counts kernel
//! reports: a free under a running engine would show there).

use std::time::{Duration, Instant};

use clap::Args;
use tegra_p2p::kmod::{Device, KmodSource};
use tegra_p2p::{FrameSource, SequenceTracker, StartParams};

use crate::card::{Card, Knob};
use crate::common::{self, Check, Ctx, Outcome};
use crate::{Env, ensure};

#[derive(Args, Debug)]
pub struct Opts {
    /// Interrupts the card loses in the lost-interrupt phase.
    #[arg(long, default_value_t = 200)]
    pub lose_irqs: u32,
    /// Frames verified after the card stopped losing interrupts.
    #[arg(long, default_value_t = 100)]
    pub frames_after: u64,
    /// Also reload the driver onto a card whose engine does not stop
    /// (needs root and the module at /lib/modules/radar, as in the guest).
    #[arg(long)]
    pub probe: bool,
}

const SLOTS: u32 = 8;
const SLOT: usize = 16 << 10;
const CHUNK: usize = 4 << 10;

fn start(src: &mut KmodSource) -> Check {
    src.start(
        &StartParams::test_pattern()
            .with_chunk_period(Duration::from_micros(200))
            .with_event_timeout(Duration::from_secs(10)),
    )
    .ctx("start")
}

/// `n` frames, every byte checked.
fn stream(src: &mut KmodSource, n: u64, t: &mut SequenceTracker, out: &mut Outcome) -> Check {
    for _ in 0..n {
        let f = src.next_frame(None).ctx("wait")?;
        common::verify_frame(&f, CHUNK, t)?;
        out.frames_verified += 1;
    }
    out.frames_dropped = out.frames_dropped.max(t.dropped);
    Ok(())
}

/// A fresh ring on the same device streams `n` verified frames.
fn fresh_ring_works(env: &Env, n: u64, what: &str, out: &mut Outcome) -> Check {
    let mut src = common::open_source(&env.device, SLOTS, SLOT, CHUNK)
        .map_err(|e| format!("{what}: a fresh REGISTER failed: {e}"))?;
    start(&mut src).map_err(|e| format!("{what}: {e}"))?;
    let mut t = SequenceTracker::new();
    stream(&mut src, n, &mut t, out).map_err(|e| format!("{what}: fresh ring: {e}"))?;
    src.stop().ctx("stop")?;
    Ok(())
}

fn lost_interrupts(env: &Env, o: &Opts, card: &Card, out: &mut Outcome) -> Check<String> {
    let mut src = common::open_source(&env.device, SLOTS, SLOT, CHUNK)?;
    let c0 = src.counters().ctx("counters")?;
    let lost0 = card.stat("irqs_lost")?;
    start(&mut src)?;
    let mut t = SequenceTracker::new();
    stream(&mut src, 20, &mut t, out)?;
    card.set(Knob::LoseIrqs, o.lose_irqs);
    // Every interrupt of the stretch is lost: only the watchdog can hand
    // frames over until the card sends interrupts again.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut during = 0u64;
    while card.stat("irqs_lost")? - lost0 < u64::from(o.lose_irqs) {
        ensure!(
            Instant::now() < deadline,
            "the card lost {} of {} interrupts in 120 s",
            card.stat("irqs_lost")? - lost0,
            o.lose_irqs
        );
        stream(&mut src, 1, &mut t, out)?;
        during += 1;
    }
    stream(&mut src, o.frames_after, &mut t, out)?;
    src.stop().ctx("stop")?;
    let c1 = src.counters().ctx("counters")?;
    let found = c1.lost_irqs - c0.lost_irqs;
    ensure!(
        found >= 1,
        "{} interrupts lost and {during} frames delivered meanwhile, but the driver's lost_irqs did not rise",
        o.lose_irqs
    );
    out.note("lost_irqs", found);
    Ok(format!(
        "{} interrupts lost: {during} frames delivered meanwhile by the watchdog (lost_irqs +{found}), {} after",
        o.lose_irqs, o.frames_after
    ))
}

/// Before and after a quarantine: the driver's count, the card's refused DMA.
struct Quarantine {
    quarantined: u64,
    dma_errors: u64,
}

fn quarantine_mark(dev: &Device, card: &Card) -> Check<Quarantine> {
    Ok(Quarantine {
        quarantined: dev.counters().ctx("counters")?.quarantined,
        dma_errors: card.stat("dma_errors")?,
    })
}

fn stuck_engine(env: &Env, dev: &Device, card: &Card, out: &mut Outcome) -> Check<String> {
    let mut src = common::open_source(&env.device, SLOTS, SLOT, CHUNK)?;
    let q0 = quarantine_mark(dev, card)?;
    let timeouts0 = dev.counters().ctx("counters")?.dma_timeouts;
    start(&mut src)?;
    let mut t = SequenceTracker::new();
    stream(&mut src, 20, &mut t, out)?;
    card.set(Knob::C2hStuck, 1);
    let stop = src.stop();
    ensure!(
        stop.is_err(),
        "STOP succeeded although the capture engine never went idle"
    );
    drop(src); // UNREGISTER: the engine still does not stop.
    let writes0 = card.stat("stuck_writes")?;
    std::thread::sleep(Duration::from_millis(100));
    let writes = card.stat("stuck_writes")? - writes0;
    let q1 = quarantine_mark(dev, card)?;
    let timeouts = dev.counters().ctx("counters")?.dma_timeouts - timeouts0;
    card.set(Knob::C2hStuck, 0);
    ensure!(
        q1.quarantined == q0.quarantined + 1,
        "a ring whose engine did not stop was not quarantined (quarantined {} -> {})",
        q0.quarantined,
        q1.quarantined
    );
    ensure!(timeouts >= 1, "no dma_timeouts counted");
    ensure!(
        writes > 0,
        "the stuck engine wrote nothing after UNREGISTER"
    );
    ensure!(
        q1.dma_errors == q0.dma_errors,
        "{} of the stuck engine's writes hit unmapped memory: the ring was freed under it",
        q1.dma_errors - q0.dma_errors
    );
    fresh_ring_works(env, 50, "after a stuck engine", out)?;
    Ok(format!(
        "stuck engine: STOP failed ({}), ring quarantined, {writes} writes after UNREGISTER all landed in mapped memory, a fresh ring streamed 50 frames",
        stop.err().map(|e| e.to_string()).unwrap_or_default()
    ))
}

fn all_ones(env: &Env, dev: &Device, card: &Card, out: &mut Outcome) -> Check<String> {
    let mut src = common::open_source(&env.device, SLOTS, SLOT, CHUNK)?;
    let q0 = quarantine_mark(dev, card)?;
    start(&mut src)?;
    let mut t = SequenceTracker::new();
    stream(&mut src, 20, &mut t, out)?;
    card.set(Knob::AllOnes, 1);
    let t0 = Instant::now();
    let fault = loop {
        match src.next_frame(Some(Duration::from_secs(10))) {
            Ok(_) => {
                ensure!(
                    t0.elapsed() < Duration::from_secs(60),
                    "frames still delivered 60 s after the card began reading all ones"
                );
            }
            Err(e) => break e.to_string(),
        }
    };
    ensure!(
        fault.contains("engine fault"),
        "all-ones reads ended the stream with '{fault}', not a fault"
    );
    drop(src); // UNREGISTER while the card still reads all ones.
    card.set(Knob::AllOnes, 0);
    let q1 = quarantine_mark(dev, card)?;
    ensure!(
        q1.quarantined == q0.quarantined + 1,
        "UNREGISTER while the card read all ones freed the ring (quarantined {} -> {})",
        q0.quarantined,
        q1.quarantined
    );
    ensure!(
        q1.dma_errors == q0.dma_errors,
        "{} DMA writes hit unmapped memory",
        q1.dma_errors - q0.dma_errors
    );
    fresh_ring_works(env, 50, "after all-ones reads", out)?;
    Ok(format!(
        "all-ones reads: the stream ended with '{fault}', UNREGISTER quarantined the ring, a fresh ring streamed 50 frames"
    ))
}

/// The driver module as the guest harness installs it.
const FPGA_KO: &str = "/lib/modules/radar/fpga_p2p.ko";

fn sh(cmd: &str, args: &[&str]) -> Check {
    let st = std::process::Command::new(cmd)
        .args(args)
        .status()
        .map_err(|e| format!("{cmd}: {e}"))?;
    ensure!(st.success(), "{cmd} {}: {st}", args.join(" "));
    Ok(())
}

/// Waits (bounded) until the device node exists or not.
fn node_appears(env: &Env, want: bool) -> bool {
    for _ in 0..100 {
        if env.device.exists() == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Probe with an engine that a previous driver left running (it does not
/// stop): the driver must not enable bus mastering (the engine would write
/// to addresses nobody maps) and must not create the device; once the engine
/// is quiet, a new probe works. Reloads the module (no file may be open).
fn probe_running_engine(env: &Env, card: &Card) -> Check<String> {
    // Unloaded with the engine quiet: the quarantined rings are reaped.
    sh("rmmod", &["fpga_p2p"])?;
    card.set(Knob::C2hStuck, 2); // busy, but writing nothing
    let r = (|| -> Check {
        sh("insmod", &[FPGA_KO])?;
        ensure!(
            node_appears(env, false),
            "the driver created {} for a card whose engine does not stop",
            env.device.display()
        );
        ensure!(
            card.stat("bus_master")? == 0,
            "the driver enabled bus mastering on a card whose engine does not stop"
        );
        Ok(())
    })();
    card.set(Knob::C2hStuck, 0);
    r?;
    sh("rmmod", &["fpga_p2p"])?;
    sh("insmod", &[FPGA_KO])?;
    ensure!(
        node_appears(env, true),
        "no {} after the engine went quiet",
        env.device.display()
    );
    ensure!(
        card.stat("bus_master")? == 1,
        "bus mastering off after a good probe"
    );
    Ok("probe with a running engine: no device, bus mastering left off; with the engine quiet, probe works".into())
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    let card = Card::find()?.ok_or("no emulated card (its test port injects the faults)")?;
    // Counters of the device, read through a second open of it.
    let dev = Device::open(&env.device).ctx("open")?;
    card.clear_faults();
    let r = (|| -> Check<Vec<String>> {
        Ok(vec![
            lost_interrupts(env, o, &card, out)?,
            stuck_engine(env, &dev, &card, out)?,
            all_ones(env, &dev, &card, out)?,
        ])
    })();
    card.clear_faults();
    let mut parts = r?;
    let c = dev.counters().ctx("counters")?;
    out.note("quarantined", c.quarantined);
    out.note("dma_timeouts", c.dma_timeouts);
    drop(dev);
    if o.probe {
        parts.push(probe_running_engine(env, &card)?);
    }
    out.detail = parts.join("; ");
    Ok(())
}
