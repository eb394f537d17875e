//! The `radar-dsp` binary: scene -> detect round trip, and refusals with a
//! clear message (truncated files, bad configuration, bad scenes).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_radar-dsp"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("radar-dsp-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run radar-dsp")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scene(out: &Path, extra: &[&str]) -> Output {
    run(bin().args(["scene", "--output"]).arg(out).args(extra))
}

#[test]
fn scene_then_detect_round_trip() {
    let d = tmpdir("roundtrip");
    let raw = d.join("f.raw");
    let toml = d.join("scene.toml");
    std::fs::write(
        &toml,
        "noise_rms_lsb = 32.0\n[[target]]\nrange_m = 30.0\nvelocity_mps = -5.0\nazimuth_deg = -20.0\nsnr_db = -15.0\n",
    )
    .unwrap();
    let o = scene(
        &raw,
        &[
            "--scene",
            toml.to_str().unwrap(),
            "-t",
            "range=80,velocity=12,azimuth=30,snr=-15",
            "--frames",
            "3",
            "--seed",
            "9",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::metadata(&raw).unwrap().len(), 3 * 4 * 1024 * 1024);

    let jsonl = d.join("d.jsonl");
    let o = run(bin()
        .args(["detect", "--backend", "cpu", "--input"])
        .arg(&raw)
        .arg("--output")
        .arg(&jsonl));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    let fields = [
        "azimuth_deg",
        "doppler_bin",
        "power_db",
        "range_bin",
        "range_m",
        "snr_db",
        "velocity_mps",
    ];
    // docs/detections-format.md, version 1: offline, no timestamp or latency.
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["version"], 1, "{l}");
        assert_eq!(l["sequence"], i as u64, "{l}");
        assert!(
            l["timestamp_ns"].is_null() && l["latency_ns"].is_null(),
            "{l}"
        );
        assert_eq!(l["count"], 2, "{l}");
        assert_eq!(l["cut"], 0);
        let dets = l["detections"].as_array().unwrap();
        assert_eq!(dets.len(), 2, "{l}");
        for det in dets {
            let mut keys: Vec<&str> = det
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort();
            assert_eq!(keys, fields);
        }
        let near = |r: f64, v: f64, az: f64| {
            dets.iter().any(|x| {
                (x["range_m"].as_f64().unwrap() - r).abs() < 0.3
                    && (x["velocity_mps"].as_f64().unwrap() - v).abs() < 0.15
                    && (x["azimuth_deg"].as_f64().unwrap() - az).abs() < 1.0
            })
        };
        assert!(near(30.0, -5.0, -20.0) && near(80.0, 12.0, 30.0), "{l}");
        // Ordered by range bin.
        assert!(dets[0]["range_bin"].as_u64() < dets[1]["range_bin"].as_u64());
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn truncated_and_mismatched_files_are_refused() {
    let d = tmpdir("truncated");
    let raw = d.join("f.raw");
    let o = scene(&raw, &["--frames", "2", "-t", "range=10,snr=0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&raw).unwrap();
    let cut = d.join("cut.raw");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let o = run(bin()
        .args(["detect", "--backend", "cpu", "--input"])
        .arg(&cut));
    assert!(!o.status.success());
    assert!(
        o.stdout.is_empty(),
        "nothing is output for a truncated file"
    );
    let e = stderr(&o);
    assert!(e.contains("truncated") && e.contains("8388508"), "{e}");

    // A geometry whose frames do not tile the file (3 TX: 3 MiB frames).
    let cfg = d.join("chain.toml");
    std::fs::write(&cfg, "[geometry]\nn_tx = 3\nchunks_per_frame = 12\n").unwrap();
    let o = run(bin()
        .args(["detect", "--backend", "cpu", "--config"])
        .arg(&cfg)
        .arg("--input")
        .arg(&raw));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));

    let o = run(bin().args(["detect", "--input"]).arg(d.join("missing.raw")));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("missing.raw"), "{}", stderr(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_configuration_and_scenes_name_the_key() {
    let d = tmpdir("badcfg");
    let raw = d.join("f.raw");
    let cfg = d.join("chain.toml");
    for (text, key) in [
        ("[cfar]\npfa = 2.0\n", "cfar.pfa"),
        ("[geometry]\nn_samples = 300\n", "geometry.n_samples"),
        ("[chain]\nmax_detections = 0\n", "chain.max_detections"),
        ("[cfar]\nguard = 3\n", "guard"),
    ] {
        std::fs::write(&cfg, text).unwrap();
        for sub in ["scene", "detect"] {
            let io = if sub == "scene" {
                "--output"
            } else {
                "--input"
            };
            let o = run(bin().arg(sub).arg("--config").arg(&cfg).arg(io).arg(&raw));
            assert!(!o.status.success());
            assert!(stderr(&o).contains(key), "{sub} {text:?}: {}", stderr(&o));
        }
    }
    for (target, key) in [
        ("range=500,snr=0", "target[0].range_m"),
        ("range=5,velocity=99,snr=0", "target[0].velocity_mps"),
        ("range=5", "target[0].snr_db"),
    ] {
        let o = scene(&raw, &["-t", target]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(key), "{target}: {}", stderr(&o));
    }
    let o = scene(&raw, &["-t", "range=5,speed=3,snr=0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("speed"), "{}", stderr(&o));
    let o = run(bin()
        .args(["detect", "--backend", "gpu", "--input"])
        .arg(&raw));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("auto, cuda, cpu"), "{}", stderr(&o));
    std::fs::remove_dir_all(&d).unwrap();
}
