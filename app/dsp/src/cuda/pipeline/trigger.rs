//! The graph of one ring slot in GPU-triggered mode (docs/processing-chain.md,
//! section 10): the GPU waits for each chunk itself and nothing on the host
//! launches work between a frame's first chunk and its detections.
//!
//! ```text
//! for chunk c:  wait until the slot's completion count >= c + 1
//!               (a stream wait, or the wait_count kernel: CudaOptions'
//!               `twait`)
//!               [c == 0: alpha_sync]  range_fft of chunk c's chirps
//! the tail (Doppler .. refine_output, the selection over the cap included)
//!               into the slot's own output buffer
//! frame_done    count := 0 (the consumer's reset; not while the host
//!               cancels), stamp, ready := 1
//! map_export    the power map, to the slot's buffer in host memory
//! host node     wakes the host thread (HostWake)
//! ```

use std::ffi::c_void;

use cudarc::driver::{CudaGraph, sys};

use cuda_mem::{StreamMemOps, cuda_err};

use super::{NoMarks, Pipeline};
use crate::cuda::options::ChunkWait;
use crate::error::DspError;

/// Where one slot's graph reads and writes, all device addresses (mapped
/// host memory's device pointers, but for the slot's frame itself).
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct TriggerTargets {
    /// The slot's frame.
    pub input: u64,
    /// The slot's completion count (the status page of the ring).
    pub count: u64,
    /// The slot's output buffer: an OutHeader, then the detections.
    pub out: u64,
    /// The slot's TriggerRecord.
    pub record: u64,
    pub slot: u32,
    /// Two CFAR scale tables (N_s doubles each) and the index of the
    /// current one.
    pub alpha_tables: u64,
    pub alpha_index: u64,
    /// The slot's copy of the power map.
    pub map: u64,
    /// The host's "cancelling" word (frame_done leaves the count be).
    pub cancelling: u64,
}

/// The host function at the end of every slot's graph, and its argument.
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct HostWake {
    pub func: sys::CUhostFn,
    pub data: *mut c_void,
}

impl Pipeline {
    /// Chunks a triggered graph waits for: the geometry's DMA chunks when
    /// chunk-streamed mode is set up for it, 1 for a frame of one chunk,
    /// None otherwise (more than MAX_STREAMED_CHUNKS chunks).
    pub fn triggered_chunks(&self) -> Option<usize> {
        match (self.chunk_chirps, self.cfg.geometry.chunks_per_frame) {
            (Some(_), n) => Some(n),
            (None, 1) => Some(1),
            _ => None,
        }
    }

    /// Captures slot `t.slot`'s graph (see the module documentation).
    pub fn triggered_graph(
        &self,
        t: &TriggerTargets,
        ops: &StreamMemOps,
        wake: HostWake,
    ) -> Result<CudaGraph, DspError> {
        let g = &self.cfg.geometry;
        let all = g.n_chirps();
        let chunks = self.triggered_chunks().ok_or_else(|| {
            DspError::CudaRequest(format!(
                "GPU-triggered mode: {} chunks per frame (at most {})",
                g.chunks_per_frame,
                super::MAX_STREAMED_CHUNKS
            ))
        })?;
        let cc = self.chunk_chirps.unwrap_or(all);
        let stream = self.stream.cu_stream();
        self.capture_with(|| {
            for c in 0..chunks {
                let poll = match self.chunk_wait {
                    ChunkWait::Stream => false,
                    ChunkWait::Last => c + 1 == chunks,
                    ChunkWait::Poll => true,
                };
                if poll {
                    // `t.count` is a live word of the ring's status page.
                    self.launch(
                        "launch wait_count",
                        &self.kernels.wait_count,
                        (1, 1),
                        1,
                        &[t.count, c as u64 + 1],
                        false,
                    )?;
                } else {
                    // SAFETY: our stream, being captured; `t.count` is the
                    // device address of a live 4-byte word of the ring's
                    // status page, which outlives the graph (the caller's
                    // contract); every kernel behind the wait was launched
                    // before (CudaBackend::new and the arming's warm-up).
                    unsafe { ops.wait_geq(stream, t.count, c as u32 + 1) }
                        .map_err(cuda_err("cuStreamWaitValue32 (graph capture)"))?;
                }
                if c == 0 {
                    // Argument lists match kernels.cu; every pointer is a
                    // live buffer of the size the kernel indexes.
                    self.launch(
                        "launch alpha_sync",
                        &self.kernels.alpha_sync,
                        (1, 1),
                        256,
                        &[t.alpha_tables, t.alpha_index, self.bufs.alpha.ptr()],
                        false,
                    )?;
                }
                let range = if chunks == 1 {
                    0..all
                } else {
                    c * cc..(c + 1) * cc
                };
                // The last chunk's work stamps its start (TriggerRecord).
                let stamp = if c + 1 == chunks { t.record + 16 } else { 0 };
                self.enqueue_range(t.input, range, stamp, &mut NoMarks)?;
            }
            self.enqueue_tail(&mut NoMarks, t.out, true)?;
            self.launch(
                "launch frame_done",
                &self.kernels.frame_done,
                (1, 1),
                1,
                &[t.count, t.record, u64::from(t.slot), t.cancelling],
                false,
            )?;
            // After the ready flag (not in the frame's latency); before the
            // host node, so a woken host finds the map.
            self.launch_map_export(t.map)?;
            // SAFETY: our stream, being captured (a host node); `wake.func`
            // only touches what `wake.data` points to, which lives for the
            // program (CudaBackend leaks it), and makes no CUDA call.
            unsafe { sys::cuLaunchHostFunc(stream, wake.func, wake.data) }
                .result()
                .map_err(cuda_err("cuLaunchHostFunc (graph capture)"))?;
            Ok(())
        })
    }

    /// How the slots' graphs wait for a chunk, for the start-up log.
    pub fn chunk_wait_text(&self) -> &'static str {
        match self.chunk_wait {
            ChunkWait::Stream => "stream waits",
            ChunkWait::Last => "stream waits, a polling kernel before the last",
            ChunkWait::Poll => "polling kernels",
        }
    }

    /// Launches alpha_sync, frame_done and map_export once, outside any
    /// graph, on harmless targets: with lazy module loading a kernel's first
    /// launch must not sit behind an unsatisfied wait. Waits for them.
    pub fn warm_trigger_kernels(&self, t: &TriggerTargets) -> Result<(), DspError> {
        // Target 0: returns at once (a count is never below 0, cyclically
        // within half the range of it).
        self.launch(
            "launch wait_count",
            &self.kernels.wait_count,
            (1, 1),
            1,
            &[t.count, 0],
            false,
        )?;
        self.launch(
            "launch alpha_sync",
            &self.kernels.alpha_sync,
            (1, 1),
            256,
            &[t.alpha_tables, t.alpha_index, self.bufs.alpha.ptr()],
            false,
        )?;
        self.launch(
            "launch frame_done",
            &self.kernels.frame_done,
            (1, 1),
            1,
            &[t.count, t.record, u64::from(t.slot), t.cancelling],
            false,
        )?;
        self.launch_map_export(t.map)?;
        self.synchronize()
    }

    /// The stream the chain runs on (GPU-triggered mode's feeder launches
    /// the slots' graphs on it).
    pub fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    pub fn context(&self) -> &std::sync::Arc<cudarc::driver::CudaContext> {
        &self.ctx
    }

    /// Detections a frame keeps at most.
    pub fn max_detections(&self) -> usize {
        self.max_det
    }

    /// Copies the detections out of a slot's mapped output buffer (`out`:
    /// its bytes, after the host saw the slot's `ready`). Never allocates
    /// when `dets` has room for max_detections.
    pub fn read_detections_from(
        &self,
        out: &[u8],
        dets: &mut crate::detection::Detections,
    ) -> Result<(), DspError> {
        dets.clear();
        let (hdr, list) = super::parse_output(out, self.max_det)?;
        let n = (hdr.count as usize).min(self.max_det);
        dets.list.extend_from_slice(&list[..n]);
        dets.cut = hdr.cut;
        Ok(())
    }
}
