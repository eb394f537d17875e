//! `radard record` and `radard replay` end to end through the binary, on a
//! small geometry: a recorded scene replays to the same detections as the
//! live run, a recorded test pattern replays byte for byte (every frame
//! verified), raw `radar-dsp scene` frames replay with synthesised
//! metadata, the period pacing holds, and every damaged or mismatched file
//! is refused with a message that names the file and says what is wrong.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use radar_dsp::scene::{Scene, SceneGenerator, Target};

const SMALL: &str = r#"
[source]
chunk_period_us = 250
scene_frames = 3
[geometry]
n_tx = 2
n_rx = 4
n_loops = 32
n_samples = 64
chunks_per_frame = 4
[cfar]
train_doppler = 2
train_range = 4
[telemetry]
enabled = false
"#;

/// 2 x 4 x 32 x 64 x 4 bytes.
const FRAME_BYTES: usize = 65536;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("radard-rr-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("temp dir");
    fs::write(d.join("small.toml"), SMALL).expect("config");
    Dir(d)
}

fn radard(d: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radard"))
        .current_dir(d)
        .args(["--config", "small.toml", "--no-rt"])
        .args(args)
        .output()
        .expect("run radard")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The detections of each printed frame line, by sequence number.
fn detections(out: &str) -> Vec<(u64, String)> {
    out.lines()
        .filter(|l| l.starts_with("frame seq="))
        .map(|l| {
            let seq = l["frame seq=".len()..]
                .split(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .expect("sequence");
            let dets = l.split_once("detections=").map_or("", |(_, d)| d);
            (seq, dets.to_string())
        })
        .collect()
}

fn record(d: &Path, frames: &str, extra: &[&str]) -> String {
    let mut args = vec!["record", "--frames", frames, "--output", "run.raw"];
    args.extend_from_slice(extra);
    let o = radard(d, &args);
    let t = text(&o);
    assert!(ran(&o), "record failed:\n{t}");
    assert!(
        t.contains(&format!("recorded {frames} frames to run.raw")),
        "{t}"
    );
    t
}

/// The run ended cleanly: exit 0, or 3 when the only fault was a deadline
/// miss (this machine is shared; a deadline is not what these tests check).
fn ran(o: &Output) -> bool {
    let t = text(o);
    match o.status.code() {
        Some(0) => true,
        Some(3) => {
            t.contains("payload_errors=0 sequence_errors=0") && !t.contains("deadline_misses=0 ")
        }
        _ => false,
    }
}

/// The run's error output (exit status non-zero, no panic).
fn refused(o: &Output) -> String {
    let t = text(o);
    assert!(!o.status.success(), "should have failed:\n{t}");
    assert!(!t.contains("panicked"), "panic:\n{t}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_recorded_scene_replays_to_the_live_detections() {
    let d = dir("scene");
    let live = radard(&d.0, &["--frames", "12", "--backend", "cpu"]);
    let live_text = text(&live);
    assert!(ran(&live), "{live_text}");
    record(&d.0, "12", &[]);
    let meta = fs::read_to_string(d.0.join("run.raw.meta.jsonl")).expect("sidecar");
    assert_eq!(meta.lines().count(), 13, "header + 12 frames:\n{meta}");
    assert!(meta.starts_with(r#"{"format":"radard-recording","version":1,"frame_bytes":65536"#));
    assert_eq!(
        fs::metadata(d.0.join("run.raw")).expect("frames").len(),
        12 * FRAME_BYTES as u64
    );

    let replay = radard(
        &d.0,
        &[
            "replay",
            "--input",
            "run.raw",
            "--rate",
            "max",
            "--backend",
            "cpu",
        ],
    );
    let t = text(&replay);
    assert!(ran(&replay), "{t}");
    assert!(
        t.contains("summary: frame limit reached (12 frames)"),
        "{t}"
    );
    assert!(t.contains("source=replay:run.raw"), "{t}");
    assert!(t.contains("sequence_errors=0"), "{t}");
    let (a, b) = (detections(&live_text), detections(&t));
    assert_eq!(a.len(), 12, "{live_text}");
    assert_eq!(b.len(), 12, "{t}");
    // The simulator plays the scene's 3 frames in turn, so frame `seq`
    // carries scene frame `seq % 3` in both runs; the recording may have
    // skipped sequence numbers that a loaded machine dropped at the source.
    for (seq, dets) in &b {
        let live = a.iter().find(|(s, _)| s % 3 == seq % 3);
        assert_eq!(
            live.map(|(_, d)| d),
            Some(dets),
            "replayed frame {seq} differs from the live run's frames {a:?}"
        );
    }
    assert!(
        a.iter().all(|(_, d)| !d.starts_with('0')),
        "no detections: {a:?}"
    );
}

#[test]
fn a_recorded_test_pattern_replays_byte_for_byte() {
    let d = dir("pattern");
    record(&d.0, "20", &["--content", "test-pattern"]);
    // The CRC of every frame and the pattern of every byte are checked.
    let o = radard(
        &d.0,
        &[
            "replay",
            "--input",
            "run.raw",
            "--rate",
            "max",
            "--content",
            "test-pattern",
            "--print-every",
            "0",
        ],
    );
    let t = text(&o);
    assert!(ran(&o), "{t}");
    assert!(
        t.contains("summary: frame limit reached (20 frames)"),
        "{t}"
    );
    assert!(t.contains("payload_errors=0 sequence_errors=0"), "{t}");
}

/// The replay source itself with chunk events (as chunk-streamed CUDA asks
/// for): each frame comes as its chunks, in order, into the frame's slot,
/// then the frame, with the recorded sequence, drops, flags and size; a
/// short frame stays short; the end of the recording is an error, not a
/// hang.
#[test]
fn the_replay_source_delivers_chunks_then_frames() {
    use radard::recording::{FORMAT, Header, Recording, RecordingWriter, VERSION};
    use radard::replay::ReplaySource;
    use tegra_p2p::source::{Event, SlotRelease};
    use tegra_p2p::{FrameMeta, FrameSource, RingConfig, RingMemory, StartParams};

    let d = dir("chunks");
    let cfg = radard::RadardConfig::parse(SMALL, "small.toml").expect("config");
    let path = d.0.join("c.raw");
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        frame_bytes: FRAME_BYTES as u64,
        chunk_bytes: (FRAME_BYTES / 4) as u64,
        geometry: cfg.geometry.clone(),
        source: "test".into(),
    };
    let mut w = RecordingWriter::create(&path, &header).expect("create");
    let frames: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i + 1; FRAME_BYTES]).collect();
    let metas = [
        FrameMeta {
            sequence: 10,
            ..FrameMeta::default()
        },
        FrameMeta {
            sequence: 13,
            dropped: 2,
            ..FrameMeta::default()
        },
        FrameMeta {
            sequence: 14,
            flags: 1,
            ..FrameMeta::default()
        },
    ];
    w.append(&frames[0], &metas[0]).expect("append");
    w.append(&frames[1], &metas[1]).expect("append");
    w.append(&frames[2][..1000], &metas[2])
        .expect("append short");
    assert_eq!(w.finish().expect("finish"), 3);

    let rec = Recording::open(&path, &cfg.geometry).expect("open");
    let ring = RingMemory::new(&RingConfig::new(2, FRAME_BYTES)).expect("ring");
    let mut src = ReplaySource::new(rec, ring, FRAME_BYTES / 4, None).expect("source");
    src.start(&StartParams::playback(1).with_chunk_events())
        .expect("start");
    for (i, m) in metas.iter().enumerate() {
        let mut slot = None;
        for c in 0..4u32 {
            match src.next_event(None).expect("event") {
                Event::Chunk(ev) => {
                    assert_eq!(ev.chunk, c);
                    assert_eq!(ev.offset, c as usize * FRAME_BYTES / 4);
                    assert!(slot.is_none_or(|s| s == ev.slot));
                    slot = Some(ev.slot);
                }
                other => panic!("frame {i} chunk {c}: {other:?}"),
            }
        }
        let Event::Frame(f) = src.next_event(None).expect("event") else {
            panic!("frame {i}: no frame event after its chunks");
        };
        assert_eq!(Some(f.slot()), slot);
        assert_eq!(f.sequence(), m.sequence);
        assert_eq!(f.dropped_before(), m.dropped);
        assert_eq!(f.flags(), m.flags);
        let want: &[u8] = if i == 2 {
            &frames[2][..1000]
        } else {
            &frames[i]
        };
        assert_eq!(f.data(), want, "frame {i} payload");
        f.check_crc().expect("payload CRC");
        f.release().expect("release");
    }
    let end = src.next_event(None).expect_err("past the end");
    assert!(
        end.to_string()
            .contains("end of the recording (3 frames replayed)"),
        "{end}"
    );
    assert!(
        src.release_slot(0).is_err(),
        "a slot the application does not hold"
    );
}

#[test]
fn replay_keeps_the_frame_period() {
    let d = dir("period");
    record(&d.0, "10", &["--content", "test-pattern"]);
    let t0 = Instant::now();
    let o = radard(
        &d.0,
        &["replay", "--input", "run.raw", "--content", "test-pattern"],
    );
    // 10 frames at 1 ms (4 chunks x 250 us): at least 9 periods apart.
    let took = t0.elapsed();
    assert!(ran(&o), "{}", text(&o));
    assert!(took >= Duration::from_millis(9), "took {took:?}");
    assert!(text(&o).contains("one frame per 1.0 ms"), "{}", text(&o));
}

#[test]
fn raw_scene_frames_replay_with_synthesised_metadata() {
    let d = dir("raw");
    // What `radar-dsp scene` writes: generated frames, concatenated.
    let cfg = radard::RadardConfig::parse(SMALL, "small.toml").expect("config");
    let scene = Scene {
        noise_rms_lsb: 32.0,
        targets: vec![Target::new(20.0, 3.0, 10.0, -10.0)],
        frame_period_s: None,
    };
    let g = SceneGenerator::new(&cfg.chain_config(), &scene, 7).expect("generator");
    let mut file = fs::File::create(d.0.join("scene.raw")).expect("create");
    g.write_frames(&mut file, 6).expect("frames");
    drop(file);
    let o = radard(
        &d.0,
        &[
            "replay",
            "--input",
            "scene.raw",
            "--rate",
            "max",
            "--backend",
            "cpu",
        ],
    );
    let t = text(&o);
    assert!(ran(&o), "{t}");
    assert!(
        t.contains("no sidecar") && t.contains("metadata synthesised"),
        "{t}"
    );
    assert!(t.contains("summary: frame limit reached (6 frames)"), "{t}");
    let dets = detections(&t);
    assert_eq!(dets.len(), 6, "{t}");
    // The target at 20 m is found in every frame (within a range bin of
    // this geometry, 2 m).
    let near_20m = |d: &str| {
        d.split('[').skip(1).any(|t| {
            t.split('m')
                .next()
                .and_then(|r| r.parse::<f64>().ok())
                .is_some_and(|r| (r - 20.0).abs() < 1.0)
        })
    };
    assert!(dets.iter().all(|(_, d)| near_20m(d)), "{dets:?}");
}

#[test]
fn damaged_or_mismatched_files_are_refused_by_name() {
    let d = dir("damaged");
    record(&d.0, "8", &["--content", "test-pattern"]);
    let raw = d.0.join("run.raw");
    let meta = d.0.join("run.raw.meta.jsonl");
    let good = fs::read(&raw).expect("read");
    let good_meta = fs::read_to_string(&meta).expect("read");
    let replay = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            "--input",
            "run.raw",
            "--rate",
            "max",
            "--content",
            "test-pattern",
        ];
        a.extend_from_slice(extra);
        refused(&radard(&d.0, &a))
    };

    // Truncated: the size is not a whole number of frames.
    fs::write(&raw, &good[..good.len() - 100]).expect("truncate");
    let e = replay(&[]);
    assert!(
        e.contains("run.raw") && e.contains("not a whole number of 65536-byte frames"),
        "{e}"
    );
    // A whole frame missing: the sidecar describes more frames.
    fs::write(&raw, &good[..good.len() - FRAME_BYTES]).expect("shorten");
    let e = replay(&[]);
    assert!(
        e.contains("run.raw.meta.jsonl") && e.contains("describes 8 frames but run.raw holds 7"),
        "{e}"
    );
    // A damaged byte in frame 3.
    let mut bad = good.clone();
    bad[3 * FRAME_BYTES + 1000] ^= 0x40;
    fs::write(&raw, &bad).expect("damage");
    let e = replay(&[]);
    assert!(
        e.contains("run.raw: frame 3: CRC-32") && e.contains("damaged"),
        "{e}"
    );
    fs::write(&raw, &good).expect("restore");
    // Another geometry of the same frame size.
    let other = SMALL.replace(
        "n_loops = 32\nn_samples = 64",
        "n_loops = 64\nn_samples = 32",
    );
    fs::write(d.0.join("other.toml"), other).expect("config");
    let o = Command::new(env!("CARGO_BIN_EXE_radard"))
        .current_dir(&d.0)
        .args([
            "--config",
            "other.toml",
            "--no-rt",
            "replay",
            "--input",
            "run.raw",
        ])
        .output()
        .expect("run");
    let e = refused(&o);
    assert!(
        e.contains("run.raw.meta.jsonl") && e.contains("recorded with geometry"),
        "{e}"
    );
    // A sidecar of another format version, and one with a garbage line.
    fs::write(&meta, good_meta.replace("\"version\":1", "\"version\":9")).expect("meta");
    let e = replay(&[]);
    assert!(
        e.contains("run.raw.meta.jsonl") && e.contains("format version 9"),
        "{e}"
    );
    let mut lines: Vec<&str> = good_meta.lines().collect();
    lines[4] = "{\"index\":3,\"sequence\":";
    fs::write(&meta, lines.join("\n")).expect("meta");
    let e = replay(&[]);
    assert!(e.contains("run.raw.meta.jsonl: line 5"), "{e}");
    // An empty file, and one that is not there.
    fs::write(&raw, b"").expect("empty");
    let e = replay(&[]);
    assert!(e.contains("run.raw: empty"), "{e}");
    fs::remove_file(&raw).expect("rm");
    let e = replay(&[]);
    assert!(e.contains("run.raw: open"), "{e}");
}

#[test]
fn record_needs_a_frame_count_and_a_writable_output() {
    let d = dir("recordargs");
    let e = refused(&radard(&d.0, &["record", "--output", "x.raw"]));
    assert!(e.contains("--frames N is required"), "{e}");
    let e = refused(&radard(
        &d.0,
        &["record", "--frames", "2", "--output", "no/such/dir/x.raw"],
    ));
    assert!(e.contains("no/such/dir/x.raw: create"), "{e}");
    let e = refused(&radard(
        &d.0,
        &["replay", "--input", "x.raw", "--source", "sim"],
    ));
    assert!(e.contains("--source does not apply"), "{e}");
}
