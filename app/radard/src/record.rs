//! `radard record`: N frames from any source (simulator, kernel module, or
//! a replay) into a recording (`recording.rs`): the raw frames and their
//! sidecar. No processing: the frames are written as delivered, each slot
//! released once its bytes are in the file's buffer. A disk slower than the
//! frame rate makes the source drop frames; the drops are recorded (the
//! next frame's `dropped`), as they would be seen live.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::{Content, RadardConfig};
use crate::recording::{FORMAT, Header, RecordWriter, VERSION, sidecar_path};
use crate::setup;

/// What a recording run did.
#[derive(Debug)]
pub struct RecordReport {
    pub frames: u64,
    pub dropped_at_source: u64,
    pub short_frames: u64,
}

/// Records `frames` frames into `output`; `notes` gets the start-up log.
/// Stops early (and keeps what was written) when `stop` is set.
pub fn record(
    cfg: &RadardConfig,
    frames: u64,
    output: &Path,
    stop: &AtomicBool,
    notes: &mut dyn FnMut(&str),
) -> Result<RecordReport, String> {
    if frames == 0 {
        return Err("--frames must be at least 1".into());
    }
    let (mut source, open_notes) = setup::open_source(cfg).map_err(|e| e.to_string())?;
    for n in open_notes {
        notes(&n);
    }
    if cfg.source.content == Content::Scene {
        notes(&setup::load_scene(cfg, &mut source).map_err(|e| e.to_string())?);
    }
    let header = Header {
        format: FORMAT.to_string(),
        version: VERSION,
        frame_bytes: cfg.geometry.frame_bytes() as u64,
        chunk_bytes: cfg.geometry.chunk_bytes() as u64,
        geometry: cfg.geometry.clone(),
        source: source.as_dyn().name().to_string(),
    };
    let mut writer = RecordWriter::create(output, &header).map_err(|e| e.to_string())?;
    let params = setup::start_params(cfg, false);
    source
        .as_dyn_mut()
        .start(&params)
        .map_err(|e| e.to_string())?;
    notes(&format!(
        "recording {frames} frames from {} to {} (+ {})",
        source.as_dyn().name(),
        output.display(),
        sidecar_path(output).display()
    ));
    let mut report = RecordReport {
        frames: 0,
        dropped_at_source: 0,
        short_frames: 0,
    };
    let mut result = Ok(());
    while report.frames < frames && !stop.load(Ordering::Relaxed) {
        let frame = match source.as_dyn().next_frame(None) {
            Ok(f) => f,
            Err(e) => {
                result = Err(e.to_string());
                break;
            }
        };
        let meta = *frame.meta();
        if let Err(e) = writer.append(frame.data(), &meta) {
            result = Err(e.to_string());
            break;
        }
        if let Err(e) = frame.release() {
            result = Err(e.to_string());
            break;
        }
        report.frames += 1;
        report.dropped_at_source += u64::from(meta.dropped);
        if meta.is_short() {
            report.short_frames += 1;
        }
    }
    let _ = source.as_dyn_mut().stop();
    // What was written stays readable even when the source failed.
    let written = writer.finish().map_err(|e| e.to_string())?;
    debug_assert_eq!(written, report.frames);
    result.map(|()| report)
}
