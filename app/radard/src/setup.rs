//! Start-up: the ring, the frame source, the scene the FPGA plays back, the
//! processing backend. Everything here runs once, before the loop.

use std::time::Duration;

use radar_dsp::scene::{Scene, SceneGenerator, Target};
use radar_dsp::select::{SelectedBackend, select_backend_with_options};
use radar_dsp::{Backend, BackendKind, DspError, SlotAddr};
use tegra_p2p::source::Event;
use tegra_p2p::{
    FrameSource, KmodSource, RingConfig, RingMemory, SimConfig, SimFaults, SimSource, StartParams,
    TxTarget,
};
use thiserror::Error;

use crate::config::{Content, RadardConfig, ReplayRate, SourceKind, Trigger};
use crate::recording::{Recording, sidecar_path};
use crate::replay::ReplaySource;

#[derive(Debug, Error)]
pub enum SetupError {
    #[error("frame source: {0}")]
    Source(#[from] tegra_p2p::Error),
    #[error("processing chain: {0}")]
    Dsp(#[from] DspError),
    #[error("recording: {0}")]
    Recording(#[from] crate::recording::RecordingError),
    #[error("source.replay_file: not set")]
    NoReplayFile,
    #[error("{0}")]
    Trigger(String),
    #[error("source.scene_file: {}: {source}", path.display())]
    SceneFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The frame source in use.
pub enum Source {
    Sim(SimSource),
    Kmod(KmodSource),
    /// A recorded frame file (`radard replay`).
    Replay(ReplaySource),
}

impl Source {
    pub fn as_dyn(&self) -> &dyn FrameSource {
        match self {
            Source::Sim(s) => s,
            Source::Kmod(k) => k,
            Source::Replay(r) => r,
        }
    }

    pub fn as_dyn_mut(&mut self) -> &mut dyn FrameSource {
        match self {
            Source::Sim(s) => s,
            Source::Kmod(k) => k,
            Source::Replay(r) => r,
        }
    }
}

/// Allocates the ring (CUDA-mapped when CUDA works here) and opens the
/// source. Returns notes for the start-up log.
pub fn open_source(cfg: &RadardConfig) -> Result<(Source, Vec<String>), SetupError> {
    let g = &cfg.geometry;
    let ring = RingMemory::new(&RingConfig::new(cfg.source.slots, g.frame_bytes()))?;
    let mut notes: Vec<String> = ring.warnings().to_vec();
    notes.push(format!(
        "ring: {} slots x {} KiB in {} memory{}",
        ring.nr_slots(),
        ring.slot_bytes() >> 10,
        if ring.is_cuda() {
            "CUDA mapped pinned"
        } else {
            "host"
        },
        if ring.is_locked() { ", locked" } else { "" }
    ));
    let source = match cfg.source.kind {
        SourceKind::Sim => Source::Sim(SimSource::new(ring, sim_config(cfg))?),
        SourceKind::Kmod => {
            // The card's completion records only where GPU-triggered
            // processing may run: the GPU reads this ring in place.
            let records = cfg.backend.trigger != Trigger::Cpu
                && cfg.backend.kind != BackendKind::Cpu
                && ring.is_cuda();
            Source::Kmod(if records {
                KmodSource::open_with_records(cfg.source.device, ring, g.chunk_bytes())?
            } else {
                KmodSource::open(cfg.source.device, ring, g.chunk_bytes())?
            })
        }
        SourceKind::Replay => {
            let (replay, note) = open_replay(cfg, ring)?;
            notes.push(note);
            Source::Replay(replay)
        }
    };
    notes.push(format!(
        "source: {} ({} chunks of {} KiB per frame)",
        source.as_dyn().name(),
        g.chunks_per_frame,
        g.chunk_bytes() >> 10
    ));
    Ok((source, notes))
}

/// Opens `source.replay_file` for the configured geometry; the note says
/// what the start-up log should (metadata synthesised for raw frames).
pub fn open_replay(
    cfg: &RadardConfig,
    ring: RingMemory,
) -> Result<(ReplaySource, String), SetupError> {
    let path = cfg
        .source
        .replay_file
        .as_deref()
        .ok_or(SetupError::NoReplayFile)?;
    let recording = Recording::open(path, &cfg.geometry)?;
    let period = match cfg.source.replay_rate {
        ReplayRate::Period => cfg.frame_period(),
        ReplayRate::Max => None,
    };
    let note = if recording.synthesized {
        format!(
            "replay: {}: {} frames, no sidecar ({} missing): raw frames (e.g. radar-dsp scene); \
             metadata synthesised: sequence = frame index, no drops or flags, CRC computed on read",
            path.display(),
            recording.frames,
            sidecar_path(path).display()
        )
    } else {
        format!(
            "replay: {}: {} frames recorded from {} (sidecar {}), {}",
            path.display(),
            recording.frames,
            recording.header.as_ref().map_or("?", |h| h.source.as_str()),
            sidecar_path(path).display(),
            period.map_or("as fast as the loop goes".to_string(), |p| format!(
                "one frame per {:.1} ms",
                p.as_secs_f64() * 1e3
            ))
        )
    };
    let replay = ReplaySource::new(recording, ring, cfg.geometry.chunk_bytes(), period)?;
    Ok((replay, note))
}

/// The simulator's configuration: chunk size and the `[simulator]` faults.
pub fn sim_config(cfg: &RadardConfig) -> SimConfig {
    let f = &cfg.simulator;
    let mut sim = SimConfig::with_chunk_bytes(cfg.geometry.chunk_bytes());
    sim.faults = SimFaults {
        drop_every: f.drop_every,
        short_every: f.short_every,
        corrupt_every: f.corrupt_every,
        crc_error_every: f.crc_error_every,
        stall: (f.stall_at > 0 && f.stall_ms > 0)
            .then(|| (f.stall_at, Duration::from_millis(f.stall_ms))),
        revoke_at: (f.revoke_at > 0).then_some(f.revoke_at),
        seed: f.seed,
        ..SimFaults::default()
    };
    sim.spin_before = Duration::from_micros(u64::from(f.spin_us));
    sim
}

/// Gives the kernel-module source a transmit ring for the fpga sink when
/// it has none yet (scene upload attaches one): one slot, one record.
pub fn attach_fpga_tx(source: &mut Source, record_bytes: usize) -> Result<(), SetupError> {
    if let Source::Kmod(k) = source
        && !k.has_tx()
    {
        let bytes = record_bytes.div_ceil(4096) * 4096;
        k.attach_tx(RingMemory::new(&RingConfig::new(1, bytes))?)?;
    }
    Ok(())
}

/// The scene played back when no scene file is given: a few targets spread
/// over range, velocity and azimuth, at per-sample SNRs a radar sees.
pub fn builtin_scene() -> Scene {
    Scene {
        noise_rms_lsb: 32.0,
        targets: vec![
            Target::new(18.0, 4.5, -20.0, -12.0),
            Target::new(42.5, -11.0, 8.0, -18.0),
            Target::new(77.0, 0.8, 35.0, -8.0),
            Target::new(103.0, 21.0, -45.0, -15.0),
        ],
        frame_period_s: None,
    }
}

/// Generates the scene frames and uploads them to the FPGA's playback memory
/// (the simulator's, or the card's over the transmit channel).
pub fn load_scene(cfg: &RadardConfig, source: &mut Source) -> Result<String, SetupError> {
    if let Source::Replay(r) = source {
        return Ok(format!(
            "scene: none uploaded, the frames come from the recording ({} frames)",
            r.frames()
        ));
    }
    let scene = match &cfg.source.scene_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| SetupError::SceneFile {
                path: path.clone(),
                source,
            })?;
            Scene::from_toml(&text)?
        }
        None => builtin_scene(),
    };
    let chain = cfg.chain_config();
    let generator = SceneGenerator::new(&chain, &scene, cfg.source.scene_seed)?;
    let frames = cfg.source.scene_frames;
    let mut buf = vec![0u8; generator.frame_bytes()];
    match source {
        Source::Sim(sim) => {
            for i in 0..frames {
                generator.frame_into(u64::from(i), &mut buf)?;
                sim.load_playback(i, &buf)?;
            }
        }
        Source::Replay(_) => {}
        Source::Kmod(k) => {
            let tx = RingMemory::new(&RingConfig::new(1, generator.frame_bytes()))?;
            k.attach_tx(tx)?;
            for i in 0..frames {
                generator.frame_into(u64::from(i), &mut buf)?;
                k.transmit(TxTarget::Playback { index: i }, &buf, u64::from(i))?;
                // One transmit slot: wait for it to come back before the next.
                loop {
                    if let Event::TxDone { .. } = k.next_event(Some(Duration::from_secs(5)))? {
                        break;
                    }
                }
            }
        }
    }
    Ok(format!(
        "scene: {} targets, {} frames uploaded for playback (seed {})",
        scene.targets.len(),
        frames,
        cfg.source.scene_seed
    ))
}

/// How the source is started; `chunk_events` for chunk-streamed mode (see
/// [`chunk_streaming`]).
pub fn start_params(cfg: &RadardConfig, chunk_events: bool) -> StartParams {
    let base = match cfg.source.content {
        Content::Scene => StartParams::playback(cfg.source.scene_frames),
        Content::TestPattern => StartParams::test_pattern(),
        Content::Adc => StartParams::adc(),
    };
    let params = base
        .with_chunk_period(cfg.chunk_period())
        .with_event_timeout(Duration::from_millis(u64::from(
            cfg.source.event_timeout_ms,
        )));
    if chunk_events {
        params.with_chunk_events()
    } else {
        params
    }
}

/// Whether chunks are streamed to `backend` (docs/processing-chain.md), and
/// why: on when the configuration asks for it, the backend starts work
/// per chunk, it took the ring's slots (`prepared`), and a frame has more
/// than one chunk.
pub fn chunk_streaming(
    cfg: &RadardConfig,
    backend: &dyn Backend,
    prepared: bool,
) -> (bool, String) {
    let chunks = cfg.geometry.chunks_per_frame;
    let name = backend.name();
    if !cfg.backend.stream_chunks {
        (false, "off (backend.stream_chunks = false)".into())
    } else if !backend.streams_chunks() {
        (
            false,
            format!("off (the {name} backend processes whole frames here)"),
        )
    } else if !prepared {
        (
            false,
            format!("off (the {name} backend cannot read this ring's slots in place)"),
        )
    } else if chunks < 2 {
        (
            false,
            "off (a frame of 1 chunk: nothing lands before the frame is complete)".into(),
        )
    } else {
        (
            true,
            format!("on ({chunks} chunks per frame: each chunk's range work starts as it lands)"),
        )
    }
}

/// Builds the backend and lets it prepare its per-slot work. Returns
/// whether slot indices may be passed to `process`: a backend that cannot
/// use these slots (CUDA, when the ring is not in mapped pinned memory)
/// takes whole frames by their bytes.
pub fn open_backend(
    cfg: &RadardConfig,
    source: &Source,
) -> Result<(SelectedBackend, bool), SetupError> {
    let mut sel =
        select_backend_with_options(cfg.backend.kind, &cfg.chain_config(), &cfg.cuda_options())?;
    let ring = source.as_dyn().ring();
    let slots: Vec<SlotAddr> = (0..ring.nr_slots())
        .map(|s| SlotAddr {
            host_ptr: ring.slot_ptr(s).map_or(0, |p| p as usize),
            device_ptr: ring.slot_device_ptr(s),
            bytes: ring.slot_bytes(),
        })
        .collect();
    let gpu_visible = slots.iter().all(|s| s.device_ptr.is_some());
    let prepared = match sel.backend.prepare_slots(&slots) {
        Ok(()) => true,
        Err(_) if !gpu_visible => false,
        Err(e) => return Err(e.into()),
    };
    Ok((sel, prepared))
}

#[cfg(test)]
mod tests {
    use super::*;
    use radar_dsp::CpuBackend;

    /// A backend that takes whole frames only.
    struct WholeFrames;

    impl Backend for WholeFrames {
        fn name(&self) -> &'static str {
            "whole"
        }
        fn process(
            &mut self,
            _frame: radar_dsp::FrameInput<'_>,
            _out: &mut radar_dsp::Detections,
        ) -> Result<(), DspError> {
            Ok(())
        }
        fn set_cfar_alpha(&mut self, _alpha: &[f64]) -> Result<(), DspError> {
            Ok(())
        }
        fn power_map(&mut self, _out: &mut Vec<f32>) -> Result<(), DspError> {
            Ok(())
        }
    }

    /// The start-up log says whether chunks are streamed and why not: the
    /// configuration, a backend that takes whole frames or not the ring's
    /// slots, or the chunk count.
    #[test]
    fn chunk_streaming_says_why_it_is_off() {
        let mut cfg = RadardConfig::default();
        cfg.geometry.n_loops = 32;
        cfg.geometry.n_samples = 64;
        cfg.cfar.train_range = 4;
        let cpu = CpuBackend::with_threads(&cfg.chain_config(), 1).expect("cpu backend");
        let (on, why) = chunk_streaming(&cfg, &cpu, true);
        assert!(on && why.contains("chunks per frame"), "{why}");
        let (on, why) = chunk_streaming(&cfg, &WholeFrames, true);
        assert!(
            !on && why.contains("whole backend processes whole frames"),
            "{why}"
        );
        let (on, why) = chunk_streaming(&cfg, &cpu, false);
        assert!(
            !on && why.contains("cannot read this ring's slots"),
            "{why}"
        );
        cfg.backend.stream_chunks = false;
        let (on, why) = chunk_streaming(&cfg, &cpu, true);
        assert!(
            !on && why.contains("backend.stream_chunks = false"),
            "{why}"
        );
        cfg.backend.stream_chunks = true;
        cfg.geometry.chunks_per_frame = 1;
        let (on, why) = chunk_streaming(&cfg, &cpu, true);
        assert!(!on && why.contains("a frame of 1 chunk"), "{why}");
        // Chunk events are asked of the source only in chunk-streamed mode.
        assert!(start_params(&cfg, true).chunk_events);
        assert!(!start_params(&cfg, false).chunk_events);
        let parsed = RadardConfig::parse("[backend]\nstream_chunks = false\n", "t").expect("parse");
        assert!(!parsed.backend.stream_chunks);
        assert!(RadardConfig::parse("[backend]\nstream_chunks = 3\n", "t").is_err());
    }
}
