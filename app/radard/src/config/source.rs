//! `[source]`: where the frames come from (simulator, kernel module, a
//! recording), what the FPGA sends, and at what cadence.

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// The userspace FPGA simulator (any Linux machine).
    #[default]
    Sim,
    /// The `fpga_p2p` kernel module (`/dev/fpga-p2p<N>`).
    Kmod,
    /// A recorded frame file (`source.replay_file`).
    Replay,
}

impl FromStr for SourceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sim" => Ok(SourceKind::Sim),
            "kmod" => Ok(SourceKind::Kmod),
            "replay" => Ok(SourceKind::Replay),
            _ => Err(format!("unknown source {s:?} (sim, kmod, replay)")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Content {
    /// Synthetic radar frames (the scene generator) played back by the FPGA.
    #[default]
    Scene,
    /// The FPGA's checkable test pattern: every frame is verified, no DSP.
    TestPattern,
    /// The radar front end: the card's ADC stream, processed by the chain.
    /// Nothing is uploaded; the simulator has no front end.
    Adc,
}

impl Content {
    /// Radar frames, for the chain (scene playback or the front end).
    pub fn is_radar(self) -> bool {
        matches!(self, Content::Scene | Content::Adc)
    }

    /// The name in the TOML and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Content::Scene => "scene",
            Content::TestPattern => "test-pattern",
            Content::Adc => "adc",
        }
    }
}

impl FromStr for Content {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "scene" => Ok(Content::Scene),
            "test-pattern" => Ok(Content::TestPattern),
            "adc" => Ok(Content::Adc),
            _ => Err(format!("unknown content {s:?} (adc, scene, test-pattern)")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SourceConfig {
    pub kind: SourceKind,
    pub device: u32,
    pub slots: u32,
    pub content: Content,
    pub chunk_period_us: u32,
    /// Finer chunk period in nanoseconds; overrides `chunk_period_us`
    /// when set (e.g. 62500 for 1 ms frames of 16 chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_period_ns: Option<u64>,
    pub event_timeout_ms: u32,
    pub scene_frames: u32,
    pub scene_seed: u64,
    pub scene_file: Option<PathBuf>,
    pub replay_file: Option<PathBuf>,
    pub replay_rate: ReplayRate,
}

/// How fast a recording is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayRate {
    /// One frame per frame period (`source.chunk_period_us` x chunks).
    #[default]
    Period,
    /// As fast as the loop takes frames.
    Max,
}

impl FromStr for ReplayRate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "period" => Ok(ReplayRate::Period),
            "max" => Ok(ReplayRate::Max),
            _ => Err(format!("unknown replay rate {s:?} (period, max)")),
        }
    }
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            kind: SourceKind::Sim,
            device: 0,
            slots: 4,
            content: Content::Scene,
            chunk_period_us: 500,
            chunk_period_ns: None,
            event_timeout_ms: 1000,
            scene_frames: 8,
            scene_seed: 1,
            scene_file: None,
            replay_file: None,
            replay_rate: ReplayRate::Period,
        }
    }
}
