//! Chunk-streamed mode on the CPU backend: frames whose rows were
//! transformed as their chunks landed (all of them, some, twice, at
//! uneven lengths, or for a frame that was then abandoned or overtaken)
//! give the same bits as the same frames processed whole, on 1 to 3
//! threads, and the backend says which frames finished from their chunks.

mod common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use common::{frame, random_scene};
use radar_dsp::{Backend, ChainConfig, CpuBackend, Detections, FrameInput, SlotFrame};

/// How a frame's chunks land before it is processed.
#[derive(Clone, Copy, Debug)]
enum Landing {
    /// Every chunk, once.
    All,
    /// Every chunk, twice.
    Twice,
    /// Every other chunk (each landed prefix still covers the ones before).
    EveryOther,
    /// Prefixes of random lengths, not whole rows or chunks.
    Uneven,
    /// No chunk event: the frame is processed whole.
    None,
    /// Chunks of an earlier capture of the slot that was never processed,
    /// then none of this one.
    AfterAnAbandonedFrame,
    /// Every chunk, but another frame is processed before this one.
    OvertakenByAnother,
}

const LANDINGS: [Landing; 7] = [
    Landing::All,
    Landing::Twice,
    Landing::EveryOther,
    Landing::Uneven,
    Landing::None,
    Landing::AfterAnAbandonedFrame,
    Landing::OvertakenByAnother,
];

/// A frame of a random scene of up to 10 targets.
fn random_frame(cfg: &ChainConfig, rng: &mut ChaCha8Rng, seed: u64) -> Vec<u8> {
    frame(cfg, &random_scene(cfg, rng, 10), seed)
}

/// `process` of `bytes` as frame `slot`; the detections and the power map.
fn process(b: &mut CpuBackend, bytes: &[u8], slot: Option<SlotFrame>) -> (Detections, Vec<f32>) {
    let mut dets = Detections::with_capacity(4096);
    b.process(FrameInput { bytes, slot }, &mut dets)
        .expect("process");
    (dets, b.power().to_vec())
}

/// Lands `bytes` on `b` as `frame`, in `chunks` chunks, as `landing` says.
fn land(
    b: &mut CpuBackend,
    rng: &mut ChaCha8Rng,
    frame: SlotFrame,
    bytes: &[u8],
    chunks: usize,
    landing: Landing,
) {
    let cb = bytes.len() / chunks;
    let mut landed = |c: usize, end: usize| {
        b.chunk_landed(frame, c, &bytes[..end]).expect("chunk");
    };
    match landing {
        Landing::All | Landing::OvertakenByAnother => {
            (0..chunks).for_each(|c| landed(c, (c + 1) * cb))
        }
        Landing::Twice => (0..chunks).for_each(|c| {
            landed(c, (c + 1) * cb);
            landed(c, (c + 1) * cb);
        }),
        Landing::EveryOther => (0..chunks).step_by(2).for_each(|c| landed(c, (c + 1) * cb)),
        Landing::Uneven => {
            let mut end = 0;
            while end < bytes.len() {
                end = (end + rng.random_range(1..2 * cb)).min(bytes.len());
                landed(end / cb, end);
            }
        }
        Landing::None | Landing::AfterAnAbandonedFrame => {}
    }
}

fn check_geometry(name: &str, cfg: &ChainConfig, threads: usize, frames: usize) {
    let mut whole = CpuBackend::with_threads(cfg, 1).expect("reference backend");
    let mut streamed = CpuBackend::with_threads(cfg, threads).expect("streamed backend");
    assert!(streamed.streams_chunks());
    let chunks = cfg.geometry.chunks_per_frame;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut detections = 0;
    for k in 0..frames {
        let landing = LANDINGS[k % LANDINGS.len()];
        let this = SlotFrame {
            index: k % 4,
            capture: 100 + k as u64,
        };
        let bytes = random_frame(cfg, &mut rng, 1000 + k as u64);
        if let Landing::AfterAnAbandonedFrame = landing {
            let other = random_frame(cfg, &mut rng, 5000 + k as u64);
            let abandoned = SlotFrame {
                capture: this.capture - 1,
                ..this
            };
            land(
                &mut streamed,
                &mut rng,
                abandoned,
                &other,
                chunks,
                Landing::All,
            );
        }
        land(&mut streamed, &mut rng, this, &bytes, chunks, landing);
        if let Landing::OvertakenByAnother = landing {
            let other = random_frame(cfg, &mut rng, 9000 + k as u64);
            let slot = SlotFrame {
                index: (this.index + 1) % 4,
                capture: 9000 + k as u64,
            };
            let want = process(&mut whole, &other, None);
            let got = process(&mut streamed, &other, Some(slot));
            assert_eq!(got, want, "{name} frame {k}: the frame that overtook");
        }
        let before = streamed.frames_streamed();
        let want = process(&mut whole, &bytes, None);
        let got = process(&mut streamed, &bytes, Some(this));
        assert_eq!(got.0, want.0, "{name} frame {k} ({landing:?}): detections");
        assert!(
            got.1 == want.1,
            "{name} frame {k} ({landing:?}): power maps differ"
        );
        detections += got.0.list.len();
        let finished_from_chunks = streamed.frames_streamed() - before;
        let expect = u64::from(matches!(
            landing,
            Landing::All | Landing::Twice | Landing::EveryOther | Landing::Uneven
        ));
        assert_eq!(
            finished_from_chunks, expect,
            "{name} frame {k} ({landing:?}): finished from its chunks"
        );
    }
    assert!(
        detections > frames,
        "{name}: too few detections ({detections})"
    );
}

#[test]
fn streamed_frames_are_the_same_bits_as_whole_frames() {
    check_geometry("default, 2 threads", &ChainConfig::default(), 2, 14);
    let mut cfg = ChainConfig::default();
    cfg.geometry.n_tx = 2;
    cfg.geometry.n_loops = 128;
    cfg.geometry.n_samples = 128;
    cfg.geometry.chunks_per_frame = 8;
    cfg.cfar.train_range = 6;
    cfg.chain.max_detections = 64;
    cfg.chain.clutter_removal = true;
    check_geometry("small, clutter removal, 3 threads", &cfg, 3, 21);
}

#[test]
fn a_chunk_without_whole_rows_and_a_foreign_frame_change_nothing() {
    let cfg = ChainConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let bytes = random_frame(&cfg, &mut rng, 11);
    let mut b = CpuBackend::with_threads(&cfg, 2).expect("backend");
    let frame = SlotFrame {
        index: 0,
        capture: 1,
    };
    // Fewer bytes than a row: nothing to transform, nothing started.
    b.chunk_landed(frame, 0, &bytes[..100]).expect("chunk");
    // More bytes than a frame: only the frame's rows count.
    let mut long = bytes.clone();
    long.extend_from_slice(&[0xAB; 4096]);
    b.chunk_landed(frame, 17, &long).expect("chunk");
    let mut whole = CpuBackend::with_threads(&cfg, 1).expect("reference");
    let want = process(&mut whole, &bytes, None);
    assert_eq!(process(&mut b, &bytes, Some(frame)), want);
    assert_eq!(b.frames_streamed(), 1);
    // The same capture again without new chunks: processed whole.
    assert_eq!(process(&mut b, &bytes, Some(frame)), want);
    assert_eq!(b.frames_streamed(), 1);
}
