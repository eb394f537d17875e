//! The plain-text console on the diagnostics link, for a person with
//! picocom or minicom: a prompt, commands answered in readable lines, each
//! answer ending in `Done` or `Error <code> <reason>` (as TI's mmWave CLI).

use std::fmt::Write as _;

use diag_proto::{Health, LogRequest, ParamError, ParamValue};

use crate::status::{LATENCY_BINS, latency_bin_edges_us};

use super::answers;
use super::params::Params;
use super::state::LinkState;

pub const PROMPT: &str = "radar:/> ";

pub const HELP: &str = "\
commands (a line ends with Enter; Backspace edits):
  help                 this list
  version              radard, kernel module, FPGA and protocol versions, boot slot, uptime
  status               health, frames, rate, misses, drops, latency, newest detections
  stats                latency percentiles and histogram
  log [N]              the newest N events (default 10)
  time                 the frames' clock: source, quality and bound, offset, frequency
  get [NAME]           one parameter, or all with type, range and unit
  set NAME VALUE       change a parameter (on/off, an integer or a real like 1e-4)
the same link also carries radarctl's binary frames (postcard-rpc, COBS);
no mode switch is needed: a line of printable text is a command, a frame
(second byte 0x80 or above, ended by a 0 byte) is a request.";

/// The answer to one line, starting on a new line, ending with Done/Error.
pub fn answer(core: &mut LinkState<'_>, line: &str) -> String {
    let mut out = String::from("\r\n");
    let mut words = line.split_whitespace();
    let Some(cmd) = words.next() else {
        // An empty line just shows the prompt again.
        out.clear();
        out.push_str("\r\n");
        return out;
    };
    let args: Vec<&str> = words.collect();
    let result = match cmd {
        "help" | "?" => {
            out.push_str(HELP);
            out.push('\n');
            Ok(())
        }
        "version" | "id" => version(core, &mut out),
        "status" => status(core, &mut out),
        "stats" => stats(core, &mut out),
        "log" => log(core, &args, &mut out),
        "time" | "clock" => {
            let _ = writeln!(out, "time {}", answers::time(&core.board, &core.info));
            Ok(())
        }
        "get" | "params" => get(core, &args, &mut out),
        "set" => set(core, &args, &mut out),
        _ => Err(format!("unknown command {cmd:?} (help lists them)")),
    };
    match result {
        Ok(()) => out.push_str("Done\n"),
        Err(e) => {
            let _ = writeln!(out, "Error -1 {e}");
        }
    }
    // Serial terminals want CR LF.
    out.replace("\r\n", "\n").replace('\n', "\r\n")
}

fn version(core: &mut LinkState<'_>, out: &mut String) -> Result<(), String> {
    let id = answers::identity(&core.board, &core.info);
    let _ = writeln!(out, "radard {}  protocol {}", id.radard, id.protocol);
    let _ = writeln!(out, "kernel module {}  FPGA {}", id.kmod, id.fpga);
    let _ = writeln!(
        out,
        "source {}  backend {}  boot slot {}",
        id.source, id.backend, id.boot_slot
    );
    let _ = writeln!(out, "uptime {:.1} s", id.uptime_ms as f64 / 1e3);
    Ok(())
}

fn health_name(h: Health) -> &'static str {
    match h {
        Health::Starting => "starting",
        Health::Healthy => "healthy",
        Health::Degraded => "DEGRADED",
        Health::Failed => "FAILED",
    }
}

fn status(core: &mut LinkState<'_>, out: &mut String) -> Result<(), String> {
    let s = core.status();
    let _ = writeln!(
        out,
        "health {} ({})",
        health_name(s.health),
        s.health_reason
    );
    let _ = writeln!(
        out,
        "frames {}  rate {:.1} Hz  deadline misses {}  uptime {:.1} s",
        s.frames,
        s.frame_rate_hz,
        s.deadline_misses,
        s.uptime_ms as f64 / 1e3
    );
    let drops: Vec<String> = s
        .drops
        .iter()
        .map(|d| format!("{} {}", d.reason, d.count))
        .collect();
    let _ = writeln!(out, "drops {}", drops.join(", "));
    let _ = writeln!(
        out,
        "latency last {:.3} ms  max {:.3} ms  loop cpu {:.1} %",
        s.latency_last_us / 1e3,
        s.latency_max_us / 1e3,
        s.loop_cpu_pct
    );
    let _ = writeln!(out, "time {}", answers::time(&core.board, &core.info));
    let _ = writeln!(out, "detections {}", s.detections_last);
    for d in s.detections.iter() {
        let _ = writeln!(
            out,
            "  {:7.2} m  {:+7.2} m/s  {:+6.1} deg  {:5.1} dB",
            d.range_m, d.velocity_mps, d.azimuth_deg, d.snr_db
        );
    }
    for k in s.sinks.iter() {
        let _ = writeln!(
            out,
            "sink {}: written {} failed {}{}",
            k.name,
            k.written,
            k.failed,
            if k.enabled { "" } else { " DOWN (degraded)" }
        );
    }
    match &s.gpu {
        Some(g) => {
            let _ = writeln!(out, "gpu {g}");
        }
        None => {
            let _ = writeln!(out, "gpu telemetry n/a");
        }
    }
    Ok(())
}

fn stats(core: &mut LinkState<'_>, out: &mut String) -> Result<(), String> {
    let snap = core.snapshot();
    let s = answers::stats(&snap, &core.info);
    let _ = writeln!(
        out,
        "frames {}  deadline misses {}{}",
        s.frames,
        s.deadline_misses,
        s.deadline_us
            .map_or(String::new(), |d| format!(" (deadline {:.3} ms)", d / 1e3))
    );
    let _ = writeln!(
        out,
        "latency ms: p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        s.latency_p50_us / 1e3,
        s.latency_p99_us / 1e3,
        s.latency_p999_us / 1e3,
        s.latency_max_us / 1e3
    );
    let edges = latency_bin_edges_us();
    let peak = snap.latency_hist.iter().copied().max().unwrap_or(0).max(1);
    for (i, &c) in snap.latency_hist.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let upper = if i + 1 < LATENCY_BINS {
            format!("{:>9.1}", edges[i + 1])
        } else {
            "      inf".to_string()
        };
        let bar = "#".repeat(((c * 40).div_ceil(peak)) as usize);
        let _ = writeln!(out, "  < {upper} us {c:>8} {bar}");
    }
    Ok(())
}

fn log(core: &mut LinkState<'_>, args: &[&str], out: &mut String) -> Result<(), String> {
    let n: u64 = match args.first() {
        None => 10,
        Some(a) => a
            .parse()
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| format!("log takes a count of 1 .. 100, not {a:?}"))?,
    };
    let mut from = core.board.events_cursor().saturating_sub(n);
    let mut shown = 0;
    while shown < n {
        let page = core.log_page(LogRequest { from, max: 8 });
        if page.events.is_empty() {
            break;
        }
        for e in page.events.iter() {
            let _ = writeln!(
                out,
                "[{:>10.3} s] #{} {:?}: {}",
                e.uptime_ms as f64 / 1e3,
                e.id,
                e.kind,
                e.text
            );
            shown += 1;
        }
        from = page.next;
    }
    if shown == 0 {
        let _ = writeln!(out, "no events");
    }
    Ok(())
}

fn get(core: &mut LinkState<'_>, args: &[&str], out: &mut String) -> Result<(), String> {
    let names: Vec<&str> = match args.first() {
        Some(n) => vec![n],
        None => Params::names().to_vec(),
    };
    for name in names {
        let p = core
            .params
            .info(name)
            .ok_or_else(|| format!("unknown parameter {name:?} (get lists them)"))?;
        let _ = writeln!(
            out,
            "{} = {}  ({:?}, {} .. {}{}{})  {}",
            p.name,
            p.value,
            p.value.kind(),
            p.min,
            p.max,
            // "1": dimensionless (a probability), as radarctl shows it.
            if p.unit.is_empty() || p.unit.as_str() == "1" {
                String::new()
            } else {
                format!(" {}", p.unit)
            },
            if p.writable { "" } else { ", read-only" },
            p.help
        );
    }
    Ok(())
}

fn set(core: &mut LinkState<'_>, args: &[&str], out: &mut String) -> Result<(), String> {
    let [name, value] = args else {
        return Err("usage: set NAME VALUE".into());
    };
    let v: ParamValue =
        ParamValue::parse_text(value).ok_or_else(|| format!("cannot read {value:?} as a value"))?;
    let applied = core.set_param(name, v).map_err(|e| match e {
        ParamError::Unknown => format!("{} (get lists them)", e.describe(name)),
        _ => e.describe(name).to_string(),
    })?;
    let _ = writeln!(
        out,
        "{} = {} (applied at frame {})",
        applied.param.name, applied.param.value, applied.at_frame
    );
    Ok(())
}
