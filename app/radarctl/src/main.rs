//! `radarctl`: talks to a radar unit over its serial diagnostics link.
//!
//! Every read command prints readable text, or JSON with `--json`. Exit
//! status: 0 done; 1 the unit refused (a parameter out of range, ...);
//! 2 bad arguments; 3 the link failed (no such port, no answer in time,
//! a protocol version that differs).

mod client;
mod heatmap;
mod show;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use client::{Client, LinkError};
use diag_proto::*;

#[derive(Parser, Debug)]
#[command(
    name = "radarctl",
    version,
    about = "Talk to a radar unit over its serial diagnostics link",
    after_help = "Examples:\n  radarctl --port /dev/ttyUSB0 status\n  radarctl stats --json\n  radarctl set cfar.pfa 1e-4\n  radarctl snapshot --png rd.png\n  radarctl top\n\nThe port also comes from RADARCTL_PORT. Exit status: 0 done; 1 the unit refused;\n2 bad arguments; 3 the link failed (no such port, no answer in time, protocol version differs)."
)]
struct Cli {
    /// Serial device of the unit's diagnostics link.
    #[arg(long, env = "RADARCTL_PORT", default_value = "/dev/ttyUSB0")]
    port: String,
    #[arg(long, default_value_t = 115_200)]
    baud: u32,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 2.0)]
    timeout: f64,
    /// Print JSON instead of text (read commands).
    #[arg(long, global = true)]
    json: bool,
    /// Claim another protocol version (tests the version check).
    #[arg(long, hide = true)]
    claim_protocol: Option<u16>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Versions of radard, kernel module, FPGA and protocol; boot slot; uptime.
    Identity,
    /// Health, frames, rate, misses, drops, latency, newest detections, GPU.
    Status,
    /// Latency percentiles and the latency histogram (drawn as bars).
    Stats,
    /// The frames' clock: its source, quality and bound, offset and
    /// frequency against the system clock, steps.
    Time,
    /// The recent-events log.
    Log {
        /// Events to show (the newest).
        #[arg(short = 'n', long, default_value_t = 20)]
        count: u64,
    },
    /// Every parameter with its value, type, range and unit.
    Params,
    /// One parameter.
    Get { name: String },
    /// Change a parameter (on/off, an integer, a real like 1e-4).
    Set { name: String, value: String },
    /// The range-Doppler map of a recent frame with its detections.
    Snapshot {
        /// Write it as a PNG heat map (dB; metres and m/s axes; colour bar; detections).
        #[arg(long)]
        png: Option<PathBuf>,
    },
    /// Live view: rate, misses, drops, latency histogram, GPU, newest detections.
    Top {
        /// Refresh period in milliseconds.
        #[arg(long, default_value_t = 500)]
        period_ms: u32,
        /// Stop after this many refreshes (default: until q or Ctrl-C).
        #[arg(long)]
        frames: Option<u64>,
    },
    /// postcard-rpc's ping: the link works.
    Ping,
}

#[derive(Debug, thiserror::Error)]
enum CtlError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Output(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("radarctl: {e}");
            ExitCode::from(match e {
                CtlError::Refused(_) | CtlError::Output(_) => 1,
                CtlError::Usage(_) => 2,
                CtlError::Link(_) => 3,
            })
        }
    }
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CtlError> {
    let text = serde_json::to_string_pretty(v).map_err(|e| CtlError::Output(e.to_string()))?;
    println!("{text}");
    Ok(())
}

fn run(cli: &Cli) -> Result<(), CtlError> {
    if !(cli.timeout > 0.0 && cli.timeout <= 3600.0) {
        return Err(CtlError::Usage(format!(
            "--timeout {}: must be in (0, 3600] seconds",
            cli.timeout
        )));
    }
    let mut c = Client::open(&cli.port, cli.baud, Duration::from_secs_f64(cli.timeout))?;
    c.check_version(cli.claim_protocol.unwrap_or(PROTOCOL_VERSION))?;
    match &cli.cmd {
        Cmd::Ping => {
            let v = c.call::<PingEndpoint>(&0x5eed_u32, "ping")?;
            if cli.json {
                print_json(&v)?;
            } else {
                println!("pong {v:#x} from {}", cli.port);
            }
        }
        Cmd::Identity => {
            let id = c.call::<IdentityEndpoint>(&(), "the identity request")?;
            if cli.json {
                print_json(&id)?
            } else {
                show::identity(&id)
            }
        }
        Cmd::Status => {
            let s = c.call::<StatusEndpoint>(&(), "the status request")?;
            let t = c.time()?;
            if cli.json {
                // The status answer's keys, and the clock's under "time".
                let mut v =
                    serde_json::to_value(&s).map_err(|e| CtlError::Output(e.to_string()))?;
                if let Some(o) = v.as_object_mut() {
                    o.insert(
                        "time".into(),
                        serde_json::to_value(&t).map_err(|e| CtlError::Output(e.to_string()))?,
                    );
                }
                print_json(&v)?
            } else {
                show::status(&s);
                println!("time       {}", show::time(t.as_ref()));
            }
        }
        Cmd::Time => {
            let t = c.time()?;
            if cli.json {
                print_json(&t)?
            } else {
                println!("{}", show::time(t.as_ref()));
            }
        }
        Cmd::Stats => {
            let s = c.call::<StatsEndpoint>(&(), "the statistics request")?;
            if cli.json {
                print_json(&s)?
            } else {
                show::stats(&s)
            }
        }
        Cmd::Log { count } => {
            let events = fetch_log(&mut c, *count)?;
            if cli.json {
                print_json(&events)?
            } else {
                show::log(&events)
            }
        }
        Cmd::Params => {
            let params = fetch_params(&mut c)?;
            if cli.json {
                print_json(&params)?
            } else {
                show::params(&params)
            }
        }
        Cmd::Get { name } => {
            let n = ParamName::try_from_str(name)
                .ok_or_else(|| CtlError::Usage(format!("parameter name {name:?} is too long")))?;
            match c.call::<ParamGetEndpoint>(&n, "the parameter request")? {
                Ok(p) => {
                    if cli.json {
                        print_json(&p)?
                    } else {
                        show::params(std::slice::from_ref(&p))
                    }
                }
                Err(e) => return Err(CtlError::Refused(refusal(name, &e))),
            }
        }
        Cmd::Set { name, value } => {
            let n = ParamName::try_from_str(name)
                .ok_or_else(|| CtlError::Usage(format!("parameter name {name:?} is too long")))?;
            let v = ParamValue::parse_text(value).ok_or_else(|| {
                CtlError::Usage(format!(
                    "cannot read {value:?} as a value (on/off, an integer, a real)"
                ))
            })?;
            match c
                .call::<ParamSetEndpoint>(&SetParam { name: n, value: v }, "the parameter change")?
            {
                Ok(a) => {
                    if cli.json {
                        print_json(&a)?
                    } else {
                        println!(
                            "{} = {} (applied at frame {})",
                            a.param.name, a.param.value, a.at_frame
                        );
                    }
                }
                Err(e) => return Err(CtlError::Refused(refusal(name, &e))),
            }
        }
        Cmd::Snapshot { png } => {
            let snap = fetch_snapshot(&mut c)?;
            if let Some(path) = png {
                let bytes = heatmap::render(&snap).map_err(CtlError::Output)?;
                std::fs::write(path, bytes)
                    .map_err(|e| CtlError::Output(format!("{}: {e}", path.display())))?;
                if !cli.json {
                    println!(
                        "{}: {} x {} range-Doppler map of frame {} with {} detections",
                        path.display(),
                        snap.info.range_bins,
                        snap.info.doppler_bins,
                        snap.info.frame,
                        snap.info.detections.len()
                    );
                }
            }
            if cli.json {
                print_json(&snap)?;
            } else if png.is_none() {
                show::snapshot(&snap);
            }
        }
        Cmd::Top { period_ms, frames } => {
            top::run(&mut c, *period_ms, *frames).map_err(CtlError::Output)?
        }
    }
    Ok(())
}

fn fetch_log(c: &mut Client, count: u64) -> Result<Vec<LogEvent>, CtlError> {
    // Find the newest id first (a request from u64::MAX answers with the head).
    let head = c
        .call::<LogEndpoint>(
            &LogRequest {
                from: u64::MAX,
                max: 1,
            },
            "the log request",
        )?
        .next;
    let mut from = head.saturating_sub(count);
    let mut out = Vec::new();
    while (out.len() as u64) < count {
        let page = c.call::<LogEndpoint>(&LogRequest { from, max: 8 }, "the log request")?;
        if page.events.is_empty() {
            break;
        }
        out.extend(page.events.iter().cloned());
        from = page.next;
    }
    Ok(out)
}

fn fetch_params(c: &mut Client) -> Result<Vec<ParamInfo>, CtlError> {
    let mut out = Vec::new();
    loop {
        let page = c.call::<ParamListEndpoint>(
            &ParamListRequest {
                first: out.len() as u8,
            },
            "the parameter list",
        )?;
        if page.params.is_empty() {
            break;
        }
        out.extend(page.params.iter().cloned());
        if out.len() >= usize::from(page.total) {
            break;
        }
    }
    Ok(out)
}

/// A whole snapshot: the info and every cell.
#[derive(serde::Serialize)]
pub struct Snapshot {
    pub info: SnapshotInfo,
    /// Row-major levels (row = Doppler, column = range).
    pub cells: Vec<u8>,
}

impl Snapshot {
    pub fn db(&self, d: usize, r: usize) -> f32 {
        let q = self.cells[d * usize::from(self.info.range_bins) + r];
        self.info.db_floor + f32::from(q) * self.info.db_step
    }
}

fn fetch_snapshot(c: &mut Client) -> Result<Snapshot, CtlError> {
    for _attempt in 0..3 {
        let info = match c.call::<SnapshotInfoEndpoint>(&(), "the snapshot request")? {
            Ok(i) => i,
            Err(SnapshotError::NoMap) => return Err(CtlError::Refused("the unit has no range-Doppler map yet (no frame processed, or test-pattern content)".into())),
            Err(e) => return Err(CtlError::Refused(format!("snapshot: {e:?}"))),
        };
        let total = usize::from(info.doppler_bins) * usize::from(info.range_bins);
        let mut cells = Vec::with_capacity(total);
        let mut gone = false;
        for index in 0..info.pieces {
            match c.call::<SnapshotPieceEndpoint>(
                &PieceRequest {
                    generation: info.generation,
                    index,
                },
                "a snapshot piece",
            )? {
                Ok(p) => cells.extend_from_slice(&p.cells),
                Err(SnapshotError::Gone) => {
                    gone = true;
                    break;
                }
                Err(e) => return Err(CtlError::Refused(format!("snapshot piece {index}: {e:?}"))),
            }
        }
        if gone {
            continue;
        }
        if cells.len() != total {
            return Err(CtlError::Refused(format!(
                "snapshot: {} cells for a {} x {} map",
                cells.len(),
                info.doppler_bins,
                info.range_bins
            )));
        }
        return Ok(Snapshot { info, cells });
    }
    Err(CtlError::Refused(
        "snapshot: the map changed under three attempts in a row".into(),
    ))
}

/// A refused parameter request, with where to find the names.
fn refusal(name: &str, e: &ParamError) -> String {
    match e {
        ParamError::Unknown => format!("{} (radarctl params lists them)", e.describe(name)),
        _ => e.describe(name).to_string(),
    }
}
