//! Why radard stopped with an error, and the exit status that says so.
//!
//! Exit status (also in `radard --help`; scripts and the test suites rely
//! on it):
//! - 0: a clean run, a run stopped by SIGTERM or SIGINT whatever its
//!   quality (a stop is how a service ends: `systemctl stop` must not leave
//!   it failed; the summary reports the misses), or a subcommand that did
//!   its job;
//! - 1: a start-up or source failure: the device, the backend, the
//!   real-time set-up rt.strict asks for, a recording that cannot be
//!   written or read, a fatal error of the source during the run;
//! - 2: bad configuration or arguments, found before anything starts;
//! - 3: a run that ended at its frame limit (`--frames N`, or the end of a
//!   replay) with payload errors, sequence breaks or deadline misses
//!   ([`RunEnd::WithErrors`]; not an error).
//!
//! The sources of the errors of radar-dsp and tegra-p2p are kept whole
//! (`source()`), never matched on here.

use std::path::PathBuf;

use thiserror::Error;

use crate::config::{ConfigError, SinkArgError};
use crate::diag::DiagError;
use crate::fpga_reset::FpgaResetError;
use crate::frame_loop::LoopError;
use crate::recorder::RecorderError;
use crate::rt::RtError;
use crate::setup::SetupError;
use crate::sinks::SinkError;
use crate::sinks::detections_record::RecordError;

/// How a run that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    Clean,
    /// Ran to its frame limit, but frames had payload errors, sequence
    /// breaks or misses.
    WithErrors,
    /// Stopped by SIGTERM or SIGINT; the summary says how it went.
    Stopped,
}

impl RunEnd {
    pub fn exit_code(self) -> u8 {
        match self {
            RunEnd::Clean | RunEnd::Stopped => 0,
            RunEnd::WithErrors => 3,
        }
    }
}

#[derive(Debug, Error)]
pub enum RadardError {
    /// The configuration file, or a value of it given on the command line.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A `--sink` argument that names no sink.
    #[error(transparent)]
    SinkArg(#[from] SinkArgError),
    /// A sink that cannot be created (its file, its address).
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Arguments that do not go together.
    #[error("{0}")]
    Usage(&'static str),
    /// `radard record` without `--frames`.
    #[error("--frames N is required (how many frames to record)")]
    RecordNeedsFrames,
    #[error(transparent)]
    FpgaReset(#[from] FpgaResetError),
    /// Opening the source, uploading the scene, opening the backend.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The transmit ring of the fpga sink.
    #[error("sink fpga: {0}")]
    FpgaSinkTx(#[source] SetupError),
    /// The real-time set-up that rt.strict asks for.
    #[error(transparent)]
    Rt(#[from] RtError),
    #[error(transparent)]
    Diag(#[from] DiagError),
    /// Starting the source's stream.
    #[error(transparent)]
    Start(tegra_p2p::Error),
    /// The loop ended on an error of the source or the chain.
    #[error(transparent)]
    Loop(#[from] LoopError),
    #[error("{}: {source}", path.display())]
    WriteSummary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    SummaryJson(#[from] serde_json::Error),
    #[error("cannot print the configuration: {0}")]
    PrintConfig(#[from] toml::ser::Error),
    /// `radard record`.
    #[error("record: {0}")]
    Record(#[from] RecorderError),
    /// `radard decode-record`: the file.
    #[error("{}: {source}", path.display())]
    ReadRecord {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `radard decode-record`: what the file holds.
    #[error("{}: not a detections record: {source}", path.display())]
    NotARecord {
        path: PathBuf,
        #[source]
        source: RecordError,
    },
}

impl RadardError {
    /// The process's exit status for this error (see the module's list).
    pub fn exit_code(&self) -> u8 {
        match self {
            RadardError::Config(_)
            | RadardError::SinkArg(_)
            | RadardError::Sink(_)
            | RadardError::Usage(_)
            | RadardError::RecordNeedsFrames => 2,
            RadardError::FpgaReset(_)
            | RadardError::Setup(_)
            | RadardError::FpgaSinkTx(_)
            | RadardError::Rt(_)
            | RadardError::Diag(_)
            | RadardError::Start(_)
            | RadardError::Loop(_)
            | RadardError::WriteSummary { .. }
            | RadardError::SummaryJson(_)
            | RadardError::PrintConfig(_)
            | RadardError::Record(_)
            | RadardError::ReadRecord { .. }
            | RadardError::NotARecord { .. } => 1,
        }
    }

    /// Who the message is from: `radard`, or the subcommand whose own
    /// input it is about (`radard record`, `radard decode-record`).
    pub fn program(&self) -> &'static str {
        match self {
            RadardError::RecordNeedsFrames => "radard record",
            RadardError::ReadRecord { .. } | RadardError::NotARecord { .. } => {
                "radard decode-record"
            }
            _ => "radard",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit statuses scripts rely on: 2 for what is wrong before
    /// anything starts, 1 for what fails after, 3 for a run with errors.
    #[test]
    fn exit_codes() {
        let config = RadardError::Config(ConfigError::Invalid {
            key: "source.slots",
            reason: "1 is too few".into(),
        });
        assert_eq!(config.exit_code(), 2);
        assert_eq!(config.to_string(), "config: source.slots: 1 is too few");
        assert_eq!(RadardError::RecordNeedsFrames.exit_code(), 2);
        assert_eq!(RadardError::RecordNeedsFrames.program(), "radard record");
        let record = RadardError::Record(RecorderError::NoFrames);
        assert_eq!(record.exit_code(), 1);
        assert_eq!(record.to_string(), "record: --frames must be at least 1");
        let not = RadardError::NotARecord {
            path: "r.bin".into(),
            source: RecordError::Short { len: 3 },
        };
        assert_eq!(
            (not.exit_code(), not.program(), not.to_string().as_str()),
            (
                1,
                "radard decode-record",
                "r.bin: not a detections record: 3 bytes, shorter than the 32-byte header"
            )
        );
        assert_eq!(RunEnd::WithErrors.exit_code(), 3);
        assert_eq!(RunEnd::Clean.exit_code(), 0);
        assert_eq!(RunEnd::Stopped.exit_code(), 0);
    }
}
