//! One thread's share of steps 1 to 4: a contiguous range of virtual
//! channels, their buffers, and the kernels that fill them.
//!
//! Frame rows (one chirp of one RX antenna, `N_s` samples) come in frame
//! order `q = l * N_v + p` (loop `l`, virtual channel `p = i * N_rx + j`
//! of chirp `m = l * N_tx + i`), so the first `R` rows of a frame hold, for
//! channel `p`, the loops `l < ceil((R - p) / N_v)`: what chunk-streamed mode
//! can range-transform before the frame is complete.

use std::ops::Range;
use std::sync::Arc;

use rustfft::Fft;
use rustfft::num_complex::Complex32;

use crate::config::SAMPLE_BYTES;
use crate::spectra::round_stored_complex;

/// Range bins per Doppler-stage block: 8 x 256 complex = 16 KiB, in L1.
const DOPPLER_BLOCK: usize = 8;

/// Loops per step-1 tile: 16 x 256 complex = 32 KiB, in L1, transposed
/// from there into the channel's `[r][l]` spectra in runs of 16 values
/// (two cache lines).
const RANGE_TILE: usize = 16;

/// Padding after each tile row, in values (one cache line): with rows a
/// power of two apart, the corner turn's reads down a column would all
/// fall in the same few L1 sets and alias the stores 4 KiB apart.
const TILE_PAD: usize = 8;

/// Side of the corner turn's square blocks, in values.
const TURN: usize = 4;

/// Constants shared read-only by all jobs.
pub(super) struct Plan {
    /// Virtual channels, `N_tx * N_rx`.
    pub(super) nv: usize,
    pub(super) nl: usize,
    pub(super) ns: usize,
    pub(super) clutter_removal: bool,
    pub(super) range_window: Vec<f32>,
    pub(super) doppler_window: Vec<f32>,
    pub(super) range_fft: Arc<dyn Fft<f32>>,
    pub(super) doppler_fft: Arc<dyn Fft<f32>>,
}

/// One thread's share of the work: a contiguous range of virtual channels
/// and every buffer it needs.
pub(super) struct ChannelJob {
    plan: Arc<Plan>,
    pub(super) channels: Range<usize>,
    /// Workers only: a copy of the rows of this job's channels it is to
    /// transform, `[channel][l][n]` (a worker cannot borrow the frame).
    raw: Vec<u8>,
    /// What a worker is to do with the job when it gets it.
    pub(super) task: Task,
    /// A few loops of one channel through step 1, `[l][r]`.
    tile: Vec<Complex32>,
    /// Per channel of this job, `[channel][r][l]`: the range FFT output,
    /// corner-turned as step 1 writes it, then in place the Doppler
    /// spectra `[channel][r][k]`.
    spectra: Vec<Complex32>,
    /// Partial power over this job's channels, `[r][k]`, float64.
    pub(super) power: Vec<f64>,
    scratch: Vec<Complex32>,
}

/// A worker's task, on rows copied into the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Task {
    /// Step 1 for frame rows `from..to` (chunk-streamed mode).
    Rows { from: usize, to: usize },
    /// Steps 1 to 4, step 1 for the rows after the first `rows_done`.
    Frame { rows_done: usize },
}

/// Where a job reads the raw samples of the rows it transforms.
#[derive(Clone, Copy)]
pub(super) enum RawSource<'a> {
    /// The frame, or the part of it that has landed, in the frame layout
    /// (`[chirp][rx][sample]`).
    Frame(&'a [u8]),
    /// The job's own copy, `[channel][l][n]`.
    Copy,
}

impl ChannelJob {
    pub(super) fn new(plan: Arc<Plan>, channels: Range<usize>, with_copy: bool) -> Self {
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
            task: Task::Frame { rows_done: 0 },
            tile: vec![Complex32::default(); RANGE_TILE.min(nl) * (ns + TILE_PAD)],
            spectra: vec![Complex32::default(); n * nl * ns],
            power: vec![0.0; nl * ns],
            scratch: vec![Complex32::default(); scratch_len],
            plan,
            channels,
        }
    }

    /// Rows in a frame.
    pub(super) fn frame_rows(&self) -> usize {
        self.plan.nl * self.plan.nv
    }

    /// Loops of channel `p` whose rows are among a frame's first `rows`.
    fn loops_done(plan: &Plan, p: usize, rows: usize) -> usize {
        rows.saturating_sub(p).div_ceil(plan.nv).min(plan.nl)
    }

    /// Byte offset in the frame of loop `l` of channel `p` (row `l * N_v + p`).
    fn frame_offset(plan: &Plan, p: usize, l: usize) -> usize {
        (l * plan.nv + p) * plan.ns * SAMPLE_BYTES
    }

    /// Copy this job's rows among frame rows `from..to` out of `frame` (the
    /// frame, or as much of it as has landed) for a worker's task.
    pub(super) fn load_rows(&mut self, frame: &[u8], from: usize, to: usize) {
        let plan = &*self.plan;
        let row = plan.ns * SAMPLE_BYTES;
        for (c, p) in self.channels.clone().enumerate() {
            for l in Self::loops_done(plan, p, from)..Self::loops_done(plan, p, to) {
                let src = Self::frame_offset(plan, p, l);
                let dst = (c * plan.nl + l) * row;
                self.raw[dst..dst + row].copy_from_slice(&frame[src..src + row]);
            }
        }
    }

    /// A worker's [`Self::task`], on the rows [`Self::load_rows`] copied.
    pub(super) fn run_task(&mut self) {
        match self.task {
            Task::Rows { from, to } => self.transform_rows(RawSource::Copy, from, to),
            Task::Frame { rows_done } => self.run(RawSource::Copy, rows_done),
        }
    }

    /// Step 1 (convert, window, range FFT) and the corner turn to
    /// `[r][l]` for this job's rows among frame rows `from..to`, a tile of
    /// loops at a time.
    pub(super) fn transform_rows(&mut self, source: RawSource<'_>, from: usize, to: usize) {
        let plan = &*self.plan;
        let (nl, ns) = (plan.nl, plan.ns);
        let row_bytes = ns * SAMPLE_BYTES;
        for (c, p) in self.channels.clone().enumerate() {
            let turned = &mut self.spectra[c * nl * ns..(c + 1) * nl * ns];
            let (l0, l1) = (
                Self::loops_done(plan, p, from),
                Self::loops_done(plan, p, to),
            );
            for t0 in (l0..l1).step_by(RANGE_TILE) {
                let t1 = (t0 + RANGE_TILE).min(l1);
                let stride = ns + TILE_PAD;
                let tile = &mut self.tile[..(t1 - t0) * stride];
                for (l, row) in (t0..t1).zip(tile.chunks_exact_mut(stride)) {
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
                    let row = &mut row[..ns];
                    convert_and_window(src, &plan.range_window, row);
                    plan.range_fft.process_with_scratch(row, &mut self.scratch);
                }
                // Without clutter removal the Doppler window goes on here,
                // in the same pass (the same products as in step 3).
                let window = (!plan.clutter_removal).then(|| &plan.doppler_window[t0..t1]);
                corner_turn(tile, stride, ns, &mut turned[t0..], nl, window);
            }
        }
    }

    /// Steps 1 to 4 for every channel of the job; step 1 only for the rows
    /// not among the frame's first `rows_done` (the others were transformed
    /// as they landed).
    pub(super) fn run(&mut self, source: RawSource<'_>, rows_done: usize) {
        self.transform_rows(source, rows_done, self.frame_rows());
        let plan = &*self.plan;
        let (nl, ns) = (plan.nl, plan.ns);
        // Steps 2 to 4 in place, a few range bins at a time, in blocks
        // small enough to stay in L1: clutter removal and the Doppler
        // window (already on without clutter removal), Doppler FFT, and
        // |X|^2 added into the float64 partial map. Channels inside, so
        // the block of the partial map stays in L1 while every channel
        // adds to it.
        let blk = DOPPLER_BLOCK.min(ns);
        for r0 in (0..ns).step_by(blk) {
            let span = r0 * nl..(r0 + blk).min(ns) * nl;
            for c in 0..self.channels.len() {
                let spec = &mut self.spectra[c * nl * ns..(c + 1) * nl * ns];
                let block = &mut spec[span.clone()];
                if plan.clutter_removal {
                    remove_clutter_and_window(block, &plan.doppler_window);
                }
                plan.doppler_fft
                    .process_with_scratch(block, &mut self.scratch);
                accumulate_power(block, &mut self.power[span.clone()], c == 0);
            }
        }
    }

    /// Doppler spectrum value `X[p][r][k]` of a channel this job owns.
    pub(super) fn spectrum(&self, p: usize, r: usize, k: usize) -> Complex32 {
        let (nl, ns) = (self.plan.nl, self.plan.ns);
        let c = p - self.channels.start;
        self.spectra[(c * ns + r) * nl + k]
    }
}

/// int16 I/Q (little-endian) to complex float32, times the range window.
#[inline(never)]
fn convert_and_window(src: &[u8], window: &[f32], dst: &mut [Complex32]) {
    // Fixed-size samples: no bounds checks, so the loop vectorises.
    let (samples, _) = src.as_chunks::<SAMPLE_BYTES>();
    for ((x, s), &w) in dst.iter_mut().zip(samples).zip(window) {
        let re = f32::from(i16::from_le_bytes([s[0], s[1]]));
        let im = f32::from(i16::from_le_bytes([s[2], s[3]]));
        *x = Complex32::new(re * w, im * w);
    }
}

/// Corner turn of a tile `[t][r]` (rows `stride` apart, the first `ns`
/// values of each used) into `turned`, `[r][l]` with rows of `nl`:
/// `turned[r * nl + t] = tile[t * stride + r]` (`turned` starts at the
/// tile's first loop), a run of tile-many loops per range bin, times
/// `window[t]` when given (the tile's part of the Doppler window), rounded
/// as the spectra are stored ([`crate::spectra::round_stored`]).
#[inline(never)]
fn corner_turn(
    tile: &[Complex32],
    stride: usize,
    ns: usize,
    turned: &mut [Complex32],
    nl: usize,
    window: Option<&[f32]>,
) {
    let loops = tile.len() / stride;
    // Blocks of TURN x TURN values, read as rows and written as columns
    // from registers; the loops (and range bins) left over go one by one.
    let (loops_blocked, ns_blocked) = (loops - loops % TURN, ns - ns % TURN);
    for r0 in (0..ns_blocked).step_by(TURN) {
        for t0 in (0..loops_blocked).step_by(TURN) {
            let mut block = [[Complex32::default(); TURN]; TURN];
            for (t, row) in block.iter_mut().enumerate() {
                let at = (t0 + t) * stride + r0;
                row.copy_from_slice(&tile[at..at + TURN]);
                if let Some(w) = window {
                    let w = w[t0 + t];
                    for v in row.iter_mut() {
                        *v *= w;
                    }
                }
                for v in row.iter_mut() {
                    *v = round_stored_complex(*v);
                }
            }
            for (k, chunk) in turned[r0 * nl + t0..].chunks_mut(nl).take(TURN).enumerate() {
                let out: &mut [Complex32; TURN] = match chunk.first_chunk_mut() {
                    Some(out) => out,
                    None => continue,
                };
                for (t, o) in out.iter_mut().enumerate() {
                    *o = block[t][k];
                }
            }
        }
    }
    let turn_one = |turned: &mut [Complex32], r: usize, t: usize| {
        let v = tile[t * stride + r];
        turned[r * nl + t] = round_stored_complex(match window {
            Some(w) => v * w[t],
            None => v,
        });
    };
    for r in 0..ns {
        let from = if r < ns_blocked { loops_blocked } else { 0 };
        for t in from..loops {
            turn_one(turned, r, t);
        }
    }
}

/// Step 2's clutter removal (mean over `l`, accumulated in float64) and
/// step 3's Doppler window, on every `[r][l]` row.
#[inline(never)]
fn remove_clutter_and_window(spec: &mut [Complex32], window: &[f32]) {
    let nl = window.len();
    for x in spec.chunks_exact_mut(nl) {
        let (mut sr, mut si) = (0.0f64, 0.0f64);
        for v in x.iter() {
            sr += f64::from(v.re);
            si += f64::from(v.im);
        }
        let mean = Complex32::new((sr / nl as f64) as f32, (si / nl as f64) as f32);
        for v in x.iter_mut() {
            *v -= mean;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocked corner turn puts every value where the plain definition
    /// does, for tiles and geometries that are and are not multiples of
    /// the block, with and without the window.
    #[test]
    fn corner_turn_matches_its_definition() {
        for (loops, ns, nl) in [(16, 256, 256), (5, 8, 16), (3, 2, 4), (7, 16, 8), (1, 4, 2)] {
            let stride = ns + TILE_PAD;
            let tile: Vec<Complex32> = (0..loops * stride)
                .map(|i| Complex32::new(i as f32, -(i as f32) * 0.5))
                .collect();
            let window: Vec<f32> = (0..loops).map(|t| 1.0 + t as f32 * 0.25).collect();
            for w in [None, Some(&window[..])] {
                let mut turned = vec![Complex32::new(f32::NAN, 0.0); ns * nl];
                corner_turn(&tile, stride, ns, &mut turned, nl, w);
                for r in 0..ns {
                    for t in 0..nl {
                        let got = turned[r * nl + t];
                        if t < loops {
                            let v = tile[t * stride + r] * w.map_or(1.0, |w| w[t]);
                            assert_eq!(
                                got,
                                round_stored_complex(v),
                                "loops {loops} ns {ns} r {r} t {t}"
                            );
                        } else {
                            assert!(got.re.is_nan(), "wrote past the tile: r {r} t {t}");
                        }
                    }
                }
            }
        }
    }
}
