//! The configuration file of `radard` (TOML). Every section is optional and
//! has defaults; unknown keys are refused; every error names the key.
//!
//! ```toml
//! [source]
//! kind = "sim"              # sim | kmod | replay
//! device = 0                # /dev/fpga-p2p<device> (kmod)
//! slots = 4                 # ring slots, >= 2
//! content = "scene"         # scene (synthetic radar frames) | test-pattern
//! chunk_period_us = 500     # 16 chunks x 500 us = one frame per 8 ms
//! event_timeout_ms = 1000
//! scene_frames = 8          # distinct scene frames cycled by playback
//! scene_seed = 1
//! # scene_file = "scene.toml"   # targets; a built-in scene otherwise
//! # replay_file = "run.raw"      # kind = "replay": a recording (docs/record-replay.md)
//! replay_rate = "period"    # replay one frame per frame period, or "max"
//!
//! [backend]
//! kind = "auto"             # auto | cuda | cpu
//! stream_chunks = true      # start each DMA chunk's work as it lands, when
//!                           # the backend can (CUDA); false: whole frames
//!
//! [rt]
//! priority = 80             # SCHED_FIFO; 0 = normal scheduling
//! cpu = 2                   # pin the loop thread
//! lock_memory = true
//! strict = false            # refuse to run without the above
//!
//! [output]
//! print_every = 1           # a line per N frames; 0 = status lines only
//! stats_json = "stats.json" # summary written at exit
//!
//! [telemetry]
//! enabled = true            # GPU temperature, clock, load, throttling
//! reader = "auto"           # auto (NVML, else Jetson sysfs) | nvml | sysfs
//! sysfs_root = "/"          # where sys/class/... is read (tests: a fixture)
//! interval_ms = 1000
//!
//! # The processing chain: [geometry], [physical], [cfar], [chain]
//! # (see docs/processing-chain.md).
//! ```

use std::path::{Path, PathBuf};
use std::str::FromStr;

use radar_dsp::config::ChainParams;
use radar_dsp::{BackendKind, CfarConfig, ChainConfig, Geometry, Physical};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::rt::RtConfig;
use crate::telemetry::TelemetryConfig;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error("config: {0}")]
    Chain(#[from] radar_dsp::DspError),
    #[error("config: {0}")]
    Rt(#[from] crate::rt::RtError),
}

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
}

impl FromStr for Content {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "scene" => Ok(Content::Scene),
            "test-pattern" => Ok(Content::TestPattern),
            _ => Err(format!("unknown content {s:?} (scene, test-pattern)")),
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
            event_timeout_ms: 1000,
            scene_frames: 8,
            scene_seed: 1,
            scene_file: None,
            replay_file: None,
            replay_rate: ReplayRate::Period,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    pub kind: String,
    /// Chunk-streamed mode (DESIGN.md section 3): ask the source for an
    /// event per DMA chunk and let the backend start each chunk's range
    /// work as it lands, so that only the last chunk's and the rest of the
    /// chain remain when the frame completes. Used when the backend can
    /// (CUDA with the ring in mapped memory); the CPU backend takes whole
    /// frames either way.
    pub stream_chunks: bool,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: "auto".into(),
            stream_chunks: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    pub print_every: u32,
    pub stats_json: Option<PathBuf>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            print_every: 1,
            stats_json: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RadardConfig {
    pub source: SourceConfig,
    pub backend: BackendConfig,
    pub rt: RtConfig,
    pub output: OutputConfig,
    pub geometry: Geometry,
    pub physical: Physical,
    pub cfar: CfarConfig,
    pub chain: ChainParams,
    pub telemetry: TelemetryConfig,
}

impl RadardConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and validate; `origin` names the text in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let cfg: RadardConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn chain_config(&self) -> ChainConfig {
        ChainConfig {
            geometry: self.geometry.clone(),
            physical: self.physical.clone(),
            cfar: self.cfar.clone(),
            chain: self.chain.clone(),
        }
    }

    pub fn backend_kind(&self) -> Result<BackendKind, ConfigError> {
        self.backend
            .kind
            .parse()
            .map_err(|e: radar_dsp::DspError| ConfigError::Invalid {
                key: "backend.kind",
                reason: e.to_string(),
            })
    }

    /// Time the FPGA takes for one frame at the configured cadence (None when
    /// the simulator runs as fast as it can).
    pub fn frame_period(&self) -> Option<std::time::Duration> {
        let us = u64::from(self.source.chunk_period_us) * self.geometry.chunks_per_frame as u64;
        (us > 0).then(|| std::time::Duration::from_micros(us))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.chain_config().validate()?;
        self.rt.validate()?;
        self.backend_kind()?;
        let s = &self.source;
        if s.kind == SourceKind::Replay && s.replay_file.is_none() {
            return Err(ConfigError::Invalid {
                key: "source.replay_file",
                reason: "source.kind = \"replay\" needs the recording to replay".into(),
            });
        }
        if let Err((key, reason)) = self.telemetry.validate() {
            return Err(ConfigError::Invalid { key, reason });
        }
        if s.slots < 2 {
            return Err(ConfigError::Invalid {
                key: "source.slots",
                reason: format!("{} is too few: the ring needs at least 2 slots", s.slots),
            });
        }
        if s.slots > 64 {
            return Err(ConfigError::Invalid {
                key: "source.slots",
                reason: format!("{} is more than the 64 slots a ring may have", s.slots),
            });
        }
        if s.event_timeout_ms == 0 {
            return Err(ConfigError::Invalid {
                key: "source.event_timeout_ms",
                reason: "must be at least 1".into(),
            });
        }
        if s.content == Content::Scene && s.scene_frames == 0 {
            return Err(ConfigError::Invalid {
                key: "source.scene_frames",
                reason: "must be at least 1".into(),
            });
        }
        if self.geometry.frame_bytes() > tegra_p2p::ring::MAX_SLOT_BYTES {
            return Err(ConfigError::Invalid {
                key: "geometry",
                reason: format!(
                    "a frame of {} bytes (n_tx x n_rx x n_loops x n_samples x 4) does not fit a ring slot of at most {} bytes",
                    self.geometry.frame_bytes(),
                    tegra_p2p::ring::MAX_SLOT_BYTES
                ),
            });
        }
        if self.geometry.chunk_bytes() % 4096 != 0 {
            return Err(ConfigError::Invalid {
                key: "geometry.chunks_per_frame",
                reason: format!(
                    "a chunk of {} bytes is not a multiple of 4096 (DMA chunks are page-aligned)",
                    self.geometry.chunk_bytes()
                ),
            });
        }
        if let Some(period) = self.frame_period() {
            // The event timeout must allow one frame period.
            if u128::from(s.event_timeout_ms) < period.as_millis() {
                return Err(ConfigError::Invalid {
                    key: "source.event_timeout_ms",
                    reason: format!(
                        "{} ms is shorter than one frame period ({} ms)",
                        s.event_timeout_ms,
                        period.as_millis()
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_8ms_simulator() {
        let cfg = RadardConfig::parse("", "empty").expect("defaults");
        assert_eq!(cfg.source.kind, SourceKind::Sim);
        assert_eq!(
            cfg.frame_period(),
            Some(std::time::Duration::from_millis(8))
        );
        assert_eq!(cfg.chain_config(), ChainConfig::default());
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[source]\nslots = 1", "source.slots"),
            ("[source]\nkind = \"usb\"", "kind"),
            ("[source]\nslot = 4", "slot"),
            ("[backend]\nkind = \"opencl\"", "backend.kind"),
            ("[rt]\npriority = 200", "rt.priority"),
            ("[geometry]\nn_samples = 100", "geometry.n_samples"),
            (
                "[geometry]\nn_loops = 4096\nn_samples = 65536",
                "does not fit a ring slot",
            ),
            ("[cfar]\npfa = 2.0", "cfar.pfa"),
            ("[source]\nevent_timeout_ms = 2", "source.event_timeout_ms"),
            (
                "[geometry]\nchunks_per_frame = 2048",
                "geometry.chunks_per_frame",
            ),
            ("[source\n", "radard.toml"),
            ("[source]\nkind = \"replay\"", "source.replay_file"),
            ("[source]\nreplay_rate = \"fast\"", "replay_rate"),
            ("[telemetry]\ninterval_ms = 5", "telemetry.interval_ms"),
            ("[telemetry]\nreader = \"ipmi\"", "reader"),
        ];
        for (text, key) in cases {
            let err = RadardConfig::parse(text, "radard.toml")
                .expect_err(text)
                .to_string();
            assert!(err.contains(key), "{text:?} gave {err:?}, wanted {key}");
        }
    }
}
