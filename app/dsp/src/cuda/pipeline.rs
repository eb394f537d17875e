//! The chain on one CUDA stream: buffers, compiled kernels (FFTs included),
//! the launch sequence, and its capture as a graph per input buffer.

use std::borrow::Cow;
use std::sync::Arc;

use bytemuck::{Pod, Zeroable};
use cudarc::driver::{CudaContext, CudaFunction, CudaGraph, CudaModule, CudaStream, sys};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};

use crate::cfar::CfarTables;
use crate::config::ChainConfig;
use crate::detection::{Detection, Detections};
use crate::error::DspError;
use crate::spectra::PACKED_BYTES;
use crate::window::hann_periodic;

use cuda_mem::{DeviceMemory, MappedHostBuffer, Mapping, cuda_err};

use super::options::{ChunkWait, CudaOptions, KernelShape, SelectAt};

#[cfg(feature = "instrument")]
mod instrument;
mod trigger;
#[cfg(feature = "instrument")]
pub use instrument::StageTiming;
#[cfg(feature = "instrument")]
pub(super) use instrument::count_kernel_nodes;
pub(super) use trigger::{HostWake, TriggerTargets};

const KERNELS_CU: &str = include_str!("kernels.cu");
/// Instrumented builds only (radar-dsp, cuda_matches_cpu, the unit tests;
/// never radard as shipped): the path of a kernels.cu to compile instead of
/// the built-in one, so that a kernel change can be measured and checked on
/// the GPU machine without a new build.
#[cfg(feature = "instrument")]
pub const KERNELS_CU_ENV: &str = "RADAR_KERNELS_CU";
/// The kernels only instrumented runs launch (a gate, an empty kernel).
#[cfg(feature = "instrument")]
const INSTRUMENT_CU: &str = include_str!("instrument.cu");

/// Static shared memory a block may use without opting in.
const SHARED_LIMIT: usize = 48 * 1024;
/// refine_output keeps the output keys of all kept detections in shared
/// memory (4 bytes each).
pub const MAX_DETECTIONS_LIMIT: usize = 4096;
/// Warps per block of refine_output (REFINE_WARPS in kernels.cu).
const REFINE_WARPS: usize = 8;
/// The most kernel arguments of any kernel in kernels.cu.
const MAX_KERNEL_ARGS: usize = 12;
/// Chunk-streamed mode is set up for frames of 2 to this many DMA chunks
/// (a graph per chunk and slot; the landed chunks are a bit mask).
pub const MAX_STREAMED_CHUNKS: usize = 64;
/// The largest FFTs the kernels take (threads per block and shared memory:
/// range_fft and doppler_power in kernels.cu).
const MAX_SAMPLES: usize = 4096;
const MAX_LOOPS: usize = 1024;

/// Loops (rows) per block of range_fft and its threads, as RANGE_ROWS and
/// RANGE_THREADS in kernels.cu (256 samples: the register FFT, 16 threads
/// a row; other sizes: the shared-memory one, N/4 threads a row).
fn range_shape(n_samples: usize) -> (usize, usize) {
    if n_samples == 256 {
        (16, 256)
    } else {
        let rows = (6000 / n_samples).clamp(1, 8);
        (rows, n_samples / 4 * rows)
    }
}

/// Threads of a doppler_power block, as DOPPLER_THREADS in kernels.cu.
fn doppler_threads(n_loops: usize, n_virtual: usize) -> usize {
    if n_loops == 256 {
        (16 * n_virtual.min(16)).max(256)
    } else {
        let t = n_loops / 4;
        let cols = n_virtual.min(1024 / t).min(6144 / n_loops);
        (cols * t).max(n_loops)
    }
}

/// `exp(-2 pi i k / n)`, k < n, in float64 rounded to float32 (the FFT
/// kernels' twiddle factors).
fn twiddles(n: usize) -> Vec<[f32; 2]> {
    (0..n)
        .map(|k| {
            let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
            [a.cos() as f32, a.sin() as f32]
        })
        .collect()
}

/// Mirrors `struct OutHeader` in kernels.cu: what the GPU writes ahead of
/// the detections in the mapped output buffer. `Pod`: read from those bytes
/// as they are.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(super) struct OutHeader {
    pub count: u32,
    pub cut: u32,
    pub reserved: [u32; 2],
}

// kernels.cu's OutHeader: four u32, so the detections after it start
// 16 bytes into the (page-aligned) buffer, aligned for `Detection`.
const _: () = assert!(std::mem::size_of::<OutHeader>() == 16);
const _: () = assert!(std::mem::align_of::<OutHeader>() == 4);

/// An output buffer's bytes (`bytes`: from its start) as the GPU wrote them:
/// the header and `max_det` detection records.
pub(super) fn parse_output(
    bytes: &[u8],
    max_det: usize,
) -> Result<(OutHeader, &[Detection]), DspError> {
    let header = std::mem::size_of::<OutHeader>();
    let records = max_det * std::mem::size_of::<Detection>();
    let layout =
        |e: bytemuck::PodCastError| DspError::CudaRequest(format!("the mapped output buffer: {e}"));
    let bytes = bytes.get(..header + records).ok_or_else(|| {
        DspError::CudaRequest("the mapped output buffer is too small".to_string())
    })?;
    let (hdr, dets) = bytes.split_at(header);
    let hdr: OutHeader = *bytemuck::try_from_bytes(hdr).map_err(layout)?;
    Ok((hdr, bytemuck::try_cast_slice(dets).map_err(layout)?))
}

/// Bytes of one `Candidate` in kernels.cu (u32, float, double, float[4]).
const CANDIDATE_BYTES: usize = 32;

/// The graphs of chunk-streamed mode for one ring slot.
pub(super) struct ChunkGraphs {
    /// `chunks[c]`: range_fft of chunk `c`, for every chunk but the last.
    pub chunks: Vec<CudaGraph>,
    /// The last chunk's range work and the rest of the chain.
    pub finish: CudaGraph,
}

/// A captured graph and the input buffer it reads.
pub(super) struct SlotGraph {
    pub graph: CudaGraph,
    /// Device address of the frame the graph reads.
    #[cfg(feature = "instrument")]
    pub input: u64,
    /// Host address of the same bytes (mapped memory), 0 for device memory.
    pub host_ptr: usize,
    /// Chunk-streamed mode's graphs (ring slots only, when the geometry has
    /// 2 to MAX_STREAMED_CHUNKS chunks).
    pub streamed: Option<ChunkGraphs>,
    /// The staging slot's mapped buffer, kept alive with its graph.
    pub mapped: Option<MappedHostBuffer>,
    /// A resident frame's device buffer, kept alive with its graph.
    #[cfg(feature = "instrument")]
    pub _device: Option<DeviceMemory>,
}

struct Kernels {
    range: CudaFunction,
    doppler: CudaFunction,
    cfar: CudaFunction,
    select: CudaFunction,
    refine: CudaFunction,
    /// GPU-triggered processing's (trigger.rs).
    alpha_sync: CudaFunction,
    frame_done: CudaFunction,
    wait_count: CudaFunction,
    map_export: CudaFunction,
    #[cfg(feature = "instrument")]
    gate: CudaFunction,
    #[cfg(feature = "instrument")]
    empty: CudaFunction,
    _module: Arc<CudaModule>,
}

struct Buffers {
    /// Range spectra [p][r][l], stored in two planes of 4 and 2 bytes a
    /// value (kernels.cu, `x_store`).
    x: DeviceMemory,
    /// The power map [r][d].
    pmap: DeviceMemory,
    cand: DeviceMemory,
    state: DeviceMemory,
    keys: DeviceMemory,
    rows: DeviceMemory,
    w_range: DeviceMemory,
    /// The Doppler window range_fft applies (with its (-1)^l), or ones
    /// with clutter removal.
    w_doppler_convert: DeviceMemory,
    /// The one doppler_power applies after clutter removal, or ones.
    w_doppler_clutter: DeviceMemory,
    tw_range: DeviceMemory,
    tw_doppler: DeviceMemory,
    tw_angle: DeviceMemory,
    alpha: DeviceMemory,
    n_eff: DeviceMemory,
    tdm: DeviceMemory,
}

/// What the launch sequence does between two stages: nothing in the
/// graphs the backend captures ([`NoMarks`]); an instrumented run records
/// an event there.
pub(super) trait StageMarks {
    /// Called before each stage and once after the last.
    fn mark(&mut self, stream: &CudaStream) -> Result<(), DspError>;
}

/// The marks of every captured graph: none.
pub(super) struct NoMarks;

impl StageMarks for NoMarks {
    fn mark(&mut self, _stream: &CudaStream) -> Result<(), DspError> {
        Ok(())
    }
}

pub(super) struct Pipeline {
    cfg: ChainConfig,
    ctx: Arc<CudaContext>,
    // Field order is drop order: the kernels before the stream.
    kernels: Kernels,
    bufs: Buffers,
    out: MappedHostBuffer,
    /// The power map for the host, Doppler-major (power_map()).
    map_host: MappedHostBuffer,
    stream: Arc<CudaStream>,
    max_det: usize,
    /// Chirps per DMA chunk when chunk-streamed mode is set up (the
    /// geometry has 2 to MAX_STREAMED_CHUNKS chunks), else None.
    chunk_chirps: Option<usize>,
    range_bin_m: f64,
    velocity_bin_mps: f64,
    /// Programmatic dependent launches in use (resolved CudaOptions::pdl).
    pdl: bool,
    select_at: SelectAt,
    chunk_wait: ChunkWait,
    cfar_tile: (usize, usize),
}

/// The TDM compensation phasors `exp(-j 2 pi (d - N_l/2)/N_l * i/N_tx)`,
/// `[d][i]`, evaluated in float64 and rounded to float32 as the CPU
/// reference's angle estimator does.
fn tdm_table(cfg: &ChainConfig) -> Vec<[f32; 2]> {
    let g = &cfg.geometry;
    let nl = g.n_loops;
    let mut t = Vec::with_capacity(nl * g.n_tx);
    for d in 0..nl {
        for i in 0..g.n_tx {
            let ph = -2.0 * std::f64::consts::PI * (d as f64 - (nl / 2) as f64) / nl as f64
                * i as f64
                / g.n_tx as f64;
            t.push([ph.cos() as f32, ph.sin() as f32]);
        }
    }
    t
}

/// The kernels' source: the built-in kernels.cu, or in an instrumented build
/// the file [`KERNELS_CU_ENV`] names.
fn kernels_cu() -> Result<Cow<'static, str>, DspError> {
    #[cfg(feature = "instrument")]
    return kernels_cu_from(std::env::var_os(KERNELS_CU_ENV).as_deref());
    #[cfg(not(feature = "instrument"))]
    Ok(Cow::Borrowed(KERNELS_CU))
}

/// The built-in source, or the file at `path`; an unreadable file is an
/// error that names the variable, never the built-in source in its place.
#[cfg(feature = "instrument")]
fn kernels_cu_from(path: Option<&std::ffi::OsStr>) -> Result<Cow<'static, str>, DspError> {
    let Some(path) = path else {
        return Ok(Cow::Borrowed(KERNELS_CU));
    };
    std::fs::read_to_string(path)
        .map(Cow::Owned)
        .map_err(|source| DspError::Io {
            context: format!("{KERNELS_CU_ENV}={}", path.to_string_lossy()),
            source,
        })
}

fn nvrtc_source(cfg: &ChainConfig, shape: KernelShape) -> Result<String, DspError> {
    let g = &cfg.geometry;
    let c = &cfg.cfar;
    let defines = [
        ("N_TX", g.n_tx),
        ("N_RX", g.n_rx),
        ("N_LOOPS", g.n_loops),
        ("N_SAMPLES", g.n_samples),
        ("GUARD_D", c.guard_doppler),
        ("GUARD_R", c.guard_range),
        ("TRAIN_D", c.train_doppler),
        ("TRAIN_R", c.train_range),
        ("MAX_DET", cfg.chain.max_detections),
        ("ANGLE_N", cfg.chain.angle_fft_size),
        ("CFAR_TILE_D", shape.cfar_tile.0),
        ("CFAR_TILE_R", shape.cfar_tile.1),
        ("CLUTTER", usize::from(cfg.chain.clutter_removal)),
    ];
    let mut src = String::new();
    for (k, v) in defines {
        src.push_str(&format!("#define {k} {v}\n"));
    }
    src.push_str(&kernels_cu()?);
    #[cfg(feature = "instrument")]
    src.push_str(INSTRUMENT_CU);
    Ok(src)
}

/// Compile kernels.cu for `cfg` and compute capability `cc` to PTX (NVRTC;
/// needs libnvrtc but no GPU).
pub(crate) fn compile_kernels(
    cfg: &ChainConfig,
    cc: (i32, i32),
    shape: KernelShape,
) -> Result<Ptx, DspError> {
    let arch = format!("--gpu-architecture=compute_{}{}", cc.0, cc.1);
    let opts = CompileOptions {
        options: vec![arch, "--std=c++17".to_string()],
        ..Default::default()
    };
    compile_ptx_with_opts(nvrtc_source(cfg, shape)?, opts).map_err(|source| {
        let log = match &source {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => other.to_string(),
        };
        DspError::Nvrtc { log, source }
    })
}

impl Pipeline {
    pub fn new(
        cfg: &ChainConfig,
        ctx: Arc<CudaContext>,
        cc: (i32, i32),
        opts: &CudaOptions,
    ) -> Result<Self, DspError> {
        let g = &cfg.geometry;
        let c = &cfg.cfar;
        let max_det = cfg.chain.max_detections;
        opts.validate()?;
        if !(4..=MAX_SAMPLES).contains(&g.n_samples) {
            return Err(DspError::config(
                "geometry.n_samples",
                format!("the cuda backend takes 4 to {MAX_SAMPLES} samples per chirp"),
            ));
        }
        if !(4..=MAX_LOOPS).contains(&g.n_loops) {
            return Err(DspError::config(
                "geometry.n_loops",
                format!("the cuda backend takes 4 to {MAX_LOOPS} loops"),
            ));
        }
        if max_det > MAX_DETECTIONS_LIMIT {
            return Err(DspError::config(
                "chain.max_detections",
                format!("the cuda backend supports at most {MAX_DETECTIONS_LIMIT}"),
            ));
        }
        let (tile_d, tile_r) = opts.cfar_tile;
        let halo_d = tile_d + 2 * (c.guard_doppler + c.train_doppler);
        let halo_r = tile_r + 2 * (c.guard_range + c.train_range);
        // cfar_peaks' halo and its two row-sum arrays, all doubles.
        let cfar_shared = halo_d * halo_r * 8 + 2 * halo_d * tile_r * 8;
        if cfar_shared > SHARED_LIMIT {
            return Err(DspError::config(
                "cfar",
                format!(
                    "the CFAR window needs {cfar_shared} bytes of shared memory per tile in the cuda backend (limit {SHARED_LIMIT})"
                ),
            ));
        }

        // SAFETY: all memory the graphs use is allocated below, on one
        // stream; cudarc's cross-stream event tracking would add event
        // records and waits that do not belong in a captured graph.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(cuda_err("create stream"))?;

        let ptx = compile_kernels(
            cfg,
            cc,
            KernelShape {
                cfar_tile: opts.cfar_tile,
            },
        )?;
        let module = ctx.load_module(ptx).map_err(cuda_err("load module"))?;
        // The operation names the kernel: "load kernel convert_window".
        macro_rules! load {
            ($name:literal) => {
                module
                    .load_function($name)
                    .map_err(cuda_err(concat!("load kernel ", $name)))
            };
        }
        let pdl = opts.pdl.unwrap_or(cc.0 >= 9);
        if pdl && cc.0 < 9 {
            return Err(DspError::config(
                "cuda options pdl",
                format!(
                    "programmatic dependent launch needs sm_90 or later, the device is sm_{}{}",
                    cc.0, cc.1
                ),
            ));
        }
        let kernels = Kernels {
            range: load!("range_fft")?,
            doppler: load!("doppler_power")?,
            cfar: load!("cfar_peaks")?,
            select: load!("select_overflow")?,
            refine: load!("refine_output")?,
            alpha_sync: load!("alpha_sync")?,
            frame_done: load!("frame_done")?,
            wait_count: load!("wait_count")?,
            map_export: load!("map_export")?,
            #[cfg(feature = "instrument")]
            gate: load!("gate_wait")?,
            #[cfg(feature = "instrument")]
            empty: load!("empty_kernel")?,
            _module: module.clone(),
        };

        let n_x = g.n_chirps() * g.n_rx * g.n_samples;
        let n_cells = g.n_loops * g.n_samples;
        let w_range = hann_periodic(g.n_samples);
        // (-1)^l moves the Doppler spectrum by N_l/2: the fftshift for free.
        let w_doppler_signed: Vec<f32> = hann_periodic(g.n_loops)
            .into_iter()
            .enumerate()
            .map(|(l, w)| if l % 2 == 0 { w } else { -w })
            .collect();
        let ones = vec![1.0f32; g.n_loops];
        let (w_conv, w_clut) = if cfg.chain.clutter_removal {
            (&ones, &w_doppler_signed)
        } else {
            (&w_doppler_signed, &ones)
        };
        let cfar = CfarTables::new(cfg)?;
        let bufs = Buffers {
            x: DeviceMemory::zeroed(&ctx, n_x * PACKED_BYTES)?,
            pmap: DeviceMemory::zeroed(&ctx, n_cells * 4)?,
            cand: DeviceMemory::zeroed(&ctx, n_cells * CANDIDATE_BYTES)?,
            state: DeviceMemory::zeroed(&ctx, 16)?,
            keys: DeviceMemory::zeroed(&ctx, max_det * 4)?,
            rows: DeviceMemory::zeroed(&ctx, max_det * 4)?,
            w_range: DeviceMemory::from_host(&ctx, &w_range)?,
            w_doppler_convert: DeviceMemory::from_host(&ctx, w_conv)?,
            w_doppler_clutter: DeviceMemory::from_host(&ctx, w_clut)?,
            tw_range: DeviceMemory::from_host(&ctx, &twiddles(g.n_samples))?,
            tw_doppler: DeviceMemory::from_host(&ctx, &twiddles(g.n_loops))?,
            tw_angle: DeviceMemory::from_host(&ctx, &twiddles(cfg.chain.angle_fft_size))?,
            alpha: DeviceMemory::from_host(&ctx, &cfar.alpha)?,
            n_eff: DeviceMemory::from_host(&ctx, &cfar.n_eff)?,
            tdm: DeviceMemory::from_host(&ctx, &tdm_table(cfg))?,
        };
        let out = MappedHostBuffer::new(
            &ctx,
            std::mem::size_of::<OutHeader>() + max_det * std::mem::size_of::<Detection>(),
            Mapping::default(),
        )?;

        let map_host = MappedHostBuffer::new(&ctx, n_cells * 4, Mapping::default())?;
        // A DMA chunk is whole chirps (Geometry::validate).
        let chunk_chirps = (2..=MAX_STREAMED_CHUNKS)
            .contains(&g.chunks_per_frame)
            .then(|| g.n_chirps() / g.chunks_per_frame);
        ctx.synchronize().map_err(cuda_err("synchronize"))?;
        Ok(Pipeline {
            cfg: cfg.clone(),
            range_bin_m: cfg.physical.range_bin_m(g),
            velocity_bin_mps: cfg.physical.velocity_bin_mps(g),
            ctx,
            kernels,
            bufs,
            out,
            map_host,
            stream,
            max_det,
            chunk_chirps,
            pdl,
            select_at: opts.select,
            chunk_wait: opts.chunk_wait,
            cfar_tile: opts.cfar_tile,
        })
    }

    /// Launch `f` on our stream with `args` (each kernel parameter is 8
    /// bytes: a device address, a double's bits or a u64), as a
    /// programmatic dependent of the previous kernel when `pdl`.
    fn launch(
        &self,
        what: &'static str,
        f: &CudaFunction,
        grid: (u32, u32),
        block: u32,
        args: &[u64],
        pdl: bool,
    ) -> Result<(), DspError> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_err("bind context"))?;
        let mut vals = [0u64; MAX_KERNEL_ARGS];
        if args.len() > MAX_KERNEL_ARGS {
            return Err(DspError::CudaRequest(format!(
                "{what}: too many kernel arguments"
            )));
        }
        vals[..args.len()].copy_from_slice(args);
        let mut params = [std::ptr::null_mut::<std::ffi::c_void>(); MAX_KERNEL_ARGS];
        for (p, v) in params.iter_mut().zip(vals.iter_mut()) {
            *p = v as *mut u64 as *mut std::ffi::c_void;
        }
        let mut value: sys::CUlaunchAttributeValue =
            // SAFETY: a plain C union of integers and structs of integers;
            // all zero is a valid value of each member.
            unsafe { std::mem::zeroed() };
        value.programmaticStreamSerializationAllowed = 1;
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value,
        };
        let config = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: 1,
            blockDimX: block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: self.stream.cu_stream(),
            attrs: if pdl { &mut attr } else { std::ptr::null_mut() },
            numAttrs: u32::from(pdl),
        };
        // SAFETY: `config` and `attr` outlive the call; `params` holds one
        // pointer per kernel parameter, each to 8 live bytes (the driver
        // copies them before returning); callers pass exactly the
        // parameters of `f` in kernels.cu, every one of them 8 bytes.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                f.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(cuda_err(what))?;
        Ok(())
    }

    /// Put one frame's work on the stream, reading the frame at `input`,
    /// with `marks` between the stages.
    fn enqueue(&self, input: u64, marks: &mut impl StageMarks) -> Result<(), DspError> {
        let g = &self.cfg.geometry;
        self.enqueue_range(input, 0..g.n_chirps(), 0, marks)?;
        self.enqueue_tail(
            marks,
            self.out.device_ptr(),
            self.select_at == SelectAt::Kernel,
        )
    }

    /// Step 1 for chirps `chirps` of the frame at `input`: range_fft (the
    /// conversion, both windows and the range FFT) into x. The whole frame,
    /// or the chirps of one DMA chunk. `stamp`, when not 0, is the device
    /// address of a u64 that gets the GPU's clock when the work starts.
    fn enqueue_range(
        &self,
        input: u64,
        chirps: std::ops::Range<usize>,
        stamp: u64,
        marks: &mut impl StageMarks,
    ) -> Result<(), DspError> {
        let g = &self.cfg.geometry;
        if chirps.start >= chirps.end || chirps.end > g.n_chirps() {
            return Err(DspError::CudaRequest(format!(
                "range work for chirps {chirps:?} of a frame of {}",
                g.n_chirps()
            )));
        }
        // The argument lists below match the kernel signatures in
        // kernels.cu; every pointer is a live allocation of the size the
        // kernel indexes (sized in `new` from the same config that
        // generated the kernels' #defines), and the chirp range lies in the
        // frame.
        marks.mark(&self.stream)?;
        let b = &self.bufs;
        let (rows, threads) = range_shape(g.n_samples);
        // Every TX has at most this many loops among the chirps.
        let loops = chirps.len().div_ceil(g.n_tx);
        self.launch(
            "launch range_fft",
            &self.kernels.range,
            (loops.div_ceil(rows) as u32, g.n_virtual() as u32),
            threads as u32,
            &[
                input,
                b.x.ptr(),
                b.w_range.ptr(),
                b.w_doppler_convert.ptr(),
                b.tw_range.ptr(),
                chirps.start as u64,
                chirps.end as u64,
                stamp,
            ],
            false,
        )
    }

    /// Steps 2 to 10 on x (all range spectra done): Doppler FFT and power
    /// (clutter removal first when on), CFAR and peaks, [selection],
    /// snapshots, angle spectra, refine and output into the mapped buffer
    /// at device address `out` (an OutHeader then the detections); the
    /// selection over the cap runs here when `select` (else a second graph
    /// does it when the host sees a cut).
    fn enqueue_tail(
        &self,
        marks: &mut impl StageMarks,
        out: u64,
        select: bool,
    ) -> Result<(), DspError> {
        let g = &self.cfg.geometry;
        let s = &self.stream;
        let b = &self.bufs;
        let blocks = |threads: usize, per: usize| threads.div_ceil(per) as u32;
        let pdl = self.pdl;
        // Argument lists as in enqueue_range.
        marks.mark(s)?;
        self.launch(
            "launch doppler_power",
            &self.kernels.doppler,
            (g.n_samples as u32, 1),
            doppler_threads(g.n_loops, g.n_virtual()) as u32,
            &[
                b.x.ptr(),
                b.pmap.ptr(),
                b.state.ptr(),
                b.tw_doppler.ptr(),
                b.w_doppler_clutter.ptr(),
            ],
            pdl,
        )?;

        marks.mark(s)?;
        self.launch(
            "launch cfar_peaks",
            &self.kernels.cfar,
            (
                blocks(g.n_samples, self.cfar_tile.1),
                blocks(g.n_loops, self.cfar_tile.0),
            ),
            (self.cfar_tile.0 * self.cfar_tile.1) as u32,
            &[
                b.pmap.ptr(),
                b.alpha.ptr(),
                b.n_eff.ptr(),
                b.state.ptr(),
                b.cand.ptr(),
                b.keys.ptr(),
            ],
            pdl,
        )?;

        if select {
            marks.mark(s)?;
            self.launch_select(pdl)?;
        }
        marks.mark(s)?;
        self.launch_refine(pdl, out)?;
        marks.mark(s)
    }

    /// The tail again for a frame over the cap (SelectAt::HostFallback):
    /// select the kept detections, then refine_output.
    fn enqueue_overflow(&self) -> Result<(), DspError> {
        self.launch_select(false)?;
        self.launch_refine(self.pdl, self.out.device_ptr())
    }

    fn launch_select(&self, pdl: bool) -> Result<(), DspError> {
        let b = &self.bufs;
        self.launch(
            "launch select_overflow",
            &self.kernels.select,
            (1, 1),
            1024,
            &[b.cand.ptr(), b.state.ptr(), b.keys.ptr(), b.rows.ptr()],
            pdl,
        )
    }

    fn launch_refine(&self, pdl: bool, out_hdr: u64) -> Result<(), DspError> {
        let b = &self.bufs;
        let out_det = out_hdr + std::mem::size_of::<OutHeader>() as u64;
        // One block per kept detection (the rest return at once).
        self.launch(
            "launch refine_output",
            &self.kernels.refine,
            (self.max_det as u32, 1),
            (REFINE_WARPS * 32) as u32,
            &[
                b.state.ptr(),
                b.cand.ptr(),
                b.keys.ptr(),
                b.x.ptr(),
                b.tdm.ptr(),
                b.tw_doppler.ptr(),
                b.tw_angle.ptr(),
                b.w_doppler_clutter.ptr(),
                out_hdr,
                out_det,
                self.range_bin_m.to_bits(),
                self.velocity_bin_mps.to_bits(),
            ],
            pdl,
        )
    }

    /// The power map, Doppler-major (`P[d][r]`), to mapped host memory at
    /// device address `to`: what the host reads (map_export transposes).
    pub(super) fn launch_map_export(&self, to: u64) -> Result<(), DspError> {
        let g = &self.cfg.geometry;
        let cells = g.n_loops * g.n_samples;
        self.launch(
            "launch map_export",
            &self.kernels.map_export,
            (cells.div_ceil(256 * 4).max(1) as u32, 1),
            256,
            &[self.bufs.pmap.ptr(), to],
            false,
        )
    }

    /// The graph `wait` launches for a frame over the cap, when the
    /// selection is SelectAt::HostFallback (None otherwise).
    pub fn overflow_graph(&self) -> Result<Option<CudaGraph>, DspError> {
        if self.select_at != SelectAt::HostFallback {
            return Ok(None);
        }
        Ok(Some(self.capture_with(|| self.enqueue_overflow())?))
    }

    /// Whether the last frame went over the detection cap (its header,
    /// in mapped host memory, after the stream synchronisation).
    pub fn over_cap(&self) -> Result<bool, DspError> {
        Ok(self.output()?.0.cut > 0)
    }

    /// What the GPU wrote to the mapped output buffer for the last frame:
    /// the header and the `max_det` detection records after it. Read only
    /// after a stream synchronisation (the GPU no longer writes it then).
    fn output(&self) -> Result<(OutHeader, &[Detection]), DspError> {
        parse_output(self.out.as_slice(), self.max_det)
    }

    /// Capture the chain reading `input` as a graph and upload it.
    fn capture(&self, input: u64) -> Result<CudaGraph, DspError> {
        self.capture_with(|| self.enqueue(input, &mut NoMarks))
    }

    /// Capture what `enqueue` queues on our stream as a graph and upload it.
    fn capture_with(
        &self,
        enqueue: impl FnOnce() -> Result<(), DspError>,
    ) -> Result<CudaGraph, DspError> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(cuda_err("begin capture"))?;
        let queued = enqueue();
        let graph = self
            .stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(cuda_err("end capture"));
        queued?;
        let graph =
            graph?.ok_or_else(|| DspError::CudaRequest("capture gave no graph".to_string()))?;
        graph.upload().map_err(cuda_err("graph upload"))?;
        Ok(graph)
    }

    /// The internal staging slot: mapped pinned memory of one frame and its
    /// graph. The first call also runs the chain once outside a graph, so
    /// that every kernel is loaded (lazy loading) before any capture.
    pub fn mapped_slot(&self, frame_bytes: usize) -> Result<SlotGraph, DspError> {
        let mapped = MappedHostBuffer::new(&self.ctx, frame_bytes, Mapping::default())?;
        self.enqueue(mapped.device_ptr(), &mut NoMarks)?;
        self.synchronize()?;
        Ok(SlotGraph {
            graph: self.capture(mapped.device_ptr())?,
            #[cfg(feature = "instrument")]
            input: mapped.device_ptr(),
            host_ptr: mapped.host_ptr() as usize,
            streamed: None,
            mapped: Some(mapped),
            #[cfg(feature = "instrument")]
            _device: None,
        })
    }

    /// The graphs for a ring slot the caller owns (mapped pinned memory):
    /// the whole chain, and chunk-streamed mode's when it is set up.
    pub fn slot_graph(&self, device_ptr: u64, host_ptr: usize) -> Result<SlotGraph, DspError> {
        Ok(SlotGraph {
            graph: self.capture(device_ptr)?,
            #[cfg(feature = "instrument")]
            input: device_ptr,
            host_ptr,
            streamed: self.chunk_graphs(device_ptr)?,
            mapped: None,
            #[cfg(feature = "instrument")]
            _device: None,
        })
    }

    pub fn geometry(&self) -> &crate::config::Geometry {
        &self.cfg.geometry
    }

    /// DMA chunks per frame when chunk-streamed mode is set up.
    pub fn streamed_chunks(&self) -> Option<usize> {
        self.chunk_chirps
            .map(|_| self.cfg.geometry.chunks_per_frame)
    }

    /// Chunk-streamed mode's graphs for the frame at `input` (None when the
    /// mode is not set up for this geometry).
    fn chunk_graphs(&self, input: u64) -> Result<Option<ChunkGraphs>, DspError> {
        let (Some(cc), Some(n)) = (self.chunk_chirps, self.streamed_chunks()) else {
            return Ok(None);
        };
        let mut chunks = Vec::with_capacity(n - 1);
        for c in 0..n - 1 {
            chunks.push(self.capture_with(|| {
                self.enqueue_range(input, c * cc..(c + 1) * cc, 0, &mut NoMarks)
            })?);
        }
        let last = (n - 1) * cc..n * cc;
        let finish = self.capture_with(|| {
            self.enqueue_range(input, last, 0, &mut NoMarks)?;
            self.enqueue_tail(
                &mut NoMarks,
                self.out.device_ptr(),
                self.select_at == SelectAt::Kernel,
            )
        })?;
        Ok(Some(ChunkGraphs { chunks, finish }))
    }

    pub fn synchronize(&self) -> Result<(), DspError> {
        self.stream
            .synchronize()
            .map_err(cuda_err("stream synchronize"))?;
        Ok(())
    }

    /// Copy the detections of the last completed frame out of mapped host
    /// memory. Never allocates when `out` has room for max_detections.
    pub fn read_detections(&self, out: &mut Detections) -> Result<(), DspError> {
        out.clear();
        let (hdr, dets) = self.output()?;
        let n = (hdr.count as usize).min(self.max_det);
        out.list.extend_from_slice(&dets[..n]);
        out.cut = hdr.cut;
        Ok(())
    }

    /// New CFAR scale factors for the next frames (the graphs read the same
    /// device buffer). The copy is synchronous and runs between frames:
    /// the previous frame's CFAR has finished (process waited for it) and
    /// the next frame's is launched only by its process().
    pub fn set_cfar_alpha(&self, alpha: &[f64]) -> Result<(), DspError> {
        crate::cfar::check_alpha(alpha, self.cfg.geometry.n_samples)?;
        Ok(self.bufs.alpha.copy_from_host(alpha)?)
    }

    /// Copy the power map of the last frame to the host, Doppler-major.
    /// Never allocates when `out` has room for the map.
    pub fn power_map(&self, out: &mut Vec<f32>) -> Result<(), DspError> {
        let n = self.cfg.geometry.n_loops * self.cfg.geometry.n_samples;
        self.launch_map_export(self.map_host.device_ptr())?;
        self.synchronize()?;
        out.clear();
        out.extend(
            self.map_host.as_slice()[..n * 4]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        Ok(())
    }
}

#[cfg(all(test, feature = "instrument"))]
mod tests {
    use super::*;

    #[test]
    fn kernels_cu_is_the_built_in_source_or_the_named_file_never_a_silent_fallback() {
        let built_in = kernels_cu_from(None).expect("built-in source");
        assert!(matches!(built_in, Cow::Borrowed(_)));
        assert!(built_in.contains("range_fft("));

        let dir = std::env::temp_dir().join(format!("radar-kernels-cu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("kernels.cu");
        std::fs::write(&file, "// a trial kernel source\n").expect("write");
        let trial = kernels_cu_from(Some(file.as_os_str())).expect("trial source");
        assert_eq!(trial, "// a trial kernel source\n");

        let missing = dir.join("no-such.cu");
        let err = kernels_cu_from(Some(missing.as_os_str())).expect_err("missing file");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{KERNELS_CU_ENV}={}: ", missing.display())),
            "{text}"
        );
        assert!(
            matches!(err, DspError::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
