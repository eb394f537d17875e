//! GPU-triggered processing on the unit (docs/processing-chain.md,
//! section 10): whether it runs (`backend.trigger`, the start-up log's one
//! line), and the source's completion records as the backend sees them.

use std::sync::atomic::AtomicU32;

use radar_dsp::{Backend, CompletionAccess};
use tegra_p2p::{CompletionWords, FrameSource};

use crate::config::{RadardConfig, Trigger};

/// tegra-p2p's completion records as radar-dsp's backends use them.
pub struct RingWords<'a>(pub CompletionWords<'a>);

impl CompletionAccess for RingWords<'_> {
    fn slots(&self) -> u32 {
        self.0.slots()
    }
    fn chunks_per_frame(&self) -> u32 {
        self.0.chunks_per_frame()
    }
    fn device_ptr(&self, slot: u32) -> Option<u64> {
        self.0.device_ptr(slot)
    }
    fn landed(&self, slot: u32) -> u32 {
        self.0.landed(slot)
    }
    fn satisfy(&self, slot: u32) {
        self.0.satisfy(slot)
    }
    fn reset(&self, slot: u32) {
        self.0.reset(slot)
    }
    fn scratch(&self) -> &AtomicU32 {
        self.0.scratch()
    }
    fn scratch_device_ptr(&self) -> Option<u64> {
        self.0.scratch_device_ptr()
    }
    fn word(&self, slot: u32) -> &AtomicU32 {
        self.0.word(slot)
    }
}

/// Why GPU-triggered processing cannot run with this backend and source,
/// before the device itself is asked (None: it may).
pub fn obstacle(
    backend: &mut dyn Backend,
    source: &dyn FrameSource,
    prepared: bool,
) -> Option<String> {
    let name = backend.name();
    if backend.triggered().is_none() {
        Some(format!("the {name} backend has no GPU to trigger"))
    } else if !prepared {
        Some(format!(
            "the {name} backend cannot read this ring's slots in place"
        ))
    } else if source.completion().is_none() {
        Some(format!(
            "the source {} writes no completion records",
            source.name()
        ))
    } else {
        None
    }
}

/// Arms GPU-triggered processing when `backend.trigger` and the parts
/// allow it. Returns whether it is on and the start-up log's line; an
/// error only when `backend.trigger = "gpu"` and it cannot be.
///
/// # Safety
/// The backend is dropped, or its mode cancelled, before the source's ring
/// memory is freed (`Unit` does both in that order).
pub unsafe fn arm(
    cfg: &RadardConfig,
    backend: &mut dyn Backend,
    source: &dyn FrameSource,
    prepared: bool,
) -> Result<(bool, String), String> {
    if cfg.backend.trigger == Trigger::Cpu {
        return Ok((false, "off (backend.trigger = \"cpu\")".to_string()));
    }
    let why_not = match obstacle(backend, source, prepared) {
        Some(why) => why,
        None => {
            let words = source.completion().map(RingWords);
            match (backend.triggered(), words) {
                (Some(t), Some(words)) => {
                    // SAFETY: the caller's contract.
                    match unsafe { t.arm(&words) } {
                        Ok(line) => return Ok((true, format!("on: {line}"))),
                        Err(e) => e.to_string(),
                    }
                }
                _ => "unavailable".to_string(),
            }
        }
    };
    if cfg.backend.trigger == Trigger::Gpu {
        Err(format!(
            "backend.trigger = \"gpu\" but GPU-triggered processing cannot run: {why_not}"
        ))
    } else {
        Ok((false, format!("off ({why_not}); CPU-triggered")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radar_dsp::CpuBackend;
    use tegra_p2p::{MemoryKind, RingConfig, RingMemory, SimConfig, SimSource};

    fn small() -> RadardConfig {
        RadardConfig::parse(
            "[geometry]\nn_tx = 2\nn_loops = 32\nn_samples = 64\nchunks_per_frame = 4\n[cfar]\ntrain_doppler = 2\ntrain_range = 4\n",
            "t",
        )
        .expect("config")
    }

    /// The key, its default, and the one line radard logs when the mode
    /// cannot run: where the backend cannot trigger (the CPU backend, as
    /// on a machine without CUDA) radard says so and runs CPU-triggered;
    /// `trigger = "gpu"` refuses to start instead; `"cpu"` never tries.
    #[test]
    fn trigger_falls_back_with_one_line_or_refuses() {
        let mut cfg = small();
        assert_eq!(cfg.backend.trigger, Trigger::Auto, "the default");
        for (text, want) in [
            ("auto", Trigger::Auto),
            ("gpu", Trigger::Gpu),
            ("cpu", Trigger::Cpu),
        ] {
            let parsed = RadardConfig::parse(&format!("[backend]\ntrigger = \"{text}\"\n"), "t")
                .expect("parse");
            assert_eq!(parsed.backend.trigger, want);
        }
        let e = RadardConfig::parse("[backend]\ntrigger = \"fpga\"\n", "t").unwrap_err();
        assert!(e.to_string().contains("trigger"), "{e}");

        let g = &cfg.geometry;
        let ring =
            RingMemory::new(&RingConfig::new(4, g.frame_bytes()).with_memory(MemoryKind::Host))
                .expect("ring");
        let sim = SimSource::new(ring, SimConfig::with_chunk_bytes(g.chunk_bytes())).expect("sim");
        assert!(sim.completion().is_some(), "the simulator writes records");
        let mut cpu = CpuBackend::with_threads(&cfg.chain_config(), 1).expect("cpu backend");
        // SAFETY: nothing is armed (the CPU backend cannot be).
        let (on, line) = unsafe { arm(&cfg, &mut cpu, &sim, true) }.expect("auto falls back");
        assert!(!on);
        assert_eq!(
            line,
            "off (the cpu backend has no GPU to trigger); CPU-triggered"
        );
        cfg.backend.trigger = Trigger::Gpu;
        // SAFETY: as above.
        let e = unsafe { arm(&cfg, &mut cpu, &sim, true) }.unwrap_err();
        assert!(
            e.contains("backend.trigger = \"gpu\"") && e.contains("no GPU"),
            "{e}"
        );
        cfg.backend.trigger = Trigger::Cpu;
        // SAFETY: as above.
        let (on, line) = unsafe { arm(&cfg, &mut cpu, &sim, true) }.expect("cpu");
        assert!(!on && line.contains("backend.trigger = \"cpu\""), "{line}");
    }
}
