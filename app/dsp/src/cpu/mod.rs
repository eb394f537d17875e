//! CPU reference backend: spec v1 (docs/processing-chain.md) with rustfft.
//!
//! Per virtual channel `p = i * N_rx + j` (independent until step 4):
//! 1. for every loop `l`, chirp `m = l * N_tx + i`, RX `j`: int16 I/Q to
//!    complex float32 without scaling, times the periodic Hann range window;
//!    range FFT over the `N_s` samples (all bins kept): `R[l][r]`;
//! 2. corner turn to `R[r][l]`, each value rounded as the spectra are
//!    stored ([`crate::spectra`]) (16 loops at a time, from an L1-sized tile,
//!    as step 1 finishes them; steps 2 to 4 then run in place, 8 range bins
//!    at a time); optional clutter removal: subtract the mean over `l`
//!    (accumulated in float64, subtracted in float32);
//! 3. periodic Hann Doppler window over `l`, Doppler FFT over `l`:
//!    `X[p][r][k]` (stored unshifted; Doppler bin `d` is `k = (d + N_l/2) mod N_l`);
//! 4. `|X|^2` (float32 components squared and summed in float64) added into
//!    a float64 partial power map.
//!
//! Then the partial maps of all channels are summed in float64, rounded once
//! to float32 and fftshifted into the Doppler-major power map `P[d][r]`, so
//! `P` is the float32 rounding of `sum_p |X[d,p,r]|^2` whatever the thread
//! count. CFAR and peak grouping ([`crate::cfar`]), the cap, the angle
//! ([`crate::angle`]) and refinement ([`crate::refine`]) follow.
//!
//! Threads: a fixed pool made at construction. Each worker owns a job (its
//! channels' buffers) that travels to it and back through two one-item
//! mailboxes (mutex + condition variable) each frame, so nothing is
//! allocated or shared-borrowed per frame; the calling thread processes its
//! own share of the channels and does the rest of the chain. A worker's
//! frame samples are copied to it (it cannot borrow the caller's frame).
//!
//! Chunk-streamed mode ([`Backend::chunk_landed`]): as a frame's chunks
//! land, the calling thread runs step 1 on every row they complete, for all
//! channels (the workers' jobs are home between frames), so that when the
//! frame is complete only steps 2 to 4 and the rest are left. The results
//! are the same bits as for the whole frame: each row goes through the same
//! conversion, window and FFT.

mod job;
mod mailbox;

use std::sync::Arc;
use std::thread::JoinHandle;

use rustfft::FftPlanner;
use rustfft::num_complex::Complex32;

use crate::angle::AngleEstimator;
use crate::backend::{Backend, FrameInput, SlotFrame};
use crate::cfar::{CfarEngine, CfarPeak};
use crate::config::{ChainConfig, SAMPLE_BYTES};
use crate::detection::Detections;
use crate::error::DspError;
use crate::refine::{Units, refine_doppler, refine_range};
use crate::window::hann_periodic;
use job::{ChannelJob, Plan, RawSource, Task};
use mailbox::Mailbox;

/// Counts from the last processed frame, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFrameStats {
    /// Cells above the CFAR threshold, before peak grouping.
    pub cfar_hits: u32,
    /// Hits that survived peak grouping, before the cap.
    pub peaks: u32,
    /// Peaks dropped by the cap.
    pub cut: u32,
}

/// Closes the worker's outgoing mailbox when the worker thread ends, even
/// by a panic, so the caller never waits for a job that cannot come back.
struct CloseOnExit(Arc<Mailbox<Box<ChannelJob>>>);

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A pool thread and the two mailboxes of its job hand-over.
struct Worker {
    /// The job, when it is home (not with the worker).
    job: Option<Box<ChannelJob>>,
    to_worker: Arc<Mailbox<Box<ChannelJob>>>,
    from_worker: Arc<Mailbox<Box<ChannelJob>>>,
    handle: Option<JoinHandle<()>>,
    /// Chunk-streamed mode: the frame rows given to it so far.
    rows_sent: usize,
}

impl Worker {
    /// Hands the job, with its task, to the worker.
    fn send(&mut self, job: Box<ChannelJob>) -> Result<(), DspError> {
        if let Err(job) = self.to_worker.put(job) {
            self.job = Some(job);
            return Err(DspError::Backend("cpu worker thread exited".into()));
        }
        Ok(())
    }

    /// Waits for the job to come home, if it is away.
    fn home(&mut self) -> Result<(), DspError> {
        if self.job.is_none() {
            let job = self
                .from_worker
                .take()
                .ok_or_else(|| DspError::Backend("cpu worker thread died".into()))?;
            self.job = Some(job);
        }
        Ok(())
    }

    /// Takes the job home if the worker is done with it; never waits.
    fn poll(&mut self) -> Result<(), DspError> {
        if self.job.is_none() {
            self.job = self
                .from_worker
                .try_take()
                .map_err(|()| DspError::Backend("cpu worker thread died".into()))?;
        }
        Ok(())
    }
}

/// The CPU reference backend.
pub struct CpuBackend {
    frame_bytes: usize,
    nl: usize,
    ns: usize,
    n_virtual: usize,
    max_detections: usize,
    main_job: ChannelJob,
    workers: Vec<Worker>,
    /// Set when a worker died; every later call fails.
    broken: bool,
    power_map: Vec<f32>,
    cfar: CfarEngine,
    peaks: Vec<CfarPeak>,
    angle: AngleEstimator,
    snapshot: Vec<Complex32>,
    units: Units,
    stats: CpuFrameStats,
    /// Chunk-streamed mode: the frame whose landed rows step 1 has started
    /// on (None between frames), and the rows the calling thread did.
    streamed: Option<SlotFrame>,
    main_rows: usize,
    frames_streamed: u64,
}

impl CpuBackend {
    /// A backend with one thread per available core (at most one per virtual channel).
    pub fn new(cfg: &ChainConfig) -> Result<Self, DspError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_threads(cfg, threads)
    }

    /// A backend using `threads` threads in all (the caller's included).
    pub fn with_threads(cfg: &ChainConfig, threads: usize) -> Result<Self, DspError> {
        cfg.validate()?;
        let g = &cfg.geometry;
        let (nl, ns, nv) = (g.n_loops, g.n_samples, g.n_virtual());
        let threads = threads.clamp(1, nv);
        let mut planner = FftPlanner::<f32>::new();
        let plan = Arc::new(Plan {
            nv,
            nl,
            ns,
            clutter_removal: cfg.chain.clutter_removal,
            range_window: hann_periodic(ns),
            doppler_window: hann_periodic(nl),
            range_fft: planner.plan_fft_forward(ns),
            doppler_fft: planner.plan_fft_forward(nl),
        });
        let bounds = channel_bounds(nv, threads);
        let mut workers = Vec::with_capacity(threads - 1);
        for t in 0..threads - 1 {
            let job = Box::new(ChannelJob::new(
                plan.clone(),
                bounds[t]..bounds[t + 1],
                true,
            ));
            let to_worker = Arc::new(Mailbox::<Box<ChannelJob>>::new());
            let from_worker = Arc::new(Mailbox::new());
            let (inbox, outbox) = (to_worker.clone(), from_worker.clone());
            let handle = std::thread::Builder::new()
                .name(format!("dsp-cpu-{t}"))
                .spawn(move || {
                    let outbox = CloseOnExit(outbox);
                    while let Some(mut job) = inbox.take() {
                        job.run_task();
                        if outbox.0.put(job).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| DspError::Io {
                    context: "spawning a CPU backend thread".into(),
                    source: e,
                })?;
            workers.push(Worker {
                job: Some(job),
                to_worker,
                from_worker,
                handle: Some(handle),
                rows_sent: 0,
            });
        }
        let main_job = ChannelJob::new(plan, bounds[threads - 1]..bounds[threads], false);
        let mut peaks = Vec::new();
        peaks.reserve_exact(nl * ns);
        Ok(CpuBackend {
            frame_bytes: g.frame_bytes(),
            nl,
            ns,
            n_virtual: nv,
            max_detections: cfg.chain.max_detections,
            main_job,
            workers,
            broken: false,
            power_map: vec![0.0; nl * ns],
            cfar: CfarEngine::new(cfg)?,
            peaks,
            angle: AngleEstimator::new(cfg),
            snapshot: vec![Complex32::default(); nv],
            units: Units::new(cfg),
            stats: CpuFrameStats::default(),
            streamed: None,
            main_rows: 0,
            frames_streamed: 0,
        })
    }

    /// Counts of the last processed frame.
    pub fn last_stats(&self) -> CpuFrameStats {
        self.stats
    }

    /// The power map of the last frame, `P[d][r]`, without copying.
    pub fn power(&self) -> &[f32] {
        &self.power_map
    }

    /// The CFAR constants in use.
    pub fn cfar(&self) -> &CfarEngine {
        &self.cfar
    }

    /// Doppler spectrum `X[d, p, r]` (fftshifted Doppler bin `d`) of the last frame.
    pub fn spectrum(&self, d: usize, p: usize, r: usize) -> Complex32 {
        let k = (d + self.nl / 2) % self.nl;
        if self.main_job.channels.contains(&p) {
            return self.main_job.spectrum(p, r, k);
        }
        for w in &self.workers {
            if let Some(job) = &w.job
                && job.channels.contains(&p)
            {
                return job.spectrum(p, r, k);
            }
        }
        Complex32::default()
    }

    /// Step 1 for the rows of `frame` that `landed` completes and that were
    /// not transformed yet: the workers' rows on the workers (each idle one
    /// gets its new rows; a busy one gets them with a later chunk, or with
    /// the frame), the calling thread's here.
    fn stream_rows(&mut self, frame: SlotFrame, landed: &[u8]) -> Result<(), DspError> {
        let rows = landed.len().min(self.frame_bytes) / (self.ns * SAMPLE_BYTES);
        if self.streamed != Some(frame) {
            // Rows of another frame are superseded.
            for w in &mut self.workers {
                w.home()?;
                w.rows_sent = 0;
            }
            self.main_rows = 0;
            self.streamed = Some(frame);
        }
        for w in &mut self.workers {
            w.poll()?;
            if w.rows_sent < rows
                && let Some(mut job) = w.job.take()
            {
                job.load_rows(landed, w.rows_sent, rows);
                job.task = Task::Rows {
                    from: w.rows_sent,
                    to: rows,
                };
                w.send(job)?;
                w.rows_sent = rows;
            }
        }
        if self.main_rows < rows {
            self.main_job
                .transform_rows(RawSource::Frame(landed), self.main_rows, rows);
            self.main_rows = rows;
        }
        Ok(())
    }

    /// Steps 1-4 on all threads, step 1 only for the rows not transformed
    /// as they landed when `streamed`; leaves `power_map` filled.
    fn run_channels(&mut self, frame: &[u8], streamed: bool) -> Result<(), DspError> {
        let total = self.main_job.frame_rows();
        for w in &mut self.workers {
            w.home()?;
            let rows_done = if streamed { w.rows_sent } else { 0 };
            w.rows_sent = 0;
            if let Some(mut job) = w.job.take() {
                job.load_rows(frame, rows_done, total);
                job.task = Task::Frame { rows_done };
                w.send(job)?;
            }
        }
        let rows_done = if streamed { self.main_rows } else { 0 };
        self.main_rows = 0;
        self.main_job.run(RawSource::Frame(frame), rows_done);
        for w in &mut self.workers {
            w.home()?;
        }

        // Sum the partial maps (float64) into the calling thread's, in
        // thread order, then round once and fftshift to P[d][r], in 8 x 8
        // blocks (the corner turn reads and writes whole cache lines).
        let (nl, ns) = (self.nl, self.ns);
        let sum = &mut self.main_job.power;
        for job in self.workers.iter().filter_map(|w| w.job.as_deref()) {
            for (s, &p) in sum.iter_mut().zip(&job.power) {
                *s += p;
            }
        }
        let half = nl / 2;
        const B: usize = 8;
        for r0 in (0..ns).step_by(B) {
            for k0 in (0..nl).step_by(B) {
                for k in k0..(k0 + B).min(nl) {
                    let d = (k + half) % nl;
                    for r in r0..(r0 + B).min(ns) {
                        self.power_map[d * ns + r] = sum[r * nl + k] as f32;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Contiguous channel ranges, one per thread; the calling thread takes the
/// last one, smaller: besides its channels it handles the chunk events,
/// copies the workers' rows out to them, and alone sums the maps and runs
/// CFAR, angles and refinement (together about three channels' worth of
/// steps 1 to 4 at the default geometry, measured on two cores).
fn channel_bounds(nv: usize, threads: usize) -> Vec<usize> {
    // Weights: 8 for a worker, 5 for the calling thread.
    let total = 8 * (threads - 1) + 5;
    let mut bounds: Vec<usize> = (0..threads)
        .map(|t| (t * 8 * nv + total / 2) / total)
        .collect();
    bounds.push(nv);
    bounds
}

impl Backend for CpuBackend {
    fn set_cfar_alpha(&mut self, alpha: &[f64]) -> Result<(), DspError> {
        self.cfar.set_alpha(alpha)
    }

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn streams_chunks(&self) -> bool {
        true
    }

    fn chunk_landed(
        &mut self,
        frame: SlotFrame,
        _chunk: usize,
        landed: &[u8],
    ) -> Result<(), DspError> {
        if self.broken {
            return Err(DspError::Backend(
                "cpu backend unusable after a worker thread died".into(),
            ));
        }
        let r = self.stream_rows(frame, landed);
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    fn frames_streamed(&self) -> u64 {
        self.frames_streamed
    }

    fn process(&mut self, frame: FrameInput<'_>, out: &mut Detections) -> Result<(), DspError> {
        out.clear();
        if frame.bytes.len() != self.frame_bytes {
            return Err(DspError::FrameSize {
                got: frame.bytes.len(),
                want: self.frame_bytes,
            });
        }
        if self.broken {
            return Err(DspError::Backend(
                "cpu backend unusable after a worker thread died".into(),
            ));
        }
        // The rows transformed as they landed count only for the same
        // capture of the same slot; any other frame supersedes them.
        let started = self.streamed.take();
        let streamed = frame.slot.is_some() && started == frame.slot;
        let rows_started = self.main_rows > 0 || self.workers.iter().any(|w| w.rows_sent > 0);
        if streamed && rows_started {
            self.frames_streamed += 1;
        }
        if let Err(e) = self.run_channels(frame.bytes, streamed) {
            self.broken = true;
            return Err(e);
        }

        // Steps 5 and 6.
        let hits = self.cfar.run(&self.power_map, &mut self.peaks);

        // Step 7: keep the highest P/mu, then order by range, Doppler.
        let found = self.peaks.len();
        let cap = self.max_detections;
        let mut cut = 0;
        if found > cap {
            let by_ratio = |a: &CfarPeak, b: &CfarPeak| {
                b.ratio()
                    .total_cmp(&a.ratio())
                    .then(a.range_bin.cmp(&b.range_bin))
                    .then(a.doppler_bin.cmp(&b.doppler_bin))
            };
            self.peaks.select_nth_unstable_by(cap, by_ratio);
            self.peaks.truncate(cap);
            cut = found - cap;
        }
        self.peaks
            .sort_unstable_by_key(|p| (p.range_bin, p.doppler_bin));
        self.stats = CpuFrameStats {
            cfar_hits: hits,
            peaks: found as u32,
            cut: cut as u32,
        };

        // Steps 8 to 10.
        for i in 0..self.peaks.len() {
            let peak = self.peaks[i];
            let (d, r) = (peak.doppler_bin as usize, peak.range_bin as usize);
            for p in 0..self.n_virtual {
                self.snapshot[p] = self.spectrum(d, p, r);
            }
            let angle = self.angle.estimate(d, &self.snapshot);
            let range_refined = refine_range(&self.power_map, self.ns, d, r);
            let doppler_refined = refine_doppler(&self.power_map, self.nl, self.ns, d, r);
            out.list.push(self.units.detection(
                &peak,
                range_refined,
                doppler_refined,
                angle.refined_bin,
            ));
        }
        out.cut = cut as u32;
        Ok(())
    }

    fn power_map(&mut self, out: &mut Vec<f32>) -> Result<(), DspError> {
        out.clear();
        out.extend_from_slice(&self.power_map);
        Ok(())
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        for w in &self.workers {
            // Closing the inbox ends the worker's loop.
            w.to_worker.close();
        }
        for w in &mut self.workers {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_gets_channels_and_the_caller_fewer() {
        assert_eq!(channel_bounds(16, 1), vec![0, 16]);
        assert_eq!(channel_bounds(16, 2), vec![0, 10, 16]);
        assert_eq!(channel_bounds(16, 4), vec![0, 4, 9, 13, 16]);
        for nv in 1..40 {
            for threads in 1..=nv {
                let b = channel_bounds(nv, threads);
                assert_eq!(b.len(), threads + 1);
                assert!(b.windows(2).all(|w| w[0] < w[1]), "{nv} {threads}: {b:?}");
            }
        }
    }

    #[test]
    fn frames_that_do_not_fit_are_refused_and_the_backend_goes_on() {
        let cfg = ChainConfig::default();
        let mut b = CpuBackend::with_threads(&cfg, 2).unwrap();
        let mut dets = Detections::with_capacity(8);
        let short = vec![0u8; cfg.geometry.frame_bytes() - 4];
        let err = b
            .process(
                FrameInput {
                    bytes: &short,
                    slot: None,
                },
                &mut dets,
            )
            .unwrap_err();
        assert!(
            matches!(err, DspError::FrameSize { got, want } if got + 4 == want),
            "{err}"
        );
        let zero = vec![0u8; cfg.geometry.frame_bytes()];
        b.process(
            FrameInput {
                bytes: &zero,
                slot: None,
            },
            &mut dets,
        )
        .unwrap();
        // An all-zero frame: P = 0 everywhere, and 0 > alpha * 0 is false.
        assert!(dets.list.is_empty());
        let mut map = Vec::new();
        b.power_map(&mut map).unwrap();
        assert_eq!(map.len(), 256 * 256);
        assert!(map.iter().all(|&p| p == 0.0));
    }
}
