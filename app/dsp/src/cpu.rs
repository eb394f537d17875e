//! CPU reference backend: spec v1 (docs/processing-chain.md) with rustfft.
//!
//! Per virtual channel `p = i * N_rx + j` (independent until step 4):
//! 1. for every loop `l`, chirp `m = l * N_tx + i`, RX `j`: int16 I/Q to
//!    complex float32 without scaling, times the periodic Hann range window;
//!    range FFT over the `N_s` samples (all bins kept): `R[l][r]`;
//! 2. corner turn to `R[r][l]` (a block of 8 range bins at a time, so steps
//!    2 to 4 run in L1); optional clutter removal: subtract the mean over `l`
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

use std::ops::Range;
use std::sync::Arc;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use rustfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};

use crate::angle::AngleEstimator;
use crate::backend::{Backend, FrameInput};
use crate::cfar::{CfarEngine, CfarPeak};
use crate::config::{ChainConfig, SAMPLE_BYTES};
use crate::detection::Detections;
use crate::error::DspError;
use crate::refine::{Units, refine_doppler, refine_range};
use crate::window::hann_periodic;

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

/// Range bins per Doppler-stage block: 8 x 256 complex = 16 KiB, in L1.
const DOPPLER_BLOCK: usize = 8;

/// Constants shared read-only by all jobs.
struct Plan {
    n_tx: usize,
    n_rx: usize,
    nl: usize,
    ns: usize,
    clutter_removal: bool,
    range_window: Vec<f32>,
    doppler_window: Vec<f32>,
    range_fft: Arc<dyn Fft<f32>>,
    doppler_fft: Arc<dyn Fft<f32>>,
}

/// One thread's share of the work: a contiguous range of virtual channels
/// and every buffer it needs.
struct ChannelJob {
    plan: Arc<Plan>,
    channels: Range<usize>,
    /// Workers only: a copy of this job's raw samples, `[channel][l][n]`.
    raw: Vec<u8>,
    /// Range FFT output of one channel, `[l][r]`.
    range: Vec<Complex32>,
    /// A few range bins of one channel, `[r][l]`, for the Doppler stage.
    block: Vec<Complex32>,
    /// Doppler spectra of this job's channels, `[channel][r][k]`.
    spectra: Vec<Complex32>,
    /// Partial power over this job's channels, `[r][k]`, float64.
    power: Vec<f64>,
    scratch: Vec<Complex32>,
}

/// Where a job reads its raw samples from.
#[derive(Clone, Copy)]
enum RawSource<'a> {
    /// The whole frame, in the frame layout (`[chirp][rx][sample]`).
    Frame(&'a [u8]),
    /// The job's own copy, `[channel][l][n]`.
    Copy,
}

impl ChannelJob {
    fn new(plan: Arc<Plan>, channels: Range<usize>, with_copy: bool) -> Self {
        let (nl, ns) = (plan.nl, plan.ns);
        let n = channels.len();
        let scratch_len = plan
            .range_fft
            .get_inplace_scratch_len()
            .max(plan.doppler_fft.get_inplace_scratch_len());
        ChannelJob {
            raw: if with_copy {
                vec![0u8; n * nl * ns * SAMPLE_BYTES]
            } else {
                Vec::new()
            },
            range: vec![Complex32::default(); nl * ns],
            block: vec![Complex32::default(); nl * DOPPLER_BLOCK.min(ns)],
            spectra: vec![Complex32::default(); n * nl * ns],
            power: vec![0.0; nl * ns],
            scratch: vec![Complex32::default(); scratch_len],
            plan,
            channels,
        }
    }

    /// Byte offset in the frame of chirp `m = l * N_tx + i`, RX `j`, sample 0.
    fn frame_offset(plan: &Plan, p: usize, l: usize) -> usize {
        let (i, j) = (p / plan.n_rx, p % plan.n_rx);
        let m = l * plan.n_tx + i;
        (m * plan.n_rx + j) * plan.ns * SAMPLE_BYTES
    }

    /// Copy this job's samples out of the frame (workers cannot borrow it).
    fn load_copy(&mut self, frame: &[u8]) {
        let plan = &*self.plan;
        let row = plan.ns * SAMPLE_BYTES;
        for (c, p) in self.channels.clone().enumerate() {
            for l in 0..plan.nl {
                let src = Self::frame_offset(plan, p, l);
                let dst = (c * plan.nl + l) * row;
                self.raw[dst..dst + row].copy_from_slice(&frame[src..src + row]);
            }
        }
    }

    /// Steps 1 to 4 for every channel of the job.
    fn run(&mut self, source: RawSource<'_>) {
        let plan = &*self.plan;
        let (nl, ns) = (plan.nl, plan.ns);
        let row_bytes = ns * SAMPLE_BYTES;
        for (c, p) in self.channels.clone().enumerate() {
            // Step 1: convert, window, range FFT.
            for l in 0..nl {
                let src = match source {
                    RawSource::Frame(frame) => {
                        let off = Self::frame_offset(plan, p, l);
                        &frame[off..off + row_bytes]
                    }
                    RawSource::Copy => {
                        let off = (c * nl + l) * row_bytes;
                        &self.raw[off..off + row_bytes]
                    }
                };
                convert_and_window(
                    src,
                    &plan.range_window,
                    &mut self.range[l * ns..(l + 1) * ns],
                );
            }
            plan.range_fft
                .process_with_scratch(&mut self.range, &mut self.scratch);

            // Steps 2 to 4 a few range bins at a time, in a block small
            // enough to stay in L1: corner turn [l][r] -> [r][l], clutter
            // removal, Doppler window, Doppler FFT, then store the spectra
            // and add |X|^2 into the float64 partial map.
            let blk = self.block.len() / nl;
            let spec = &mut self.spectra[c * nl * ns..(c + 1) * nl * ns];
            for r0 in (0..ns).step_by(blk) {
                gather_columns(&self.range, ns, r0, &mut self.block);
                prepare_doppler(&mut self.block, &plan.doppler_window, plan.clutter_removal);
                plan.doppler_fft
                    .process_with_scratch(&mut self.block, &mut self.scratch);
                let span = r0 * nl..(r0 + blk) * nl;
                spec[span.clone()].copy_from_slice(&self.block);
                accumulate_power(&self.block, &mut self.power[span], c == 0);
            }
        }
    }

    /// Doppler spectrum value `X[p][r][k]` of a channel this job owns.
    fn spectrum(&self, p: usize, r: usize, k: usize) -> Complex32 {
        let (nl, ns) = (self.plan.nl, self.plan.ns);
        let c = p - self.channels.start;
        self.spectra[(c * ns + r) * nl + k]
    }
}

/// int16 I/Q (little-endian) to complex float32, times the range window.
#[inline(never)]
fn convert_and_window(src: &[u8], window: &[f32], dst: &mut [Complex32]) {
    for ((x, s), &w) in dst
        .iter_mut()
        .zip(src.chunks_exact(SAMPLE_BYTES))
        .zip(window)
    {
        let re = f32::from(i16::from_le_bytes([s[0], s[1]]));
        let im = f32::from(i16::from_le_bytes([s[2], s[3]]));
        *x = Complex32::new(re * w, im * w);
    }
}

/// Corner turn of range bins `r0..r0 + B` of a `[l][r]` matrix (rows of
/// `ns`) into `block`, `[B][l]`.
#[inline(never)]
fn gather_columns(range: &[Complex32], ns: usize, r0: usize, block: &mut [Complex32]) {
    let nl = range.len() / ns;
    let blk = block.len() / nl;
    for (l, row) in range.chunks_exact(ns).enumerate() {
        for (b, &v) in row[r0..r0 + blk].iter().enumerate() {
            block[b * nl + l] = v;
        }
    }
}

/// Optional clutter removal (mean over `l`, accumulated in float64) and the
/// Doppler window, on every `[r][l]` row.
#[inline(never)]
fn prepare_doppler(spec: &mut [Complex32], window: &[f32], clutter_removal: bool) {
    let nl = window.len();
    for x in spec.chunks_exact_mut(nl) {
        if clutter_removal {
            let (mut sr, mut si) = (0.0f64, 0.0f64);
            for v in x.iter() {
                sr += f64::from(v.re);
                si += f64::from(v.im);
            }
            let mean = Complex32::new((sr / nl as f64) as f32, (si / nl as f64) as f32);
            for v in x.iter_mut() {
                *v -= mean;
            }
        }
        for (v, &w) in x.iter_mut().zip(window) {
            *v *= w;
        }
    }
}

/// `power (+)= |X|^2`, squares and sum in float64.
#[inline(never)]
fn accumulate_power(spec: &[Complex32], power: &mut [f64], first: bool) {
    if first {
        for (acc, v) in power.iter_mut().zip(spec) {
            *acc = norm_sqr_f64(*v);
        }
    } else {
        for (acc, v) in power.iter_mut().zip(spec) {
            *acc += norm_sqr_f64(*v);
        }
    }
}

fn norm_sqr_f64(v: Complex32) -> f64 {
    let (re, im) = (f64::from(v.re), f64::from(v.im));
    re * re + im * im
}

/// A one-item hand-over between two threads: a mutex and a condition
/// variable (futex waits: no allocation, ever, unlike a channel's lazily
/// built waiter lists). Closing it wakes the other side for good.
struct Mailbox<T> {
    state: Mutex<MailboxState<T>>,
    ready: Condvar,
}

enum MailboxState<T> {
    Empty,
    Full(T),
    Closed,
}

impl<T> Mailbox<T> {
    fn new() -> Self {
        Mailbox {
            state: Mutex::new(MailboxState::Empty),
            ready: Condvar::new(),
        }
    }

    /// Leave `item`; gives it back when the mailbox is closed.
    fn put(&self, item: T) -> Result<(), T> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*s, MailboxState::Closed) {
            return Err(item);
        }
        *s = MailboxState::Full(item);
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// Wait for an item; `None` once the mailbox is closed.
    fn take(&self) -> Option<T> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match std::mem::replace(&mut *s, MailboxState::Empty) {
                MailboxState::Full(item) => return Some(item),
                MailboxState::Closed => {
                    *s = MailboxState::Closed;
                    return None;
                }
                MailboxState::Empty => {
                    s = self.ready.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    fn close(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *s = MailboxState::Closed;
        drop(s);
        self.ready.notify_all();
    }
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
    job: Option<Box<ChannelJob>>,
    to_worker: Arc<Mailbox<Box<ChannelJob>>>,
    from_worker: Arc<Mailbox<Box<ChannelJob>>>,
    handle: Option<JoinHandle<()>>,
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
            n_tx: g.n_tx,
            n_rx: g.n_rx,
            nl,
            ns,
            clutter_removal: cfg.chain.clutter_removal,
            range_window: hann_periodic(ns),
            doppler_window: hann_periodic(nl),
            range_fft: planner.plan_fft_forward(ns),
            doppler_fft: planner.plan_fft_forward(nl),
        });
        // Contiguous channel ranges; the calling thread takes the last one.
        let bounds: Vec<usize> = (0..=threads).map(|t| t * nv / threads).collect();
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
                        job.run(RawSource::Copy);
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

    /// Steps 1-4 on all threads; leaves `power_map` filled.
    fn run_channels(&mut self, frame: &[u8]) -> Result<(), DspError> {
        for w in &mut self.workers {
            let mut job = w
                .job
                .take()
                .ok_or_else(|| DspError::Backend("cpu worker job missing".into()))?;
            job.load_copy(frame);
            if let Err(job) = w.to_worker.put(job) {
                w.job = Some(job);
                return Err(DspError::Backend("cpu worker thread exited".into()));
            }
        }
        self.main_job.run(RawSource::Frame(frame));
        for w in &mut self.workers {
            let job = w
                .from_worker
                .take()
                .ok_or_else(|| DspError::Backend("cpu worker thread died".into()))?;
            w.job = Some(job);
        }

        // Sum the partial maps (float64), round once, fftshift to P[d][r].
        let (nl, ns) = (self.nl, self.ns);
        let half = nl / 2;
        for r in 0..ns {
            for k in 0..nl {
                let mut s = self.main_job.power[r * nl + k];
                for w in &self.workers {
                    if let Some(job) = &w.job {
                        s += job.power[r * nl + k];
                    }
                }
                let d = (k + half) % nl;
                self.power_map[d * ns + r] = s as f32;
            }
        }
        Ok(())
    }
}

impl Backend for CpuBackend {
    fn set_cfar_alpha(&mut self, alpha: &[f64]) -> Result<(), DspError> {
        self.cfar.set_alpha(alpha)
    }

    fn name(&self) -> &'static str {
        "cpu"
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
        if let Err(e) = self.run_channels(frame.bytes) {
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
