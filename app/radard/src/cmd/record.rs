//! `radard record --frames N --output FILE`: N frames from the configured
//! source into a recording (FILE and its sidecar FILE.meta.jsonl), no
//! processing (`radard::recorder`).

use std::path::Path;

use radard::{RadardConfig, RadardError};

use crate::cli::Cli;
use crate::signals;

pub fn record(cli: &Cli, cfg: &RadardConfig, output: &Path) -> Result<u8, RadardError> {
    let frames = cli.frames.ok_or(RadardError::RecordNeedsFrames)?;
    signals::install();
    let mut note = |n: &str| println!("radard: {n}");
    let r = radard::recorder::record_frames(cfg, frames, output, &signals::STOP, &mut note)?;
    println!(
        "radard: recorded {} frames to {} (dropped at source {}, short {})",
        r.frames,
        output.display(),
        r.dropped_at_source,
        r.short_frames
    );
    Ok(0)
}
