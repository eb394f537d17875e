//! The run's summary: what radard prints at exit (`summary: ...` lines,
//! [`Display`](fmt::Display)) and writes as JSON (`--stats-json`,
//! `output.stats_json`; [`Serialize`]). One schema, versioned by
//! [`SUMMARY_VERSION`]; each figure appears once. Percentiles are
//! `radar_stats`'s nearest rank.

use std::fmt;
use std::path::Path;

use radar_stats::Percentiles;
use serde::Serialize;

use crate::config::{Content, RadardConfig, SinkKind};
use crate::error::{RadardError, RunEnd};
use crate::frame_loop::LoopEnd;
use crate::runner::RunReport;
use crate::status::DropReason;
use crate::telemetry;
use crate::threads::ThreadUsage;

/// The summary JSON's schema version (the `version` key).
pub const SUMMARY_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Summary {
    pub version: u32,
    pub source: String,
    pub backend: String,
    pub backend_reason: String,
    /// Chunk-streamed mode in use, the chunk events handed to the backend
    /// and those it refused, and the frames it finished from streamed work.
    pub chunk_streaming: bool,
    pub chunks_streamed: u64,
    pub chunk_errors: u64,
    pub frames_streamed: u64,
    /// GPU-triggered processing ran (docs/processing-chain.md, section 10);
    /// at the stop, the queued frames its cancellation flushed (no frames:
    /// nothing landed for them), or why the GPU did not finish them.
    pub gpu_triggered: bool,
    pub gpu_triggered_flushed: Option<u64>,
    pub gpu_triggered_error: Option<String>,
    pub content: String,
    pub end: String,
    pub policy: String,
    /// Stopped by SIGTERM or SIGINT (exit 0 whatever the quality below).
    pub stopped_by_signal: bool,
    /// The loop ended on an error (exit status 1; `end` says which).
    #[serde(skip)]
    loop_failed: bool,
    /// Frames processed.
    pub frames: u64,
    /// The ledger: produced = processed + dropped by reason.
    pub frames_produced: u64,
    pub dropped: Dropped,
    pub ledger_closed: bool,
    pub deadline_misses: u64,
    /// Misses the source's late delivery explains (docs/requirements.md).
    pub deadline_misses_source_late: u64,
    /// Misses that are the loop's own: `deadline_misses` less those.
    pub deadline_misses_loop: u64,
    pub source_timeouts: u64,
    pub payload_errors: u64,
    pub sequence_errors: u64,
    /// Frame lines the console's queue could not take.
    pub log_records_lost: u64,
    pub frame_period_ms: Option<f64>,
    /// Capture timestamp to detections published.
    pub latency_ms: LatencyMs,
    /// Frame event to detections published.
    pub processing_ms: LatencyMs,
    /// Loop thread CPU time per frame (us) over the run.
    pub loop_cpu_us_per_frame: Option<f64>,
    pub rss_warm_kib: Option<u64>,
    pub rss_end_kib: Option<u64>,
    pub health: String,
    pub watchdog_pings: u64,
    pub sinks: Vec<SinkSummary>,
    pub source_counters: Option<SourceCounters>,
    /// The last GPU telemetry sample (None: off, or none taken).
    pub telemetry: Option<telemetry::Sample>,
    /// The frames' time at the end (docs/detections-format.md, "Time").
    pub time: TimeSummary,
    /// Each thread's CPU time, wait for a CPU and preemptions over the run.
    pub threads: Vec<ThreadUsage>,
    /// CPU time the hypervisor took from this machine during the run (ms,
    /// all CPUs; None where /proc/stat has no steal column).
    pub steal_ms: Option<f64>,
    /// The simulator's chunk cadence (None: another source).
    pub simulator_pacing: Option<SimulatorPacing>,
}

/// The frames' time at the end of a run.
#[derive(Debug, Serialize)]
pub struct TimeSummary {
    /// Where the frames' UTC came from (`utc_source`) and its device.
    pub source: String,
    pub clock: Option<String>,
    /// The last quality and its bound (ns; None: no bound).
    pub quality: String,
    pub bound_ns: Option<u64>,
    /// The card's clock less the system clock less TAI - UTC, and its rate
    /// against the system clock, at the last reading.
    pub offset_ns: Option<i64>,
    pub drift_ppb: Option<i64>,
    pub utc_offset_s: i64,
    pub card_steps: u64,
    pub system_steps: u64,
    /// Frames whose time was held after their predecessor's (a step back).
    pub frames_held: u64,
    /// Looks the clock thread took at the frames' clock (one a second).
    pub readings: u64,
    pub read_errors: u64,
}

/// Frames not processed, by reason.
#[derive(Debug, Serialize)]
pub struct Dropped {
    pub at_source: u64,
    pub late: u64,
    pub short: u64,
    pub crc: u64,
    pub error: u64,
}

/// Nearest-rank percentiles of a latency, in ms (all 0 without samples):
/// over the `samples` last frames the latency log kept; `max` over the
/// whole run.
#[derive(Debug, Default, Serialize)]
pub struct LatencyMs {
    pub samples: usize,
    pub p50: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

#[derive(Debug, Serialize)]
pub struct SinkSummary {
    pub name: String,
    pub sent: u64,
    pub queue_full: u64,
    pub errors: u64,
    /// Why the sink could not be created at start (None: it was).
    pub down_at_start: Option<String>,
    /// Still down at the end.
    pub down: bool,
    /// An asterix sink's datagram counters (docs/asterix.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asterix: Option<AsterixCounters>,
}

/// What an asterix sink sent.
#[derive(Debug, Serialize)]
pub struct AsterixCounters {
    pub datagrams: u64,
    pub records: u64,
    pub split_frames: u64,
    pub send_errors: u64,
    pub clamped: u64,
}

/// The source's own counters (the kernel module's, or the simulator's).
#[derive(Debug, Serialize)]
pub struct SourceCounters {
    pub frames: u64,
    pub chunks: u64,
    pub drops_no_slot: u64,
    pub drops_fault: u64,
    pub short_frames: u64,
    pub crc_errors: u64,
    pub desc_errors: u64,
    pub irqs: u64,
    pub revocations: u64,
    pub event_overflows: u64,
    pub dma_timeouts: u64,
}

#[derive(Debug, Serialize)]
pub struct SimulatorPacing {
    /// Chunks the simulator wrote more than one chunk period late.
    pub chunks_late: u64,
    pub max_lateness_ms: f64,
}

impl From<Option<Percentiles<u64>>> for LatencyMs {
    fn from(p: Option<Percentiles<u64>>) -> Self {
        p.map_or_else(LatencyMs::default, |p| {
            let p = p.map(|ns| ns as f64 / 1e6);
            LatencyMs {
                samples: p.samples,
                p50: p.p50,
                p99: p.p99,
                p99_9: p.p999,
                max: p.max,
            }
        })
    }
}

impl LatencyMs {
    /// The log's percentiles, with the largest latency of the whole run
    /// (`run_max_ns`, which the loop keeps for every frame) as the max:
    /// a frame older than the log still shows there.
    fn of_run(log: Option<Percentiles<u64>>, run_max_ns: u64) -> Self {
        let mut l = LatencyMs::from(log);
        if l.samples > 0 {
            l.max = l.max.max(run_max_ns as f64 / 1e6);
        }
        l
    }
}

/// The summary's line for one latency of a run that processed `frames`.
/// The log keeps the last frames only: the line says so when it did not
/// hold them all.
fn latency_line(what: &str, l: &LatencyMs, frames: u64, period_ms: Option<f64>) -> String {
    let counted = if (l.samples as u64) < frames {
        format!("percentiles of the last {} of {frames} frames", l.samples)
    } else {
        format!("{} frames", l.samples)
    };
    format!(
        "summary: latency ms ({what}, {counted}): p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}{}",
        l.p50,
        l.p99,
        l.p99_9,
        l.max,
        period_ms.map_or(String::new(), |p| format!("  (period {p:.3})"))
    )
}

impl Summary {
    /// The summary of a run of `cfg`.
    pub fn new(cfg: &RadardConfig, r: &RunReport) -> Self {
        let snap = &r.snapshot;
        let f = &r.figures;
        Summary {
            version: SUMMARY_VERSION,
            source: r.source.clone(),
            backend: r.backend.0.clone(),
            backend_reason: r.backend.1.clone(),
            chunk_streaming: r.chunk_streaming,
            chunks_streamed: snap.chunks_streamed,
            chunk_errors: snap.chunk_errors,
            frames_streamed: r.frames_streamed,
            gpu_triggered: r.gpu_triggered,
            gpu_triggered_flushed: r
                .gpu_triggered_end
                .as_ref()
                .and_then(|e| e.as_ref().ok().copied()),
            gpu_triggered_error: r
                .gpu_triggered_end
                .as_ref()
                .and_then(|e| e.as_ref().err().cloned()),
            content: format!("{:?}", cfg.source.content),
            end: match &r.result {
                Ok(LoopEnd::FrameLimit) => "frame limit reached".to_string(),
                Ok(LoopEnd::StopRequested) => "stopped by signal".to_string(),
                Err(e) => format!("error: {e}"),
            },
            policy: format!("{:?}", cfg.frame_loop.policy),
            stopped_by_signal: matches!(r.result, Ok(LoopEnd::StopRequested)),
            loop_failed: r.result.is_err(),
            frames: snap.frames_processed,
            frames_produced: snap.frames_produced,
            dropped: Dropped {
                at_source: snap.dropped(DropReason::AtSource),
                late: snap.dropped(DropReason::Late),
                short: snap.dropped(DropReason::Short),
                crc: snap.dropped(DropReason::Crc),
                error: snap.dropped(DropReason::Error),
            },
            ledger_closed: snap.ledger_closes(),
            deadline_misses: snap.deadline_misses,
            deadline_misses_source_late: snap.deadline_misses_source_late,
            deadline_misses_loop: snap.deadline_misses - snap.deadline_misses_source_late,
            source_timeouts: snap.source_timeouts,
            payload_errors: if cfg.source.content == Content::TestPattern {
                snap.dropped(DropReason::Crc)
            } else {
                0
            },
            sequence_errors: snap.sequence_errors,
            log_records_lost: snap.frame_lines_lost,
            frame_period_ms: cfg.frame_period().map(|p| p.as_secs_f64() * 1e3),
            latency_ms: LatencyMs::of_run(r.latency_ns, snap.latency_max_ns),
            processing_ms: LatencyMs::of_run(r.processing_ns, snap.processing_max_ns),
            loop_cpu_us_per_frame: (f.loop_cpu_frames > 0)
                .then(|| f.loop_cpu_total_ns as f64 / 1e3 / f.loop_cpu_frames as f64),
            rss_warm_kib: f.rss_warm_kib,
            rss_end_kib: r.rss_end_kib,
            health: snap.health().name().to_string(),
            watchdog_pings: f.watchdog_pings,
            sinks: r
                .sink_names
                .iter()
                .zip(&snap.sinks)
                .enumerate()
                .map(|(i, (n, c))| SinkSummary {
                    name: n.clone(),
                    sent: c.sent,
                    queue_full: c.queue_full,
                    errors: c.errors,
                    down_at_start: r.sinks_down_at_start.get(i).cloned().flatten(),
                    down: c.down != 0,
                    asterix: (SinkKind::from_code(c.kind) == Some(SinkKind::Asterix)).then_some(
                        AsterixCounters {
                            datagrams: c.datagrams,
                            records: c.records,
                            split_frames: c.split_frames,
                            send_errors: c.send_errors,
                            clamped: c.clamped,
                        },
                    ),
                })
                .collect(),
            source_counters: r.source_counters.map(|c| SourceCounters {
                frames: c.frames,
                chunks: c.chunks,
                drops_no_slot: c.drops_no_slot,
                drops_fault: c.drops_fault,
                short_frames: c.short_frames,
                crc_errors: c.crc_errors,
                desc_errors: c.desc_errors,
                irqs: c.irqs,
                revocations: c.revocations,
                event_overflows: c.event_overflows,
                dma_timeouts: c.dma_timeouts,
            }),
            telemetry: r.telemetry.clone(),
            time: TimeSummary {
                source: r.time.source().name().to_string(),
                clock: r.time_clock.clone(),
                quality: r.time.quality().name().to_string(),
                bound_ns: r.time.bound(),
                offset_ns: r.time.offset(),
                drift_ppb: r.time.drift(),
                utc_offset_s: r.time.utc_offset_s,
                card_steps: r.time.card_steps,
                system_steps: r.time.system_steps,
                frames_held: r.frames_time_held,
                readings: r.time.generation,
                read_errors: r.time.read_errors,
            },
            threads: r.threads.clone(),
            steal_ms: r.steal_ms,
            simulator_pacing: r.simulator_pacing.map(|(late, max_ns)| SimulatorPacing {
                chunks_late: late,
                max_lateness_ms: max_ns as f64 / 1e6,
            }),
        }
    }

    /// Clean: no payload error, sequence break or deadline miss. A run
    /// stopped by a signal is `Stopped` either way: the stop is not the
    /// run's failure, and its quality is in the figures.
    pub fn run_end(&self) -> RunEnd {
        if self.stopped_by_signal {
            RunEnd::Stopped
        } else if self.quality_clean() {
            RunEnd::Clean
        } else {
            RunEnd::WithErrors
        }
    }

    fn quality_clean(&self) -> bool {
        self.payload_errors == 0 && self.sequence_errors == 0 && self.deadline_misses == 0
    }

    /// Writes the JSON (pretty, one trailing newline) to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), RadardError> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").map_err(|source| RadardError::WriteSummary {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The `summary:` lines, each ending in a newline.
impl fmt::Display for Summary {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self;
        writeln!(out, "summary: {} ({} frames)", s.end, s.frames)?;
        writeln!(
            out,
            "summary: source={} backend={} content={}",
            s.source, s.backend, s.content
        )?;
        writeln!(
            out,
            "summary: chunk_streaming={} chunks_streamed={} chunk_errors={} frames_streamed={}",
            s.chunk_streaming, s.chunks_streamed, s.chunk_errors, s.frames_streamed
        )?;
        if s.gpu_triggered {
            match (&s.gpu_triggered_error, s.gpu_triggered_flushed) {
                (Some(e), _) => writeln!(out, "summary: gpu_triggered=true end: {e}")?,
                (None, n) => writeln!(
                    out,
                    "summary: gpu_triggered=true queued frames flushed at the stop={}",
                    n.unwrap_or(0)
                )?,
            }
        }
        let d = &s.dropped;
        writeln!(
            out,
            "summary: ledger produced={} = processed {} + dropped {} (at_source={} late={} short={} crc={} error={}): {}",
            s.frames_produced,
            s.frames,
            d.at_source + d.late + d.short + d.crc + d.error,
            d.at_source,
            d.late,
            d.short,
            d.crc,
            d.error,
            if s.ledger_closed { "closed" } else { "OPEN" }
        )?;
        writeln!(
            out,
            "summary: policy={} deadline_misses={} (source late {}, loop {}) source_timeouts={} payload_errors={} sequence_errors={} log_lost={}",
            s.policy,
            s.deadline_misses,
            s.deadline_misses_source_late,
            s.deadline_misses_loop,
            s.source_timeouts,
            s.payload_errors,
            s.sequence_errors,
            s.log_records_lost
        )?;
        for (what, l) in [
            ("capture to detections", &s.latency_ms),
            ("event to detections", &s.processing_ms),
        ] {
            writeln!(
                out,
                "{}",
                latency_line(what, l, s.frames, s.frame_period_ms)
            )?;
        }
        let kib = |v: Option<u64>| v.map_or("-".to_string(), |k| format!("{k} KiB"));
        writeln!(
            out,
            "summary: loop_cpu={} rss_warm={} rss_end={} health={} watchdog_pings={}",
            s.loop_cpu_us_per_frame
                .map_or("-".to_string(), |c| format!("{c:.1} us/frame")),
            kib(s.rss_warm_kib),
            kib(s.rss_end_kib),
            s.health,
            s.watchdog_pings
        )?;
        for (i, k) in s.sinks.iter().enumerate() {
            write!(
                out,
                "summary: sink[{i}] {} sent={} queue_full={} errors={}",
                k.name, k.sent, k.queue_full, k.errors
            )?;
            if let Some(a) = &k.asterix {
                write!(
                    out,
                    " datagrams={} records={} split_frames={} send_errors={} clamped={}",
                    a.datagrams, a.records, a.split_frames, a.send_errors, a.clamped
                )?;
            }
            match (&k.down_at_start, k.down) {
                (_, true) => write!(out, " state=DOWN (degraded)")?,
                (Some(_), false) => write!(out, " state=up (down at start)")?,
                (None, false) => {}
            }
            writeln!(out)?;
            if let Some(why) = &k.down_at_start {
                writeln!(
                    out,
                    "summary: sink[{i}] could not be created at start: {why}"
                )?;
            }
        }
        if let Some(c) = &s.source_counters {
            writeln!(
                out,
                "summary: counters frames={} chunks={} drops_no_slot={} drops_fault={} short={} crc_errors={} desc_errors={} irqs={} revocations={} event_overflows={} dma_timeouts={}",
                c.frames,
                c.chunks,
                c.drops_no_slot,
                c.drops_fault,
                c.short_frames,
                c.crc_errors,
                c.desc_errors,
                c.irqs,
                c.revocations,
                c.event_overflows,
                c.dma_timeouts
            )?;
        }
        if let Some(t) = &s.telemetry {
            writeln!(out, "summary: telemetry {t}")?;
        }
        let t = &s.time;
        write!(out, "summary: time {} {}", t.source, t.quality)?;
        if let Some(b) = t.bound_ns {
            write!(
                out,
                " within {}",
                crate::timekeeping::ns_text(i128::from(b))
            )?;
        }
        if let Some(c) = &t.clock {
            write!(out, " ({c})")?;
        }
        writeln!(
            out,
            " card_steps={} system_steps={} frames_held={} read_errors={}",
            t.card_steps, t.system_steps, t.frames_held, t.read_errors
        )?;
        for t in &s.threads {
            writeln!(
                out,
                "summary: thread {} cpu={:.1}ms waited_for_cpu={:.1}ms preempted={} sleeps={}",
                t.name, t.cpu_ms, t.runq_wait_ms, t.involuntary, t.voluntary
            )?;
        }
        if let Some(p) = &s.simulator_pacing {
            writeln!(
                out,
                "summary: simulator chunks_late={} max_lateness={:.3}ms (chunks it wrote more than a chunk period after they were due: frames late from the source)",
                p.chunks_late, p.max_lateness_ms
            )?;
        }
        if let Some(steal) = s.steal_ms {
            writeln!(
                out,
                "summary: steal={steal:.1}ms (CPU time the hypervisor took)"
            )?;
        }
        let quality = if s.quality_clean() {
            "clean".to_string()
        } else {
            format!(
                "{} deadline misses, {} payload errors, {} sequence errors",
                s.deadline_misses, s.payload_errors, s.sequence_errors
            )
        };
        // A loop that failed exits as its error says (RadardError::Loop: 1).
        let (status, why) = match s.run_end() {
            _ if s.loop_failed => (1, "the loop's error"),
            RunEnd::Stopped => (0, "stopped by signal"),
            RunEnd::Clean => (0, "clean run"),
            RunEnd::WithErrors => (3, "frame limit reached with errors"),
        };
        debug_assert!(s.loop_failed || status == s.run_end().exit_code());
        writeln!(
            out,
            "summary: quality {quality}; exit status {status} ({why})"
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The percentiles are the nearest rank of the latencies, in ms: of
    /// 1..=8 ms, p50 is the 4th value (rank ceil(0.5 x 8)), p99 and p99.9
    /// the 8th.
    #[test]
    fn latency_percentiles_are_nearest_rank_in_ms() {
        let ns: Vec<u64> = (1..=8).map(|ms| ms * 1_000_000).collect();
        let l = LatencyMs::from(Percentiles::of_sorted(&ns));
        assert_eq!(
            (l.samples, l.p50, l.p99, l.p99_9, l.max),
            (8, 4.0, 8.0, 8.0, 8.0)
        );
        let none = LatencyMs::from(None);
        assert_eq!((none.samples, none.p50, none.max), (0, 0.0, 0.0));
    }

    /// A run longer than the latency log: the percentiles are the log's,
    /// the max is the run's (a frame the log no longer holds), and the
    /// line says which frames the percentiles cover.
    #[test]
    fn a_run_longer_than_the_log_says_so_and_keeps_its_max() {
        let ns: Vec<u64> = (1..=4).map(|ms| ms * 1_000_000).collect();
        let l = LatencyMs::of_run(Percentiles::of_sorted(&ns), 25_000_000);
        assert_eq!((l.samples, l.p50, l.max), (4, 2.0, 25.0));
        assert_eq!(
            latency_line("event to detections", &l, 10, Some(8.0)),
            "summary: latency ms (event to detections, percentiles of the last 4 of 10 frames): \
             p50 2.000  p99 4.000  p99.9 4.000  max 25.000  (period 8.000)"
        );
        let whole = LatencyMs::of_run(Percentiles::of_sorted(&ns), 4_000_000);
        assert_eq!(
            latency_line("capture to detections", &whole, 4, None),
            "summary: latency ms (capture to detections, 4 frames): \
             p50 2.000  p99 4.000  p99.9 4.000  max 4.000"
        );
        // No frame: nothing to take the run's max from.
        assert_eq!(LatencyMs::of_run(None, 7).max, 0.0);
    }
}
