//! Recorded frame files (`radard record`, `radard replay`).
//!
//! A recording is two files:
//! - `FILE`: the frames, raw, concatenated, no header: the same layout as
//!   `radar-dsp scene` output (docs/record-replay.md), so either replays;
//! - `FILE.meta.jsonl`: the sidecar, JSON lines: first a header
//!   `{"format":"radard-recording","version":1,"frame_bytes":..,"chunk_bytes":..,"geometry":{..},"source":..}`,
//!   then one line per frame, in file order:
//!   `{"index":0,"sequence":..,"timestamp_ns":..,"flags":..,"dropped":..,"bytes":..,"crc32":..}`.
//!   `crc32` is CRC-32/IEEE of the frame as stored in `FILE` (all
//!   `frame_bytes`; a short frame is stored zero-filled after `bytes`).
//!
//! Opening checks everything that can be checked without reading the
//! frames: the frame file's size is a whole number of frames, the sidecar's
//! version and geometry match the configuration, and it has exactly one
//! line per frame. Each frame's CRC is checked as it is replayed. Every
//! error names the file and says what is wrong.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use radar_dsp::Geometry;
use serde::{Deserialize, Serialize};
use tegra_p2p::FrameMeta;
use thiserror::Error;

pub const FORMAT: &str = "radard-recording";
pub const VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum RecordingError {
    #[error("{path}: {what}: {source}")]
    Io {
        path: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

fn io<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> RecordingError + 'a {
    move |source| RecordingError::Io {
        path: path.display().to_string(),
        what,
        source,
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> RecordingError {
    RecordingError::Invalid {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// The sidecar of a frame file.
pub fn sidecar_path(frames: &Path) -> PathBuf {
    let mut s = frames.as_os_str().to_owned();
    s.push(".meta.jsonl");
    PathBuf::from(s)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub frame_bytes: u64,
    pub chunk_bytes: u64,
    pub geometry: Geometry,
    /// Where the frames came from (`sim`, `/dev/fpga-p2p0`, ...).
    pub source: String,
}

/// One recorded frame's line in the sidecar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameEntry {
    pub index: u64,
    pub sequence: u64,
    pub timestamp_ns: u64,
    pub flags: u32,
    pub dropped: u32,
    pub bytes: u32,
    pub crc32: u32,
}

/// Writes a recording.
pub struct RecordingWriter {
    path: PathBuf,
    sidecar_path: PathBuf,
    frames: BufWriter<File>,
    sidecar: BufWriter<File>,
    frame_bytes: usize,
    zeros: Vec<u8>,
    written: u64,
}

impl RecordingWriter {
    pub fn create(path: &Path, header: &Header) -> Result<Self, RecordingError> {
        let sidecar_path = sidecar_path(path);
        let frames = File::create(path).map_err(io(path, "create"))?;
        let sidecar_file = File::create(&sidecar_path).map_err(io(&sidecar_path, "create"))?;
        let mut sidecar = BufWriter::new(sidecar_file);
        let line =
            serde_json::to_string(header).map_err(|e| invalid(&sidecar_path, e.to_string()))?;
        writeln!(sidecar, "{line}").map_err(io(&sidecar_path, "write"))?;
        Ok(RecordingWriter {
            path: path.to_path_buf(),
            sidecar_path,
            frames: BufWriter::with_capacity(1 << 20, frames),
            sidecar,
            frame_bytes: header.frame_bytes as usize,
            zeros: vec![0; header.frame_bytes as usize],
            written: 0,
        })
    }

    /// Appends a frame: `data` is the delivered payload (a short frame is
    /// zero-filled to the frame size).
    pub fn append(&mut self, data: &[u8], meta: &FrameMeta) -> Result<(), RecordingError> {
        let data = &data[..data.len().min(self.frame_bytes)];
        let fill = &self.zeros[..self.frame_bytes - data.len()];
        let mut crc = crc32fast::Hasher::new();
        crc.update(data);
        crc.update(fill);
        self.frames
            .write_all(data)
            .and_then(|()| self.frames.write_all(fill))
            .map_err(io(&self.path, "write"))?;
        let entry = FrameEntry {
            index: self.written,
            sequence: meta.sequence,
            timestamp_ns: meta.timestamp_ns,
            flags: meta.flags,
            dropped: meta.dropped,
            bytes: data.len() as u32,
            crc32: crc.finalize(),
        };
        let line = serde_json::to_string(&entry)
            .map_err(|e| invalid(&self.sidecar_path, e.to_string()))?;
        writeln!(self.sidecar, "{line}").map_err(io(&self.sidecar_path, "write"))?;
        self.written += 1;
        Ok(())
    }

    /// Flushes both files to disk.
    pub fn finish(mut self) -> Result<u64, RecordingError> {
        self.frames.flush().map_err(io(&self.path, "write"))?;
        self.sidecar
            .flush()
            .map_err(io(&self.sidecar_path, "write"))?;
        self.frames
            .get_ref()
            .sync_all()
            .map_err(io(&self.path, "sync"))?;
        self.sidecar
            .get_ref()
            .sync_all()
            .map_err(io(&self.sidecar_path, "sync"))?;
        Ok(self.written)
    }
}

/// A recording opened for replay, checked.
#[derive(Debug)]
pub struct Recording {
    pub path: PathBuf,
    pub file: File,
    pub frame_bytes: usize,
    pub frames: u64,
    /// Per-frame metadata: from the sidecar, or synthesised for a raw frame
    /// file (`synthesized`): sequence = index, no flags, no drops, CRC of
    /// the frame computed as it is read.
    pub entries: Vec<FrameEntry>,
    pub synthesized: bool,
    pub header: Option<Header>,
}

impl Recording {
    /// Opens `path` for frames of `geometry`.
    pub fn open(path: &Path, geometry: &Geometry) -> Result<Self, RecordingError> {
        let frame_bytes = geometry.frame_bytes();
        let file = File::open(path).map_err(io(path, "open"))?;
        let size = file.metadata().map_err(io(path, "stat"))?.len();
        if size == 0 {
            return Err(invalid(path, "empty: no frames"));
        }
        if size % frame_bytes as u64 != 0 {
            return Err(invalid(
                path,
                format!(
                    "{size} bytes is not a whole number of {frame_bytes}-byte frames \
                     ({} frames and {} bytes over): truncated, or recorded with another geometry",
                    size / frame_bytes as u64,
                    size % frame_bytes as u64
                ),
            ));
        }
        let frames = size / frame_bytes as u64;
        let sidecar_path = sidecar_path(path);
        let sidecar_file = match File::open(&sidecar_path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(&sidecar_path, "open")(e)),
        };
        let Some(sidecar_file) = sidecar_file else {
            let entries = (0..frames)
                .map(|i| FrameEntry {
                    index: i,
                    sequence: i,
                    timestamp_ns: 0,
                    flags: 0,
                    dropped: 0,
                    bytes: frame_bytes as u32,
                    crc32: 0,
                })
                .collect();
            return Ok(Recording {
                path: path.to_path_buf(),
                file,
                frame_bytes,
                frames,
                entries,
                synthesized: true,
                header: None,
            });
        };
        let mut lines = BufReader::new(sidecar_file).lines();
        let first = lines
            .next()
            .ok_or_else(|| invalid(&sidecar_path, "empty: no header line"))?
            .map_err(io(&sidecar_path, "read"))?;
        let header: Header = serde_json::from_str(&first)
            .map_err(|e| invalid(&sidecar_path, format!("line 1 (header): {e}")))?;
        if header.format != FORMAT {
            return Err(invalid(
                &sidecar_path,
                format!("format {:?}, expected {FORMAT:?}", header.format),
            ));
        }
        if header.version != VERSION {
            return Err(invalid(
                &sidecar_path,
                format!(
                    "format version {} (this radard reads version {VERSION})",
                    header.version
                ),
            ));
        }
        if header.geometry != *geometry || header.frame_bytes != frame_bytes as u64 {
            return Err(invalid(
                &sidecar_path,
                format!(
                    "recorded with geometry {:?} ({} bytes per frame), configured {:?} ({} bytes): \
                     set [geometry] to the recording's",
                    header.geometry, header.frame_bytes, geometry, frame_bytes
                ),
            ));
        }
        let mut entries = Vec::with_capacity(frames.min(1 << 20) as usize);
        for (n, line) in lines.enumerate() {
            let line = line.map_err(io(&sidecar_path, "read"))?;
            if line.trim().is_empty() {
                continue;
            }
            let e: FrameEntry = serde_json::from_str(&line)
                .map_err(|e| invalid(&sidecar_path, format!("line {}: {e}", n + 2)))?;
            if e.index != entries.len() as u64 {
                return Err(invalid(
                    &sidecar_path,
                    format!(
                        "line {}: frame index {}, expected {}",
                        n + 2,
                        e.index,
                        entries.len()
                    ),
                ));
            }
            if e.bytes as usize > frame_bytes {
                return Err(invalid(
                    &sidecar_path,
                    format!(
                        "line {}: {} payload bytes in a {frame_bytes}-byte frame",
                        n + 2,
                        e.bytes
                    ),
                ));
            }
            entries.push(e);
        }
        if entries.len() as u64 != frames {
            return Err(invalid(
                &sidecar_path,
                format!(
                    "describes {} frames but {} holds {frames}",
                    entries.len(),
                    path.display()
                ),
            ));
        }
        Ok(Recording {
            path: path.to_path_buf(),
            file,
            frame_bytes,
            frames,
            entries,
            synthesized: false,
            header: Some(header),
        })
    }
}
