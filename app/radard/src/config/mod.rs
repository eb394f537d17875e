//! The configuration file of `radard` (TOML). Every section is optional and
//! has defaults; unknown keys are refused; every error names the key.
//! `files` finds and merges the files: `/etc/radard/radard.toml` (or
//! `RADARD_CONFIG`, or `--config`) and its drop-ins `radard.toml.d/*.toml`.
//!
//! ```toml
//! [source]
//! kind = "sim"              # sim | kmod | replay
//! device = 0                # /dev/fpga-p2p<device> (kmod)
//! slots = 4                 # ring slots, >= 2
//! content = "scene"         # adc (the front end) | scene (synthetic radar frames) | test-pattern
//! chunk_period_us = 500     # 16 chunks x 500 us = one frame per 8 ms
//! # chunk_period_ns = 62500 # finer; overrides chunk_period_us (1 ms frames)
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
//!                           # the backend can (CPU, CUDA); false: whole frames
//! gpu_wait = "spin"         # spin | block | yield: how the loop waits for
//!                           # the GPU (block: less CPU, a little more latency)
//! trigger = "auto"          # auto | gpu | cpu: GPU-triggered processing (the
//!                           # GPU waits for the card's completion records;
//!                           # the loop wakes once a frame) where the device
//!                           # can, else CPU-triggered as above
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
//! status_interval_ms = 1000 # status line, STATUS=, loop CPU time
//!
//! [loop]
//! policy = "process-all"    # process-all | skip-to-newest
//! power_map_every = 125     # publish a 64x64 power map every N frames; 0 = never
//! frames_per_wake = 1       # GPU-triggered: one wake-up per N frames (N <= slots / 2)
//!
//! [health]
//! good_frames = 1000        # consecutive good frames before the verdict
//! state_file = "/run/radard/health"
//! command = []              # e.g. ["/usr/bin/mark-good"]; run once, after the file
//!
//! [[sink]]                  # any number of sinks (docs/detections-format.md)
//! kind = "jsonl"            # jsonl | udp | fpga | asterix
//! path = "/var/lib/radard/detections.jsonl"
//! rotate_bytes = 67108864   # start a new file past this size; 0 = never
//! keep = 4                  # rotated files kept (path.1 .. path.K)
//! # kind = "udp", address = "192.168.1.10:5005"
//! # kind = "fpga"           # the FPGA's transmit channel (board/fpga/detections-record.md)
//! # kind = "asterix", address = "239.10.10.10:8600", sac = 0, sic = 1,
//! #   max_datagram = 1400, multicast_ttl = 1, multicast_loop = true
//! #                         # CAT-010 target reports (docs/asterix.md)
//!
//! [simulator]               # fault injection of --source sim (tests)
//! drop_every = 0            # drop every Nth frame at the source
//! short_every = 0           # deliver every Nth frame short
//! crc_error_every = 0       # flag every Nth frame with a CRC mismatch
//! stall_at = 0              # before frame N (0 = never) ...
//! stall_ms = 0              # ... produce nothing for this long
//! revoke_at = 0             # before frame N (0 = never) the ring is revoked
//! backend_error_every = 0   # fail the chain on every Nth frame
//! spin_us = 0               # spin this long before each chunk is due instead
//!                           # of sleeping to it (0 = sleep only; see below)
//!
//! [telemetry]
//! enabled = true            # GPU temperature, clock, load, throttling
//! reader = "auto"           # auto (NVML, else Jetson sysfs) | nvml | sysfs
//! sysfs_root = "/"          # where sys/class/... is read (tests: a fixture)
//! interval_ms = 1000
//! [diag]
//! port = "/dev/ttyTHS0"     # serial diagnostics link; none without it
//! baud = 115200
//! [fpga_reset]              # the FPGA's reset line (src/fpga_reset.rs)
//! enabled = false
//! [time]                    # the frames' time and its quality (src/timekeeping/)
//! phc = "auto"              # the card's PTP clock: "auto" (from the card's
//!                           # sysfs node) or a device path ("/dev/fpga-ptp")
//! interval_ms = 1000        # how often it is read against the system clock
//! samples = 5               # readings per look (the tightest is kept)
//! lock_threshold_ns = 100000 # locked: within this of the system clock ...
//! lock_readings = 3         # ... this many readings in a row
//! holdover_s = 600          # holdover, then free-running
//! holdover_ppb = 10000      # the bound's growth in holdover
//! step_threshold_ns = 1000000 # a jump past the drift: a clock step
//! # utc_offset_s = 37       # TAI - UTC; left out: the kernel's
//!
//! # The processing chain: [geometry], [physical], [cfar], [chain]
//! # (see docs/processing-chain.md).
//! ```
//!
//! `source` is the `[source]` section, `sink` the `[[sink]]` tables (and
//! `--sink`).

mod error;
mod files;
mod sink;
mod source;

use std::path::PathBuf;

use radar_dsp::config::ChainParams;
use radar_dsp::cuda::{CudaOptions, GpuWait};
use radar_dsp::{BackendKind, CfarConfig, ChainConfig, Geometry, Physical};
use serde::{Deserialize, Serialize};

use crate::rt::RtConfig;
use crate::telemetry::TelemetryConfig;

pub use error::ConfigError;
pub use files::{BaseChoice, CONFIG_ENV, ConfigSources, DEFAULT_CONFIG_PATH};
pub use sink::{
    DEFAULT_MAX_DATAGRAM, DEFAULT_SAC, DEFAULT_SIC, MAX_MAX_DATAGRAM, MIN_MAX_DATAGRAM, SINK_KINDS,
    SinkArgError, SinkConfig, SinkKind, resolve,
};
pub use source::{Content, ReplayRate, SourceConfig, SourceKind};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    pub kind: BackendKind,
    /// Chunk-streamed mode (docs/processing-chain.md): ask the source for an
    /// event per DMA chunk and let the backend start each chunk's range
    /// work as it lands, so that only the last chunk's and the rest of the
    /// chain remain when the frame completes. Used when the backend can
    /// (CUDA with the ring in mapped memory); the CPU backend takes whole
    /// frames either way.
    pub stream_chunks: bool,
    /// How the loop waits for the GPU's work: `spin` (default: no system
    /// call, the loop's core busy while the GPU runs) or `block` (sleep until
    /// the GPU's interrupt: far less CPU time, a little more latency);
    /// `yield` spins yielding the CPU.
    pub gpu_wait: GpuWait,
    /// GPU-triggered processing (docs/processing-chain.md, section 10).
    pub trigger: Trigger,
    /// Launch choices other than the CUDA backend's defaults, for
    /// benchmarks (`trigger_latency --cuda-options`); not a configuration
    /// key (`gpu_wait` still applies).
    #[serde(skip)]
    pub cuda_launch: Option<CudaOptions>,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: BackendKind::Auto,
            stream_chunks: true,
            gpu_wait: GpuWait::Spin,
            trigger: Trigger::Auto,
            cuda_launch: None,
        }
    }
}

/// Who starts a frame's work (`backend.trigger`, `--trigger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Trigger {
    /// GPU-triggered where the backend, the source and the device can
    /// (the CUDA backend on a ring whose source writes completion records,
    /// a device whose stream waits pass the self-test on the ring's
    /// memory); CPU-triggered otherwise, with one log line saying why.
    #[default]
    Auto,
    /// GPU-triggered, or refuse to start.
    Gpu,
    /// CPU-triggered: the loop hands each chunk (or the whole frame) to the
    /// backend (`stream_chunks`).
    Cpu,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Trigger::Auto => "auto",
            Trigger::Gpu => "gpu",
            Trigger::Cpu => "cpu",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    pub print_every: u32,
    pub stats_json: Option<PathBuf>,
    pub status_interval_ms: u32,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            print_every: 1,
            stats_json: None,
            status_interval_ms: 1000,
        }
    }
}

/// What the loop does when it falls behind (`[loop] policy`, `--policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LoopPolicy {
    /// Process every delivered frame, however late.
    #[default]
    #[value(name = "process-all")]
    ProcessAll,
    /// Release a frame unprocessed (dropped, reason `late`) when a newer
    /// one is already complete.
    #[value(name = "skip-to-newest")]
    SkipToNewest,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopConfig {
    pub policy: LoopPolicy,
    pub power_map_every: u32,
    /// GPU-triggered mode: the loop sleeps until this many frames are done
    /// (one wake-up for them all); at most half the ring's slots, so the
    /// source has free slots while the loop sleeps. Their detections are
    /// ready as soon as the GPU is done (deadlines are judged by that); the
    /// sinks get them when the loop wakes.
    pub frames_per_wake: u32,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            policy: LoopPolicy::ProcessAll,
            power_map_every: 125,
            frames_per_wake: 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    pub good_frames: u64,
    pub state_file: PathBuf,
    pub command: Vec<String>,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            good_frames: 1000,
            state_file: PathBuf::from("/run/radard/health"),
            command: Vec::new(),
        }
    }
}

/// Fault injection of the simulator source (ignored with `kmod`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SimulatorConfig {
    pub drop_every: u64,
    pub short_every: u64,
    pub crc_error_every: u64,
    pub corrupt_every: u64,
    pub stall_at: u64,
    pub stall_ms: u64,
    pub backend_error_every: u64,
    /// Before frame N (0 = never), the ring is revoked as if its memory
    /// went away: the run ends with the source's error.
    pub revoke_at: u64,
    pub seed: u64,
    /// The simulator sleeps until this many microseconds before each chunk
    /// is due and spins the rest, so that its chunks land on time where
    /// timer wake-ups come late (a virtual machine whose idle CPUs the
    /// hypervisor deschedules). It costs the simulator's thread a CPU at
    /// short chunk periods; the FPGA it stands in for has no such jitter.
    pub spin_us: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RadardConfig {
    pub source: SourceConfig,
    pub backend: BackendConfig,
    pub rt: RtConfig,
    pub output: OutputConfig,
    pub diag: crate::diag::DiagConfig,
    #[serde(rename = "loop")]
    pub frame_loop: LoopConfig,
    pub health: HealthConfig,
    pub simulator: SimulatorConfig,
    #[serde(rename = "sink", skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkConfig>,
    pub geometry: Geometry,
    pub physical: Physical,
    pub cfar: CfarConfig,
    pub chain: ChainParams,
    pub telemetry: TelemetryConfig,
    pub fpga_reset: crate::fpga_reset::FpgaResetConfig,
    pub time: crate::timekeeping::TimeConfig,
}

impl RadardConfig {
    /// Parse and validate; `origin` names the text in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let cfg = Self::parse_unvalidated(text, origin)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse only: syntax, types and known keys (a drop-in on its own).
    pub fn parse_unvalidated(text: &str, origin: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| {
            // A `[[sink]]` table that makes no sink is named by its index
            // and key, as the checks of `validate` name theirs.
            match sink::first_bad_table(text) {
                Some(bad) => ConfigError::InFile {
                    files: origin.to_string(),
                    inner: Box::new(bad),
                },
                None => ConfigError::Parse {
                    path: origin.to_string(),
                    message: e.to_string().trim_end().to_string(),
                },
            }
        })
    }

    pub fn chain_config(&self) -> ChainConfig {
        ChainConfig {
            geometry: self.geometry.clone(),
            physical: self.physical.clone(),
            cfar: self.cfar.clone(),
            chain: self.chain.clone(),
        }
    }

    /// Time the FPGA takes for one frame at the configured cadence (None when
    /// the simulator runs as fast as it can).
    pub fn frame_period(&self) -> Option<std::time::Duration> {
        let ns = self.chunk_period().as_nanos() as u64 * self.geometry.chunks_per_frame as u64;
        (ns > 0).then(|| std::time::Duration::from_nanos(ns))
    }

    /// The chunk period (`source.chunk_period_ns`, else `chunk_period_us`).
    pub fn chunk_period(&self) -> std::time::Duration {
        match self.source.chunk_period_ns {
            Some(ns) => std::time::Duration::from_nanos(ns),
            None => std::time::Duration::from_micros(u64::from(self.source.chunk_period_us)),
        }
    }

    /// The CUDA backend's options: its defaults, waiting as
    /// `backend.gpu_wait` says.
    pub fn cuda_options(&self) -> CudaOptions {
        CudaOptions {
            wait: self.backend.gpu_wait,
            ..self.backend.cuda_launch.clone().unwrap_or_default()
        }
    }

    /// Index of the `fpga` sink among the sinks, if there is one.
    pub fn fpga_sink_index(&self) -> Option<usize> {
        self.sinks.iter().position(|s| s.kind() == SinkKind::Fpga)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.chain_config().validate()?;
        self.rt.validate()?;
        self.fpga_reset.validate()?;
        self.diag
            .validate()
            .map_err(|(key, reason)| ConfigError::Invalid { key, reason })?;
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
        if let Err((key, reason)) = self.time.validate() {
            return Err(ConfigError::Invalid { key, reason });
        }
        if self.simulator.spin_us > 100_000 {
            return Err(ConfigError::Invalid {
                key: "simulator.spin_us",
                reason: format!(
                    "{} us is more than the 100000 us (0.1 s) allowed",
                    self.simulator.spin_us
                ),
            });
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
        let k = self.frame_loop.frames_per_wake;
        if k == 0 || 2 * k > s.slots {
            return Err(ConfigError::Invalid {
                key: "loop.frames_per_wake",
                reason: format!(
                    "{k} is not in 1..={} (at most half of source.slots = {}: the source fills the other slots while the loop sleeps)",
                    s.slots / 2,
                    s.slots
                ),
            });
        }
        if s.event_timeout_ms == 0 {
            return Err(ConfigError::Invalid {
                key: "source.event_timeout_ms",
                reason: "must be at least 1".into(),
            });
        }
        if s.content == Content::Adc && s.kind == SourceKind::Sim {
            return Err(ConfigError::Invalid {
                key: "source.content",
                reason: "adc is the card's front end (source.kind = \"kmod\", or a recording \
                         with \"replay\"); the simulator has none: use scene"
                    .into(),
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
        if !self.geometry.chunk_bytes().is_multiple_of(4096) {
            return Err(ConfigError::Invalid {
                key: "geometry.chunks_per_frame",
                reason: format!(
                    "a chunk of {} bytes is not a multiple of 4096 (DMA chunks are page-aligned)",
                    self.geometry.chunk_bytes()
                ),
            });
        }
        if self.output.status_interval_ms == 0 {
            return Err(ConfigError::Invalid {
                key: "output.status_interval_ms",
                reason: "must be at least 1".into(),
            });
        }
        if self.health.good_frames == 0 {
            return Err(ConfigError::Invalid {
                key: "health.good_frames",
                reason: "must be at least 1".into(),
            });
        }
        if self.health.command.first().is_some_and(|c| c.is_empty()) {
            return Err(ConfigError::Invalid {
                key: "health.command",
                reason: "the program (first element) is empty".into(),
            });
        }
        if self.sinks.len() > crate::status::MAX_SINKS {
            return Err(ConfigError::Invalid {
                key: "sink",
                reason: format!(
                    "{} sinks; at most {}",
                    self.sinks.len(),
                    crate::status::MAX_SINKS
                ),
            });
        }
        for (i, sink) in self.sinks.iter().enumerate() {
            sink.validate(i)?;
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
            (
                "[backend]\nkind = \"opencl\"",
                "unknown variant `opencl`, expected one of `auto`, `cuda`, `cpu`",
            ),
            (
                "[backend]\ngpu_wait = \"nap\"",
                "unknown variant `nap`, expected one of `spin`, `yield`, `block`",
            ),
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
            ("[diag]\nbaud = 7", "diag.baud"),
            ("[diag]\nport = \"\"", "diag.port"),
            ("[[sink]]\nkind = \"smtp\"", "sink[0].kind"),
            ("[[sink]]\nkind = \"jsonl\"", "sink[0].path"),
            (
                "[[sink]]\nkind = \"fpga\"\n[[sink]]\nkind = \"fpga\"\npath = \"x\"",
                "sink[1].path: a fpga sink takes no path",
            ),
            (
                "[[sink]]\nkind = \"jsonl\"\npath = \"x\"\nkeep = 0",
                "sink[0].keep",
            ),
            (
                "[[sink]]\nkind = \"udp\"\naddress = \"nohost\"",
                "sink[0].address",
            ),
            (
                "[[sink]]\nkind = \"fpga\"\n[[sink]]\nkind = \"udp\"\naddress = \"1.2.3.4:99999\"",
                "sink[1].address",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"127.0.0.1:8600\"\nsac = 256",
                "sink[0].sac: 256 is out of range",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"127.0.0.1:8600\"\nsic = -1",
                "sink[0].sic: -1 is out of range",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"no.such.host.invalid:8600\"",
                "sink[0].address",
            ),
            (
                "[[sink]]\nkind = \"asterix\"",
                "sink[0].address: a sink of kind = \"asterix\" needs an address",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"127.0.0.1:8600\"\nmax_datagram = 23",
                "sink[0].max_datagram: 23 bytes is too small for one record",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"127.0.0.1:8600\"\nmax_datagram = 70000",
                "sink[0].max_datagram",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"127.0.0.1:8600\"\nmulticast_ttl = 2",
                "sink[0].multicast_ttl: \"127.0.0.1:8600\" is not a multicast group",
            ),
            (
                "[[sink]]\nkind = \"asterix\"\naddress = \"239.0.0.1:8600\"\nmulticast_ttl = 300",
                "sink[0].multicast_ttl: 300 is more than 255",
            ),
            (
                "[[sink]]\nkind = \"udp\"\naddress = \"127.0.0.1:8600\"\nsic = 1",
                "sink[0].sic: only an asterix sink takes sic",
            ),
            ("[loop]\npolicy = \"fastest\"", "policy"),
            ("[health]\ngood_frames = 0", "health.good_frames"),
        ];
        for (text, key) in cases {
            let err = RadardConfig::parse(text, "radard.toml")
                .expect_err(text)
                .to_string();
            assert!(err.contains(key), "{text:?} gave {err:?}, wanted {key}");
            // One "config:" prefix, also for the chain's own checks.
            assert!(!err.contains("config: config"), "{text:?} gave {err:?}");
        }
    }
}
