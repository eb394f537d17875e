//! The detection feed: the loop writes every processed frame's detections
//! once into a bounded lock-free broadcast ring of fixed-size slots
//! allocated at start-up; each threaded sink reads it with its own cursor.
//! A reader that falls more than the ring behind loses the oldest frames
//! (counted, never waited for).

use std::sync::atomic::{AtomicU64, Ordering, fence};

use radar_dsp::Detection;

use crate::timekeeping::{NO_BOUND, Quality, TimeSource};

/// Frames the feed holds (about a second at 8 ms frames).
pub const FEED_FRAMES: usize = 128;
/// Words of a slot before its detections: sequence, timestamp, latency,
/// count and cut, UTC time, its source and quality, its bound.
const HEADER_WORDS: usize = 7;

/// One frame's detections as a sink reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameDetections {
    pub sequence: u64,
    /// The source's capture timestamp (the FPGA's clock).
    pub timestamp_ns: u64,
    /// The frame's wall-clock time (UTC, ns since 1970), its source,
    /// quality and the bound on its error (None: no bound).
    pub utc_ns: u64,
    pub time_source: TimeSource,
    pub time_quality: Quality,
    pub time_bound_ns: Option<u64>,
    pub latency_ns: u64,
    pub cut: u32,
    pub detections: Vec<Detection>,
}

/// What the loop knows of a frame besides its detections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameStamp {
    pub sequence: u64,
    /// The source's capture timestamp (the FPGA's clock).
    pub timestamp_ns: u64,
    /// The frame's wall-clock time (UTC, ns since 1970), its source,
    /// quality and the bound on its error (None: no bound).
    pub utc_ns: u64,
    pub time_source: TimeSource,
    pub time_quality: Quality,
    pub time_bound_ns: Option<u64>,
    /// Capture to detections published.
    pub latency_ns: u64,
}

impl FrameDetections {
    pub fn with_capacity(max_detections: usize) -> Self {
        FrameDetections {
            detections: Vec::with_capacity(max_detections),
            ..FrameDetections::default()
        }
    }
}

/// Words of one detection in the feed (`Detection` is `Pod`: any bits are
/// a valid detection, its size is checked at the struct).
const DET_WORDS: usize = std::mem::size_of::<Detection>() / 8;
const _: () = assert!(std::mem::size_of::<Detection>() == DET_WORDS * 8);

/// The broadcast ring: one writer (the loop), a cursor per reader.
pub struct DetectionFeed {
    pub(super) max_detections: usize,
    slot_words: usize,
    head: AtomicU64,
    stamps: Box<[AtomicU64]>,
    words: Box<[AtomicU64]>,
}

/// What a read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedRead {
    /// The next frame's detections were copied out.
    Copied,
    /// Nothing new.
    Empty,
    /// This many frames' detections were overwritten before they were read
    /// (the cursor moved past them).
    Lost(u64),
}

impl DetectionFeed {
    pub fn new(max_detections: usize) -> Self {
        let slot_words = HEADER_WORDS + DET_WORDS * max_detections;
        DetectionFeed {
            max_detections,
            slot_words,
            head: AtomicU64::new(0),
            stamps: (0..FEED_FRAMES).map(|_| AtomicU64::new(0)).collect(),
            words: (0..FEED_FRAMES * slot_words)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Frames published so far (a new reader starts here).
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// The loop's write (single writer). Detections beyond the feed's
    /// capacity are added to the cut.
    pub fn push(&self, stamp: &FrameStamp, dets: &[Detection], cut: u32) {
        let i = self.head.load(Ordering::Relaxed);
        let slot = (i % FEED_FRAMES as u64) as usize;
        let n = dets.len().min(self.max_detections);
        let cut = cut.saturating_add((dets.len() - n) as u32);
        self.stamps[slot].store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let w = &self.words[slot * self.slot_words..(slot + 1) * self.slot_words];
        w[0].store(stamp.sequence, Ordering::Relaxed);
        w[1].store(stamp.timestamp_ns, Ordering::Relaxed);
        w[2].store(stamp.latency_ns, Ordering::Relaxed);
        w[3].store(((n as u64) << 32) | u64::from(cut), Ordering::Relaxed);
        w[4].store(stamp.utc_ns, Ordering::Relaxed);
        w[5].store(
            stamp.time_source as u64 | (stamp.time_quality as u64) << 8,
            Ordering::Relaxed,
        );
        w[6].store(stamp.time_bound_ns.unwrap_or(NO_BOUND), Ordering::Relaxed);
        for (k, d) in dets[..n].iter().enumerate() {
            let base = HEADER_WORDS + k * DET_WORDS;
            let words: [u64; DET_WORDS] = bytemuck::cast(*d);
            for (dst, v) in w[base..base + DET_WORDS].iter().zip(words) {
                dst.store(v, Ordering::Relaxed);
            }
        }
        self.stamps[slot].store(i + 1, Ordering::Release);
        self.head.store(i + 1, Ordering::Release);
    }

    /// Reads the frame at `*cursor` into `out` and advances the cursor.
    pub fn read(&self, cursor: &mut u64, out: &mut FrameDetections) -> FeedRead {
        let head = self.head.load(Ordering::Acquire);
        let oldest = head.saturating_sub(FEED_FRAMES as u64);
        if *cursor < oldest {
            let lost = oldest - *cursor;
            *cursor = oldest;
            return FeedRead::Lost(lost);
        }
        if *cursor >= head {
            return FeedRead::Empty;
        }
        let c = *cursor;
        let slot = (c % FEED_FRAMES as u64) as usize;
        let s1 = self.stamps[slot].load(Ordering::Acquire);
        if s1 != c + 1 {
            // Being overwritten by a newer frame's.
            *cursor += 1;
            return FeedRead::Lost(1);
        }
        let w = &self.words[slot * self.slot_words..(slot + 1) * self.slot_words];
        out.sequence = w[0].load(Ordering::Relaxed);
        out.timestamp_ns = w[1].load(Ordering::Relaxed);
        out.latency_ns = w[2].load(Ordering::Relaxed);
        let nc = w[3].load(Ordering::Relaxed);
        let n = ((nc >> 32) as usize).min(self.max_detections);
        out.cut = nc as u32;
        out.utc_ns = w[4].load(Ordering::Relaxed);
        let t = w[5].load(Ordering::Relaxed);
        out.time_source = TimeSource::from_u64(t & 0xff);
        out.time_quality = Quality::from_u64((t >> 8) & 0xff);
        let b = w[6].load(Ordering::Relaxed);
        out.time_bound_ns = (b != NO_BOUND).then_some(b);
        out.detections.clear();
        for k in 0..n {
            let base = HEADER_WORDS + k * DET_WORDS;
            let mut dw = [0u64; DET_WORDS];
            for (d, s) in dw.iter_mut().zip(&w[base..base + DET_WORDS]) {
                *d = s.load(Ordering::Relaxed);
            }
            out.detections.push(bytemuck::cast(dw));
        }
        fence(Ordering::Acquire);
        *cursor += 1;
        if self.stamps[slot].load(Ordering::Relaxed) != s1 {
            return FeedRead::Lost(1);
        }
        FeedRead::Copied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::test_detection as det;

    #[test]
    fn the_feed_hands_every_reader_every_frame_or_counts_it_lost() {
        let feed = DetectionFeed::new(4);
        let mut rec = FrameDetections::with_capacity(4);
        let mut cursor = 0;
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Empty);
        let dets: Vec<Detection> = (0..6).map(det).collect();
        let stamp = FrameStamp {
            sequence: 7,
            timestamp_ns: 100,
            utc_ns: 1_795_700_000_000_000_000,
            time_source: TimeSource::CardClock,
            time_quality: Quality::Holdover,
            time_bound_ns: Some(12_345),
            latency_ns: 5,
        };
        feed.push(&stamp, &dets, 1);
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Copied);
        assert_eq!(
            (rec.sequence, rec.timestamp_ns, rec.utc_ns, rec.latency_ns),
            (7, 100, 1_795_700_000_000_000_000, 5)
        );
        assert_eq!(
            (rec.time_source, rec.time_quality, rec.time_bound_ns),
            (TimeSource::CardClock, Quality::Holdover, Some(12_345))
        );
        assert_eq!(rec.detections, dets[..4].to_vec());
        assert_eq!(rec.cut, 3, "1 cut by the chain, 2 by the feed's capacity");
        for s in 0..(FEED_FRAMES as u64 + 5) {
            let stamp = FrameStamp {
                sequence: s,
                ..FrameStamp::default()
            };
            feed.push(&stamp, &[], 0);
        }
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Lost(5));
        assert_eq!(feed.read(&mut cursor, &mut rec), FeedRead::Copied);
        assert_eq!(rec.sequence, 5);
    }
}
