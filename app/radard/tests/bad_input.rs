//! Bad input to the radard binary: each a clear message naming the key or
//! file, a non-zero exit status, never a panic (DESIGN.md rule 4).
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
