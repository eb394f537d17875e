//! The card's clock: a PTP hardware clock (`/dev/ptpN`) that the kernel
//! module registers for the card's time counter (board/fpga/registers.md,
//! "Time"). Frames are stamped with it at their first sample; linuxptp keeps
//! it on the site's time (TAI, by PTP's convention).
//!
//! What a program needs of it, through the kernel's PTP character device:
//! where it is (from the card's sysfs node), its time against the system
//! clock (`PTP_SYS_OFFSET_EXTENDED`: the system clock read just before and
//! just after the card's latch, several times, the tightest pair kept), its
//! capabilities, and its external time stamps (the PPS input).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// `struct ptp_clock_time`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtpClockTime {
    pub sec: i64,
    pub nsec: u32,
    pub reserved: u32,
}

impl PtpClockTime {
    /// Nanoseconds (i128: any seconds value fits).
    pub fn ns(&self) -> i128 {
        i128::from(self.sec) * 1_000_000_000 + i128::from(self.nsec)
    }
}

/// Samples `PTP_SYS_OFFSET_EXTENDED` takes at most (`PTP_MAX_SAMPLES`).
pub const MAX_SAMPLES: usize = 25;

/// `struct ptp_sys_offset_extended`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PtpSysOffsetExtended {
    pub n_samples: u32,
    pub rsv: [u32; 3],
    /// Per sample: system clock before, the PHC, system clock after.
    pub ts: [[PtpClockTime; 3]; MAX_SAMPLES],
}

/// `struct ptp_clock_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PtpClockCaps {
    pub max_adj: i32,
    pub n_alarm: i32,
    pub n_ext_ts: i32,
    pub n_per_out: i32,
    pub pps: i32,
    pub n_pins: i32,
    pub cross_timestamping: i32,
    pub adjust_phase: i32,
    pub rsv: [i32; 12],
}

/// `struct ptp_extts_request`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PtpExttsRequest {
    pub index: u32,
    pub flags: u32,
    pub rsv: [u32; 2],
}

/// `struct ptp_extts_event`: what `read()` of the device returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtpExttsEvent {
    pub t: PtpClockTime,
    pub index: u32,
    pub flags: u32,
    pub rsv: [u32; 2],
}

const _: () = {
    assert!(std::mem::size_of::<PtpClockTime>() == 16);
    assert!(std::mem::size_of::<PtpSysOffsetExtended>() == 16 + 25 * 3 * 16);
    assert!(std::mem::size_of::<PtpClockCaps>() == 80);
    assert!(std::mem::size_of::<PtpExttsRequest>() == 16);
    assert!(std::mem::size_of::<PtpExttsEvent>() == 32);
};

/// `PTP_ENABLE_FEATURE`, `PTP_RISING_EDGE` (linux/ptp_clock.h).
pub const PTP_ENABLE_FEATURE: u32 = 1 << 0;
pub const PTP_RISING_EDGE: u32 = 1 << 1;

mod ioctls {
    use super::*;
    // linux/ptp_clock.h: PTP_CLK_MAGIC '='.
    nix::ioctl_read!(clock_getcaps, b'=', 1, PtpClockCaps);
    nix::ioctl_write_ptr!(extts_request2, b'=', 11, PtpExttsRequest);
    nix::ioctl_readwrite!(sys_offset_extended, b'=', 9, PtpSysOffsetExtended);
}

/// The card's clock against the system clock at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhcReading {
    /// The card's clock (ns; TAI when disciplined).
    pub phc_ns: i128,
    /// CLOCK_REALTIME just before and just after the card's latch.
    pub sys_before_ns: i128,
    pub sys_after_ns: i128,
}

impl PhcReading {
    /// The card's clock less the system clock (at the middle of the pair).
    pub fn offset_ns(&self) -> i128 {
        self.phc_ns - (self.sys_before_ns + self.sys_after_ns) / 2
    }
    /// How long the pair took: the reading is good to half of it.
    pub fn window_ns(&self) -> i128 {
        self.sys_after_ns - self.sys_before_ns
    }
}

/// An open PTP hardware clock.
#[derive(Debug)]
pub struct Phc {
    file: File,
    path: PathBuf,
}

impl Phc {
    /// Opens `path` read-only: enough to read the clock and its offset.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Phc> {
        let path = path.as_ref();
        Ok(Phc {
            file: File::open(path)?,
            path: path.to_path_buf(),
        })
    }

    /// Opens `path` read-write: needed to enable external time stamps.
    pub fn open_rw(path: impl AsRef<Path>) -> std::io::Result<Phc> {
        let path = path.as_ref();
        Ok(Phc {
            file: OpenOptions::new().read(true).write(true).open(path)?,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The dynamic POSIX clock id of the open device (`FD_TO_CLOCKID`).
    pub fn clock_id(&self) -> libc::clockid_t {
        ((!self.file.as_raw_fd()) << 3) | 3
    }

    /// The clock now (`clock_gettime` on its clock id), ns.
    pub fn now_ns(&self) -> std::io::Result<i128> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: out-pointer to a local timespec; the clock id names an
        // open descriptor of this struct.
        if unsafe { libc::clock_gettime(self.clock_id(), &mut ts) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec))
    }

    /// `PTP_CLOCK_GETCAPS`.
    pub fn caps(&self) -> std::io::Result<PtpClockCaps> {
        let mut c = PtpClockCaps::default();
        // SAFETY: the ioctl writes one ptp_clock_caps into `c`.
        unsafe { ioctls::clock_getcaps(self.file.as_raw_fd(), &mut c) }?;
        Ok(c)
    }

    /// The card's clock against CLOCK_REALTIME: `samples` readings (1 to
    /// 25) by `PTP_SYS_OFFSET_EXTENDED`, the one with the shortest window
    /// kept (the least disturbed by interrupts and bus traffic).
    pub fn read_offset(&self, samples: u32) -> std::io::Result<PhcReading> {
        let n = samples.clamp(1, MAX_SAMPLES as u32);
        let mut req = PtpSysOffsetExtended {
            n_samples: n,
            rsv: [0; 3],
            ts: [[PtpClockTime::default(); 3]; MAX_SAMPLES],
        };
        // SAFETY: the ioctl reads n_samples and writes the ts array of the
        // struct passed (sized for PTP_MAX_SAMPLES).
        unsafe { ioctls::sys_offset_extended(self.file.as_raw_fd(), &mut req) }?;
        req.ts[..n as usize]
            .iter()
            .map(|s| PhcReading {
                sys_before_ns: s[0].ns(),
                phc_ns: s[1].ns(),
                sys_after_ns: s[2].ns(),
            })
            .min_by_key(|r| r.window_ns())
            .ok_or_else(|| std::io::Error::other("no sample"))
    }

    /// Turns external time stamp channel `index` on (rising edges) or off
    /// (`PTP_EXTTS_REQUEST2`; the device must be open read-write).
    pub fn enable_extts(&self, index: u32, on: bool) -> std::io::Result<()> {
        let req = PtpExttsRequest {
            index,
            flags: if on {
                PTP_ENABLE_FEATURE | PTP_RISING_EDGE
            } else {
                0
            },
            rsv: [0; 2],
        };
        // SAFETY: the ioctl reads one ptp_extts_request.
        unsafe { ioctls::extts_request2(self.file.as_raw_fd(), &req) }?;
        Ok(())
    }

    /// Reads external time stamp events: blocks until there is one, then
    /// returns those queued (at most 16).
    pub fn read_extts(&mut self) -> std::io::Result<Vec<PtpExttsEvent>> {
        let mut buf = [0u8; 16 * 32];
        let n = self.file.read(&mut buf)?;
        Ok(buf[..n - n % 32]
            .chunks_exact(32)
            .map(|c| {
                let w = |i: usize| u32::from_ne_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
                PtpExttsEvent {
                    t: PtpClockTime {
                        sec: i64::from_ne_bytes(c[0..8].try_into().unwrap_or([0; 8])),
                        nsec: w(8),
                        reserved: w(12),
                    },
                    index: w(16),
                    flags: w(20),
                    rsv: [w(24), w(28)],
                }
            })
            .collect())
    }
}

impl std::os::fd::AsRawFd for Phc {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

/// The PTP hardware clock of the card behind `/dev/fpga-p2pN` (`node`, its
/// path or name): the device node its sysfs entry names
/// (`/sys/class/misc/<name>/device/ptp/ptpM` is `/dev/ptpM`), or None when
/// the card has no clock (or no such card).
pub fn of_card(node: impl AsRef<Path>) -> Option<PathBuf> {
    of_card_in(Path::new("/"), node.as_ref())
}

/// [`of_card`] under another root (tests).
pub fn of_card_in(root: &Path, node: &Path) -> Option<PathBuf> {
    let name = node.file_name()?;
    let dir = root
        .join("sys/class/misc")
        .join(name)
        .join("device")
        .join("ptp");
    let mut clocks: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.strip_prefix("ptp")
                .is_some_and(|d| d.parse::<u32>().is_ok())
        })
        .collect();
    clocks.sort();
    clocks.first().map(|c| Path::new("/dev").join(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cards_clock_is_found_from_its_sysfs_node() {
        let root = std::env::temp_dir().join(format!("phc-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let ptp = root.join("sys/class/misc/fpga-p2p0/device/ptp");
        std::fs::create_dir_all(ptp.join("ptp3")).expect("dirs");
        assert_eq!(
            of_card_in(&root, Path::new("/dev/fpga-p2p0")),
            Some(PathBuf::from("/dev/ptp3"))
        );
        assert_eq!(of_card_in(&root, Path::new("fpga-p2p1")), None);
        std::fs::create_dir_all(root.join("sys/class/misc/fpga-p2p1/device/ptp")).expect("dirs");
        assert_eq!(of_card_in(&root, Path::new("fpga-p2p1")), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_reading_is_the_clock_less_the_middle_of_its_pair() {
        let r = PhcReading {
            phc_ns: 1_037_000_000_500,
            sys_before_ns: 1_000_000_000_000,
            sys_after_ns: 1_000_000_001_000,
        };
        assert_eq!(r.offset_ns(), 37_000_000_000);
        assert_eq!(r.window_ns(), 1000);
    }
}
