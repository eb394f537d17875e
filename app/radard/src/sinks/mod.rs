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

pub mod detections_record;
mod feed;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use radar_dsp::detection::DetectionsLine;
use thiserror::Error;

use crate::config::SinkConfig;
use crate::status::{EventKind, StatusBoard};

pub use feed::{DetectionFeed, FEED_FRAMES, FeedRead, FrameDetections};
/// Default rotation size of a jsonl sink.
pub const DEFAULT_ROTATE_BYTES: u64 = 64 << 20;
/// Default rotated files kept.
pub const DEFAULT_KEEP: u32 = 4;
/// The largest UDP payload sent (an IPv4 datagram's limit, less headers).
pub const MAX_DATAGRAM: usize = 65_000;

#[derive(Debug, Error)]
pub enum SinkError {
    #[error("config: {key}: {reason}")]
    Create { key: String, reason: String },
}

/// Where a threaded sink writes.
pub enum SinkTarget {
    Jsonl(JsonlFile),
    Udp(UdpSocket),
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

/// A sink as built at start-up.
pub enum Sink {
    /// Written by its own thread from the feed.
    Threaded { name: String, target: SinkTarget },
    /// The FPGA's transmit channel, submitted by the loop.
    Fpga,
}

/// Creates the configured sinks; an error names the key (`sink[i].path`).
pub fn create_sinks(sinks: &[SinkConfig]) -> Result<Vec<Sink>, SinkError> {
    let mut out = Vec::with_capacity(sinks.len());
    for (i, s) in sinks.iter().enumerate() {
        let key = |k: &str| format!("sink[{i}].{k}");
        let sink = match s {
            SinkConfig::Jsonl {
                path,
                rotate_bytes,
                keep,
            } => Sink::Threaded {
                name: format!("jsonl {}", path.display()),
                target: SinkTarget::Jsonl(JsonlFile::open(
                    path,
                    &key("path"),
                    rotate_bytes.unwrap_or(DEFAULT_ROTATE_BYTES),
                    keep.unwrap_or(DEFAULT_KEEP),
                )?),
            },
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
                Sink::Threaded {
                    name: format!("udp {to}"),
                    target: SinkTarget::Udp(sock),
                }
            }
            SinkConfig::Fpga => Sink::Fpga,
        };
        out.push(sink);
    }
    Ok(out)
}

impl Sink {
    pub fn name(&self) -> &str {
        match self {
            Sink::Threaded { name, .. } => name,
            Sink::Fpga => "fpga transmit channel",
        }
    }
}

/// A sink's writer thread body: reads the feed from `start` and writes
/// until `done` is set and everything published is written (or lost).
pub fn run_writer(
    index: usize,
    mut target: SinkTarget,
    feed: &DetectionFeed,
    board: &StatusBoard,
    done: &AtomicBool,
    start: u64,
) {
    let mut cursor = start;
    let mut rec = FrameDetections::with_capacity(feed.max_detections);
    let mut line = Vec::with_capacity(64 << 10);
    loop {
        let finished = done.load(Ordering::Acquire);
        let mut idle = true;
        loop {
            match feed.read(&mut cursor, &mut rec) {
                FeedRead::Empty => break,
                FeedRead::Lost(n) => board.sink_queue_full(index, n),
                FeedRead::Copied => {
                    idle = false;
                    line.clear();
                    let result = match &mut target {
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
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn line_of(rec: &FrameDetections, n: usize, out: &mut Vec<u8>) {
    let n = n.min(rec.detections.len());
    DetectionsLine {
        sequence: rec.sequence,
        timestamp_ns: Some(rec.timestamp_ns),
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

    #[test]
    fn sinks_that_cannot_be_created_name_the_key() {
        let bad = SinkConfig::Jsonl {
            path: "/proc/no/such/dir/d.jsonl".into(),
            rotate_bytes: None,
            keep: None,
        };
        let err = create_sinks(&[SinkConfig::Fpga, bad])
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("sink[1].path") && err.contains("/proc/no/such/dir"),
            "{err}"
        );
    }
}
