//! Readable text of the unit's answers.

use diag_proto::*;

pub fn identity(id: &Identity) {
    println!("radard         {}", id.radard);
    println!("kernel module  {}", id.kmod);
    println!("FPGA           {}", id.fpga);
    println!("protocol       {}", id.protocol);
    println!("boot slot      {}", id.boot_slot);
    println!("source         {}  backend {}", id.source, id.backend);
    println!("uptime         {:.1} s", id.uptime_ms as f64 / 1e3);
}

pub fn health_name(h: Health) -> &'static str {
    match h {
        Health::Starting => "starting",
        Health::Healthy => "healthy",
        Health::Degraded => "DEGRADED",
        Health::Failed => "FAILED",
    }
}

pub fn status(s: &Status) {
    println!("health     {} ({})", health_name(s.health), s.health_reason);
    println!(
        "frames     {}  rate {:.1} Hz  deadline misses {}  uptime {:.1} s",
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
    println!("drops      {}", drops.join(", "));
    println!(
        "latency    last {:.3} ms  max {:.3} ms  loop cpu {:.1} %",
        s.latency_last_us / 1e3,
        s.latency_max_us / 1e3,
        s.loop_cpu_pct
    );
    for k in s.sinks.iter() {
        println!(
            "sink       {}: written {} failed {}{}",
            k.name,
            k.written,
            k.failed,
            // radard could not create it: the unit runs degraded.
            if k.enabled { "" } else { "  DOWN (degraded)" }
        );
    }
    println!("gpu        {}", gpu(s.gpu.as_ref()));
    println!("detections {} in the newest frame", s.detections_last);
    for d in s.detections.iter() {
        println!(
            "  {:7.2} m  {:+7.2} m/s  {:+6.1} deg  {:5.1} dB",
            d.range_m, d.velocity_mps, d.azimuth_deg, d.snr_db
        );
    }
}

/// The frames' clock, or why there is none to show.
pub fn time(t: Option<&TimeStatus>) -> String {
    t.map_or(
        "not reported by this unit (radard before radar/time)".into(),
        |t| t.to_string(),
    )
}

pub fn gpu(g: Option<&GpuTelemetry>) -> String {
    g.map_or("telemetry n/a".into(), |g| g.to_string())
}

/// The histogram's bins from the first to the last non-empty one, as
/// (label, count).
pub fn histogram_rows(s: &Stats) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = Vec::new();
    let mut lower = 0.0f32;
    for b in s.histogram.iter() {
        rows.push((format!("{} .. {}", us(lower), us(b.upper_us)), b.count));
        lower = b.upper_us;
    }
    rows.push((format!(">= {}", us(lower)), s.overflow));
    let first = rows.iter().position(|r| r.1 > 0).unwrap_or(0);
    let last = rows.iter().rposition(|r| r.1 > 0).unwrap_or(0);
    rows[first..=last].to_vec()
}

fn us(v: f32) -> String {
    if v >= 1000.0 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.0} us")
    }
}

pub fn stats(s: &Stats) {
    println!(
        "frames {}  deadline misses {}{}  loop cpu {:.1} %",
        s.frames,
        s.deadline_misses,
        s.deadline_us
            .map_or(String::new(), |d| format!(" (deadline {:.3} ms)", d / 1e3)),
        s.loop_cpu_pct
    );
    println!(
        "latency  p50 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
        s.latency_p50_us / 1e3,
        s.latency_p99_us / 1e3,
        s.latency_p999_us / 1e3,
        s.latency_max_us / 1e3
    );
    let rows = histogram_rows(s);
    let peak = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (label, count) in rows {
        let bar = "█".repeat((count * 50).div_ceil(peak) as usize);
        println!("  {label:>width$} {count:>9} {bar}");
    }
}

pub fn log(events: &[LogEvent]) {
    if events.is_empty() {
        println!("no events");
    }
    for e in events {
        println!(
            "[{:>10.3} s] #{:<5} {:<12} {}",
            e.uptime_ms as f64 / 1e3,
            e.id,
            format!("{:?}", e.kind),
            e.text
        );
    }
}

pub fn params(ps: &[ParamInfo]) {
    let w = ps.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in ps {
        println!(
            "{:<w$} = {:<8} {:<5} {} .. {}{}{}  {}",
            p.name.as_str(),
            p.value.to_string(),
            format!("{:?}", p.value.kind()),
            p.min,
            p.max,
            if p.unit.is_empty() || p.unit.as_str() == "1" {
                String::new()
            } else {
                format!(" {}", p.unit)
            },
            if p.writable { "" } else { "  read-only" },
            p.help
        );
    }
}

pub fn snapshot(s: &crate::Snapshot) {
    let i = &s.info;
    println!(
        "frame {} (map {}): {} Doppler x {} range cells, range {:.2} .. {:.2} m, velocity {:+.2} .. {:+.2} m/s",
        i.frame,
        i.generation,
        i.doppler_bins,
        i.range_bins,
        i.range_first_m,
        i.range_first_m + i.range_step_m * f32::from(i.range_bins.saturating_sub(1)),
        i.velocity_first_mps,
        i.velocity_first_mps + i.velocity_step_mps * f32::from(i.doppler_bins.saturating_sub(1)),
    );
    println!(
        "detections {} (+{} more)",
        i.detections.len(),
        i.detections_more
    );
    for d in i.detections.iter() {
        println!(
            "  {:7.2} m  {:+7.2} m/s  {:+6.1} deg  {:5.1} dB",
            d.range_m, d.velocity_mps, d.azimuth_deg, d.snr_db
        );
    }
}
