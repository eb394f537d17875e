//! The Jetson sysfs telemetry reader against fixture trees laid out as on
//! an AGX Orin with JetPack 6 (L4T r36): thermal zones under
//! sys/devices/virtual/thermal linked from sys/class/thermal, devfreq nodes
//! under sys/class/devfreq linked to their platform devices, device-tree
//! names NUL-terminated as the kernel exposes them. Distractor zones and
//! devfreq nodes, renumbered zones, and malformed, missing and unreadable
//! files: every value is present or absent with its reason, never a panic.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use radard::telemetry::sysfs::SysfsReader;
use radard::telemetry::{self, Absent, Reader, Reading, TelemetryCell};

struct Fixture {
    root: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn write(path: &Path, text: &[u8]) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write fixture file");
}

impl Fixture {
    fn empty(name: &str) -> Self {
        let root =
            std::env::temp_dir().join(format!("radard-telemetry-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("fixture root");
        Fixture { root }
    }

    /// A thermal zone `n` of `kind` at `temp` (file content as given).
    fn zone(&self, n: u32, kind: Option<&[u8]>, temp: Option<&[u8]>) {
        let dir = self
            .root
            .join(format!("sys/devices/virtual/thermal/thermal_zone{n}"));
        fs::create_dir_all(&dir).expect("zone dir");
        if let Some(k) = kind {
            write(&dir.join("type"), k);
        }
        if let Some(t) = temp {
            write(&dir.join("temp"), t);
        }
        let class = self.root.join("sys/class/thermal");
        fs::create_dir_all(&class).expect("class dir");
        symlink(
            format!("../../devices/virtual/thermal/thermal_zone{n}"),
            class.join(format!("thermal_zone{n}")),
        )
        .expect("zone link");
    }

    /// A devfreq node `name` for the platform device `dev` whose device-tree
    /// node is `of_name`; returns the node's directory.
    fn devfreq(&self, name: &str, dev: &str, of_name: &[u8]) -> PathBuf {
        let devdir = self.root.join(format!("sys/devices/platform/bus@0/{dev}"));
        let node = devdir.join(format!("devfreq/{name}"));
        fs::create_dir_all(&node).expect("devfreq dir");
        let of = self
            .root
            .join(format!("sys/firmware/devicetree/base/bus@0/{dev}"));
        write(&of.join("name"), of_name);
        symlink(
            format!("../../../../firmware/devicetree/base/bus@0/{dev}"),
            devdir.join("of_node"),
        )
        .expect("of_node link");
        symlink(format!("../../../{dev}"), node.join("device")).expect("device link");
        let class = self.root.join("sys/class/devfreq");
        fs::create_dir_all(&class).expect("class dir");
        symlink(
            format!("../../devices/platform/bus@0/{dev}/devfreq/{name}"),
            class.join(name),
        )
        .expect("devfreq link");
        node
    }

    /// The whole Orin layout: nine zones (GPU second), the GPU's devfreq
    /// node among those of other engines.
    fn orin(name: &str) -> Self {
        let f = Fixture::empty(name);
        let zones: [(&[u8], &[u8]); 9] = [
            (b"cpu-thermal\n", b"45187\n"),
            (b"gpu-thermal\n", b"47531\n"),
            (b"cv0-thermal\n", b"-256000\n"),
            (b"cv1-thermal\n", b"-256000\n"),
            (b"cv2-thermal\n", b"-256000\n"),
            (b"soc0-thermal\n", b"44406\n"),
            (b"soc1-thermal\n", b"45281\n"),
            (b"soc2-thermal\n", b"43968\n"),
            (b"tj-thermal\n", b"47531\n"),
        ];
        for (n, (kind, temp)) in zones.iter().enumerate() {
            f.zone(n as u32, Some(kind), Some(temp));
        }
        let vic = f.devfreq("15340000.vic", "15340000.vic", b"vic\0");
        write(&vic.join("cur_freq"), b"115200000\n");
        write(&vic.join("device/load"), b"0\n");
        let nvenc = f.devfreq("154c0000.nvenc", "154c0000.nvenc", b"nvenc\0");
        write(&nvenc.join("cur_freq"), b"115200000\n");
        let gpu = f.devfreq("17000000.gpu", "17000000.gpu", b"ga10b\0");
        write(&gpu.join("cur_freq"), b"1300500000\n");
        write(&gpu.join("min_freq"), b"306000000\n");
        write(&gpu.join("max_freq"), b"1300500000\n");
        write(&gpu.join("governor"), b"nvhost_podgov\n");
        write(&gpu.join("device/load"), b"375\n");
        f
    }

    fn gpu_node(&self) -> PathBuf {
        self.root
            .join("sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu")
    }
}

#[test]
fn orin_layout_gives_every_value() {
    let f = Fixture::orin("orin");
    let mut r = SysfsReader::new(&f.root);
    let s = r.sample();
    assert_eq!(s.temp_mc, Reading::Present(47_531));
    assert_eq!(s.sm_clock_hz, Reading::Present(1_300_500_000));
    assert_eq!(s.min_clock_hz, Reading::Present(306_000_000));
    assert_eq!(s.max_clock_hz, Reading::Present(1_300_500_000));
    assert_eq!(s.load_permille, Reading::Present(375));
    match &s.governor {
        Reading::Present(g) => assert_eq!(g.as_str(), "nvhost_podgov"),
        other => panic!("governor {other:?}"),
    }
    assert_eq!(s.throttle_reasons, Reading::Absent(Absent::NotReported));
    let line = s.to_string();
    assert!(
        line.starts_with(
            "gpu[sysfs] temp=47.5C sm=1300MHz min=306MHz max=1300MHz governor=nvhost_podgov load=37.5%"
        ),
        "{line}"
    );
    assert!(
        r.describe()
            .contains("thermal_zone1, sys/class/devfreq/17000000.gpu"),
        "{}",
        r.describe()
    );
}

#[test]
fn an_empty_tree_says_what_is_missing() {
    let f = Fixture::empty("empty");
    let s = SysfsReader::new(&f.root).sample();
    assert_eq!(s.temp_mc, Reading::Absent(Absent::NoGpuThermalZone));
    assert_eq!(s.sm_clock_hz, Reading::Absent(Absent::NoGpuDevfreq));
    assert_eq!(s.load_permille, Reading::Absent(Absent::NoGpuDevfreq));
    let line = s.to_string();
    assert!(line.contains("temp=absent(no gpu-thermal zone)"), "{line}");
    assert!(line.contains("sm=absent(no GPU devfreq node)"), "{line}");
    // A root that does not exist at all behaves the same.
    let s = SysfsReader::new(Path::new("/nonexistent/radard-telemetry")).sample();
    assert_eq!(s.temp_mc, Reading::Absent(Absent::NoGpuThermalZone));
}

#[test]
fn zones_are_found_by_type_not_number() {
    let f = Fixture::empty("renumbered");
    // A zone without a type file, one with an unreadable type (a
    // directory), one whose type only starts like the GPU's, then the GPU.
    f.zone(0, None, Some(b"1000\n"));
    f.zone(1, None, Some(b"2000\n"));
    fs::create_dir_all(
        f.root
            .join("sys/devices/virtual/thermal/thermal_zone1/type"),
    )
    .expect("dir as type");
    f.zone(2, Some(b"gpu-thermal-old\n"), Some(b"3000\n"));
    f.zone(12, Some(b"gpu-thermal"), Some(b"-1500")); // no newline, below 0 C
    let s = SysfsReader::new(&f.root).sample();
    assert_eq!(s.temp_mc, Reading::Present(-1500));
}

#[test]
fn the_gpu_is_found_by_its_device_tree_name() {
    let f = Fixture::empty("names");
    // An engine whose device-tree name only contains "gpu", a node whose
    // device link is missing, then the GPU under an unusual node name.
    let other = f.devfreq("gpu-like", "13e00000.host1x", b"gpu-host1x\0");
    write(&other.join("cur_freq"), b"1\n");
    fs::create_dir_all(f.root.join("sys/class/devfreq/orphan")).expect("orphan");
    let gpu = f.devfreq("devfreq0", "17000000.gpu", b"ga10b\0");
    write(&gpu.join("cur_freq"), b"612000000\n");
    let s = SysfsReader::new(&f.root).sample();
    assert_eq!(s.sm_clock_hz, Reading::Present(612_000_000));
    assert_eq!(s.min_clock_hz, Reading::Absent(Absent::Missing));
    assert_eq!(s.load_permille, Reading::Absent(Absent::Missing));
    assert_eq!(s.governor, Reading::Absent(Absent::Missing));
}

#[test]
fn malformed_files_are_absent_values_not_panics() {
    let f = Fixture::orin("malformed");
    let gpu = f.gpu_node();
    write(
        &f.root
            .join("sys/devices/virtual/thermal/thermal_zone1/temp"),
        b"hot\n",
    );
    write(&gpu.join("cur_freq"), b"");
    write(&gpu.join("min_freq"), b"\xff\xfe\n");
    write(&gpu.join("max_freq"), b"99999999999999999999999\n");
    write(&gpu.join("device/load"), b"1500\n"); // over 100.0 %
    write(&gpu.join("governor"), b"a-governor-name-longer-than-16\n");
    let s = SysfsReader::new(&f.root).sample();
    assert_eq!(s.temp_mc, Reading::Absent(Absent::Malformed));
    assert_eq!(s.sm_clock_hz, Reading::Absent(Absent::Malformed));
    assert_eq!(s.min_clock_hz, Reading::Absent(Absent::Malformed));
    assert_eq!(s.max_clock_hz, Reading::Absent(Absent::Malformed));
    assert_eq!(s.load_permille, Reading::Absent(Absent::Malformed));
    assert_eq!(s.governor, Reading::Absent(Absent::Malformed));

    // A file that cannot be read (a directory where the value should be).
    fs::remove_file(gpu.join("cur_freq")).expect("rm");
    fs::create_dir(gpu.join("cur_freq")).expect("dir");
    let s = SysfsReader::new(&f.root).sample();
    assert_eq!(s.sm_clock_hz, Reading::Absent(Absent::Unreadable));
    assert!(s.to_string().contains("sm=absent(unreadable)"), "{s}");
}

/// The telemetry thread's loop publishes samples into the cell at its
/// interval; a value that changes in sysfs shows in the next sample.
#[test]
fn the_thread_publishes_the_latest_sample() {
    let f = Fixture::orin("thread");
    let cell = TelemetryCell::default();
    let stop = AtomicBool::new(false);
    let temp = f
        .root
        .join("sys/devices/virtual/thermal/thermal_zone1/temp");
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut r = SysfsReader::new(&f.root);
            telemetry::run(&mut r, &cell, Duration::from_millis(10), &stop);
        });
        let wait_for = |pred: &dyn Fn(&telemetry::Sample) -> bool| {
            let t0 = Instant::now();
            loop {
                if let Some(s) = cell.latest().filter(|s| pred(s)) {
                    return s;
                }
                assert!(t0.elapsed() < Duration::from_secs(10), "no such sample");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let first = wait_for(&|s| s.count >= 1);
        assert_eq!(first.temp_mc, Reading::Present(47_531));
        write(&temp, b"81250\n");
        let later = wait_for(&|s| s.temp_mc == Reading::Present(81_250));
        assert!(later.count > first.count);
        stop.store(true, Ordering::Relaxed);
    });
}

/// radard itself, pointed at the fixture: the summary shows the sample.
#[test]
fn radard_reports_the_fixture_telemetry() {
    let f = Fixture::orin("radard");
    let cfg = f.root.join("radard.toml");
    fs::write(
        &cfg,
        format!(
            r#"
[source]
chunk_period_us = 1000
scene_frames = 2
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
reader = "sysfs"
sysfs_root = "{}"
interval_ms = 50
"#,
            f.root.display()
        ),
    )
    .expect("config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_radard"))
        .args(["--config"])
        .arg(&cfg)
        .args([
            "--frames",
            "100",
            "--backend",
            "cpu",
            "--no-rt",
            "--print-every",
            "0",
        ])
        .output()
        .expect("run radard");
    let text = String::from_utf8_lossy(&out.stdout);
    // 3: the run completed with a deadline miss (a shared machine); the
    // telemetry is what is checked here.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("telemetry: Jetson sysfs under")
            && text.contains("thermal_zone1, sys/class/devfreq/17000000.gpu"),
        "{text}"
    );
    assert!(
        text.contains("summary: telemetry gpu[sysfs] temp=47.5C sm=1300MHz min=306MHz max=1300MHz governor=nvhost_podgov load=37.5% throttle=absent(not reported)"),
        "{text}"
    );
}
