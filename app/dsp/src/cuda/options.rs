//! How the chain is launched and waited for: the choices of
//! [`CudaOptions`] (none changes the results) and the kernel shapes they
//! bake into the NVRTC source.

use crate::error::DspError;

/// CFAR tile per block (cells, one thread each), Doppler x range, unless
/// CudaOptions::cfar_tile says otherwise.
const CFAR_TILE: (usize, usize) = (16, 32);

/// Launch-shape choices baked into the kernels as #defines.
#[derive(Clone, Copy, Debug)]
pub(super) struct KernelShape {
    pub cfar_tile: (usize, usize),
}

impl KernelShape {
    pub const DEFAULT: KernelShape = KernelShape {
        cfar_tile: CFAR_TILE,
    };
}

/// Where step 7 over the detection cap (select_overflow) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectAt {
    /// In a select_overflow kernel between cfar_peaks and the angle FFT,
    /// every frame (it returns at once under the cap).
    Kernel,
    /// Not in the frame's graph: when the frame's header says it went over
    /// the cap, `wait` launches a second graph (select_overflow, angle FFT,
    /// refine_output) that redoes the tail with the kept detections.
    HostFallback,
}

/// How a GPU-triggered slot's graph waits for a chunk's completion count
/// (`twait=` in the options' text).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChunkWait {
    /// A stream memory operation (`cuStreamWaitValue32`, GEQ) before every
    /// chunk: the GPU idles while it waits.
    Stream,
    /// Stream waits before every chunk but the last, and a one-thread
    /// kernel polling the count before the last (wait_count): the default.
    /// On the H100 the frame's last work then starts and runs without the
    /// tail an idle GPU's stream wait gave it (record to detections p99.9
    /// 86.5 -> 52.4 us; docs/processing-chain.md section 10).
    #[default]
    Last,
    /// The polling kernel before every chunk.
    Poll,
}

/// How the host thread waits for a frame's work on the GPU. Spelled
/// `spin`, `yield` and `block` on command lines, in TOML and in text.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum GpuWait {
    /// Spin on the CPU: the lowest wake-up latency and no system call, at
    /// the cost of the loop's CPU time for the whole GPU run.
    #[default]
    Spin,
    /// Spin, yielding the CPU between polls.
    Yield,
    /// Sleep until the GPU's completion interrupt (a blocking system call):
    /// the least CPU time, a few microseconds more latency.
    Block,
}

impl GpuWait {
    /// The spelling the command line, TOML and `CudaOptions::parse` use.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuWait::Spin => "spin",
            GpuWait::Yield => "yield",
            GpuWait::Block => "block",
        }
    }
}

impl std::fmt::Display for GpuWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Choices in how the chain is launched (docs/processing-chain.md says why
/// the defaults are what they are). The results do not depend on them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// Launch doppler_power, cfar_peaks, select_overflow and refine_output
    /// as programmatic dependents (PDL) of the kernel before them. `None`: on
    /// devices of compute capability 9.0 and later (PDL needs sm_90).
    pub pdl: Option<bool>,
    /// Where the selection over the detection cap runs.
    pub select: SelectAt,
    /// CFAR tile (Doppler rows, range bins), one thread a cell: at most
    /// 1024 cells.
    pub cfar_tile: (usize, usize),
    /// How the host waits for the GPU.
    pub wait: GpuWait,
    /// GPU-triggered mode: how a slot's graph waits for each chunk.
    pub chunk_wait: ChunkWait,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            pdl: None,
            select: SelectAt::HostFallback,
            cfar_tile: KernelShape::DEFAULT.cfar_tile,
            wait: GpuWait::default(),
            chunk_wait: ChunkWait::default(),
        }
    }
}

impl CudaOptions {
    /// Parse `key=value` pairs separated by commas (`pdl=on|off|auto`,
    /// `select=kernel|host`, `cfar=DxR`, `wait=spin|yield|block`,
    /// `twait=stream|last|poll`).
    pub fn parse(text: &str) -> Result<Self, DspError> {
        let mut o = CudaOptions::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = || {
                DspError::config(
                    "cuda options",
                    format!(
                        "cannot use {item:?} (pdl=on|off|auto, select=kernel|host, cfar=DxR, wait=spin|yield|block, twait=stream|last|poll)"
                    ),
                )
            };
            let (k, v) = item.split_once('=').ok_or_else(bad)?;
            match (k.trim(), v.trim()) {
                ("pdl", "on") => o.pdl = Some(true),
                ("pdl", "off") => o.pdl = Some(false),
                ("pdl", "auto") => o.pdl = None,
                ("select", "kernel") => o.select = SelectAt::Kernel,
                ("select", "host") => o.select = SelectAt::HostFallback,
                ("cfar", tile) => {
                    let (d, r) = tile.split_once('x').ok_or_else(bad)?;
                    let d: usize = d.parse().map_err(|_| bad())?;
                    let r: usize = r.parse().map_err(|_| bad())?;
                    o.cfar_tile = (d, r);
                }
                ("twait", "stream") => o.chunk_wait = ChunkWait::Stream,
                ("twait", "last") => o.chunk_wait = ChunkWait::Last,
                ("twait", "poll") => o.chunk_wait = ChunkWait::Poll,
                ("wait", w) => {
                    o.wait = <GpuWait as clap::ValueEnum>::from_str(w, false).map_err(|_| bad())?
                }
                _ => return Err(bad()),
            }
        }
        o.validate()?;
        Ok(o)
    }

    /// The kernels' limits on the shape choices.
    pub fn validate(&self) -> Result<(), DspError> {
        let (d, r) = self.cfar_tile;
        if d == 0 || r == 0 || d * r > 1024 || (d * r) % 32 != 0 {
            return Err(DspError::config(
                "cuda options cfar",
                format!("a {d}x{r} tile: one thread a cell, whole warps, at most 1024"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Launch options parse to what they say; anything the kernels cannot
    /// take is an error naming the option, never a panic later.
    #[test]
    fn options_parse_and_validate() {
        let o = CudaOptions::parse("pdl=off, select=kernel,cfar=32x16,wait=block")
            .expect("valid options");
        assert_eq!(o.wait, GpuWait::Block);
        assert_eq!(o.pdl, Some(false));
        assert_eq!(o.select, SelectAt::Kernel);
        assert_eq!(o.cfar_tile, (32, 16));
        assert_eq!(o.chunk_wait, ChunkWait::Last);
        for (text, w) in [
            ("twait=stream", ChunkWait::Stream),
            ("twait=last", ChunkWait::Last),
            ("twait=poll", ChunkWait::Poll),
        ] {
            assert_eq!(CudaOptions::parse(text).expect(text).chunk_wait, w);
        }
        assert!(CudaOptions::parse("twait=never").is_err());
        assert_eq!(
            CudaOptions::parse("").expect("empty"),
            CudaOptions::default()
        );
        assert!(CudaOptions::default().validate().is_ok());
        for bad in [
            "pdl=maybe",
            "select=cfar",
            "cfar=0x32",
            "cfar=33x33",
            "cfar=8x3",
            "cfar=8",
            "split=3",
            "unroll=16",
            "unroll=-1",
            "x",
            "pdl",
        ] {
            match CudaOptions::parse(bad) {
                Err(DspError::Config { key, .. }) => assert!(key.starts_with("cuda options")),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    /// The enums' spellings are the same on the command line, in TOML
    /// (serde) and in text (Display), and `CudaOptions::parse` takes them.
    #[test]
    fn gpu_wait_spellings() {
        use clap::ValueEnum;
        for (w, text) in [
            (GpuWait::Spin, "spin"),
            (GpuWait::Yield, "yield"),
            (GpuWait::Block, "block"),
        ] {
            assert_eq!(w.to_string(), text);
            assert_eq!(GpuWait::from_str(text, false), Ok(w));
            assert_eq!(
                serde_json::to_string(&w).expect("serialize"),
                format!("\"{text}\"")
            );
            let back: GpuWait = serde_json::from_str(&format!("\"{text}\"")).expect("parse");
            assert_eq!(back, w);
            let o = CudaOptions::parse(&format!("wait={text}")).expect("options");
            assert_eq!(o.wait, w);
        }
        assert_eq!(GpuWait::value_variants().len(), 3);
        assert!(serde_json::from_str::<GpuWait>("\"Spin\"").is_err());
    }
}
