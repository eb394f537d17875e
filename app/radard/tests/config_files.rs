//! The configuration files as the radard binary reads them: the base file
//! named by `RADARD_CONFIG` (standing in for `/etc/radard/radard.toml`,
//! which a test cannot write) with its drop-in directory, `--config` over
//! both, and `--print-config` naming what it read.

mod common;

use std::path::Path;

use common::*;

/// `radard ARGS` with `RADARD_CONFIG` set to `base` (or unset): its exit
/// status and stdout.
fn radard_with(base: Option<&Path>, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = radard();
    cmd.args(args);
    match base {
        Some(b) => cmd.env("RADARD_CONFIG", b),
        None => cmd.env_remove("RADARD_CONFIG"),
    };
    let out = cmd.output().expect("run radard");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The value line `key = ...` of `[section]` in printed TOML.
fn value<'a>(toml: &'a str, section: &str, key: &str) -> Option<&'a str> {
    let mut inside = false;
    for line in toml.lines() {
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
        } else if inside {
            if let Some(v) = line.strip_prefix(&format!("{key} = ")) {
                return Some(v);
            }
        }
    }
    None
}

/// The acceptance check of the default configuration: with the base file
/// present, plain `radard --print-config` prints its settings, and a
/// drop-in changes one key and nothing else.
#[test]
fn print_config_shows_the_base_file_and_a_drop_in_changes_one_key() {
    let dir = scratch("config-files");
    let base = dir.join("radard.toml");
    std::fs::write(
        &base,
        "[source]\nslots = 5\nscene_seed = 42\n[output]\nprint_every = 7\n\
         [[sink]]\nkind = \"jsonl\"\npath = \"/data/radard/detections.jsonl\"\n",
    )
    .expect("base");
    let (code, plain, err) = radard_with(Some(&base), &["--print-config"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(value(&plain, "source", "slots"), Some("5"), "{plain}");
    assert_eq!(value(&plain, "source", "scene_seed"), Some("42"));
    assert_eq!(value(&plain, "output", "print_every"), Some("7"));
    assert!(plain.contains("path = \"/data/radard/detections.jsonl\""));
    assert!(
        plain.contains(&format!(
            "#   {} (base file, by RADARD_CONFIG)",
            base.display()
        )),
        "{plain}"
    );
    assert!(plain.contains("no drop-ins in"), "{plain}");

    let drop_in = dir.join("radard.toml.d/50-site.toml");
    std::fs::create_dir_all(drop_in.parent().expect("dir")).expect("mkdir");
    std::fs::write(&drop_in, "[source]\nslots = 9\n").expect("drop-in");
    let (code, merged, err) = radard_with(Some(&base), &["--print-config"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        merged.contains(&format!("#   {} (drop-in)", drop_in.display())),
        "{merged}"
    );
    assert_eq!(value(&merged, "source", "slots"), Some("9"), "{merged}");
    // Everything else as before: the settings differ in that one line.
    let settings = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (settings(&plain), settings(&merged));
    assert_eq!(a.len(), b.len());
    let differ: Vec<_> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
    assert_eq!(
        differ,
        [(&"slots = 5".to_string(), &"slots = 9".to_string())]
    );

    // What it prints is a configuration radard reads back as it is.
    let printed = dir.join("printed.toml");
    std::fs::write(&printed, &merged).expect("write");
    let (code, again, err) = radard_with(
        None,
        &[
            "--config",
            printed.to_str().expect("utf-8"),
            "--print-config",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(settings(&again), b);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--config` wins over `RADARD_CONFIG`, with its own drop-ins; the
/// command line's options over both; a named file that does not exist,
/// and a bad key in a drop-in, are errors (exit 2) naming the file.
#[test]
fn the_command_line_wins_and_errors_name_the_file() {
    let dir = scratch("config-precedence");
    let env_base = dir.join("env.toml");
    std::fs::write(&env_base, "[source]\nslots = 5\n").expect("env base");
    let cli_base = dir.join("cli.toml");
    std::fs::write(&cli_base, "[source]\nslots = 6\n").expect("cli base");
    std::fs::create_dir_all(dir.join("cli.toml.d")).expect("mkdir");
    std::fs::write(
        dir.join("cli.toml.d/10-a.toml"),
        "[output]\nprint_every = 3\n",
    )
    .expect("drop-in");
    let cli = cli_base.to_str().expect("utf-8");
    let (code, out, err) = radard_with(Some(&env_base), &["--config", cli, "--print-config"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(value(&out, "source", "slots"), Some("6"), "{out}");
    assert_eq!(value(&out, "output", "print_every"), Some("3"), "{out}");
    assert!(out.contains("(base file, by --config)"), "{out}");
    assert!(!out.contains("env.toml"), "{out}");
    let (_, out, _) = radard_with(
        Some(&env_base),
        &["--config", cli, "--print-every", "11", "--print-config"],
    );
    assert_eq!(value(&out, "output", "print_every"), Some("11"), "{out}");

    let gone = dir.join("gone.toml");
    let (code, _, err) = radard_with(Some(&gone), &["--print-config"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("{} (RADARD_CONFIG): No such file", gone.display())),
        "{err}"
    );

    std::fs::write(dir.join("cli.toml.d/20-b.toml"), "[rt]\npriority = 120\n").expect("bad");
    let (code, _, err) = radard_with(None, &["--config", cli, "--print-config"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cli.toml.d/20-b.toml: config: rt.priority: 120"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
