//! The simulator against the ring's contract (docs/requirements.md) and
//! board/fpga/test-pattern.md: pattern, CRC, drop at source, sequence and
//! drop accounting, fault injection, playback, timeouts, chunk events.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tegra_p2p::uapi::FPGA_P2P_EVF_SHORT;
use tegra_p2p::*;

const SLOT: usize = 64 << 10;
const CHUNK: usize = 16 << 10;

fn sim(nr_slots: u32, slot: usize, chunk: usize, faults: SimFaults) -> SimSource {
    let ring = RingMemory::new(&RingConfig::new(nr_slots, slot).with_memory(MemoryKind::Host))
        .expect("ring");
    let cfg = SimConfig {
        faults,
        ..SimConfig::with_chunk_bytes(chunk)
    };
    SimSource::new(ring, cfg).expect("sim")
}

fn fast() -> StartParams {
    StartParams::test_pattern().with_chunk_period(Duration::from_micros(20))
}

fn slot_crc(src: &SimSource, slot: u32) -> u32 {
    let p = src.ring().slot_ptr(slot).unwrap();
    // SAFETY: test reads a slot the application holds (or that is stale); the
    // simulator never writes a slot the application owns.
    crc32(unsafe { std::slice::from_raw_parts(p, src.ring().slot_bytes()) })
}

#[test]
fn streams_test_pattern_every_byte_verified() {
    let mut s = sim(4, SLOT, CHUNK, SimFaults::default());
    s.start(&fast()).unwrap();
    let mut t = SequenceTracker::new();
    let mut last_ts = 0;
    for _ in 0..400 {
        let f = s.next_frame(None).unwrap();
        assert_eq!(f.len(), SLOT);
        assert_eq!(f.flags(), 0);
        verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
        f.check_crc().unwrap();
        t.observe(f.sequence(), f.dropped_before()).unwrap();
        assert!(f.timestamp_ns() > last_ts, "timestamps increase");
        last_ts = f.timestamp_ns();
        assert!(f.device_ptr().is_none());
        assert_eq!(f.host_ptr(), s.ring().slot_ptr(f.slot()).unwrap());
        f.release().unwrap();
    }
    s.stop().unwrap();
    let c = s.counters().unwrap();
    let n = (SLOT / CHUNK) as u64;
    assert_eq!(t.delivered, 400);
    assert!(c.frames >= 400 && c.frames <= 404, "{}", c.frames);
    assert!(
        c.chunks >= c.frames * n && c.chunks < (c.frames + 1) * n,
        "chunks counted"
    );
    assert!(
        t.dropped <= c.drops_no_slot,
        "drops reported <= drops counted"
    );
    assert_eq!(c.drops_fault, 0);
    // Restart: sequence numbers count from 0 again.
    s.start(&fast()).unwrap();
    let f = s.next_frame(None).unwrap();
    assert_eq!(f.sequence(), u64::from(f.dropped_before()));
}

#[test]
fn full_geometry_at_default_cadence() {
    // 4 slots of 4 MiB in 16 chunks of 256 KiB at 2 kHz: a frame every 8 ms.
    let ring = RingMemory::new(&RingConfig::new(4, sim::DEFAULT_SLOT_BYTES)).unwrap();
    let mut s = SimSource::new(ring, SimConfig::default()).unwrap();
    s.start(&StartParams::test_pattern()).unwrap();
    let mut t = SequenceTracker::new();
    let t0 = Instant::now();
    for _ in 0..25 {
        let f = s.next_frame(None).unwrap();
        assert_eq!(f.len(), 4 << 20);
        verify_test_pattern(f.data(), f.sequence(), sim::DEFAULT_CHUNK_BYTES).unwrap();
        f.check_crc().unwrap();
        t.observe(f.sequence(), f.dropped_before()).unwrap();
    }
    // The cadence is a floor: 25 frames cannot arrive faster than 24 * 8 ms.
    assert!(t0.elapsed() >= Duration::from_millis(24 * 8 - 8));
}

#[test]
fn drop_at_source_when_the_application_holds_every_slot() {
    let mut s = sim(4, SLOT, CHUNK, SimFaults::default());
    s.start(&fast()).unwrap();
    let held: Vec<Frame<'_>> = (0..4).map(|_| s.next_frame(None).unwrap()).collect();
    let mut slots: Vec<u32> = held.iter().map(|f| f.slot()).collect();
    slots.sort();
    assert_eq!(slots, vec![0, 1, 2, 3], "each held frame has its own slot");
    let before: Vec<u32> = held.iter().map(|f| slot_crc(&s, f.slot())).collect();
    let c0 = s.counters().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let c1 = s.counters().unwrap();
    assert!(
        c1.drops_no_slot > c0.drops_no_slot + 5,
        "frames dropped at the source"
    );
    assert_eq!(c1.frames, 4, "nothing delivered while every slot is held");
    // No event can be pending: a wait times out.
    assert!(matches!(
        s.next_event(Some(Duration::from_millis(5))),
        Err(Error::Timeout { .. })
    ));
    let after: Vec<u32> = held.iter().map(|f| slot_crc(&s, f.slot())).collect();
    assert_eq!(before, after, "held slots were never written");
    for f in &held {
        verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
    }
    let last_seq = held.iter().map(|f| f.sequence()).max().unwrap();
    drop(held);
    // Releasing resumes delivery; the gap is explained by the drop count, which
    // covers every drop counted before the release (and no more than counted after).
    let f = s.next_frame(None).unwrap();
    let c2 = s.counters().unwrap();
    // Five frames delivered since start: every other sequence number was a drop.
    let reported = f.sequence() + 1 - 5;
    assert!(
        reported >= c1.drops_no_slot,
        "{reported} < {}",
        c1.drops_no_slot
    );
    assert!(
        reported <= c2.drops_no_slot,
        "{reported} > {}",
        c2.drops_no_slot
    );
    assert!(f.dropped_before() > 0);
    assert_eq!(f.sequence(), last_seq + 1 + u64::from(f.dropped_before()));
    verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
}

#[test]
fn holding_some_slots_leaves_them_untouched_while_others_stream() {
    // Released slots go back to the engine in release order, so a slot held
    // for long does not hold up the others.
    let mut s = sim(4, SLOT, CHUNK, SimFaults::default());
    s.start(&fast()).unwrap();
    let a = s.next_frame(None).unwrap();
    let b = s.next_frame(None).unwrap();
    let held = [
        (a.slot(), slot_crc(&s, a.slot())),
        (b.slot(), slot_crc(&s, b.slot())),
    ];
    let mut t = SequenceTracker::new();
    t.observe(a.sequence(), a.dropped_before()).unwrap();
    t.observe(b.sequence(), b.dropped_before()).unwrap();
    let mut order = Vec::new();
    for _ in 0..300 {
        let f = s.next_frame(None).unwrap();
        assert!(
            f.slot() != a.slot() && f.slot() != b.slot(),
            "held slot delivered again"
        );
        verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
        t.observe(f.sequence(), f.dropped_before()).unwrap();
        order.push(f.slot());
    }
    // The two free slots alternate, in the order they were released.
    assert!(
        order.windows(2).all(|w| w[0] != w[1]),
        "release order: {:?}",
        &order[..8]
    );
    for (slot, crc) in held {
        assert_eq!(slot_crc(&s, slot), crc, "held slot {slot} written");
    }
    verify_test_pattern(a.data(), a.sequence(), CHUNK).unwrap();
    verify_test_pattern(b.data(), b.sequence(), CHUNK).unwrap();
    // Released last, used last: b's slot comes after the ones already free.
    let (sa, sb) = (a.slot(), b.slot());
    drop(b);
    drop(a);
    let next: Vec<u32> = (0..4).map(|_| s.next_frame(None).unwrap().slot()).collect();
    let pos = |x: u32| next.iter().position(|&y| y == x).unwrap();
    assert!(pos(sb) < pos(sa), "released b before a: {next:?}");
}

#[test]
fn sequence_gaps_are_explained_by_drop_counts() {
    let faults = SimFaults {
        drop_every: 7,
        drop_probability: 0.1,
        seed: 42,
        ..Default::default()
    };
    let mut s = sim(4, SLOT, CHUNK, faults);
    s.start(&fast()).unwrap();
    let mut t = SequenceTracker::new();
    let mut gaps = 0;
    for _ in 0..500 {
        let f = s.next_frame(None).unwrap();
        assert_ne!(f.sequence() % 7, 6, "every 7th frame is dropped");
        if f.dropped_before() > 0 {
            gaps += 1;
        }
        t.observe(f.sequence(), f.dropped_before()).unwrap();
        verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
    }
    s.stop().unwrap();
    let c = s.counters().unwrap();
    assert!(gaps > 50, "drops happened ({gaps})");
    // Every 7th sequence up to the last delivered one was dropped and reported.
    assert!(
        t.dropped >= t.started() / 7,
        "{} < {}",
        t.dropped,
        t.started() / 7
    );
    assert!(c.drops_fault >= t.started() / 7, "fault drops counted");
    assert!(
        t.dropped <= c.drops_fault + c.drops_no_slot,
        "reported <= counted"
    );
    // A tracker catches an unexplained gap.
    let mut bad = SequenceTracker::new();
    bad.observe(0, 0).unwrap();
    assert!(bad.observe(2, 0).is_err());
}

#[test]
fn short_frames_are_flagged_and_checkable() {
    let mut s = sim(
        4,
        SLOT,
        CHUNK,
        SimFaults {
            short_every: 3,
            ..Default::default()
        },
    );
    s.start(&fast()).unwrap();
    let mut shorts = 0;
    for _ in 0..60 {
        let f = s.next_frame(None).unwrap();
        let is_short = f.sequence() % 3 == 2;
        assert_eq!(f.meta().is_short(), is_short, "seq {}", f.sequence());
        if is_short {
            shorts += 1;
            assert_eq!(f.flags() & FPGA_P2P_EVF_SHORT, FPGA_P2P_EVF_SHORT);
            assert!(f.len() < SLOT && !f.is_empty() && f.len() % 4 == 0);
        } else {
            assert_eq!(f.len(), SLOT);
        }
        f.check_crc().unwrap();
        verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
    }
    assert!(shorts >= 15, "{shorts}");
    s.stop().unwrap();
    let counted = s.counters().unwrap().short_frames;
    assert!(counted >= shorts && counted <= shorts + 4, "{counted}");
}

#[test]
fn corruption_after_crc_is_detected() {
    let mut s = sim(
        4,
        SLOT,
        CHUNK,
        SimFaults {
            corrupt_every: 4,
            ..Default::default()
        },
    );
    s.start(&fast()).unwrap();
    let mut bad = 0;
    for _ in 0..80 {
        let f = s.next_frame(None).unwrap();
        let corrupt = f.sequence() % 4 == 3;
        assert_eq!(
            f.check_crc().is_err(),
            corrupt,
            "CRC check, seq {}",
            f.sequence()
        );
        assert_eq!(
            verify_test_pattern(f.data(), f.sequence(), CHUNK).is_err(),
            corrupt,
            "pattern check, seq {}",
            f.sequence()
        );
        bad += corrupt as u32;
    }
    assert!(bad >= 15, "{bad}");
}

#[test]
fn stall_times_out_then_streaming_resumes() {
    let mut s = sim(
        4,
        SLOT,
        CHUNK,
        SimFaults {
            stall: Some((5, Duration::from_millis(400))),
            ..Default::default()
        },
    );
    s.start(&fast().with_event_timeout(Duration::from_millis(100)))
        .unwrap();
    // Frames 0..=4 (a loaded machine may drop some), then the stall: a timeout.
    let mut t = SequenceTracker::new();
    let mut last = None;
    let (err, waited) = loop {
        let t0 = Instant::now();
        match s.next_frame(None) {
            Ok(f) => {
                t.observe(f.sequence(), f.dropped_before()).unwrap();
                last = Some(f.sequence());
            }
            Err(e) => break (e, t0.elapsed()),
        }
    };
    assert!(
        matches!(
            err,
            Error::Timeout {
                timeout_ms: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    assert!(
        last.is_some_and(|l| l <= 4),
        "frames before the stall: last {last:?}"
    );
    // After the stall, frames flow again from sequence 5.
    let f = s.next_frame(Some(Duration::from_secs(2))).unwrap();
    assert!(
        f.sequence() >= 5,
        "the stalled frame or a later one comes next"
    );
    t.observe(f.sequence(), f.dropped_before()).unwrap();
}

#[test]
fn timeouts_and_not_streaming() {
    let mut s = sim(2, SLOT, CHUNK, SimFaults::default());
    assert!(matches!(
        s.next_frame(None),
        Err(Error::NotStreaming { .. })
    ));
    // A frame every 4 * 50 ms: a 20 ms wait times out.
    s.start(&StartParams::test_pattern().with_chunk_period(Duration::from_millis(50)))
        .unwrap();
    let t0 = Instant::now();
    let r = s.next_frame(Some(Duration::from_millis(20)));
    assert!(
        matches!(r, Err(Error::Timeout { timeout_ms: 20, .. })),
        "{r:?}"
    );
    drop(r);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert!(
        t0.elapsed() < Duration::from_millis(1000),
        "the timeout is honoured"
    );
    assert_eq!(
        s.next_frame(Some(Duration::from_secs(2)))
            .unwrap()
            .sequence(),
        0
    );
    // Double start is refused; stop then wait is an error, not a hang.
    s.stop().unwrap();
    assert!(matches!(
        s.next_frame(None),
        Err(Error::NotStreaming { .. })
    ));
}

#[test]
fn revocation_and_engine_fault_stop_the_stream() {
    let mut s = sim(
        4,
        SLOT,
        CHUNK,
        SimFaults {
            revoke_at: Some(10),
            ..Default::default()
        },
    );
    s.start(&fast()).unwrap();
    // Frames 0..10 each delivered or dropped at the source (a loaded
    // machine's consumer may leave every slot READY for a moment), then
    // REVOKED. A drop is reported with the next frame delivered; those just
    // before the revocation have no such frame (the revocation event, as
    // the card's, carries no count) and are in the counters only.
    let (mut delivered, mut reported) = (0, 0);
    let err = loop {
        match s.next_frame(None) {
            Ok(f) => {
                delivered += 1;
                reported += u64::from(f.dropped_before());
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Revoked { .. }), "{err}");
    assert!(matches!(s.next_frame(None), Err(Error::Revoked { .. })));
    let c = s.counters().unwrap();
    assert_eq!(c.revocations, 1);
    assert_eq!(
        delivered + c.drops_no_slot,
        10,
        "{delivered} delivered, {} dropped at the source",
        c.drops_no_slot
    );
    assert!(reported <= c.drops_no_slot, "{reported} drops reported");
    assert!(err.to_string().contains("revoked"));

    let mut s = sim(
        4,
        SLOT,
        CHUNK,
        SimFaults {
            fault_at: Some((3, 42)),
            ..Default::default()
        },
    );
    s.start(&fast()).unwrap();
    for _ in 0..3 {
        s.next_frame(None).unwrap();
    }
    assert!(matches!(
        s.next_frame(None),
        Err(Error::Fault { code: 42, .. })
    ));
    // The source is usable again after a restart.
    s.set_faults(SimFaults::default()).unwrap();
    s.stop().unwrap();
    s.start(&fast()).unwrap();
    assert!(s.next_frame(None).is_ok());
}

#[test]
fn playback_cycles_uploaded_frames() {
    let mut s = sim(4, SLOT, CHUNK, SimFaults::default());
    assert!(matches!(
        s.start(&StartParams {
            mode: SourceMode::Adc,
            ..fast()
        }),
        Err(Error::Unsupported { .. })
    ));
    assert!(
        s.start(&StartParams::playback(3)).is_err(),
        "nothing uploaded yet"
    );
    let frames: Vec<Vec<u8>> = (0..3u8)
        .map(|i| {
            (0..SLOT)
                .map(|b| (b as u8).wrapping_mul(31) ^ (i * 85))
                .collect()
        })
        .collect();
    s.load_playback(0, &frames[0]).unwrap();
    s.load_playback(1, &frames[1]).unwrap();
    // Uploading through the transmit channel works too (and completes).
    s.transmit(TxTarget::Playback { index: 2 }, &frames[2], 77)
        .unwrap();
    assert!(s.load_playback(1, &frames[0][..100]).is_err(), "wrong size");
    assert!(
        s.load_playback(9999, &frames[0]).is_err(),
        "index out of range"
    );
    assert_eq!(
        s.tx_record(TxTarget::Playback { index: 2 }).last_crc32,
        crc32(&frames[2])
    );
    s.start(&StartParams::playback(3).with_chunk_period(Duration::from_micros(20)))
        .unwrap();
    assert!(matches!(
        s.next_event(None).unwrap(),
        Event::TxDone { cookie: 77, .. }
    ));
    let mut seen = HashMap::new();
    for _ in 0..30 {
        let f = s.next_frame(None).unwrap();
        let want = &frames[(f.sequence() % 3) as usize];
        assert!(
            f.data() == &want[..],
            "frame {} plays {}",
            f.sequence(),
            f.sequence() % 3
        );
        f.check_crc().unwrap();
        *seen.entry(f.sequence() % 3).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 3);
    assert!(
        s.transmit(TxTarget::Playback { index: 0 }, &frames[0], 1)
            .is_err(),
        "playback memory is busy while streaming"
    );
}

#[test]
fn chunk_events_precede_their_frame() {
    let mut s = sim(4, SLOT, CHUNK, SimFaults::default());
    s.start(&fast().with_chunk_events()).unwrap();
    let nchunks = (SLOT / CHUNK) as u32;
    let mut frames = 0;
    let mut next_chunk = 0u32;
    let mut cur_slot: Option<u32> = None;
    // Each chunk's bytes as they were when its event arrived.
    let mut landed = vec![0u8; SLOT];
    while frames < 50 {
        match s.next_event(None).unwrap() {
            Event::Chunk(c) => {
                assert_eq!(c.chunk, next_chunk, "chunks in order");
                if c.chunk == 0 {
                    cur_slot = Some(c.slot);
                } else {
                    assert_eq!(Some(c.slot), cur_slot, "a frame's chunks share a slot");
                }
                assert_eq!(c.offset, c.chunk as usize * CHUNK);
                assert_eq!(c.bytes().len(), CHUNK);
                assert_eq!(c.landed().len(), c.offset + CHUNK);
                assert_eq!(c.host_ptr(), c.landed()[c.offset..].as_ptr());
                landed[c.offset..c.offset + CHUNK].copy_from_slice(c.bytes());
                next_chunk += 1;
            }
            Event::Frame(f) => {
                assert_eq!(
                    next_chunk, nchunks,
                    "every chunk announced before the frame"
                );
                assert_eq!(Some(f.slot()), cur_slot, "the chunks were this frame's");
                verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
                // The chunks' bytes were in place, final, when their events
                // arrived: the frame's pattern (its sequence known now).
                verify_test_pattern(&landed, f.sequence(), CHUNK).unwrap();
                next_chunk = 0;
                frames += 1;
            }
            Event::TxDone { .. } => panic!("no transmit here"),
        }
    }
}

#[test]
fn transmit_completes_and_records_what_the_fpga_saw() {
    let mut s = sim(2, SLOT, CHUNK, SimFaults::default());
    s.start(&fast()).unwrap();
    let dets = b"detections: 3 targets".repeat(10);
    s.transmit(TxTarget::Detections, &dets, 5).unwrap();
    assert!(s.transmit(TxTarget::Detections, &[], 6).is_err());
    let mut done = false;
    for _ in 0..4 {
        if let Event::TxDone { cookie, .. } = s.next_event(None).unwrap() {
            assert_eq!(cookie, 5);
            done = true;
        }
    }
    assert!(done);
    let r = s.tx_record(TxTarget::Detections);
    assert_eq!(
        (r.count, r.last_bytes, r.last_crc32),
        (1, dets.len() as u32, crc32(&dets))
    );
    let c = s.counters().unwrap();
    assert_eq!((c.tx_submitted, c.tx_completed), (1, 1));
}

#[test]
fn bad_configuration_is_an_error() {
    let ring = RingMemory::new(&RingConfig::new(4, SLOT).with_memory(MemoryKind::Host)).unwrap();
    assert!(SimSource::new(ring, SimConfig::with_chunk_bytes(3000)).is_err());
    let ring = RingMemory::new(&RingConfig::new(1, SLOT).with_memory(MemoryKind::Host)).unwrap();
    assert!(SimSource::new(ring, SimConfig::with_chunk_bytes(CHUNK)).is_err());
    // Chunks 10 s apart: no frame completes during the test, so no slot
    // can be the application's (at fast() pacing a real-time producer
    // may deliver slot 0 before the release below).
    let slow = StartParams::test_pattern().with_chunk_period(Duration::from_secs(10));
    let mut s = sim(2, SLOT, CHUNK, SimFaults::default());
    s.start(&slow).unwrap();
    assert!(s.start(&slow).is_err(), "double start");
    assert!(s.release_slot_for_test(0).is_err(), "slot not owned");
    assert!(s.release_slot_for_test(2).is_err(), "slot out of range");
}

trait ReleaseForTest {
    fn release_slot_for_test(&self, slot: u32) -> Result<()>;
}
impl ReleaseForTest for SimSource {
    fn release_slot_for_test(&self, slot: u32) -> Result<()> {
        use tegra_p2p::source::SlotRelease;
        self.release_slot(slot)
    }
}

/// A played-back frame's CRC is computed once, at start: whole frames still
/// verify, a short one is summed over what was written, and a corrupted one
/// fails its check.
#[test]
fn playback_crcs_hold_for_short_and_corrupted_frames() {
    let faults = SimFaults {
        short_every: 3,
        corrupt_every: 4,
        ..SimFaults::default()
    };
    let mut s = sim(4, SLOT, CHUNK, faults);
    let frames: Vec<Vec<u8>> = (0..2u8)
        .map(|i| (0..SLOT).map(|b| (b as u8).wrapping_mul(7) ^ i).collect())
        .collect();
    for (i, f) in frames.iter().enumerate() {
        s.load_playback(i as u32, f).unwrap();
    }
    s.start(&StartParams::playback(2).with_chunk_period(Duration::from_micros(20)))
        .unwrap();
    let (mut short, mut corrupt, mut whole) = (0, 0, 0);
    for _ in 0..24 {
        let f = s.next_frame(None).unwrap();
        let seq = f.sequence();
        let is_short = seq % 3 == 2;
        let is_corrupt = seq % 4 == 3;
        assert_eq!(f.meta().is_short(), is_short, "frame {seq}");
        assert_eq!(
            f.check_crc().is_ok(),
            !is_corrupt,
            "frame {seq}: short {is_short}, corrupted {is_corrupt}"
        );
        short += usize::from(is_short);
        corrupt += usize::from(is_corrupt);
        whole += usize::from(!is_short && !is_corrupt);
        f.release().unwrap();
    }
    assert!(short > 0 && corrupt > 0 && whole > 0);
}

/// Spinning the last stretch before each chunk instead of sleeping to it
/// keeps the cadence (never faster than the period) and the bytes.
#[test]
fn spin_pacing_keeps_the_cadence_and_the_bytes() {
    let ring =
        RingMemory::new(&RingConfig::new(4, SLOT).with_memory(MemoryKind::Host)).expect("ring");
    let cfg = SimConfig {
        spin_before: Duration::from_micros(200),
        ..SimConfig::with_chunk_bytes(CHUNK)
    };
    let mut s = SimSource::new(ring, cfg).expect("sim");
    // 4 chunks of 250 us: a frame every millisecond.
    s.start(&StartParams::test_pattern().with_chunk_period(Duration::from_micros(250)))
        .unwrap();
    let mut first_ts = None;
    let (mut last_seq, mut last_ts) = (0, 0);
    let mut t = SequenceTracker::new();
    for _ in 0..50 {
        let f = s.next_frame(None).unwrap();
        verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
        f.check_crc().unwrap();
        t.observe(f.sequence(), f.dropped_before()).unwrap();
        first_ts.get_or_insert((f.sequence(), f.timestamp_ns()));
        (last_seq, last_ts) = (f.sequence(), f.timestamp_ns());
        f.release().unwrap();
    }
    let (seq0, ts0) = first_ts.unwrap();
    let frames = last_seq - seq0;
    assert!(frames >= 49);
    assert!(
        last_ts - ts0 >= frames * 1_000_000 - 250_000,
        "{frames} frame periods in {} ns",
        last_ts - ts0
    );
    s.stop().unwrap();
}

/// The producer runs at the SCHED_FIFO priority asked for (or says it was
/// refused, without the privilege), and as its starter did when none is
/// asked for; frames flow either way.
#[test]
fn the_producer_takes_the_priority_asked_for() {
    let mut s = sim(4, SLOT, CHUNK, SimFaults::default());
    assert_eq!(s.producer_scheduling(), ProducerScheduling::Inherited);
    s.start(&fast()).unwrap();
    assert_eq!(s.producer_scheduling(), ProducerScheduling::Inherited);
    s.next_frame(Some(Duration::from_secs(5)))
        .unwrap()
        .release()
        .unwrap();
    s.stop().unwrap();
    s.set_producer_priority(Some(3));
    s.start(&fast()).unwrap();
    match s.producer_scheduling() {
        ProducerScheduling::Fifo(p) => assert_eq!(p, 3),
        ProducerScheduling::Refused { priority, errno } => {
            assert_eq!(
                (priority, errno),
                (3, libc::EPERM),
                "only EPERM is expected"
            );
            println!("skipped: SCHED_FIFO refused here (no privilege)");
        }
        other => panic!("asked for SCHED_FIFO 3, got {other:?}"),
    }
    assert!(
        s.producer_scheduling()
            .to_string()
            .contains("SCHED_FIFO priority 3")
    );
    s.next_frame(Some(Duration::from_secs(5)))
        .unwrap()
        .release()
        .unwrap();
}

/// GPU-triggered processing's contract (docs/capture-path.md): after the
/// last byte of each chunk the source writes the slot's completion record,
/// and when a record says `n` chunks landed, chunks `0..n` of the slot hold
/// the frame's bytes. A checker thread watches every slot's record as a GPU
/// would, and checks each chunk against the test pattern the moment its
/// record says it landed, before the frame event; across drops at the source
/// (a slow consumer), fault drops and short frames, up to a revocation,
/// after which no record changes. The consumer resets a slot's count
/// before it releases the slot.
#[test]
fn completion_records_say_which_chunks_landed() {
    use tegra_p2p::record_check::RecordChecker;
    use tegra_p2p::uapi::FPGA_P2P_COMPLETION_MAGIC;

    const SLOTS: u32 = 4;
    const CHUNKS: u32 = (SLOT / CHUNK) as u32;
    const FRAMES: u64 = 400;
    let faults = SimFaults {
        drop_every: 7,
        short_every: 11,
        revoke_at: Some(FRAMES),
        ..SimFaults::default()
    };
    let mut s = sim(SLOTS, SLOT, CHUNK, faults);
    {
        let words = s
            .completion()
            .expect("the simulator writes completion records");
        assert_eq!(words.chunks_per_frame(), CHUNKS);
        assert_eq!(words.slots(), SLOTS);
        for slot in 0..SLOTS {
            assert_eq!(words.landed(slot), 0, "a fresh ring's records are zero");
        }
    }
    // SAFETY: the checker is stopped before the source (and its ring) is
    // dropped; each slot is released only after its frame was checked.
    let mut checker =
        unsafe { RecordChecker::start(s.ring(), CHUNK) }.expect("start the record checker");
    s.start(&StartParams::test_pattern().with_chunk_period(Duration::from_micros(100)))
        .unwrap();
    let words = s.completion().expect("completion records");
    let mut frames = 0u64;
    let mut dropped = 0u64;
    let mut shorts = 0u64;
    let end = loop {
        let f = match s.next_frame(Some(Duration::from_secs(5))) {
            Ok(f) => f,
            Err(e) => break e,
        };
        frames += 1;
        dropped += u64::from(f.dropped_before());
        let slot = f.slot();
        let rec = words.snapshot(slot);
        assert_eq!(rec.magic, FPGA_P2P_COMPLETION_MAGIC);
        assert_eq!(rec.sequence, f.sequence(), "the record is the frame's");
        assert_eq!(rec.chunks, CHUNKS, "every chunk counted, short frames too");
        assert_eq!(rec.chunk, CHUNKS - 1);
        // The checker saw every chunk of the frame before the release.
        checker
            .wait_verified(slot, f.sequence(), Duration::from_secs(5))
            .unwrap();
        if f.flags() & FPGA_P2P_EVF_SHORT == 0 {
            verify_test_pattern(f.data(), f.sequence(), CHUNK).unwrap();
            assert!(
                !checker.padded(slot, f.sequence()),
                "zeros in a whole frame"
            );
        } else {
            shorts += 1;
        }
        // A slow consumer now and then: the source drops frames.
        if frames % 13 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        words.reset(slot);
        f.release().unwrap();
    };
    assert!(matches!(end, Error::Revoked { .. }), "{end}");
    // After the revocation nothing is written any more.
    let before: Vec<_> = (0..SLOTS).map(|s| words.snapshot(s)).collect();
    std::thread::sleep(Duration::from_millis(20));
    let after: Vec<_> = (0..SLOTS).map(|s| words.snapshot(s)).collect();
    assert_eq!(before, after, "records written after the revocation");
    checker.stop();
    assert!(frames > 100, "{frames} frames");
    assert!(dropped > 0, "no drops");
    assert!(shorts > 0, "no short frames");
    assert_eq!(
        checker.failures(),
        0,
        "chunks missing: {:?}",
        checker.first_failure()
    );
    println!(
        "completion records: {frames} frames ({shorts} short), {dropped} dropped, {} chunks checked when their records said so",
        checker.checked()
    );
}
