//! The answers of the diagnostics link (identity, status, statistics,
//! telemetry, log events, the power map's pieces), built from the loop's
//! lock-free status board and nothing else of the loop's.

use std::time::Instant;

use diag_proto::{
    DetectionSummary, DropCount, EventKind as WireKind, GpuTelemetry, Health, HistogramBin,
    Identity, List, LogEvent, Note, PIECE_CELLS, Piece, SinkStatus, SnapshotDetection,
    SnapshotError, SnapshotInfo, Stats, Status, Telemetry, Text, TimeQuality, TimeStatus,
};

use crate::status::{
    DropReason, Event, EventKind, HealthState, LATENCY_BINS, PowerMapSnapshot, SourceFault,
    StatusBoard, StatusSnapshot, latency_bin_edges_us,
};

use super::params::describe_change;

/// What the server knows of the unit besides the board (set at start-up).
#[derive(Clone, Debug, Default)]
pub struct UnitInfo {
    pub kmod: String,
    pub fpga: String,
    pub boot_slot: String,
    pub source: String,
    pub backend: String,
    /// The frame period (the deadline), when frames are paced.
    pub frame_period_ns: Option<u64>,
    /// Names of the board's sinks, by index.
    pub sink_names: Vec<String>,
    /// The card's PTP clock device read for the frames' time (None: none).
    pub time_clock: Option<String>,
}

/// GPU telemetry, when something reads it.
pub type GpuReader = Box<dyn Fn() -> Option<GpuTelemetry> + Send>;

/// Judges health from how the counters move between two looks.
pub struct HealthJudge {
    last: Option<(Instant, StatusSnapshot)>,
    verdict: (Health, String),
}

impl Default for HealthJudge {
    fn default() -> Self {
        HealthJudge {
            last: None,
            verdict: (Health::Starting, "no frame yet".into()),
        }
    }
}

impl HealthJudge {
    /// Updates the verdict from a fresh snapshot (at most every 500 ms, so
    /// "recent" means the last half second or more).
    pub fn judge(&mut self, s: &StatusSnapshot, now: Instant) -> (Health, String) {
        let Some((t, prev)) = &self.last else {
            self.last = Some((now, *s));
            self.verdict = first_verdict(s);
            return self.verdict.clone();
        };
        if now.duration_since(*t).as_millis() < 500 {
            return self.verdict.clone();
        }
        let secs = now.duration_since(*t).as_secs_f64();
        self.verdict = if s.frames_processed == 0 {
            (Health::Starting, "no frame yet".into())
        } else if s.frames_processed == prev.frames_processed {
            (
                Health::Failed,
                format!("no frame processed in the last {secs:.1} s"),
            )
        } else if s.deadline_misses > prev.deadline_misses {
            (
                Health::Degraded,
                format!(
                    "{} deadline misses in {secs:.1} s",
                    s.deadline_misses - prev.deadline_misses
                ),
            )
        } else if s.dropped_total() > prev.dropped_total() {
            (
                Health::Degraded,
                format!(
                    "{} frames dropped in {secs:.1} s",
                    s.dropped_total() - prev.dropped_total()
                ),
            )
        } else if s.health() == HealthState::WriteFailed {
            (
                Health::Degraded,
                "the boot-health verdict could not be written".into(),
            )
        } else {
            (
                Health::Healthy,
                format!("{} frames in a row on time", s.consecutive_good),
            )
        };
        self.last = Some((now, *s));
        self.verdict.clone()
    }
}

fn first_verdict(s: &StatusSnapshot) -> (Health, String) {
    if s.frames_processed == 0 {
        (Health::Starting, "no frame yet".into())
    } else {
        (
            Health::Healthy,
            format!("{} frames processed", s.frames_processed),
        )
    }
}

pub fn loop_cpu_pct(s: &StatusSnapshot, info: &UnitInfo) -> f32 {
    let period = info
        .frame_period_ns
        .map(|p| p as f64)
        .or_else(|| (s.rate_hz > 0.0).then(|| 1e9 / s.rate_hz))
        .unwrap_or(0.0);
    if period > 0.0 {
        (s.loop_cpu_per_frame_ns as f64 / period * 100.0) as f32
    } else {
        0.0
    }
}

pub fn identity(board: &StatusBoard, info: &UnitInfo) -> Identity {
    Identity {
        radard: Text::truncate_from(env!("CARGO_PKG_VERSION")),
        kmod: Text::truncate_from(&info.kmod),
        fpga: Text::truncate_from(&info.fpga),
        protocol: diag_proto::PROTOCOL_VERSION,
        boot_slot: Text::truncate_from(&info.boot_slot),
        uptime_ms: board.uptime_ns() / 1_000_000,
        source: Text::truncate_from(&info.source),
        backend: Text::truncate_from(&info.backend),
    }
}

pub fn status(
    s: &StatusSnapshot,
    board: &StatusBoard,
    info: &UnitInfo,
    health: (Health, String),
    gpu: Option<GpuTelemetry>,
) -> Status {
    let mut drops = List::new();
    for r in DropReason::ALL {
        drops.push(DropCount {
            reason: Text::truncate_from(r.name()),
            count: s.dropped(r),
        });
    }
    let mut dets = List::new();
    let n = (s.latest.count as usize).min(s.latest.detections.len());
    for d in &s.latest.detections[..n] {
        if !dets.push(DetectionSummary {
            range_m: d.range_m,
            velocity_mps: d.velocity_mps,
            azimuth_deg: d.azimuth_deg,
            snr_db: d.snr_db,
        }) {
            break;
        }
    }
    let mut sinks = List::new();
    for (i, c) in s.sinks.iter().enumerate().take(s.sink_count as usize) {
        let name = info
            .sink_names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("sink{i}"));
        sinks.push(SinkStatus {
            name: Text::truncate_from(&name),
            // A sink that could not be created (the unit runs degraded).
            enabled: c.down == 0,
            written: c.sent,
            failed: c.errors + c.queue_full,
        });
    }
    Status {
        uptime_ms: board.uptime_ns() / 1_000_000,
        frames: s.frames_processed,
        frame_rate_hz: s.rate_hz as f32,
        deadline_misses: s.deadline_misses,
        drops,
        health: health.0,
        health_reason: Note::truncate_from(&health.1),
        latency_last_us: s.latest.latency_ns as f32 / 1e3,
        latency_max_us: s.latency_max_ns as f32 / 1e3,
        loop_cpu_pct: loop_cpu_pct(s, info),
        detections_last: s.latest.count,
        detections: dets,
        sinks,
        gpu,
    }
}

pub fn stats(s: &StatusSnapshot, info: &UnitInfo) -> Stats {
    let edges = latency_bin_edges_us();
    let mut histogram = List::new();
    for i in 0..LATENCY_BINS - 1 {
        histogram.push(HistogramBin {
            upper_us: edges[i + 1] as f32,
            count: s.latency_hist[i],
        });
    }
    let q = |p| s.latency_quantile_us(p).unwrap_or(0.0) as f32;
    Stats {
        frames: s.frames_processed,
        deadline_misses: s.deadline_misses,
        deadline_us: info.frame_period_ns.map(|p| p as f32 / 1e3),
        latency_p50_us: q(0.5),
        latency_p99_us: q(0.99),
        latency_p999_us: q(0.999),
        latency_max_us: s.latency_max_ns as f32 / 1e3,
        overflow: s.latency_hist[LATENCY_BINS - 1],
        histogram,
        loop_cpu_pct: loop_cpu_pct(s, info),
    }
}

pub fn telemetry(
    s: &StatusSnapshot,
    board: &StatusBoard,
    info: &UnitInfo,
    gpu: Option<GpuTelemetry>,
) -> Telemetry {
    Telemetry {
        uptime_ms: board.uptime_ns() / 1_000_000,
        frame_rate_hz: s.rate_hz as f32,
        loop_cpu_pct: loop_cpu_pct(s, info),
        gpu,
    }
}

/// The frames' time (`radar/time`, the console's `time`): the clock
/// thread's last judgement on the board.
pub fn time(board: &StatusBoard, info: &UnitInfo) -> TimeStatus {
    use crate::timekeeping::Quality;
    let t = board.time().unwrap_or_default();
    TimeStatus {
        source: Text::truncate_from(t.source().name()),
        clock: Text::truncate_from(info.time_clock.as_deref().unwrap_or("")),
        quality: match t.quality() {
            Quality::Unknown => TimeQuality::Unknown,
            Quality::FreeRunning => TimeQuality::FreeRunning,
            Quality::Holdover => TimeQuality::Holdover,
            Quality::Locked => TimeQuality::Locked,
        },
        bound_ns: t.bound(),
        offset_ns: t.offset(),
        drift_ppb: t.drift(),
        utc_offset_s: t
            .utc_offset_s
            .clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16,
        system_synchronised: match t.system_synchronised {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        },
        card_steps: t.card_steps.min(u64::from(u32::MAX)) as u32,
        system_steps: t.system_steps.min(u64::from(u32::MAX)) as u32,
        read_errors: t.read_errors.min(u64::from(u32::MAX)) as u32,
        quality_for_ms: board.uptime_ns().saturating_sub(t.quality_since_ns) / 1_000_000,
    }
}

/// An event of the board as the log shows it.
pub fn log_event(id: u64, e: &Event) -> LogEvent {
    let (kind, text) = match EventKind::from_u32(e.kind) {
        Some(EventKind::Started) => (
            WireKind::Startup,
            if e.a == 0 {
                "radard started, frames free running".to_string()
            } else {
                format!("radard started, frame period {:.3} ms", e.a as f64 / 1e6)
            },
        ),
        Some(EventKind::FramesFlowing) => (
            WireKind::Startup,
            format!("frames flowing (first sequence {})", e.a),
        ),
        Some(EventKind::DeadlineMiss) => (
            WireKind::DeadlineMiss,
            format!(
                "frame {} missed its deadline by {:.3} ms",
                e.a,
                e.b as f64 / 1e6
            ),
        ),
        Some(EventKind::Drop) => (
            WireKind::Drop,
            format!(
                "frame {} dropped ({})",
                e.a,
                DropReason::ALL
                    .get(e.b as usize)
                    .map_or("unknown reason", |r| r.name())
            ),
        ),
        Some(EventKind::SourceFault) => (
            WireKind::Fault,
            format!(
                "source {} after frame {}",
                SourceFault::from_u64(e.b).map_or("fault", SourceFault::name),
                e.a
            ),
        ),
        Some(EventKind::BackendError) => (
            WireKind::Fault,
            format!("processing chain failed on frame {}", e.a),
        ),
        Some(EventKind::SinkError) => (
            WireKind::Fault,
            format!("sink {} failed ({} errors so far)", e.a, e.b),
        ),
        Some(EventKind::HealthGood) => (
            WireKind::Health,
            format!("boot marked good after {} good frames (frame {})", e.a, e.b),
        ),
        Some(EventKind::ParameterChange) => (WireKind::ParamChange, describe_change(e.a, e.b)),
        Some(EventKind::Stop) => (
            WireKind::Other,
            format!("loop stopped after {} frames", e.a),
        ),
        Some(EventKind::SinkDown) => (
            WireKind::Fault,
            format!(
                "sink {} could not be created: running degraded, retrying",
                e.a
            ),
        ),
        Some(EventKind::SinkUp) => (
            WireKind::Other,
            format!("sink {} created after {} attempts", e.a, e.b),
        ),
        // The time events are "other" on the wire: a kind of their own
        // would change the log's schema for every client.
        Some(EventKind::ClockStep) => (
            WireKind::Other,
            format!(
                "{} stepped by {}",
                if e.b == crate::timekeeping::STEP_SYSTEM {
                    "the system clock"
                } else {
                    "the frames' clock"
                },
                crate::timekeeping::ns_text(i128::from(e.a as i64))
            ),
        ),
        Some(EventKind::TimeQuality) => (
            WireKind::Other,
            match crate::timekeeping::Quality::from_u64(e.a) {
                q if e.b == crate::timekeeping::NO_BOUND => format!("time {}", q.name()),
                q => format!(
                    "time {} within {}",
                    q.name(),
                    crate::timekeeping::ns_text(i128::from(e.b))
                ),
            },
        ),
        Some(EventKind::FrameTimeHeld) => (
            WireKind::Other,
            format!(
                "frame {}: its clock stepped back; held {} after the previous frame",
                e.a,
                crate::timekeeping::ns_text(i128::from(e.b))
            ),
        ),
        None => (
            WireKind::Other,
            format!("event {} ({:#x}, {:#x})", e.kind, e.a, e.b),
        ),
    };
    LogEvent {
        id,
        uptime_ms: e.time_ns / 1_000_000,
        kind,
        text: Text::truncate_from(&text),
    }
}

/// A power map held by the server while a client fetches its pieces.
pub struct HeldMap {
    pub info: SnapshotInfo,
    pub cells: Vec<u8>,
}

pub fn hold_map(m: &PowerMapSnapshot) -> HeldMap {
    let rows = (m.rows as usize).min(m.db.len());
    let cols = (m.cols as usize).min(m.range_m.len());
    let mut lo = f32::INFINITY;
    let mut hi = f32::NEG_INFINITY;
    for row in &m.db[..rows] {
        for &v in &row[..cols] {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    if !lo.is_finite() {
        lo = 0.0;
        hi = 1.0;
    }
    let floor = lo.floor();
    let step = ((hi - floor) / 255.0).max(0.01);
    let mut cells = Vec::with_capacity(rows * cols);
    for row in &m.db[..rows] {
        for &v in &row[..cols] {
            let q = if v.is_finite() {
                ((v - floor) / step).round().clamp(0.0, 255.0)
            } else {
                0.0
            };
            cells.push(q as u8);
        }
    }
    let step_of = |a: &[f32]| if a.len() > 1 { a[1] - a[0] } else { 0.0 };
    let mut detections = List::new();
    let n = (m.detection_count as usize).min(m.detections.len());
    for d in &m.detections[..n] {
        detections.push(SnapshotDetection {
            range_m: d.range_m,
            velocity_mps: d.velocity_mps,
            azimuth_deg: d.azimuth_deg,
            snr_db: d.snr_db,
        });
    }
    let listed = detections.len() as u32;
    HeldMap {
        info: SnapshotInfo {
            generation: m.generation,
            frame: m.sequence,
            doppler_bins: rows as u16,
            range_bins: cols as u16,
            range_first_m: m.range_m.first().copied().unwrap_or(0.0),
            range_step_m: step_of(&m.range_m[..cols]),
            velocity_first_mps: m.velocity_mps.first().copied().unwrap_or(0.0),
            velocity_step_mps: step_of(&m.velocity_mps[..rows]),
            db_floor: floor,
            db_step: step,
            pieces: cells.len().div_ceil(PIECE_CELLS) as u16,
            detections,
            detections_more: (m.detection_count + m.detection_cut).saturating_sub(listed),
        },
        cells,
    }
}

pub fn piece(held: &HeldMap, generation: u64, index: u16) -> Result<Piece, SnapshotError> {
    if generation != held.info.generation {
        return Err(SnapshotError::Gone);
    }
    let start = usize::from(index) * PIECE_CELLS;
    if start >= held.cells.len() {
        return Err(SnapshotError::BadIndex);
    }
    let end = (start + PIECE_CELLS).min(held.cells.len());
    let mut cells = List::new();
    for &c in &held.cells[start..end] {
        cells.push(c);
    }
    Ok(Piece {
        generation,
        index,
        cells,
    })
}
