//! The unit a run drives: the frame source and the chain it feeds, opened
//! in the order the hardware wants (the ring and the source, the scene the
//! FPGA plays back, the backend on the ring's slots) and started. radard,
//! the hot-loop test and the loop benchmark all set up through it.

use radar_dsp::Backend;
use radar_dsp::select::SelectedBackend;
use tegra_p2p::FrameSource;

use crate::config::{Content, RadardConfig};
use crate::frame_loop::LoopOptions;
use crate::setup::{self, SetupError, Source};

/// Frames before the loop counts as warm (lazy set-up in backends).
pub const WARMUP_FRAMES: u64 = 4;

/// The source and the chain it feeds.
pub struct Unit {
    // Field order is drop order: the backend (whose GPU-triggered work
    // uses the ring) before the source that owns the ring.
    /// The processing backend; None with test-pattern content (frames are
    /// verified, not processed) or before [`Unit::open_backend`].
    pub backend: Option<SelectedBackend>,
    pub source: Source,
    /// The backend prepared work per ring slot: slot indices may be passed
    /// to `process`.
    pub slots_prepared: bool,
    /// The loop hands each landed chunk to the backend (chunk-streamed
    /// mode).
    pub chunk_streaming: bool,
    /// GPU-triggered processing is armed: the backend's work for every
    /// slot waits on the source's completion records.
    pub gpu_triggered: bool,
}

impl Unit {
    /// Allocates the ring and opens the source; `note` gets the start-up
    /// log's lines.
    pub fn open_source(cfg: &RadardConfig, note: &mut dyn FnMut(&str)) -> Result<Self, SetupError> {
        let (source, notes) = setup::open_source(cfg)?;
        for n in notes {
            note(&n);
        }
        Ok(Unit {
            source,
            backend: None,
            slots_prepared: false,
            chunk_streaming: false,
            gpu_triggered: false,
        })
    }

    /// Uploads the scene the FPGA plays back (scene content).
    pub fn load_scene(
        &mut self,
        cfg: &RadardConfig,
        note: &mut dyn FnMut(&str),
    ) -> Result<(), SetupError> {
        note(&setup::load_scene(cfg, &mut self.source)?);
        Ok(())
    }

    /// Opens the backend on the ring's slots and decides whether chunks
    /// are streamed to it.
    pub fn open_backend(
        &mut self,
        cfg: &RadardConfig,
        note: &mut dyn FnMut(&str),
    ) -> Result<(), SetupError> {
        let (mut sel, prepared) = setup::open_backend(cfg, &self.source)?;
        note(&format!("backend {}: {}", sel.backend.name(), sel.reason));
        // SAFETY: the backend is dropped, or its GPU-triggered work
        // cancelled, before the source and its ring (Unit's field order,
        // Unit::disarm and Drop).
        let (triggered, line) = unsafe {
            crate::trigger::arm(cfg, sel.backend.as_mut(), self.source.as_dyn(), prepared)
        }
        .map_err(SetupError::Trigger)?;
        note(&format!("GPU-triggered processing {line}"));
        let (on, why) = if triggered {
            (
                false,
                "off (GPU-triggered: the GPU waits for each chunk itself)".to_string(),
            )
        } else {
            setup::chunk_streaming(cfg, sel.backend.as_ref(), prepared)
        };
        note(&format!("chunk streaming {why}"));
        self.slots_prepared = prepared;
        self.chunk_streaming = on;
        self.gpu_triggered = triggered;
        self.backend = Some(sel);
        Ok(())
    }

    /// Ends GPU-triggered processing: stops the source (so that nothing
    /// writes the ring any more), then lets the backend's queued work run
    /// out (its results are no frames). Returns the frames flushed, or the
    /// backend's error; None when the mode was not armed. Idempotent.
    pub fn disarm(&mut self) -> Option<Result<u64, radar_dsp::DspError>> {
        if !self.gpu_triggered {
            return None;
        }
        self.gpu_triggered = false;
        // A stop of a stopped source is refused; the source is quiet either way.
        let _ = self.source.as_dyn_mut().stop();
        let backend = self.backend.as_mut()?;
        let t = backend.backend.triggered()?;
        if !t.armed() {
            return None;
        }
        let words = self.source.as_dyn().completion()?;
        Some(t.cancel(
            &crate::trigger::RingWords(words),
            std::time::Duration::from_secs(2),
        ))
    }

    /// What the content needs after the source: with scene content the
    /// scene and the backend; nothing for the test pattern.
    pub fn open_chain(
        &mut self,
        cfg: &RadardConfig,
        note: &mut dyn FnMut(&str),
    ) -> Result<(), SetupError> {
        if cfg.source.content == Content::Scene {
            self.load_scene(cfg, note)?;
        }
        if cfg.source.content.is_radar() {
            self.open_backend(cfg, note)?;
        }
        Ok(())
    }

    /// The source and the chain, for callers with nothing to do between.
    pub fn open(cfg: &RadardConfig, note: &mut dyn FnMut(&str)) -> Result<Self, SetupError> {
        let mut unit = Self::open_source(cfg, note)?;
        unit.open_chain(cfg, note)?;
        Ok(unit)
    }

    /// Gives the fpga sink a transmit ring when the source has none yet.
    pub fn attach_fpga_tx(&mut self, record_bytes: usize) -> Result<(), SetupError> {
        setup::attach_fpga_tx(&mut self.source, record_bytes)
    }

    /// Puts the simulator's producer thread (the FPGA's stand-in, which on
    /// the unit takes no CPU) above a real-time loop at `loop_priority`,
    /// from the next start: at the loop's own priority it would wait for
    /// the loop and the backend's workers to block, and deliver late.
    /// Nothing for other sources.
    pub fn put_simulator_above(&mut self, loop_priority: i32) {
        if let Source::Sim(sim) = &mut self.source {
            sim.set_producer_priority(Some((loop_priority + 1).min(99)));
        }
    }

    /// The simulator's producer scheduling at the last start (None: another
    /// source).
    pub fn simulator_scheduling(&self) -> Option<tegra_p2p::ProducerScheduling> {
        match &self.source {
            Source::Sim(sim) => Some(sim.producer_scheduling()),
            _ => None,
        }
    }

    /// Starts the source's stream, with an event per chunk when
    /// `chunk_events`.
    pub fn start(
        &mut self,
        cfg: &RadardConfig,
        chunk_events: bool,
    ) -> Result<(), tegra_p2p::Error> {
        self.source
            .as_dyn_mut()
            .start(&setup::start_params(cfg, chunk_events))
    }

    /// The source and the backend, as the loop takes them.
    pub fn parts(&mut self) -> (&dyn FrameSource, Option<&mut dyn Backend>) {
        let backend = self
            .backend
            .as_mut()
            .map(|s| s.backend.as_mut() as &mut dyn Backend);
        (self.source.as_dyn(), backend)
    }

    /// The backend's name and why it was chosen, for the logs.
    pub fn backend_description(&self) -> (String, String) {
        self.backend.as_ref().map_or(
            (
                "none".to_string(),
                "test-pattern content: frames verified, no DSP".to_string(),
            ),
            |s| (s.backend.name().to_string(), s.reason.clone()),
        )
    }

    /// Frames the loop runs: `asked`, and a replay ends with its recording.
    pub fn frame_limit(&self, asked: Option<u64>) -> Option<u64> {
        match &self.source {
            Source::Replay(r) => Some(asked.map_or(r.frames(), |n| n.min(r.frames()))),
            _ => asked,
        }
    }

    /// The loop's options for `cfg` on this unit, stopping after
    /// `max_frames`.
    pub fn loop_options(&self, cfg: &RadardConfig, max_frames: Option<u64>) -> LoopOptions {
        LoopOptions {
            period: cfg.frame_period(),
            max_frames,
            warmup_frames: WARMUP_FRAMES,
            print_every: cfg.output.print_every,
            slots_prepared: self.slots_prepared,
            chunk_streaming: self.chunk_streaming,
            gpu_triggered: self.gpu_triggered,
            frames_per_wake: cfg.frame_loop.frames_per_wake,
            event_timeout: std::time::Duration::from_millis(u64::from(cfg.source.event_timeout_ms)),
            policy: cfg.frame_loop.policy,
            power_map_every: cfg.frame_loop.power_map_every,
            backend_error_every: cfg.simulator.backend_error_every,
            ..LoopOptions::new(cfg.source.content)
        }
    }
}

impl Drop for Unit {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.disarm() {
            eprintln!("radard: GPU-triggered processing did not end cleanly: {e}");
        }
    }
}
