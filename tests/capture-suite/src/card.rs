//! The emulated card's test port: BAR2 of the emulated FPGA card in QEMU
//! (tests/qemu/fpga-card/), which a real card does not have and the driver
//! never maps. Tests mmap `/sys/bus/pci/devices/<card>/resource2` to inject
//! faults and read what the card saw. Offsets: `fpga_card_test.h`.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::common::{Check, Ctx};

const VENDOR: &str = "0x10ee";
const DEVICE: &str = "0x9038";
const BAR_LEN: usize = 0x20000;
const ID: usize = 0x000;
const ID_VALUE: u32 = 0x5445_5354;
const STAT0: usize = 0x100;
const DET_LEVEL: usize = 0x800;
const DET_BYTES: usize = 0x804;
const DET_TAG: usize = 0x808;
const DET_POP: usize = 0x80c;
const DET_DATA: usize = 0x10000;
const PPS_PULSE: usize = 0x040;
const CLOCK_PPB: usize = 0x044;
const PPS_PULSES: usize = 0x048;

/// Fault injection registers (RW; 0 turns a fault off).
#[derive(Clone, Copy, Debug)]
pub enum Knob {
    /// Every Nth frame is dropped as a link fault.
    DropEvery = 0x004,
    /// Every Nth frame ends at half its length (SHORT).
    ShortEvery = 0x008,
    /// Every Nth frame gets a bit flipped after its CRC.
    CorruptEvery = 0x00c,
    /// 1: the next C2H descriptor fetch fails (descriptor error).
    C2hDescError = 0x010,
    /// 1: the next H2C descriptor fetch fails.
    H2cDescError = 0x014,
    /// The next N interrupts (MSI-X messages) are lost.
    LoseIrqs = 0x018,
    /// The C2H engine never goes idle: 1 and it keeps writing its last
    /// destination, 2 and it writes nothing (an engine hung on its bus).
    C2hStuck = 0x01c,
    /// 1: BAR0/BAR1 read all ones, as after a completion timeout.
    AllOnes = 0x020,
    /// Every Nth frame's metadata is pushed after its last descriptor.
    MetaLateEvery = 0x024,
}

/// The counters, in the order of `fpga_card_test.h`.
const STATS: &[&str] = &[
    "frames_started",
    "frames_sent",
    "chunks",
    "drops_no_slot",
    "drops_fault",
    "frame_credits",
    "c2h_credits",
    "c2h_completed",
    "c2h_status",
    "h2c_credits",
    "h2c_status",
    "stalls",
    "protocol_errors",
    "meta_level",
    "tag_level",
    "h2c_packets",
    "h2c_errors",
    "h2c_last_target",
    "h2c_last_index",
    "h2c_last_bytes",
    "h2c_last_crc",
    "irqs",
    "irqs_lost",
    "halts",
    "dma_errors",
    "stuck_writes",
    "det_overflows",
    "bus_master",
    "meta_late",
    "det_records",
];

/// The mapped test port of one emulated card.
pub struct Card {
    base: *mut u8,
    path: PathBuf,
}

impl Card {
    /// The first emulated card's test port, or None when there is no such
    /// card (a real card, or no card).
    pub fn find() -> Check<Option<Card>> {
        let Ok(dir) = std::fs::read_dir("/sys/bus/pci/devices") else {
            return Ok(None);
        };
        let mut devs: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        devs.sort();
        for d in devs {
            let id = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
            if id("vendor").trim() != VENDOR || id("device").trim() != DEVICE {
                continue;
            }
            let res = d.join("resource2");
            if !res.exists() {
                continue;
            }
            let card = Card::map(&res)?;
            if card.rd(ID) == ID_VALUE {
                return Ok(Some(card));
            }
        }
        Ok(None)
    }

    fn map(path: &Path) -> Check<Card> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .ctx(&path.display().to_string())?;
        // SAFETY: a shared mapping of a PCI BAR's sysfs resource file of
        // BAR_LEN bytes (the emulated card's BAR2 size); checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BAR_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Card {
            base: p.cast(),
            path: path.to_path_buf(),
        })
    }

    fn rd(&self, off: usize) -> u32 {
        assert!(off + 4 <= BAR_LEN && off.is_multiple_of(4));
        // SAFETY: in bounds and aligned (asserted) of the live mapping;
        // MMIO, so a volatile 32-bit read.
        unsafe { std::ptr::read_volatile(self.base.add(off).cast::<u32>()) }
    }

    fn wr(&self, off: usize, v: u32) {
        assert!(off + 4 <= BAR_LEN && off.is_multiple_of(4));
        // SAFETY: as in rd; a volatile 32-bit write.
        unsafe { std::ptr::write_volatile(self.base.add(off).cast::<u32>(), v) }
    }

    /// Set a fault injection register.
    pub fn set(&self, k: Knob, v: u32) {
        self.wr(k as usize, v);
    }

    /// All faults off.
    pub fn clear_faults(&self) {
        for k in [
            Knob::DropEvery,
            Knob::ShortEvery,
            Knob::CorruptEvery,
            Knob::C2hDescError,
            Knob::H2cDescError,
            Knob::LoseIrqs,
            Knob::C2hStuck,
            Knob::AllOnes,
            Knob::MetaLateEvery,
        ] {
            self.set(k, 0);
        }
    }

    /// An edge on the card's PPS input, now (`FC_TEST_PPS_PULSE`).
    pub fn pps_pulse(&self) {
        self.wr(PPS_PULSE, 1);
    }

    /// The card's oscillator error in ppb (`FC_TEST_CLOCK_PPB`).
    pub fn clock_ppb(&self) -> i32 {
        self.rd(CLOCK_PPB) as i32
    }

    /// Sets the card's oscillator error in ppb.
    pub fn set_clock_ppb(&self, ppb: i32) {
        self.wr(CLOCK_PPB, ppb as u32);
    }

    /// PPS edges sent through the test port since QEMU started.
    pub fn pps_pulses(&self) -> u32 {
        self.rd(PPS_PULSES)
    }

    /// A counter by name (see STATS).
    pub fn stat(&self, name: &str) -> Check<u64> {
        let i = STATS
            .iter()
            .position(|s| *s == name)
            .ok_or_else(|| format!("{}: no counter {name}", self.path.display()))?;
        Ok(u64::from(self.rd(STAT0 + 4 * i)))
    }

    /// The oldest detection packet the card still keeps (target 0; it
    /// keeps the newest 16): its tag word and bytes, left in the list.
    fn peek_detections(&self) -> Option<(u32, Vec<u8>)> {
        if self.rd(DET_LEVEL) == 0 {
            return None;
        }
        let (tag, n) = (self.rd(DET_TAG), self.rd(DET_BYTES) as usize);
        let mut v = Vec::with_capacity(n);
        for w in 0..n.div_ceil(4) {
            v.extend_from_slice(&self.rd(DET_DATA + 4 * w).to_le_bytes());
        }
        v.truncate(n);
        Some((tag, v))
    }

    /// The last detection record the card received (the older ones it
    /// keeps are dropped from its list), or None when it has none.
    pub fn last_detections(&self) -> Option<(u32, Vec<u8>)> {
        while self.rd(DET_LEVEL) > 1 {
            self.wr(DET_POP, 1);
        }
        self.peek_detections()
    }
}

impl Drop for Card {
    fn drop(&mut self) {
        // SAFETY: the mapping made in map(), unmapped once.
        unsafe { libc::munmap(self.base.cast(), BAR_LEN) };
    }
}

/// `p2p-suite card-detections [--out FILE]`: what the emulated card's
/// detection output (the FPGA's link to the vehicle) received: the count of
/// whole records and the last record, written to FILE byte for byte.
pub fn detections(out_file: Option<&Path>, out: &mut crate::common::Outcome) -> Check {
    let card =
        Card::find()?.ok_or("no emulated card (its test port keeps the detection records)")?;
    let records = card.stat("det_records")?;
    out.note("detection_records", records);
    let Some((tag, bytes)) = card.last_detections() else {
        out.note("detection_last_bytes", 0);
        out.detail = format!("{records} detection records, none kept");
        return Ok(());
    };
    out.note("detection_last_bytes", bytes.len());
    out.note("detection_last_tag", tag);
    if let Some(f) = out_file {
        std::fs::write(f, &bytes).ctx(&f.display().to_string())?;
    }
    out.detail = format!(
        "{records} detection records, the last {} bytes",
        bytes.len()
    );
    Ok(())
}
