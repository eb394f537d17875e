//! NVML (`nvml-wrapper`): where `libnvidia-ml.so.1` loads and reports a GPU
//! (a discrete GPU; on Orin NVML ships but answers "not supported" for most
//! values, so sysfs is used there). The library's presence is checked with
//! `dlopen` before NVML is initialised, so a machine without the driver
//! gets a clear reason, never a failure inside the wrapper.

use std::ffi::CStr;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::error::NvmlError;

use super::sample::{Absent, Reader, Reading, Sample, SourceName};

const LIB: &CStr = c"libnvidia-ml.so.1";

/// Whether the dynamic loader finds the NVML library.
pub fn library_present() -> bool {
    // SAFETY: dlopen/dlclose with a valid C string; the handle is closed
    // at once and nothing from the library is called. RTLD_LAZY binds no
    // symbols, so no constructor of ours depends on it.
    unsafe {
        let h = libc::dlopen(LIB.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
    }
    true
}

pub struct NvmlReader {
    nvml: Nvml,
    index: u32,
    name: String,
}

fn absent(e: NvmlError) -> Absent {
    match e {
        NvmlError::NotSupported => Absent::NvmlUnsupported,
        _ => Absent::NvmlError,
    }
}

fn reading<T>(r: Result<T, NvmlError>) -> Reading<T> {
    match r {
        Ok(v) => Reading::Present(v),
        Err(e) => Reading::Absent(absent(e)),
    }
}

impl NvmlReader {
    /// NVML with its first GPU, or why not (for the start-up log).
    pub fn open() -> Result<Self, String> {
        if !library_present() {
            return Err(format!("{} not found", LIB.to_string_lossy()));
        }
        let nvml = Nvml::builder()
            .lib_path(std::ffi::OsStr::new("libnvidia-ml.so.1"))
            .init()
            .map_err(|e| format!("NVML init: {e}"))?;
        let count = nvml
            .device_count()
            .map_err(|e| format!("NVML device count: {e}"))?;
        if count == 0 {
            return Err("NVML reports no GPU".into());
        }
        let name = nvml
            .device_by_index(0)
            .and_then(|d| d.name())
            .map_err(|e| format!("NVML GPU 0: {e}"))?;
        // A GPU that reports neither temperature nor clock (Orin) is better
        // read from sysfs.
        let probe = NvmlReader {
            nvml,
            index: 0,
            name,
        };
        let s = probe.read();
        if s.temp_mc.value().is_none() && s.sm_clock_hz.value().is_none() {
            return Err(format!(
                "NVML's {} reports neither temperature nor clock",
                probe.name
            ));
        }
        Ok(probe)
    }

    pub fn describe(&self) -> String {
        format!("GPU {}: {}", self.index, self.name)
    }

    fn read(&self) -> Sample {
        let dev = match self.nvml.device_by_index(self.index) {
            Ok(d) => d,
            Err(e) => return Sample::absent(SourceName::Nvml, absent(e)),
        };
        let mhz = |r: Result<u32, NvmlError>| match r {
            Ok(v) => Reading::Present(u64::from(v) * 1_000_000),
            Err(e) => Reading::Absent(absent(e)),
        };
        Sample {
            source: SourceName::Nvml,
            count: 0,
            temp_mc: match dev.temperature(TemperatureSensor::Gpu) {
                Ok(c) => Reading::Present(i64::from(c) * 1000),
                Err(e) => Reading::Absent(absent(e)),
            },
            sm_clock_hz: mhz(dev.clock_info(Clock::SM)),
            min_clock_hz: Reading::Absent(Absent::NotReported),
            max_clock_hz: mhz(dev.max_clock_info(Clock::SM)),
            load_permille: match dev.utilization_rates() {
                Ok(u) => Reading::Present(u64::from(u.gpu) * 10),
                Err(e) => Reading::Absent(absent(e)),
            },
            throttle_reasons: reading(dev.current_throttle_reasons().map(|r| r.bits())),
            governor: Reading::Absent(Absent::NotReported),
        }
    }
}

impl Reader for NvmlReader {
    fn source(&self) -> SourceName {
        SourceName::Nvml
    }
    fn sample(&mut self) -> Sample {
        self.read()
    }
}
