//! The instrumented runs of the CUDA backend (the `instrument` feature, for
//! `radar-dsp bench`, its tests and radard's loop_floor bench): frames
//! resident in device memory, GPU times of graph replays and of each stage,
//! kernel counts, what a kernel boundary and the device's copy bandwidth
//! cost. The backend's own work (the `Backend` trait) never calls any of it.

use cuda_mem::cuda_err;

use crate::detection::Detections;
use crate::error::DspError;

use super::CudaBackend;
use super::pipeline::{StageTiming, count_kernel_nodes};

/// Which graphs [`CudaBackend::graph_gpu_times`] times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphSet {
    /// The whole chain on a frame in a prepared (mapped) slot.
    Slots,
    /// The whole chain on a frame resident in device memory.
    Resident,
    /// Chunk-streamed mode: what is left once the frame is complete (the
    /// last chunk's range work and the rest), after the other chunks'
    /// graphs ran untimed.
    Finish,
}

impl CudaBackend {
    /// Names of the stages that [`Self::stage_times`] reports.
    pub fn stage_names(&self) -> Vec<&'static str> {
        self.pipeline.stage_names()
    }

    /// Whether the chain's kernels are launched with programmatic dependent
    /// launch (sm_90 and later).
    pub fn pdl(&self) -> bool {
        self.pipeline.pdl()
    }

    /// GPU time (us, median of `reps`) of a graph of `kernels` empty
    /// kernels in a chain, with or without programmatic dependent launch.
    pub fn empty_chain_us(&self, kernels: usize, pdl: bool, reps: usize) -> Result<f64, DspError> {
        self.pipeline.empty_chain_us(kernels, pdl, reps)
    }

    /// Kernel launches in one frame's graph: the kernel
    /// nodes of the staging slot's graph.
    pub fn kernels_per_frame(&self) -> Result<usize, DspError> {
        count_kernel_nodes(&self.staging.graph)
    }

    /// Kernel launches of one frame in chunk-streamed mode: over all its
    /// graphs (every chunk's and the finishing one), and in the finishing
    /// graph alone (what runs once the frame is complete). None when the
    /// mode is not set up.
    pub fn kernels_per_streamed_frame(&self) -> Result<Option<(usize, usize)>, DspError> {
        let Some(st) = self.slots.first().and_then(|g| g.streamed.as_ref()) else {
            return Ok(None);
        };
        let finish = count_kernel_nodes(&st.finish)?;
        let mut all = finish;
        for chunk in &st.chunks {
            all += count_kernel_nodes(chunk)?;
        }
        Ok(Some((all, finish)))
    }

    /// Whatever was queued, done (the over-cap step of [`Self::wait`] is
    /// not taken): benchmarks wait here for chunk work they do not time.
    pub fn synchronize(&self) -> Result<(), DspError> {
        self.pipeline.synchronize()
    }

    /// Copy a frame into device memory once and capture a graph that reads
    /// it there; returns its index for [`Self::launch_resident`].
    pub fn add_resident_frame(&mut self, frame: &[u8]) -> Result<usize, DspError> {
        self.check_size(frame)?;
        let g = self.pipeline.resident_slot(frame)?;
        self.resident.push(g);
        Ok(self.resident.len() - 1)
    }

    /// Launch the graph of resident frame `index`; pair with [`Self::wait`]
    /// (before any other call: x holds this frame until then) and
    /// [`Self::read_detections`].
    pub fn launch_resident(&self, index: usize) -> Result<(), DspError> {
        let g = self
            .resident
            .get(index)
            .ok_or_else(|| DspError::CudaRequest(format!("no resident frame {index}")))?;
        self.forget_chunks();
        g.graph.launch().map_err(cuda_err("graph launch"))?;
        Ok(())
    }

    /// Queue an empty kernel on the chain's stream without waiting for it
    /// (bench experiments: wake the GPU shortly before a frame is due).
    pub fn wake(&self) -> Result<(), DspError> {
        self.pipeline.wake()
    }

    /// GPU time (us) of `reps` graph replays of `set`, events around each
    /// launch, rotating over the first `inputs` prepared slots (or resident
    /// frames). `gated`: each launch and its events queued behind a gate
    /// kernel that opens once they are all queued, so that the host's
    /// submission of the graph does not count (see `Pipeline::timed_launch`).
    pub fn graph_gpu_times(
        &self,
        set: GraphSet,
        inputs: usize,
        reps: usize,
        gated: bool,
    ) -> Result<Vec<f64>, DspError> {
        let graphs = if set == GraphSet::Resident {
            &self.resident
        } else {
            &self.slots
        };
        let n = inputs.min(graphs.len());
        if n == 0 {
            return Err(DspError::CudaRequest(
                "graph_gpu_times: no inputs prepared".to_string(),
            ));
        }
        self.forget_chunks();
        let (e0, e1) = self.pipeline.timing_events()?;
        let mut gate = if gated {
            Some(self.pipeline.new_gate()?)
        } else {
            None
        };
        let mut v = Vec::with_capacity(reps);
        for k in 0..reps {
            let g = &graphs[k % n];
            let timed = match (set, &g.streamed) {
                (GraphSet::Finish, Some(st)) => {
                    for chunk in &st.chunks {
                        chunk.launch().map_err(cuda_err("graph launch (chunk)"))?;
                    }
                    &st.finish
                }
                (GraphSet::Finish, None) => {
                    return Err(DspError::CudaRequest(
                        "graph_gpu_times: chunk-streamed mode is not set up".to_string(),
                    ));
                }
                _ => &g.graph,
            };
            v.push(self.pipeline.timed_launch(timed, &e0, &e1, gate.as_mut())?);
        }
        Ok(v)
    }

    /// Device-to-device copy bandwidth in GB/s (bytes read plus written),
    /// median of `reps` copies of `bytes`.
    pub fn copy_bandwidth_gbps(&self, bytes: usize, reps: usize) -> Result<f64, DspError> {
        self.pipeline.copy_bandwidth_gbps(bytes, reps)
    }

    /// Copy the last frame's detections (already in mapped host memory).
    pub fn read_detections(&self, out: &mut Detections) -> Result<(), DspError> {
        self.pipeline.read_detections(out)
    }

    /// Per-stage GPU times (microseconds) of `reps` instrumented, non-graph
    /// runs reading prepared slot `slot`, else resident frame `resident`,
    /// else the staging slot.
    pub fn stage_times(
        &mut self,
        slot: Option<usize>,
        resident: Option<usize>,
        reps: usize,
    ) -> Result<Vec<StageTiming>, DspError> {
        let input = match (slot, resident) {
            (Some(s), _) => self.slots.get(s).map(|g| g.input),
            (None, Some(r)) => self.resident.get(r).map(|g| g.input),
            (None, None) => Some(self.staging.input),
        }
        .ok_or_else(|| DspError::CudaRequest("stage_times: no such input".to_string()))?;
        self.forget_chunks();
        self.pipeline.stage_times(input, reps)
    }
}
