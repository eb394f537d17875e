//! The instrumented runs of the chain (the `instrument` feature, for
//! `radar-dsp bench` and its tests): frames resident in device memory,
//! graph replays between events, stage-by-stage runs behind a gate kernel,
//! chains of empty kernels, the device's copy bandwidth. The backend's own
//! work never calls any of it.

use cuda_mem::{DeviceMemory, MappedHostBuffer, Mapping, cuda_err};
use cudarc::driver::{CudaEvent, CudaGraph, CudaStream, result, sys};

use crate::error::DspError;

use super::{Pipeline, SelectAt, SlotGraph, StageMarks};

/// GPU time of one stage over the instrumented runs, in microseconds.
#[derive(Clone, Debug)]
pub struct StageTiming {
    pub name: &'static str,
    pub samples_us: Vec<f64>,
}

/// Stage events of an instrumented run: `mark` records the next one before
/// each stage and once after the last.
struct EventMarks<'e> {
    events: &'e [CudaEvent],
    next: usize,
}

impl<'e> EventMarks<'e> {
    fn new(events: &'e [CudaEvent]) -> Self {
        EventMarks { events, next: 0 }
    }
}

impl StageMarks for EventMarks<'_> {
    fn mark(&mut self, stream: &CudaStream) -> Result<(), DspError> {
        let e = self
            .events
            .get(self.next)
            .ok_or_else(|| DspError::CudaRequest("too few timing events".to_string()))?;
        e.record(stream).map_err(cuda_err("event record"))?;
        self.next += 1;
        Ok(())
    }
}

impl Pipeline {
    /// Whether the kernels are launched with programmatic dependent launch.
    pub fn pdl(&self) -> bool {
        self.pdl
    }

    /// Names of the stages that `enqueue` separates with events.
    pub fn stage_names(&self) -> Vec<&'static str> {
        let mut v = vec![
            "convert+windows+range FFT",
            "[clutter+]Doppler FFT+power",
            "CFAR+peaks",
        ];
        if self.select_at == SelectAt::Kernel {
            v.push("select over the cap");
        }
        v.push("snapshots+angle+refine+output");
        v
    }

    /// GPU time (median over `reps` replays, microseconds) of a graph of
    /// `kernels` empty one-warp kernels in a chain, launched as
    /// programmatic dependents when `pdl`: what a kernel boundary costs.
    pub fn empty_chain_us(&self, kernels: usize, pdl: bool, reps: usize) -> Result<f64, DspError> {
        if pdl && !self.pdl_capable() {
            return Err(DspError::CudaRequest(
                "programmatic dependent launch needs sm_90 or later".to_string(),
            ));
        }
        let graph =
            self.capture_with(|| (0..kernels).try_for_each(|k| self.launch_empty(pdl && k > 0)))?;
        let (e0, e1) = self.timing_events()?;
        let mut gate = self.new_gate()?;
        let mut t = Vec::with_capacity(reps.max(1));
        for _ in 0..reps.max(1) {
            t.push(self.timed_launch(&graph, &e0, &e1, Some(&mut gate))?);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    }

    /// Queue one empty one-warp kernel on the chain's stream and return
    /// (no wait): the GPU has work again, for experiments on what an idle
    /// GPU costs the next frame (`radar-dsp bench --wake-us`).
    pub fn wake(&self) -> Result<(), DspError> {
        self.launch_empty(false)
    }

    /// One empty one-warp kernel on the chain's stream.
    fn launch_empty(&self, pdl: bool) -> Result<(), DspError> {
        self.launch(
            "launch empty_kernel",
            &self.kernels.empty,
            (1, 1),
            32,
            &[0],
            pdl,
        )
    }

    fn pdl_capable(&self) -> bool {
        self.ctx
            .compute_capability()
            .map(|(major, _)| major >= 9)
            .unwrap_or(false)
    }

    /// A frame copied to device memory once, and its graph.
    pub fn resident_slot(&self, frame: &[u8]) -> Result<SlotGraph, DspError> {
        let dev = DeviceMemory::from_host(&self.ctx, frame)?;
        Ok(SlotGraph {
            graph: self.capture(dev.ptr())?,
            input: dev.ptr(),
            host_ptr: 0,
            streamed: None,
            mapped: None,
            _device: Some(dev),
        })
    }

    pub fn timing_events(&self) -> Result<(CudaEvent, CudaEvent), DspError> {
        let ev = || {
            self.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda_err("create event"))
        };
        Ok((ev()?, ev()?))
    }

    /// Launch `graph` between two events, wait, return the GPU time in us.
    /// With `gate`, the events and the graph are queued behind a closed
    /// gate kernel that the host opens once they are all queued: the time
    /// is then the device's alone. Without, the first event can complete
    /// while the host is still submitting the graph, and that submission
    /// time counts too.
    pub fn timed_launch(
        &self,
        graph: &CudaGraph,
        e0: &CudaEvent,
        e1: &CudaEvent,
        gate: Option<&mut MappedHostBuffer>,
    ) -> Result<f64, DspError> {
        let flag = match gate {
            Some(g) => Some(self.close_gate(g)?),
            None => None,
        };
        e0.record(&self.stream).map_err(cuda_err("event record"))?;
        graph.launch().map_err(cuda_err("graph launch"))?;
        e1.record(&self.stream).map_err(cuda_err("event record"))?;
        if let Some(f) = flag {
            open_gate(f);
        }
        self.synchronize()?;
        let ms = e0.elapsed_ms(e1).map_err(cuda_err("event elapsed"))?;
        Ok(ms as f64 * 1e3)
    }

    /// A mapped word for `close_gate`.
    pub fn new_gate(&self) -> Result<MappedHostBuffer, DspError> {
        Ok(MappedHostBuffer::new(&self.ctx, 4, Mapping::default())?)
    }

    /// Queue gate_wait on `gate` (closed): the stream holds until
    /// `open_gate` on the returned flag (or about 2 s at most).
    fn close_gate(&self, gate: &mut MappedHostBuffer) -> Result<*mut u32, DspError> {
        let word = gate
            .as_mut_slice()
            .get_mut(..4)
            .ok_or_else(|| DspError::CudaRequest("the gate buffer holds no word".to_string()))?;
        let flag: *mut u32 = bytemuck::try_from_bytes_mut(word)
            .map_err(|e| DspError::CudaRequest(format!("the gate buffer: {e}")))?;
        // SAFETY: `flag` points to the first word of `gate`, a live mapped
        // buffer that the GPU only reads.
        unsafe { std::ptr::write_volatile(flag, 0) };
        // gate_wait(const volatile u32 *, u64) on the live gate buffer.
        self.launch(
            "launch gate_wait",
            &self.kernels.gate,
            (1, 1),
            1,
            &[gate.device_ptr(), 4_000_000_000u64],
            false,
        )?;
        Ok(flag)
    }

    pub fn copy_bandwidth_gbps(&self, bytes: usize, reps: usize) -> Result<f64, DspError> {
        let src = DeviceMemory::zeroed(&self.ctx, bytes)?;
        let dst = DeviceMemory::zeroed(&self.ctx, bytes)?;
        self.ctx.synchronize().map_err(cuda_err("synchronize"))?;
        let (e0, e1) = self.timing_events()?;
        let mut t = Vec::with_capacity(reps.max(1));
        for _ in 0..reps.max(1) {
            e0.record(&self.stream).map_err(cuda_err("event record"))?;
            // SAFETY: both buffers hold `bytes` bytes and outlive the sync below.
            unsafe {
                result::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, self.stream.cu_stream())
            }
            .map_err(cuda_err("cuMemcpyDtoDAsync"))?;
            e1.record(&self.stream).map_err(cuda_err("event record"))?;
            self.synchronize()?;
            t.push(e0.elapsed_ms(&e1).map_err(cuda_err("event elapsed"))? as f64);
        }
        t.sort_by(f64::total_cmp);
        let ms = t[t.len() / 2];
        Ok(2.0 * bytes as f64 / (ms * 1e-3) / 1e9)
    }

    /// Per-stage GPU times of `reps` runs launched stage by stage (not as a
    /// graph) with events between the stages. Each run is queued behind a
    /// gate kernel that the host opens once every stage is queued, so the
    /// stages run back to back and the events time the GPU, not the host's
    /// launch calls.
    pub fn stage_times(&self, input: u64, reps: usize) -> Result<Vec<StageTiming>, DspError> {
        let names = self.stage_names();
        let events = (0..=names.len())
            .map(|_| {
                self.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(cuda_err("create event"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut timings: Vec<StageTiming> = names
            .iter()
            .map(|&name| StageTiming {
                name,
                samples_us: Vec::with_capacity(reps),
            })
            .chain(std::iter::once(StageTiming {
                name: "total (stage by stage)",
                samples_us: Vec::with_capacity(reps),
            }))
            .collect();
        let mut gate = self.new_gate()?;
        for _ in 0..reps {
            let flag = self.close_gate(&mut gate)?;
            self.enqueue(input, &mut EventMarks::new(&events))?;
            open_gate(flag);
            self.synchronize()?;
            for i in 0..names.len() {
                let ms = events[i]
                    .elapsed_ms(&events[i + 1])
                    .map_err(cuda_err("event elapsed"))?;
                timings[i].samples_us.push(ms as f64 * 1e3);
            }
            let ms = events[0]
                .elapsed_ms(&events[names.len()])
                .map_err(cuda_err("event elapsed"))?;
            timings[names.len()].samples_us.push(ms as f64 * 1e3);
        }
        Ok(timings)
    }
}

/// Open a gate closed by `Pipeline::close_gate` (its flag, in mapped
/// memory that outlives the queued gate kernel).
fn open_gate(flag: *mut u32) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: `flag` came from close_gate: a live mapped buffer.
    unsafe { std::ptr::write_volatile(flag, 1) };
}

pub(in crate::cuda) fn count_kernel_nodes(graph: &CudaGraph) -> Result<usize, DspError> {
    let g = graph.cu_graph();
    let mut n = 0usize;
    // SAFETY: FFI; a null node array asks for the count only.
    unsafe { sys::cuGraphGetNodes(g, std::ptr::null_mut(), &mut n) }
        .result()
        .map_err(cuda_err("cuGraphGetNodes"))?;
    let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); n];
    // SAFETY: `nodes` has room for n entries.
    unsafe { sys::cuGraphGetNodes(g, nodes.as_mut_ptr(), &mut n) }
        .result()
        .map_err(cuda_err("cuGraphGetNodes"))?;
    let mut kernels = 0;
    for node in nodes.iter().take(n) {
        let mut t = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // SAFETY: `node` belongs to the live graph.
        unsafe { sys::cuGraphNodeGetType(*node, &mut t) }
            .result()
            .map_err(cuda_err("cuGraphNodeGetType"))?;
        if t == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
            kernels += 1;
        }
    }
    Ok(kernels)
}
