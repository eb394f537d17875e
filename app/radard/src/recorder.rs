//! What `radard record` does: N frames from any source (simulator, kernel
//! module, or a replay) into a recording (`recording`): the raw frames and
//! their sidecar. No processing: the frames are written as delivered, each
//! slot released once its bytes are in the file's buffer. A disk slower
//! than the frame rate makes the source drop frames; the drops are recorded
//! (the next frame's `dropped`), as they would be seen live.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use thiserror::Error;

use crate::config::{Content, RadardConfig};
use crate::recording::{FORMAT, Header, RecordingError, RecordingWriter, VERSION, sidecar_path};
use crate::setup::{self, SetupError};

/// What a recording run wrote.
#[derive(Debug)]
pub struct RecordedFrames {
    pub frames: u64,
    pub dropped_at_source: u64,
    pub short_frames: u64,
}

#[derive(Debug, Error)]
pub enum RecorderError {
    #[error("--frames must be at least 1")]
    NoFrames,
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error(transparent)]
    Source(#[from] tegra_p2p::Error),
}

/// Records `frames` frames into `output`; `note` gets the start-up log.
/// Stops early (and keeps what was written) when `stop` is set.
pub fn record_frames(
    cfg: &RadardConfig,
    frames: u64,
    output: &Path,
    stop: &AtomicBool,
    note: &mut dyn FnMut(&str),
) -> Result<RecordedFrames, RecorderError> {
    if frames == 0 {
        return Err(RecorderError::NoFrames);
    }
    let (mut source, open_notes) = setup::open_source(cfg)?;
    for n in open_notes {
        note(&n);
    }
    if cfg.source.content == Content::Scene {
        note(&setup::load_scene(cfg, &mut source)?);
    }
    let header = Header {
        format: FORMAT.to_string(),
        version: VERSION,
        frame_bytes: cfg.geometry.frame_bytes() as u64,
        chunk_bytes: cfg.geometry.chunk_bytes() as u64,
        geometry: cfg.geometry.clone(),
        source: source.as_dyn().name().to_string(),
    };
    let mut writer = RecordingWriter::create(output, &header)?;
    let params = setup::start_params(cfg, false);
    source.as_dyn_mut().start(&params)?;
    note(&format!(
        "recording {frames} frames from {} to {} (+ {})",
        source.as_dyn().name(),
        output.display(),
        sidecar_path(output).display()
    ));
    let mut recorded = RecordedFrames {
        frames: 0,
        dropped_at_source: 0,
        short_frames: 0,
    };
    let mut result = Ok(());
    while recorded.frames < frames && !stop.load(Ordering::Relaxed) {
        let frame = match source.as_dyn().next_frame(None) {
            Ok(f) => f,
            // SIGINT/SIGTERM during the wait: the loop condition decides.
            Err(tegra_p2p::Error::Interrupted { .. }) => continue,
            Err(e) => {
                result = Err(e.into());
                break;
            }
        };
        let meta = *frame.meta();
        if let Err(e) = writer.append(frame.data(), &meta) {
            result = Err(e.into());
            break;
        }
        if let Err(e) = frame.release() {
            result = Err(e.into());
            break;
        }
        recorded.frames += 1;
        recorded.dropped_at_source += u64::from(meta.dropped);
        if meta.is_short() {
            recorded.short_frames += 1;
        }
    }
    let _ = source.as_dyn_mut().stop();
    // What was written stays readable even when the source failed.
    let written = writer.finish()?;
    debug_assert_eq!(written, recorded.frames);
    result.map(|()| recorded)
}
