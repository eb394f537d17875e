//! Reading the frames' clock against the system clock, and the kernel's
//! view of the system clock. Off the loop: the clock thread only.

use std::path::{Path, PathBuf};

use tegra_p2p::CaptureClock;
use tegra_p2p::clock::{realtime_ns, tai_ns};
use tegra_p2p::phc::Phc;

use super::{Reading, SystemClock, TimeConfig};

/// The kernel's NTP "no estimate" error (NTP_PHASE_LIMIT: 16 s, in us).
const NO_ESTIMATE_US: i64 = 16_000_000;

/// What the clock thread reads.
pub enum ClockReader {
    /// The card's PTP hardware clock; opened (read-only) on first use and
    /// again after a failed read.
    Phc { path: PathBuf, open: Option<Phc> },
    /// The host's CLOCK_TAI (the simulator's frames).
    HostTai,
    /// Nothing to read: frames carry no time of the site.
    None,
}

impl ClockReader {
    /// The reader for frames stamped by `capture`: `time.phc` names the
    /// card's clock device, or "auto" takes the one the card's sysfs node
    /// named.
    pub fn for_capture(cfg: &TimeConfig, capture: &CaptureClock) -> Self {
        match capture {
            CaptureClock::Phc(found) => ClockReader::Phc {
                path: if cfg.phc == "auto" {
                    found.clone()
                } else {
                    PathBuf::from(&cfg.phc)
                },
                open: None,
            },
            CaptureClock::HostTai => ClockReader::HostTai,
            CaptureClock::Monotonic | CaptureClock::CardCounter => ClockReader::None,
        }
    }

    pub fn phc_path(&self) -> Option<PathBuf> {
        match self {
            ClockReader::Phc { path, .. } => Some(path.clone()),
            _ => None,
        }
    }

    /// N of the card's /dev/ptpN (a symbolic link such as /dev/fpga-ptp
    /// resolved).
    pub fn phc_index(&self) -> Option<u32> {
        let ClockReader::Phc { path, .. } = self else {
            return None;
        };
        ptp_index(&std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()))
    }

    /// The frames' clock against CLOCK_REALTIME, with CLOCK_REALTIME
    /// against CLOCK_MONOTONIC read right after.
    pub fn read(&mut self, samples: u32) -> std::io::Result<Reading> {
        let (card_minus_real_ns, window_ns) = match self {
            ClockReader::Phc { path, open } => {
                if open.is_none() {
                    *open = Some(Phc::open(&*path)?);
                }
                let phc = open
                    .as_ref()
                    .ok_or_else(|| std::io::Error::other("not open"))?;
                match phc.read_offset(samples) {
                    Ok(r) => (r.offset_ns(), u64::try_from(r.window_ns()).unwrap_or(0)),
                    Err(e) => {
                        // A card that went away and came back is a new device.
                        *open = None;
                        return Err(e);
                    }
                }
            }
            ClockReader::HostTai => {
                let before = realtime_ns();
                let tai = tai_ns();
                let after = realtime_ns();
                (
                    tai - (before + after) / 2,
                    u64::try_from(after - before).unwrap_or(0),
                )
            }
            ClockReader::None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "the frames carry no time of day",
                ));
            }
        };
        Ok(Reading {
            mono_ns: tegra_p2p::clock::monotonic_ns(),
            card_minus_real_ns,
            window_ns,
            real_minus_mono_ns: tegra_p2p::clock::offset_from_monotonic_ns(libc::CLOCK_REALTIME),
        })
    }
}

fn ptp_index(p: &Path) -> Option<u32> {
    p.file_name()?.to_str()?.strip_prefix("ptp")?.parse().ok()
}

/// The kernel's TAI offset, CLOCK_TAI - CLOCK_REALTIME, whole seconds.
pub fn kernel_tai_offset_s() -> i64 {
    let d = tai_ns() - realtime_ns();
    (d + 500_000_000).div_euclid(1_000_000_000) as i64
}

/// What the kernel says of the system clock (adjtimex, reading only: the
/// unit's radard may not change the clock, and does not try).
pub fn system_clock() -> SystemClock {
    // SAFETY: timex is plain integers; all zero (modes 0) only reads.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: a timex the kernel fills in; modes 0 changes nothing.
    let rc = unsafe { libc::adjtimex(&mut tx) };
    if rc < 0 {
        return SystemClock {
            synchronised: None,
            esterror_ns: None,
        };
    }
    SystemClock {
        synchronised: Some(rc != libc::TIME_ERROR),
        esterror_ns: u64::try_from(tx.esterror)
            .ok()
            .filter(|&e| e < NO_ESTIMATE_US as u64)
            .map(|e| e * 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_clock_reads_as_the_kernels_tai_offset() {
        let mut r = ClockReader::HostTai;
        let reading = r.read(1).expect("read");
        let off = reading.card_minus_real_ns - i128::from(kernel_tai_offset_s()) * 1_000_000_000;
        assert!(off.abs() < 50_000_000, "{off}");
        assert!(reading.real_minus_mono_ns > 0);
        assert!(ClockReader::None.read(1).is_err());
        assert_eq!(ptp_index(Path::new("/dev/ptp12")), Some(12));
        assert_eq!(ptp_index(Path::new("/dev/fpga-ptp")), None);
    }
}
