//! `p2p-suite`: the capture-path test programs that run inside QEMU against
//! the real `fpga_p2p` module (on the emulated FPGA card, with the nv-p2p shim),
//! through `tegra-p2p`'s `KmodSource` and checked ioctl layer.
//!
//! Every invocation prints one KTAP document on stdout (one test, named
//! after the suite, with its figures as a JSON diagnostic line: see
//! [`ktap`]) and exits non-zero on failure. Progress goes to stderr.

mod badinput;
mod card;
mod common;
mod crash;
mod duplex;
mod faults;
mod ktap;
mod neighbours;
mod ownership;
mod ptp;
mod revocation;
mod stream;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use common::{Check, Ctx, Outcome};

#[global_allocator]
static GLOBAL: common::CountingAlloc = common::CountingAlloc;

#[derive(Parser, Debug)]
#[command(name = "p2p-suite", about = "fpga_p2p capture-path suites (QEMU)")]
struct Cli {
    #[command(flatten)]
    env: Env,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Where the module's nodes and knobs are.
#[derive(Args, Debug, Clone)]
pub struct Env {
    /// Device node.
    #[arg(long, global = true, default_value = "/dev/fpga-p2p0")]
    pub device: PathBuf,
    /// The nv-p2p shim's debugfs directory (stats, registrations, revoke).
    #[arg(long, global = true, default_value = "/sys/kernel/debug/nvp2p_shim")]
    pub shim_debugfs: PathBuf,
    /// The nv-p2p module loaded: the shim (counters, fault injection) or
    /// NVIDIA's own nvidia-p2p (neither; harsher revocations).
    #[arg(long, global = true, value_enum, default_value_t = P2p::Shim)]
    pub p2p: P2p,
}

/// Which nv-p2p implementation the module runs on.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum P2p {
    Shim,
    Nvidia,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Test pattern, every byte verified: many small frames, then full 4 MiB frames.
    Stream(stream::Opts),
    /// Held slots are never written; drops at the source are counted and reported.
    Ownership(ownership::Opts),
    /// Ring memory freed or revoked while streaming.
    Revocation(revocation::Opts),
    /// A streaming child is SIGKILLed; the device stays usable and clean.
    Crash(crash::Opts),
    /// Hostile ioctl arguments: each gets an errno, nothing crashes.
    Badinput(badinput::Opts),
    /// Transmit while capturing: completions, bytes seen by the FPGA, capture rate kept.
    Duplex(duplex::Opts),
    /// The emulated card's lost interrupts, stuck engine and all-ones reads.
    Faults(faults::Opts),
    /// munmap, mprotect and fork beside a ring do not revoke it.
    Neighbours(neighbours::Opts),
    /// Register, stream a few frames, verify, exit.
    Smoke {
        #[arg(long, default_value_t = 8)]
        frames: u64,
    },
    /// Open the device and sleep until killed.
    HoldOpen,
    /// The emulated card's received detection records: count, and the last
    /// one's bytes into --out (the radard suite decodes them).
    CardDetections {
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// PPS edges into the card come out of its PTP clock as external time
    /// stamps with the card's time at the edge.
    PtpPps(ptp::PpsOpts),
    /// Frames carry the card's clock at their first sample: their UTC
    /// agrees with the guest's clock.
    PtpFrames(ptp::FramesOpts),
    /// The system clock: the kernel's TAI offset, synchronised or not, steps.
    Sysclock(ptp::SysclockOpts),
    /// The emulated card's oscillator error (test port).
    CardClock(ptp::CardClockOpts),
    /// A PPS edge into the card at every whole second of CLOCK_REALTIME.
    PpsPulser(ptp::PulserOpts),
}

fn smoke(env: &Env, frames: u64, out: &mut Outcome) -> Check {
    let (slot, chunk) = (16 << 10, 4 << 10);
    let mut src = common::open_source(&env.device, 4, slot, chunk)?;
    use tegra_p2p::FrameSource;
    src.start(&tegra_p2p::StartParams::test_pattern())
        .ctx("start")?;
    let mut t = tegra_p2p::SequenceTracker::new();
    for _ in 0..frames {
        let f = src.next_frame(None).ctx("wait")?;
        common::verify_frame(&f, chunk, &mut t)?;
        out.frames_verified += 1;
    }
    out.frames_dropped = t.dropped;
    src.stop().ctx("stop")?;
    Ok(())
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            eprintln!("{e}");
            print_result(&Outcome {
                suite: std::env::args().nth(1).unwrap_or_default(),
                detail: format!("bad arguments: {}", e.kind()),
                ..Default::default()
            });
            std::process::exit(2);
        }
    };
    let name = match &cli.cmd {
        Cmd::Stream(_) => "stream",
        Cmd::Ownership(_) => "ownership",
        Cmd::Revocation(_) => "revocation",
        Cmd::Crash(_) => "crash",
        Cmd::Badinput(_) => "badinput",
        Cmd::Duplex(_) => "duplex",
        Cmd::Neighbours(_) => "neighbours",
        Cmd::Faults(_) => "faults",
        Cmd::Smoke { .. } => "smoke",
        Cmd::HoldOpen => "hold-open",
        Cmd::CardDetections { .. } => "card-detections",
        Cmd::PtpPps(_) => "ptp-pps",
        Cmd::PtpFrames(_) => "ptp-frames",
        Cmd::Sysclock(_) => "sysclock",
        Cmd::CardClock(_) => "card-clock",
        Cmd::PpsPulser(_) => "pps-pulser",
    };
    let mut out = Outcome {
        suite: name.to_string(),
        ..Default::default()
    };
    if let Cmd::HoldOpen = cli.cmd {
        hold_open(&cli.env, out);
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let o = &mut out;
        match &cli.cmd {
            Cmd::Stream(opts) => stream::run(&cli.env, opts, o),
            Cmd::Ownership(opts) => ownership::run(&cli.env, opts, o),
            Cmd::Revocation(opts) => revocation::run(&cli.env, opts, o),
            Cmd::Crash(opts) => crash::run(&cli.env, opts, o),
            Cmd::Badinput(opts) => badinput::run(&cli.env, opts, o),
            Cmd::Duplex(opts) => duplex::run(&cli.env, opts, o),
            Cmd::Neighbours(opts) => neighbours::run(&cli.env, opts, o),
            Cmd::Faults(opts) => faults::run(&cli.env, opts, o),
            Cmd::Smoke { frames } => smoke(&cli.env, *frames, o),
            Cmd::HoldOpen => Ok(()),
            Cmd::CardDetections { out } => card::detections(out.as_deref(), o),
            Cmd::PtpPps(opts) => ptp::pps(&cli.env, opts, o),
            Cmd::PtpFrames(opts) => ptp::frames(&cli.env, opts, o),
            Cmd::Sysclock(opts) => ptp::sysclock(opts, o),
            Cmd::CardClock(opts) => ptp::card_clock(opts, o),
            Cmd::PpsPulser(opts) => ptp::pulser(opts, o),
        }
    }));
    let result = match r {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panic: {}",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("?")
        )),
    };
    match result {
        Ok(()) => {
            out.passed = true;
            if out.detail.is_empty() {
                out.detail = "ok".into();
            }
        }
        Err(e) => {
            out.passed = false;
            out.detail = e;
        }
    }
    print_result(&out);
    std::process::exit(if out.passed { 0 } else { 1 });
}

fn print_result(out: &Outcome) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    // Nothing to report a failed write of the report to: the exit status
    // still says whether the suite passed.
    let _ = stdout.write_all(ktap::document(out).as_bytes());
    let _ = stdout.flush();
}

fn hold_open(env: &Env, mut out: Outcome) -> ! {
    match tegra_p2p::kmod::Device::open(&env.device) {
        Ok(dev) => {
            out.passed = true;
            out.detail = format!("holding {} open until killed", env.device.display());
            print_result(&out);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
                let _ = &dev;
            }
        }
        Err(e) => {
            out.detail = e.to_string();
            print_result(&out);
            std::process::exit(1);
        }
    }
}
