//! Bad input to the radard binary: each a clear message naming the key or
//! file, a non-zero exit status, never a panic.
//! (Recorded files that are truncated or damaged: `record_replay.rs`.)

use std::process::{Command, Output};

fn radard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radard"))
        .args(["--no-rt"])
        .args(args)
        .output()
        .expect("run radard")
}

/// stderr of a run that must fail with `code`.
fn refused(o: &Output, code: i32) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert!(
        !err.contains("panicked") && !out.contains("panicked"),
        "{err}"
    );
    err
}

#[test]
fn a_missing_device_node_is_named() {
    // An index no test machine has.
    let o = radard(&["--source", "kmod", "--device", "97", "--frames", "1"]);
    let e = refused(&o, 1);
    assert!(
        e.contains("/dev/fpga-p2p97: no such device node (is the fpga_p2p module loaded?)"),
        "{e}"
    );
    // Recording from it: the same message.
    let o = radard(&[
        "record",
        "--source",
        "kmod",
        "--device",
        "97",
        "--frames",
        "1",
        "--output",
        "/dev/null",
    ]);
    let e = refused(&o, 1);
    assert!(e.contains("/dev/fpga-p2p97: no such device node"), "{e}");
}

#[test]
fn a_missing_config_file_and_bad_keys_are_named() {
    let o = radard(&["--config", "/nonexistent/radard.toml"]);
    let e = refused(&o, 2);
    assert!(e.contains("/nonexistent/radard.toml"), "{e}");
    let dir = std::env::temp_dir().join(format!("radard-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for (text, key) in [
        ("[telemetry]\ninterval_ms = 0\n", "telemetry.interval_ms"),
        ("[telemetry]\nroot = \"/\"\n", "unknown field `root`"),
        ("[source]\nkind = \"replay\"\n", "source.replay_file"),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).expect("write");
        let o = radard(&["--config", path.to_str().expect("utf8")]);
        let e = refused(&o, 2);
        assert!(e.contains(key), "{text:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sinks_that_cannot_be_made_are_named() {
    // An unknown kind, on the command line and in the TOML.
    let o = radard(&["--frames", "1", "--sink", "smtp:mail.example"]);
    let e = refused(&o, 2);
    assert!(
        e.contains(
            "--sink \"smtp:mail.example\": unknown sink kind \"smtp\" (jsonl, udp, fpga, asterix)"
        ),
        "{e}"
    );
    let dir = std::env::temp_dir().join(format!("radard-badsink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("sinks.toml");
    std::fs::write(&path, "[[sink]]\nkind = \"smtp\"\n").expect("write");
    let e = refused(&radard(&["--config", path.to_str().expect("utf8")]), 2);
    assert!(
        e.contains("sink[0].kind: unknown sink kind \"smtp\""),
        "{e}"
    );
    // Values out of range: refused, the key named.
    std::fs::write(
        &path,
        "[[sink]]\nkind = \"asterix\"\naddress = \"127.0.0.1:8600\"\nsac = 999\n",
    )
    .expect("write");
    let e = refused(&radard(&["--config", path.to_str().expect("utf8")]), 2);
    assert!(e.contains("sink[0].sac: 999 is out of range"), "{e}");
    let e = refused(
        &radard(&[
            "--frames",
            "1",
            "--sink",
            "asterix:no-such-host.invalid:8600",
        ]),
        2,
    );
    assert!(e.contains("sink[0].address"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn decode_record_prints_a_detections_line_and_names_a_bad_file() {
    use radar_dsp::Detection;
    let dir = std::env::temp_dir().join(format!("radard-decode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let d = Detection {
        range_bin: 37,
        doppler_bin: 146,
        range_m: 18.025719,
        velocity_mps: 4.4919996,
        azimuth_deg: -19.977976,
        snr_db: 31.215034,
        power_db: 113.05319,
        ..Detection::default()
    };
    let mut rec = Vec::new();
    radard::sinks::detections_record::encode(1234, 10_159_207, &[d, d], 3, 512, &mut rec);
    let path = dir.join("record.bin");
    std::fs::write(&path, &rec).expect("write");
    let o = radard(&["decode-record", "--input", path.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let mut want = Vec::new();
    radar_dsp::detection::DetectionsLine {
        sequence: 1234,
        timestamp_ns: Some(10_159_207),
        utc: None,
        latency_ns: None,
        detections: &[d, d],
        cut: 3,
    }
    .write_to(&mut want);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&want)
    );
    // One byte short: the file and what is wrong.
    std::fs::write(&path, &rec[..rec.len() - 1]).expect("write");
    let e = refused(
        &radard(&["decode-record", "--input", path.to_str().expect("utf8")]),
        1,
    );
    assert!(
        e.contains(&path.display().to_string()) && e.contains("bytes for 2 detections, want 88"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_front_end_on_the_simulator_is_refused_with_the_key() {
    // The simulator has no radar front end: a configuration error (exit 2)
    // naming the key, before anything starts.
    let o = radard(&["--content", "adc", "--frames", "1"]);
    let e = refused(&o, 2);
    assert!(
        e.contains("source.content: adc is the card's front end"),
        "{e}"
    );
    let o = radard(&["--content", "front-end", "--frames", "1"]);
    let e = refused(&o, 2);
    assert!(
        e.contains("unknown content \"front-end\" (adc, scene, test-pattern)"),
        "{e}"
    );
}
