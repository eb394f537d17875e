//! Jetson sysfs (JetPack 6, L4T r36), read under a configurable root:
//!
//! - temperature: the thermal zone whose `type` is `gpu-thermal`
//!   (`sys/class/thermal/thermal_zone*/`, `temp` in milli-degrees C);
//! - clock: the devfreq node whose `device/of_node/name` is the GPU
//!   (`ga10b` on Orin; `sys/class/devfreq/*/`): `cur_freq`, `min_freq`,
//!   `max_freq` in Hz, `governor`;
//! - load: `<devfreq>/device/load`, tenths of a percent.
//!
//! The zone and node are looked up by name at every sample (zones are
//! numbered by probe order, which changes between kernels), so a unit whose
//! GPU node appears late is still found. Throttle reasons have no sysfs
//! file: always absent.

use std::fs;
use std::path::{Path, PathBuf};

use super::sample::{Absent, Governor, Reader, Reading, Sample, SourceName};

/// Device-tree names of Tegra integrated GPUs (Orin's first).
const GPU_OF_NAMES: [&str; 3] = ["ga10b", "gv11b", "gp10b"];

pub struct SysfsReader {
    root: PathBuf,
}

/// A sysfs file's content, trimmed of the newline (and the NUL that ends
/// device-tree strings).
fn read_text(path: &Path) -> Result<String, Absent> {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| Absent::Malformed)?;
            Ok(text
                .trim_end_matches(|c: char| c == '\0' || c.is_whitespace())
                .trim_start()
                .to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Absent::Missing),
        Err(_) => Err(Absent::Unreadable),
    }
}

fn read_number<T: std::str::FromStr>(path: &Path) -> Reading<T> {
    match read_text(path) {
        Ok(t) => match t.parse() {
            Ok(v) => Reading::Present(v),
            Err(_) => Reading::Absent(Absent::Malformed),
        },
        Err(a) => Reading::Absent(a),
    }
}

/// Entries of `dir` whose names start with `prefix`, sorted (so the first
/// match is the same on every sample); none when `dir` cannot be read.
fn entries(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl SysfsReader {
    pub fn new(root: &Path) -> Self {
        SysfsReader {
            root: root.to_path_buf(),
        }
    }

    /// The thermal zone directory of the GPU.
    pub fn gpu_thermal_zone(&self) -> Option<PathBuf> {
        let class = self.root.join("sys/class/thermal");
        let dir = if class.is_dir() {
            class
        } else {
            self.root.join("sys/devices/virtual/thermal")
        };
        entries(&dir, "thermal_zone")
            .into_iter()
            .find(|z| read_text(&z.join("type")).is_ok_and(|t| t == "gpu-thermal"))
    }

    /// The devfreq directory of the GPU.
    pub fn gpu_devfreq(&self) -> Option<PathBuf> {
        entries(&self.root.join("sys/class/devfreq"), "")
            .into_iter()
            .find(|d| {
                read_text(&d.join("device/of_node/name"))
                    .is_ok_and(|n| GPU_OF_NAMES.contains(&n.as_str()))
            })
    }

    /// What was found, for the start-up log.
    pub fn describe(&self) -> String {
        let show = |p: Option<PathBuf>, what: &str| {
            p.map_or(format!("no {what}"), |p| {
                p.strip_prefix(&self.root)
                    .map_or(p.clone(), Path::to_path_buf)
                    .display()
                    .to_string()
            })
        };
        format!(
            "{}, {}",
            show(self.gpu_thermal_zone(), "gpu-thermal zone"),
            show(self.gpu_devfreq(), "GPU devfreq node")
        )
    }
}

impl Reader for SysfsReader {
    fn source(&self) -> SourceName {
        SourceName::Sysfs
    }

    fn sample(&mut self) -> Sample {
        let mut s = Sample::absent(SourceName::Sysfs, Absent::NotReported);
        s.temp_mc = match self.gpu_thermal_zone() {
            Some(z) => read_number(&z.join("temp")),
            None => Reading::Absent(Absent::NoGpuThermalZone),
        };
        match self.gpu_devfreq() {
            Some(d) => {
                s.sm_clock_hz = read_number(&d.join("cur_freq"));
                s.min_clock_hz = read_number(&d.join("min_freq"));
                s.max_clock_hz = read_number(&d.join("max_freq"));
                s.load_permille = match read_number::<u64>(&d.join("device/load")) {
                    Reading::Present(v) if v > 1000 => Reading::Absent(Absent::Malformed),
                    r => r,
                };
                s.governor = match read_text(&d.join("governor")) {
                    Ok(g) if !g.is_empty() => match Governor::new(&g) {
                        Some(name) => Reading::Present(name),
                        None => Reading::Absent(Absent::Malformed),
                    },
                    Ok(_) => Reading::Absent(Absent::Malformed),
                    Err(a) => Reading::Absent(a),
                };
            }
            None => {
                let why = Absent::NoGpuDevfreq;
                s.sm_clock_hz = Reading::Absent(why);
                s.min_clock_hz = Reading::Absent(why);
                s.max_clock_hz = Reading::Absent(why);
                s.load_permille = Reading::Absent(why);
                s.governor = Reading::Absent(why);
            }
        }
        s.throttle_reasons = Reading::Absent(Absent::NotReported);
        s
    }
}
