//! `radard replay --input FILE [--rate period|max]`: a run whose frames
//! come from a recording (or a `radar-dsp scene` file) instead of a live
//! source. The command line points the configuration's source at the file
//! (`cli`); the rest is a run, ending with the recording.

use radard::{RadardConfig, RadardError};

use crate::cli::Cli;

pub fn replay(cli: &Cli, cfg: &RadardConfig) -> Result<u8, RadardError> {
    super::run::run(cli, cfg)
}
