//! The command line: its options and subcommands (clap), and how they apply
//! to the configuration file's values ([`Cli::config`]: each option
//! overrides its key; `--sink` adds to the `[[sink]]` tables; `replay`
//! points the source at the recording).

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, ValueEnum};
use radar_dsp::BackendKind;
use radard::RadardError;
use radard::config::{
    CONFIG_ENV, ConfigSources, Content, LoopPolicy, RadardConfig, ReplayRate, SinkConfig,
    SourceKind, Trigger,
};

#[derive(Parser, Debug)]
#[command(
    name = "radard",
    version,
    about = "Radar appliance: capture frames, run the processing chain every frame period, report detections",
    after_help = "Examples:\n  radard                                  simulator, synthetic scene, 8 ms frames, best backend\n  radard --frames 500 --backend cpu      500 frames on the CPU backend, then a summary\n  radard --content test-pattern          verify every byte of every frame instead of DSP\n  radard --source kmod --device 0        frames from /dev/fpga-p2p0\n  radard --print-config                  the effective configuration as TOML\n  radard record --frames 100 --output run.raw     record 100 frames (+ run.raw.meta.jsonl)\n  radard replay --input run.raw --rate max        process a recording as fast as possible\n\nDetection sinks (--sink, repeatable, or [[sink]] tables in the TOML; docs/detections-format.md):\n  --sink jsonl:/var/lib/radard/detections.jsonl   one JSON object per frame, rotated by size\n                                                  ([[sink]] kind = \"jsonl\", path, rotate_bytes, keep)\n  --sink udp:192.168.1.10:5005                   one datagram (the same JSON line) per frame\n                                                  ([[sink]] kind = \"udp\", address)\n  --sink fpga                                     a binary record per frame to the FPGA's transmit\n                                                  channel ([[sink]] kind = \"fpga\"; board/fpga/detections-record.md)\n  --sink asterix:239.10.10.10:8600                ASTERIX CAT-010 target reports over UDP, unicast or multicast,\n                                                  a frame split over datagrams ([[sink]] kind = \"asterix\", address,\n                                                  sac, sic, max_datagram, multicast_ttl, multicast_loop; docs/asterix.md)\nA sink that cannot be created at start runs degraded and is retried (docs/outputs.md).\n\nsystemd: READY=1 once frames flow, STATUS= every status interval, WATCHDOG=1 while frames\narrive and deadlines hold (WatchdogSec=); after health.good_frames consecutive good frames\nthe verdict goes to health.state_file (default /run/radard/health; docs/health-verdict.md).\n\nConfiguration: --config FILE, else $RADARD_CONFIG, else /etc/radard/radard.toml (built-in\ndefaults when it does not exist); then its drop-ins FILE.d/*.toml in name order (a drop-in's\nkeys replace the file's, table by table; an array, [[sink]] included, replaces the whole\narray); then the options. --print-config names the files it read.\n\nExit status: 0 clean, or stopped by SIGTERM/SIGINT (misses and errors are in the summary);\n1 start-up or source failure; 2 bad configuration or arguments; 3 a run that ended at\n--frames N (or the end of a replay) with payload errors, sequence breaks or deadline misses."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Configuration file (TOML; every key has a default), with its drop-ins
    /// FILE.d/*.toml [default: $RADARD_CONFIG, else /etc/radard/radard.toml
    /// when it exists].
    #[arg(short, long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Frame source: sim (userspace FPGA simulator) or kmod (the fpga_p2p module);
    /// for a recording, `radard replay`.
    #[arg(long, global = true)]
    pub source: Option<SourceKind>,
    /// Device index for --source kmod (/dev/fpga-p2p<N>).
    #[arg(long, global = true)]
    pub device: Option<u32>,
    /// Processing backend (backend.kind).
    #[arg(long, global = true, value_parser = values_of::<BackendKind>())]
    pub backend: Option<BackendKind>,
    /// Process whole frames only: no chunk events, no chunk-streamed work,
    /// no GPU-triggered processing (backend.stream_chunks = false,
    /// backend.trigger = "cpu").
    #[arg(long, global = true)]
    pub whole_frames: bool,
    /// Who starts a frame's work (backend.trigger): gpu (the GPU waits for
    /// the card's completion records itself), cpu (the loop launches it),
    /// auto (gpu where the device can).
    #[arg(long, global = true, value_parser = values_of::<Trigger>())]
    pub trigger: Option<Trigger>,
    /// What the FPGA sends: adc (the radar front end), scene (synthetic radar frames played
    /// back) or test-pattern (verified byte by byte, no DSP).
    #[arg(long, global = true)]
    pub content: Option<Content>,
    /// Stop after this many frames (default: run until SIGINT/SIGTERM).
    #[arg(short = 'n', long, global = true)]
    pub frames: Option<u64>,
    /// Chunk period in microseconds (16 chunks per frame; 0 = as fast as possible, simulator only).
    #[arg(long, global = true)]
    pub chunk_period_us: Option<u32>,
    /// Chunk period in nanoseconds (overrides --chunk-period-us; 62500 = 1 ms frames).
    #[arg(long, global = true)]
    pub chunk_period_ns: Option<u64>,
    /// Print a frame line every N frames (0: status lines only).
    #[arg(long, global = true)]
    pub print_every: Option<u32>,
    /// Detection sink, repeatable: jsonl:PATH, udp:HOST:PORT,
    /// asterix:HOST:PORT or fpga (added to the configuration's [[sink]]
    /// tables).
    #[arg(long = "sink", value_name = "KIND[:WHERE]", global = true)]
    pub sinks: Vec<String>,
    /// What the loop does when it falls behind ([loop] policy).
    #[arg(long, global = true, value_parser = values_of::<LoopPolicy>())]
    pub policy: Option<LoopPolicy>,
    /// Where the health verdict goes (health.state_file).
    #[arg(long, global = true)]
    pub health_file: Option<PathBuf>,
    /// Write the run's summary as JSON to this file at exit.
    #[arg(long, global = true)]
    pub stats_json: Option<PathBuf>,
    /// Refuse to run without real-time scheduling, locked memory and affinity.
    #[arg(long, global = true)]
    pub strict_rt: bool,
    /// Skip the real-time set-up (development).
    #[arg(long, global = true)]
    pub no_rt: bool,
    /// Serial device of the diagnostics link ([diag] port).
    #[arg(long, global = true)]
    pub diag_port: Option<PathBuf>,
    /// Print the effective configuration as TOML (the files read named in
    /// comments) and exit.
    #[arg(long, global = true)]
    pub print_config: bool,
}

/// Besides running (no subcommand): recording frames and replaying them.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Write --frames N frames from the source (options as for a run) to a
    /// raw frame file and its metadata sidecar FILE.meta.jsonl.
    Record {
        /// The frame file to write.
        #[arg(long)]
        output: PathBuf,
    },
    /// Run the loop, backend and outputs over a recorded frame file (or a
    /// `radar-dsp scene` file) instead of a live source.
    Replay {
        /// The frame file (its sidecar FILE.meta.jsonl is used when present).
        #[arg(long)]
        input: PathBuf,
        /// period: one frame per frame period; max: as fast as possible.
        #[arg(long, default_value = "period")]
        rate: ReplayRate,
    },
    /// Decode a detections record as the `fpga` sink sends it
    /// (board/fpga/detections-record.md) and print it as a detections line
    /// (docs/detections-format.md; latency_ns null).
    DecodeRecord {
        /// The record's bytes (e.g. a copy of what the FPGA received).
        #[arg(long)]
        input: PathBuf,
    },
}

/// The values of an enum option, listed on its line of `--help`
/// (`[possible values: ...]`; their descriptions are the configuration's).
fn values_of<T: ValueEnum + Clone + Send + Sync + 'static>() -> impl TypedValueParser<Value = T> {
    let values = T::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value)
        .map(|v| v.help(None));
    PossibleValuesParser::new(values).try_map(|name: String| T::from_str(&name, false))
}

impl Cli {
    /// The configuration files: `--config`, else `$RADARD_CONFIG`, else
    /// the default path, with their drop-ins.
    pub fn config_sources(&self) -> Result<ConfigSources, RadardError> {
        let env = std::env::var_os(CONFIG_ENV);
        Ok(ConfigSources::locate(
            self.config.as_deref(),
            env.as_deref(),
        )?)
    }

    /// The configuration files (or the defaults) with the command line's
    /// options applied, validated.
    pub fn config(&self, sources: &ConfigSources) -> Result<RadardConfig, RadardError> {
        let mut cfg = sources.load()?;
        if let Some(s) = self.source {
            cfg.source.kind = s;
        }
        if let Some(Command::Replay { input, rate }) = &self.command {
            if self.source.is_some() {
                return Err(RadardError::Usage(
                    "radard replay: --source does not apply: the frames come from --input",
                ));
            }
            cfg.source.kind = SourceKind::Replay;
            cfg.source.replay_file = Some(input.clone());
            cfg.source.replay_rate = *rate;
        }
        if let Some(d) = self.device {
            cfg.source.device = d;
        }
        if let Some(b) = self.backend {
            cfg.backend.kind = b;
        }
        if let Some(t) = self.trigger {
            cfg.backend.trigger = t;
        }
        if self.whole_frames {
            cfg.backend.stream_chunks = false;
            cfg.backend.trigger = Trigger::Cpu;
        }
        if let Some(c) = self.content {
            cfg.source.content = c;
        }
        if let Some(p) = self.chunk_period_us {
            cfg.source.chunk_period_us = p;
            cfg.source.chunk_period_ns = None;
        }
        if let Some(p) = self.chunk_period_ns {
            cfg.source.chunk_period_ns = Some(p);
        }
        if let Some(p) = self.print_every {
            cfg.output.print_every = p;
        }
        if let Some(p) = &self.stats_json {
            cfg.output.stats_json = Some(p.clone());
        }
        if self.strict_rt {
            cfg.rt.strict = true;
        }
        if let Some(p) = &self.diag_port {
            cfg.diag.port = Some(p.clone());
        }
        for a in &self.sinks {
            cfg.sinks.push(SinkConfig::from_arg(a)?);
        }
        if let Some(p) = self.policy {
            cfg.frame_loop.policy = p;
        }
        if let Some(p) = &self.health_file {
            cfg.health.state_file = p.clone();
        }
        cfg.validate()?;
        Ok(cfg)
    }
}
