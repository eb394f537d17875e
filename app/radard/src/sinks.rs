//! Detection sinks: where each frame's detections go (docs/detections-format.md).
//!
//! The loop writes every processed frame's detections once into a
//! [`DetectionFeed`], a bounded lock-free broadcast ring of fixed-size
//! records allocated at start-up. Each file or network sink has its own
//! normal-priority thread that reads the ring with its own cursor and
//! writes; one that falls more than the ring behind loses the oldest
//! records, counted as `queue_full` for that sink. So a slow or failing sink
//! never stalls the loop, and the loop's work does not grow with the number
//! of sinks.
//!
//! The `fpga` sink is the exception: the FPGA's transmit channel belongs to
//! the frame source, which only the loop thread may use, so the loop encodes
//! the record ([`encode_fpga_record`]) into a preallocated buffer and
//! submits it (a copy into a transmit slot and one non-blocking submit; a
//! full transmit ring counts as `queue_full`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::Duration;

use radar_dsp::Detection;
use radar_dsp::detection::DetectionsLine;
use thiserror::Error;

use crate::config::SinkConfig;
use crate::status::{EventKind, StatusBoard};

/// Frames the feed holds (about a second at 8 ms frames).
pub const FEED_FRAMES: usize = 128;
const HEADER_WORDS: usize = 4;
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

/// One frame's detections as a sink reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SinkRecord {
    pub sequence: u64,
    pub timestamp_ns: u64,
    pub latency_ns: u64,
    pub cut: u32,
    pub detections: Vec<Detection>,
}

impl SinkRecord {
    pub fn with_capacity(max_detections: usize) -> Self {
        SinkRecord {
            detections: Vec::with_capacity(max_detections),
            ..SinkRecord::default()
        }
    }
}

/// Words of one detection in the feed (`Detection` is `Pod`: any bits are
/// a valid detection, its size is checked at the struct).
const DET_WORDS: usize = std::mem::size_of::<Detection>() / 8;
const _: () = assert!(std::mem::size_of::<Detection>() == DET_WORDS * 8);

/// The broadcast ring: one writer (the loop), a cursor per reader.
pub struct DetectionFeed {
    max_detections: usize,
    slot_words: usize,
    head: AtomicU64,
    stamps: Box<[AtomicU64]>,
    words: Box<[AtomicU64]>,
}

/// What a read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedRead {
    /// The record was copied out.
    Record,
    /// Nothing new.
    Empty,
    /// This many records were overwritten before they were read (the
    /// cursor moved past them).
    Lost(u64),
}

impl DetectionFeed {
    pub fn new(max_detections: usize) -> Self {
        let slot_words = HEADER_WORDS + DET_WORDS * max_detections;
        DetectionFeed {
            max_detections,
            slot_words,
            head: AtomicU64::new(0),
            stamps: (0..FEED_FRAMES).map(|_| AtomicU64::new(0)).collect(),
            words: (0..FEED_FRAMES * slot_words)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Records published so far (a new reader starts here).
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// The loop's write (single writer). Detections beyond the feed's
    /// capacity are added to the cut.
    pub fn push(
        &self,
        sequence: u64,
        timestamp_ns: u64,
        latency_ns: u64,
        dets: &[Detection],
        cut: u32,
    ) {
        let i = self.head.load(Ordering::Relaxed);
        let slot = (i % FEED_FRAMES as u64) as usize;
        let n = dets.len().min(self.max_detections);
        let cut = cut.saturating_add((dets.len() - n) as u32);
        self.stamps[slot].store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let w = &self.words[slot * self.slot_words..(slot + 1) * self.slot_words];
        w[0].store(sequence, Ordering::Relaxed);
        w[1].store(timestamp_ns, Ordering::Relaxed);
        w[2].store(latency_ns, Ordering::Relaxed);
        w[3].store(((n as u64) << 32) | u64::from(cut), Ordering::Relaxed);
        for (k, d) in dets[..n].iter().enumerate() {
            let base = HEADER_WORDS + k * DET_WORDS;
            let words: [u64; DET_WORDS] = bytemuck::cast(*d);
            for (dst, v) in w[base..base + DET_WORDS].iter().zip(words) {
                dst.store(v, Ordering::Relaxed);
            }
        }
        self.stamps[slot].store(i + 1, Ordering::Release);
        self.head.store(i + 1, Ordering::Release);
    }

    /// Reads the record at `*cursor` into `out` and advances the cursor.
    pub fn read(&self, cursor: &mut u64, out: &mut SinkRecord) -> FeedRead {
        let head = self.head.load(Ordering::Acquire);
        let oldest = head.saturating_sub(FEED_FRAMES as u64);
        if *cursor < oldest {
            let lost = oldest - *cursor;
            *cursor = oldest;
            return FeedRead::Lost(lost);
        }
        if *cursor >= head {
            return FeedRead::Empty;
        }
        let c = *cursor;
        let slot = (c % FEED_FRAMES as u64) as usize;
        let s1 = self.stamps[slot].load(Ordering::Acquire);
        if s1 != c + 1 {
            // Being overwritten by a newer record.
            *cursor += 1;
            return FeedRead::Lost(1);
        }
        let w = &self.words[slot * self.slot_words..(slot + 1) * self.slot_words];
        out.sequence = w[0].load(Ordering::Relaxed);
        out.timestamp_ns = w[1].load(Ordering::Relaxed);
        out.latency_ns = w[2].load(Ordering::Relaxed);
        let nc = w[3].load(Ordering::Relaxed);
        let n = ((nc >> 32) as usize).min(self.max_detections);
        out.cut = nc as u32;
        out.detections.clear();
        for k in 0..n {
            let base = HEADER_WORDS + k * DET_WORDS;
            let mut dw = [0u64; DET_WORDS];
            for (d, s) in dw.iter_mut().zip(&w[base..base + DET_WORDS]) {
                *d = s.load(Ordering::Relaxed);
            }
            out.detections.push(bytemuck::cast(dw));
        }
        fence(Ordering::Acquire);
        *cursor += 1;
        if self.stamps[slot].load(Ordering::Relaxed) != s1 {
            return FeedRead::Lost(1);
        }
        FeedRead::Record
    }
}

/// The FPGA detections record (board/fpga/detections-record.md): a 32-byte
/// header and 28 bytes per detection, little-endian.
pub const FPGA_RECORD_MAGIC: u32 = 0x5445_4452; // "RDET"
pub const FPGA_RECORD_VERSION: u16 = 1;
pub const FPGA_HEADER_BYTES: usize = 32;
pub const FPGA_DETECTION_BYTES: usize = 28;

/// Bytes of a record of `n` detections.
pub fn fpga_record_bytes(n: usize) -> usize {
    FPGA_HEADER_BYTES + n * FPGA_DETECTION_BYTES
}

/// Encodes a record into `out` (cleared; allocates only if `out` is too
/// small). At most `max` detections; the rest are added to the cut.
pub fn encode_fpga_record(
    sequence: u64,
    timestamp_ns: u64,
    dets: &[Detection],
    cut: u32,
    max: usize,
    out: &mut Vec<u8>,
) {
    let n = dets.len().min(max).min(u32::MAX as usize);
    let cut = cut.saturating_add((dets.len() - n) as u32);
    out.clear();
    out.extend_from_slice(&FPGA_RECORD_MAGIC.to_le_bytes());
    out.extend_from_slice(&FPGA_RECORD_VERSION.to_le_bytes());
    out.extend_from_slice(&(FPGA_DETECTION_BYTES as u16).to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&timestamp_ns.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&cut.to_le_bytes());
    for d in &dets[..n] {
        out.extend_from_slice(&d.range_bin.to_le_bytes());
        out.extend_from_slice(&d.doppler_bin.to_le_bytes());
        for v in [
            d.range_m,
            d.velocity_mps,
            d.azimuth_deg,
            d.snr_db,
            d.power_db,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// A decoded FPGA record (tests, tools).
#[derive(Clone, Debug, PartialEq)]
pub struct FpgaRecord {
    pub sequence: u64,
    pub timestamp_ns: u64,
    pub cut: u32,
    pub detections: Vec<Detection>,
}

/// Decodes a record; the error says what is wrong with it.
pub fn decode_fpga_record(b: &[u8]) -> Result<FpgaRecord, String> {
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
    if b.len() < FPGA_HEADER_BYTES {
        return Err(format!(
            "{} bytes, shorter than the 32-byte header",
            b.len()
        ));
    }
    if u32_at(0) != FPGA_RECORD_MAGIC {
        return Err(format!(
            "magic {:#010x}, want {FPGA_RECORD_MAGIC:#010x}",
            u32_at(0)
        ));
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    let per = u16::from_le_bytes([b[6], b[7]]) as usize;
    if version != FPGA_RECORD_VERSION || per != FPGA_DETECTION_BYTES {
        return Err(format!(
            "version {version} with {per}-byte detections, want 1 with 28"
        ));
    }
    let n = u32_at(24) as usize;
    if b.len() != fpga_record_bytes(n) {
        return Err(format!(
            "{} bytes for {n} detections, want {}",
            b.len(),
            fpga_record_bytes(n)
        ));
    }
    let f32_at = |o: usize| f32::from_bits(u32_at(o));
    let detections = (0..n)
        .map(|k| {
            let o = FPGA_HEADER_BYTES + k * FPGA_DETECTION_BYTES;
            Detection {
                range_bin: u32_at(o),
                doppler_bin: u32_at(o + 4),
                range_m: f32_at(o + 8),
                velocity_mps: f32_at(o + 12),
                azimuth_deg: f32_at(o + 16),
                snr_db: f32_at(o + 20),
                power_db: f32_at(o + 24),
                ..Detection::default()
            }
        })
        .collect();
    Ok(FpgaRecord {
        sequence: u64_at(8),
        timestamp_ns: u64_at(16),
        cut: u32_at(28),
        detections,
    })
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
    let mut rec = SinkRecord::with_capacity(feed.max_detections);
    let mut line = Vec::with_capacity(64 << 10);
    loop {
        let finished = done.load(Ordering::Acquire);
        let mut idle = true;
        loop {
            match feed.read(&mut cursor, &mut rec) {
                FeedRead::Empty => break,
                FeedRead::Lost(n) => board.sink_queue_full(index, n),
                FeedRead::Record => {
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

fn line_of(rec: &SinkRecord, n: usize, out: &mut Vec<u8>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn det(i: u32) -> Detection {
        Detection {
            range_bin: i,
            doppler_bin: 2 * i,
            range_m: i as f32 * 0.5,
            velocity_mps: -(i as f32),
            azimuth_deg: 3.0,
            snr_db: 20.0,
            power_db: 90.0,
            ..Detection::default()
        }
    }

    #[test]
    fn the_feed_hands_every_reader_every_record_or_counts_it_lost() {
        let feed = DetectionFeed::new(4);
        let mut rec = SinkRecord::with_capacity(4);
        let mut cursor = 0;
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Empty);
        let dets: Vec<Detection> = (0..6).map(det).collect();
        feed.push(7, 100, 5, &dets, 1);
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Record);
        assert_eq!(
            (rec.sequence, rec.timestamp_ns, rec.latency_ns),
            (7, 100, 5)
        );
        assert_eq!(rec.detections, dets[..4].to_vec());
        assert_eq!(rec.cut, 3, "1 cut by the chain, 2 by the feed's capacity");
        for s in 0..(FEED_FRAMES as u64 + 5) {
            feed.push(s, 0, 0, &[], 0);
        }
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Lost(5));
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Record);
        assert_eq!(rec.sequence, 5);
    }

    #[test]
    fn fpga_records_round_trip_and_bad_ones_say_why() {
        let dets: Vec<Detection> = (0..3).map(det).collect();
        let mut b = Vec::new();
        encode_fpga_record(42, 1234, &dets, 2, 2, &mut b);
        assert_eq!(b.len(), fpga_record_bytes(2));
        let r = decode_fpga_record(&b).expect("decodes");
        assert_eq!((r.sequence, r.timestamp_ns, r.cut), (42, 1234, 3));
        assert_eq!(r.detections, dets[..2].to_vec());
        assert!(
            decode_fpga_record(&b[..40])
                .unwrap_err()
                .contains("for 2 detections")
        );
        b[0] = 0;
        assert!(decode_fpga_record(&b).unwrap_err().contains("magic"));
    }

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
