//! Detection sinks: where each frame's detections go (docs/detections-format.md).
//!
//! The loop writes every processed frame's detections once into a
//! [`DetectionFeed`] (`feed`), a bounded lock-free broadcast ring of
//! fixed-size slots allocated at start-up. Each file or network sink has
//! its own normal-priority thread that reads the ring with its own cursor
//! and writes; one that falls more than the ring behind loses the oldest
//! frames, counted as `queue_full` for that sink. So a slow or failing sink
//! never stalls the loop, and the loop's work does not grow with the number
//! of sinks.
//!
//! The `fpga` sink is the exception: the FPGA's transmit channel belongs to
//! the frame source, which only the loop thread may use, so the loop encodes
//! the detections record ([`detections_record::encode`]) into a
//! preallocated buffer and submits it (a copy into a transmit slot and one
//! non-blocking submit; a full transmit ring counts as `queue_full`).
//!
//! A file or network sink that cannot be created at start (no route to its
//! destination, a data directory not writable yet) does not stop radard:
//! the unit runs degraded without it, says so (status line, STATUS=, the
//! health verdict, the diagnostics, the summary), and the sink's thread
//! tries again every [`REOPEN_INTERVAL`], counting the frames it could not
//! write as errors. Only a configuration error (a bad key value, checked
//! before anything starts) refuses to run (docs/outputs.md).

pub mod asterix;
pub mod detections_record;
mod feed;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use radar_dsp::detection::DetectionsLine;
use thiserror::Error;

use crate::config::{DEFAULT_MAX_DATAGRAM, SinkConfig};
use crate::status::{EventKind, SinkCounter, StatusBoard};
use asterix::{AsterixSender, AsterixSetup};

pub use feed::{DetectionFeed, FEED_FRAMES, FeedRead, FrameDetections, FrameStamp};
/// Default rotation size of a jsonl sink.
pub const DEFAULT_ROTATE_BYTES: u64 = 64 << 20;
/// Default rotated files kept.
pub const DEFAULT_KEEP: u32 = 4;
/// The largest UDP payload sent (an IPv4 datagram's limit, less headers).
pub const MAX_DATAGRAM: usize = 65_000;
/// How often a sink that could not be created is tried again.
pub const REOPEN_INTERVAL: Duration = Duration::from_secs(1);

/// Why a sink could not be created: the key it was created from, and why.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SinkError {
    #[error("{key}: {reason}")]
    Create { key: String, reason: String },
}

/// Where a threaded sink writes.
pub enum SinkTarget {
    Jsonl(JsonlFile),
    Udp(UdpSocket),
    Asterix(AsterixSender),
}

/// A jsonl file with size-based rotation.
pub struct JsonlFile {
    path: PathBuf,
    file: File,
    written: u64,
    rotate_bytes: u64,
    keep: u32,
}

impl JsonlFile {
    fn open(path: &Path, key: &str, rotate_bytes: u64, keep: u32) -> Result<Self, SinkError> {
        let create = |reason: String| SinkError::Create {
            key: key.to_string(),
            reason,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                create(format!(
                    "{}: cannot create the directory: {e}",
                    dir.display()
                ))
            })?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| create(format!("{}: {e}", path.display())))?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(JsonlFile {
            path: path.to_path_buf(),
            file,
            written,
            rotate_bytes,
            keep,
        })
    }

    fn rotated(&self, k: u32) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{k}"));
        PathBuf::from(p)
    }

    /// Moves path -> path.1 -> ... -> path.K (the oldest goes) and starts a
    /// new file.
    fn rotate(&mut self) -> std::io::Result<()> {
        let _ = std::fs::remove_file(self.rotated(self.keep));
        for k in (1..self.keep).rev() {
            let _ = std::fs::rename(self.rotated(k), self.rotated(k + 1));
        }
        std::fs::rename(&self.path, self.rotated(1))?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.written = 0;
        Ok(())
    }

    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.rotate_bytes > 0
            && self.written > 0
            && self.written + line.len() as u64 > self.rotate_bytes
        {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.written += line.len() as u64;
        Ok(())
    }
}

/// A threaded sink as built at start-up: open, or down with the reason
/// (its thread tries again).
pub struct ThreadedSink {
    pub name: String,
    pub target: Result<SinkTarget, SinkError>,
    opener: SinkOpener,
}

/// A sink as built at start-up.
pub enum Sink {
    /// Written by its own thread from the feed.
    Threaded(ThreadedSink),
    /// The FPGA's transmit channel, submitted by the loop.
    Fpga,
}

/// What a threaded sink is created from, again when it was down.
#[derive(Clone, Debug)]
struct SinkOpener {
    index: usize,
    config: SinkConfig,
    simulated: bool,
}

impl SinkOpener {
    fn open(&self) -> Result<SinkTarget, SinkError> {
        let key = |k: &str| format!("sink[{}].{k}", self.index);
        match &self.config {
            SinkConfig::Jsonl {
                path,
                rotate_bytes,
                keep,
            } => Ok(SinkTarget::Jsonl(JsonlFile::open(
                path,
                &key("path"),
                rotate_bytes.unwrap_or(DEFAULT_ROTATE_BYTES),
                keep.unwrap_or(DEFAULT_KEEP),
            )?)),
            SinkConfig::Udp { address: addr } => {
                let create = |reason: String| SinkError::Create {
                    key: key("address"),
                    reason,
                };
                let to = addr
                    .to_socket_addrs()
                    .map_err(|e| create(format!("{addr:?}: {e}")))?
                    .next()
                    .ok_or_else(|| create(format!("{addr:?} resolves to nothing")))?;
                let bind = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
                let sock =
                    UdpSocket::bind(bind).map_err(|e| create(format!("bind {bind}: {e}")))?;
                // Connected, so that a closed port is reported (ECONNREFUSED)
                // and counted as an error.
                sock.connect(to)
                    .map_err(|e| create(format!("{addr:?}: {e}")))?;
                Ok(SinkTarget::Udp(sock))
            }
            SinkConfig::Asterix {
                address,
                sac,
                sic,
                max_datagram,
                multicast_ttl,
                multicast_loop,
            } => AsterixSender::open(&AsterixSetup {
                address: address.clone(),
                sac: *sac,
                sic: *sic,
                max_datagram: max_datagram.unwrap_or(DEFAULT_MAX_DATAGRAM),
                multicast_ttl: *multicast_ttl,
                multicast_loop: *multicast_loop,
                simulated: self.simulated,
            })
            .map(SinkTarget::Asterix)
            .map_err(|reason| SinkError::Create {
                key: key("address"),
                reason,
            }),
            // Not a threaded sink.
            SinkConfig::Fpga => Err(SinkError::Create {
                key: key("kind"),
                reason: "the fpga sink has no thread".into(),
            }),
        }
    }
}

/// A sink's name in logs and the status line.
fn sink_name(s: &SinkConfig) -> String {
    match s {
        SinkConfig::Jsonl { path, .. } => format!("jsonl {}", path.display()),
        SinkConfig::Udp { address } => format!("udp {address}"),
        SinkConfig::Asterix { address, .. } => format!("asterix {address}"),
        SinkConfig::Fpga => "fpga transmit channel".into(),
    }
}

/// Creates the configured sinks (their keys were checked by the
/// configuration). One that cannot be created comes back down, with the
/// key and the reason; its thread tries again. `simulated`: the frames are
/// synthetic (ASTERIX marks its reports so).
pub fn create_sinks(sinks: &[SinkConfig], simulated: bool) -> Vec<Sink> {
    sinks
        .iter()
        .enumerate()
        .map(|(index, s)| {
            if *s == SinkConfig::Fpga {
                return Sink::Fpga;
            }
            let opener = SinkOpener {
                index,
                config: s.clone(),
                simulated,
            };
            Sink::Threaded(ThreadedSink {
                name: sink_name(s),
                target: opener.open(),
                opener,
            })
        })
        .collect()
}

impl Sink {
    pub fn name(&self) -> &str {
        match self {
            Sink::Threaded(t) => &t.name,
            Sink::Fpga => "fpga transmit channel",
        }
    }

    /// Why the sink is down (None: it is up).
    pub fn down_reason(&self) -> Option<&SinkError> {
        match self {
            Sink::Threaded(t) => t.target.as_ref().err(),
            Sink::Fpga => None,
        }
    }
}

/// A sink's writer thread body: reads the feed from `start` and writes
/// until `done` is set and everything published is written (or lost). A
/// sink that is down is tried again every [`REOPEN_INTERVAL`]; the frames
/// that come meanwhile count as its errors.
pub fn run_writer(
    index: usize,
    sink: ThreadedSink,
    feed: &DetectionFeed,
    board: &StatusBoard,
    done: &AtomicBool,
    start: u64,
) {
    let ThreadedSink {
        name,
        target,
        opener,
    } = sink;
    let mut target = target.ok();
    let mut attempts = 1u64;
    let mut next_attempt = Instant::now() + REOPEN_INTERVAL;
    let mut cursor = start;
    let mut rec = FrameDetections::with_capacity(feed.max_detections);
    let mut line = Vec::with_capacity(64 << 10);
    loop {
        let finished = done.load(Ordering::Acquire);
        if target.is_none() && !finished && Instant::now() >= next_attempt {
            attempts += 1;
            next_attempt = Instant::now() + REOPEN_INTERVAL;
            if let Ok(t) = opener.open() {
                target = Some(t);
                board.sink_set(index, SinkCounter::Down, 0);
                board.post(EventKind::SinkUp, index as u64, attempts);
                eprintln!("radard: sink[{index}]: {name}: created after {attempts} attempts");
            }
        }
        let mut idle = true;
        loop {
            match feed.read(&mut cursor, &mut rec) {
                FeedRead::Empty => break,
                FeedRead::Lost(n) => board.sink_queue_full(index, n),
                FeedRead::Copied => {
                    idle = false;
                    line.clear();
                    let Some(target) = target.as_mut() else {
                        // Down: this frame is not written.
                        board.sink_error(index);
                        continue;
                    };
                    let result = match target {
                        SinkTarget::Jsonl(f) => {
                            line_of(&rec, rec.detections.len(), &mut line);
                            f.write_line(&line)
                        }
                        SinkTarget::Udp(sock) => {
                            // One datagram per frame: detections that do not
                            // fit are cut.
                            let mut n = rec.detections.len();
                            line_of(&rec, n, &mut line);
                            while line.len() > MAX_DATAGRAM && n > 0 {
                                n = n * MAX_DATAGRAM / line.len();
                                line.clear();
                                line_of(&rec, n, &mut line);
                            }
                            sock.send(&line).map(|_| ())
                        }
                        SinkTarget::Asterix(tx) => {
                            let s = tx.send_frame(&rec);
                            board.sink_add(index, SinkCounter::Datagrams, s.datagrams);
                            board.sink_add(index, SinkCounter::Records, s.records);
                            board.sink_add(index, SinkCounter::Clamped, s.clamped);
                            if s.datagrams + s.send_errors > 1 {
                                board.sink_add(index, SinkCounter::SplitFrames, 1);
                            }
                            if s.send_errors > 0 {
                                board.sink_add(index, SinkCounter::SendErrors, s.send_errors);
                                Err(std::io::Error::other("a datagram was not sent"))
                            } else {
                                Ok(())
                            }
                        }
                    };
                    match result {
                        Ok(()) => board.sink_sent(index, 1),
                        Err(_) => {
                            let errors = board.sink_error(index);
                            // The first error and then every power of two.
                            if errors.is_power_of_two() {
                                board.post(EventKind::SinkError, index as u64, errors);
                            }
                        }
                    }
                }
            }
        }
        if finished && cursor >= feed.head() {
            return;
        }
        if idle {
            // A frame's line goes out within about a millisecond of its
            // detections (docs/detections-format.md: a frame's time plus
            // its latency is the wall clock when its line is written).
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn line_of(rec: &FrameDetections, n: usize, out: &mut Vec<u8>) {
    let n = n.min(rec.detections.len());
    DetectionsLine {
        sequence: rec.sequence,
        timestamp_ns: Some(rec.timestamp_ns),
        utc: Some(radar_dsp::detection::UtcTime {
            ns: rec.utc_ns,
            source: rec.time_source.name(),
            quality: rec.time_quality.name(),
            bound_ns: rec.time_bound_ns,
        }),
        latency_ns: Some(rec.latency_ns),
        detections: &rec.detections[..n],
        cut: rec.cut + (rec.detections.len() - n) as u32,
    }
    .write_to(out);
}

/// A detection whose fields all differ with `i`, for the sinks' tests.
#[cfg(test)]
pub(crate) fn test_detection(i: u32) -> radar_dsp::Detection {
    radar_dsp::Detection {
        range_bin: i,
        doppler_bin: 2 * i,
        range_m: i as f32 * 0.5,
        velocity_mps: -(i as f32),
        azimuth_deg: 3.0,
        snr_db: 20.0,
        power_db: 90.0,
        ..radar_dsp::Detection::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_rotates_keeping_k_files() {
        let dir = std::env::temp_dir().join(format!("radard-rot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("d.jsonl");
        let mut f = JsonlFile::open(&path, "sink[0].path", 100, 2).expect("open");
        for _ in 0..20 {
            f.write_line(&[b'x'; 39]).expect("write");
        }
        assert!(path.exists() && dir.join("d.jsonl.1").exists() && dir.join("d.jsonl.2").exists());
        assert!(!dir.join("d.jsonl.3").exists());
        for p in [path.clone(), dir.join("d.jsonl.1")] {
            assert!(std::fs::metadata(&p).expect("meta").len() <= 100);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The degraded policy: a sink that cannot be created comes back down
    /// with the key and the reason, the others are created.
    #[test]
    fn sinks_that_cannot_be_created_are_down_and_name_the_key() {
        let bad = SinkConfig::Jsonl {
            path: "/proc/no/such/dir/d.jsonl".into(),
            rotate_bytes: None,
            keep: None,
        };
        let sinks = create_sinks(&[SinkConfig::Fpga, bad], false);
        assert!(sinks[0].down_reason().is_none());
        let err = sinks[1].down_reason().expect("down").to_string();
        assert!(
            err.contains("sink[1].path") && err.contains("/proc/no/such/dir"),
            "{err}"
        );
    }

    /// A jsonl sink whose directory cannot be created at start (a file is
    /// in its way) counts the frames it misses as errors, is created once
    /// the way is clear, and writes the frames after that.
    #[test]
    fn a_sink_down_at_start_comes_up_when_it_can() {
        let dir = std::env::temp_dir().join(format!("radard-down-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let blocker = dir.join("data");
        std::fs::write(&blocker, b"not a directory").expect("file");
        let path = blocker.join("d.jsonl");
        let cfg = SinkConfig::Jsonl {
            path: path.clone(),
            rotate_bytes: None,
            keep: None,
        };
        let mut sinks = create_sinks(&[cfg], false);
        assert!(sinks[0].down_reason().is_some());
        let Some(Sink::Threaded(sink)) = sinks.pop() else {
            panic!("a threaded sink");
        };
        let feed = DetectionFeed::new(4);
        let board = StatusBoard::new();
        board.set_sink_count(1);
        board.sink_set(0, SinkCounter::Down, 1);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| run_writer(0, sink, &feed, &board, &done, 0));
            let stamp = |sequence| FrameStamp {
                sequence,
                ..FrameStamp::default()
            };
            feed.push(&stamp(1), &[test_detection(1)], 0);
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(board.snapshot().sinks[0].errors, 1, "missed while down");
            std::fs::remove_file(&blocker).expect("clear the way");
            let t0 = Instant::now();
            while board.snapshot().sinks[0].down != 0 {
                assert!(t0.elapsed() < REOPEN_INTERVAL * 5, "never came up");
                std::thread::sleep(Duration::from_millis(20));
            }
            feed.push(&stamp(2), &[test_detection(2)], 0);
            done.store(true, Ordering::Release);
            writer.join().expect("writer");
        });
        let c = board.snapshot().sinks[0];
        assert_eq!((c.sent, c.errors, c.down), (1, 1, 0));
        let text = std::fs::read_to_string(&path).expect("written");
        assert_eq!(text.lines().count(), 1);
        assert!(text.starts_with("{\"version\":1,\"sequence\":2,"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
