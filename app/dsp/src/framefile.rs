//! Raw frame files: frames in the layout of docs/requirements.md, concatenated,
//! no header. A file whose size is not a whole number of frames is refused
//! before anything is read (it is truncated or not a frame file for this
//! geometry).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::DspError;

pub struct FrameFile {
    path: PathBuf,
    file: File,
    frame_bytes: usize,
    frames: u64,
    next: u64,
}

impl FrameFile {
    pub fn open(path: &Path, frame_bytes: usize) -> Result<Self, DspError> {
        let io = |context: &str, e| DspError::Io {
            context: format!("{}: {context}", path.display()),
            source: e,
        };
        let file = File::open(path).map_err(|e| io("open", e))?;
        let bytes = file.metadata().map_err(|e| io("stat", e))?.len();
        if frame_bytes == 0 || bytes % frame_bytes as u64 != 0 {
            return Err(DspError::Truncated {
                path: path.display().to_string(),
                bytes,
                frame_bytes,
            });
        }
        Ok(FrameFile {
            path: path.to_path_buf(),
            file,
            frame_bytes,
            frames: bytes / frame_bytes as u64,
            next: 0,
        })
    }

    /// Whole frames in the file.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Read the next frame into `buf` (one frame long). `Ok(false)` at the
    /// end; a file that shrank under us is reported as truncated.
    pub fn read_frame(&mut self, buf: &mut [u8]) -> Result<bool, DspError> {
        if buf.len() != self.frame_bytes {
            return Err(DspError::FrameSize {
                got: buf.len(),
                want: self.frame_bytes,
            });
        }
        if self.next == self.frames {
            return Ok(false);
        }
        self.file.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                DspError::Truncated {
                    path: self.path.display().to_string(),
                    bytes: self.next * self.frame_bytes as u64,
                    frame_bytes: self.frame_bytes,
                }
            } else {
                DspError::Io {
                    context: format!("{}: reading frame {}", self.path.display(), self.next),
                    source: e,
                }
            }
        })?;
        self.next += 1;
        Ok(true)
    }
}
