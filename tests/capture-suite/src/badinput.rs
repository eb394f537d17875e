//! `badinput`: hostile ioctl arguments, seeded and deterministic. Every call
//! must fail with an errno of the expected class (never succeed, never crash
//! or hang the kernel); afterwards the device still streams.

use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use tegra_p2p::kmod::Device;
use tegra_p2p::uapi::*;

use crate::common::{Check, Ctx, Outcome, Rng};
use crate::{Env, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Hostile calls to make.
    #[arg(long, default_value_t = 20_000)]
    pub calls: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

const PAGE: usize = 4096;
const SLOT: usize = 16 << 10;
const SLOTS: u32 = 4;
const CHUNK: u32 = 4 << 10;

use Errno::*;

/// State the hostile calls aim at: a valid capture ring (started), a valid
/// transmit ring if the device has one, and address-space landmarks.
struct Target {
    dev: Device,
    info: fpga_p2p_info,
    cap: u32,
    tx: Option<u32>,
    ring_addr: u64,
    /// A reserved range with no access: unmapped for the kernel's purposes.
    hole: u64,
    /// A page followed by a PROT_NONE page (for truncated structs).
    edge: u64,
}

fn map(len: usize, prot: i32) -> Check<u64> {
    // SAFETY: fresh anonymous mapping; nothing existing is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    ensure!(p != libc::MAP_FAILED, "mmap: {}", Errno::last());
    Ok(p as u64)
}

/// A raw ioctl with any number and any argument.
fn raw(fd: i32, req: u32, arg: u64) -> Result<i32, Errno> {
    // SAFETY: hostile by design: the kernel must validate everything; the
    // pointers passed are either ours (live) or deliberately invalid for the
    // kernel to reject; none of them is a Rust reference that the kernel
    // could invalidate.
    let r = unsafe { libc::ioctl(fd, req as _, arg) };
    if r < 0 { Err(Errno::last()) } else { Ok(r) }
}

fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | ((FPGA_P2P_IOC_MAGIC as u32) << 8) | nr
}

fn ptr<T>(v: &T) -> u64 {
    v as *const T as u64
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    eprintln!("badinput: seed {}", o.seed);
    out.note("seed", o.seed);
    let mut rng = Rng::new(o.seed);
    let dev = Device::open(&env.device).ctx("open")?;
    let info = dev.check_version().ctx("info")?;
    let ring_addr = map(SLOTS as usize * SLOT, libc::PROT_READ | libc::PROT_WRITE)?;
    let mut r = fpga_p2p_ring {
        addr: ring_addr,
        slot_bytes: SLOT as u64,
        nr_slots: SLOTS,
        direction: FPGA_P2P_DIR_C2H,
        chunk_bytes: CHUNK,
        ..Default::default()
    };
    // SAFETY: the mapping lives until the end of the process and is never
    // accessed through a Rust reference.
    let cap = unsafe { dev.register(&mut r) }.ctx("register capture ring")?;
    let tx = if info.caps & FPGA_P2P_CAP_TRANSMIT != 0 {
        let a = map(2 * SLOT, libc::PROT_READ | libc::PROT_WRITE)?;
        let mut t = fpga_p2p_ring {
            addr: a,
            slot_bytes: SLOT as u64,
            nr_slots: 2,
            direction: FPGA_P2P_DIR_H2C,
            ..Default::default()
        };
        // SAFETY: as above.
        Some(unsafe { dev.register(&mut t) }.ctx("register transmit ring")?)
    } else {
        None
    };
    dev.start(&fpga_p2p_start {
        handle: cap,
        source: FPGA_P2P_SRC_TEST_PATTERN,
        chunk_period_ns: 200_000,
        event_timeout_ms: 50,
        ..Default::default()
    })
    .ctx("start")?;
    let hole = map(16 * PAGE, libc::PROT_NONE)?;
    // SAFETY: unmapping our own reservation: the range becomes truly unmapped.
    unsafe { libc::munmap(hole as *mut _, 16 * PAGE) };
    let edge = map(2 * PAGE, libc::PROT_READ | libc::PROT_WRITE)?;
    // SAFETY: our own mapping's second page becomes inaccessible.
    unsafe { libc::mprotect((edge + PAGE as u64) as *mut _, PAGE, libc::PROT_NONE) };
    let t = Target {
        dev,
        info,
        cap,
        tx,
        ring_addr,
        hole,
        edge: edge + PAGE as u64,
    };
    let mut by_case = std::collections::BTreeMap::<&'static str, u64>::new();
    while out.fuzz_calls < o.calls {
        let (case, res, allowed) = hostile_call(&t, &mut rng);
        out.fuzz_calls += 1;
        *by_case.entry(case).or_default() += 1;
        match res {
            Ok(v) => {
                return Err(format!(
                    "call {} ({case}) succeeded ({v}); expected one of {allowed:?} (seed {})",
                    out.fuzz_calls, o.seed
                ));
            }
            Err(e) if allowed.contains(&e) => {}
            Err(e) => {
                return Err(format!(
                    "call {} ({case}) failed with {e}; expected one of {allowed:?} (seed {})",
                    out.fuzz_calls, o.seed
                ));
            }
        }
    }
    eprintln!("badinput: {} calls, cases {by_case:?}", out.fuzz_calls);
    out.note("cases", by_case.len() as u64);
    // The capture ring still streams after all that.
    let mut w = fpga_p2p_wait {
        release_handle: t.cap,
        release_slot: FPGA_P2P_NO_SLOT,
        timeout_ms: 2000,
        ..Default::default()
    };
    for _ in 0..4 {
        t.dev.wait(&mut w).ctx("wait after the hostile calls")?;
        ensure!(
            w.event.type_ == FPGA_P2P_EV_FRAME,
            "event {} after the hostile calls",
            w.event.type_
        );
        w.release_slot = w.event.slot;
    }
    drop(t);
    crate::smoke(env, 4, out)?;
    Ok(())
}

type Call = (&'static str, Result<i32, Errno>, &'static [Errno]);

fn hostile_call(t: &Target, rng: &mut Rng) -> Call {
    let fd = t.dev.as_fd().as_raw_fd();
    let unknown_handle = || 0x4000_0000u32 | (rng_small(t.cap) as u32);
    let good_ring = || fpga_p2p_ring {
        addr: t.ring_addr,
        slot_bytes: SLOT as u64,
        nr_slots: SLOTS,
        direction: FPGA_P2P_DIR_C2H,
        chunk_bytes: CHUNK,
        ..Default::default()
    };
    match rng.below(30) {
        0 => {
            let mut r = good_ring();
            r.addr += 1 + rng.below(PAGE as u64 - 1);
            ("register: unaligned address", reg(fd, &mut r), &[EINVAL])
        }
        1 => {
            let mut r = good_ring();
            r.slot_bytes = SLOT as u64 - 1 - rng.below(PAGE as u64 - 1);
            ("register: unaligned slot size", reg(fd, &mut r), &[EINVAL])
        }
        2 => {
            let mut r = good_ring();
            if rng.below(2) == 0 {
                r.slot_bytes = 0;
            } else {
                r.nr_slots = rng.below(2) as u32; // 0 or 1 capture slots
            }
            (
                "register: zero size or too few slots",
                reg(fd, &mut r),
                &[EINVAL],
            )
        }
        3 => {
            let mut r = good_ring();
            r.nr_slots = t
                .info
                .max_slots
                .saturating_add(1 + rng.below(1 << 20) as u32);
            (
                "register: too many slots",
                reg(fd, &mut r),
                &[EINVAL, E2BIG],
            )
        }
        4 => {
            let mut r = good_ring();
            r.slot_bytes = (t.info.max_slot_bytes + PAGE as u64) << rng.below(20);
            (
                "register: huge slots",
                reg(fd, &mut r),
                &[EINVAL, E2BIG, EOVERFLOW],
            )
        }
        5 => {
            let mut r = good_ring();
            r.addr = u64::MAX - (PAGE as u64 * (1 + rng.below(8))) + 1;
            (
                "register: address overflow",
                reg(fd, &mut r),
                &[EINVAL, EOVERFLOW, EFAULT],
            )
        }
        6 => {
            let mut r = good_ring();
            r.addr = t.hole;
            r.nr_slots = 2;
            r.slot_bytes = PAGE as u64 * 4;
            r.chunk_bytes = PAGE as u32;
            (
                "register: unmapped buffer",
                reg(fd, &mut r),
                &[EFAULT, ENOMEM, EINVAL],
            )
        }
        7 => {
            let mut r = good_ring();
            r.addr = 0xffff_8880_0000_0000 + PAGE as u64 * rng.below(1024);
            (
                "register: kernel address",
                reg(fd, &mut r),
                &[EFAULT, EINVAL],
            )
        }
        8 => {
            // Overlaps the registered capture ring.
            let mut r = good_ring();
            r.addr = t.ring_addr + PAGE as u64 * rng.below(4);
            (
                "register: overlapping buffer",
                reg(fd, &mut r),
                &[EBUSY, EEXIST, EINVAL],
            )
        }
        9 => {
            let mut r = good_ring();
            r.direction = 2 + rng.below(1000) as u32;
            ("register: bad direction", reg(fd, &mut r), &[EINVAL])
        }
        10 => {
            let mut r = good_ring();
            r.chunk_bytes = *rng.pick(&[0, 3, 1000, SLOT as u32 + PAGE as u32, 3 * PAGE as u32]);
            ("register: bad chunk size", reg(fd, &mut r), &[EINVAL])
        }
        11 => {
            let mut r = good_ring();
            r.reserved[rng.below(2) as usize] = 1 + rng.below(u64::MAX - 1);
            ("register: nonzero reserved", reg(fd, &mut r), &[EINVAL])
        }
        12 => {
            let h = unknown_handle();
            (
                "unregister: unknown handle",
                raw(fd, ioc::UNREGISTER, ptr(&h)),
                &[ENOENT, EINVAL],
            )
        }
        13 => {
            let s = fpga_p2p_start {
                handle: unknown_handle(),
                source: FPGA_P2P_SRC_TEST_PATTERN,
                ..Default::default()
            };
            (
                "start: unknown handle",
                raw(fd, ioc::START, ptr(&s)),
                &[ENOENT, EINVAL],
            )
        }
        14 => {
            // The capture ring is running: a second start is refused whatever it says.
            let mut s = fpga_p2p_start {
                handle: t.cap,
                source: rng.below(6) as u32,
                playback_frames: rng.below(4) as u32,
                ..Default::default()
            };
            if rng.below(2) == 0 {
                s.reserved[0] = 1;
            }
            (
                "start: double start / bad source",
                raw(fd, ioc::START, ptr(&s)),
                &[EBUSY, EALREADY, EINVAL],
            )
        }
        15 => {
            let h = unknown_handle();
            (
                "stop: unknown handle",
                raw(fd, ioc::STOP, ptr(&h)),
                &[ENOENT, EINVAL],
            )
        }
        16 => {
            let r = fpga_p2p_release {
                handle: t.cap,
                slot: SLOTS + rng.below(u32::MAX as u64 - SLOTS as u64) as u32,
            };
            (
                "release: slot out of range",
                raw(fd, ioc::RELEASE, ptr(&r)),
                &[EINVAL, ERANGE],
            )
        }
        17 => {
            // Never delivered to us (we release nothing we took): not owned.
            let r = fpga_p2p_release {
                handle: t.cap,
                slot: rng.below(SLOTS as u64) as u32,
            };
            (
                "release: slot not owned",
                raw(fd, ioc::RELEASE, ptr(&r)),
                &[EINVAL, EPERM, EBUSY, EALREADY],
            )
        }
        18 => {
            let r = fpga_p2p_release {
                handle: unknown_handle(),
                slot: 0,
            };
            (
                "release: unknown handle",
                raw(fd, ioc::RELEASE, ptr(&r)),
                &[ENOENT, EINVAL],
            )
        }
        19 => {
            // Transmit on the capture ring (wrong direction), or bad fields.
            let mut x = fpga_p2p_tx {
                handle: t.tx.unwrap_or(t.cap),
                slot: 0,
                bytes: 64,
                target: FPGA_P2P_TX_DETECTIONS,
                ..Default::default()
            };
            match rng.below(6) {
                0 => x.handle = t.cap,
                1 => x.bytes = 0,
                2 => x.bytes = SLOT as u32 + 1 + rng.below(1 << 20) as u32,
                3 => x.slot = 2 + rng.below(1000) as u32,
                4 => x.target = 3 + rng.below(1000) as u32,
                _ => x.reserved0 = 1,
            }
            if t.tx.is_none() {
                x.handle = t.cap;
            }
            (
                "tx_submit: bad arguments",
                raw(fd, ioc::TX_SUBMIT, ptr(&x)),
                &[EINVAL, ERANGE, ENOENT, EOPNOTSUPP],
            )
        }
        20 => {
            let mut w = fpga_p2p_wait {
                release_handle: t.cap,
                release_slot: FPGA_P2P_NO_SLOT,
                timeout_ms: 1,
                ..Default::default()
            };
            match rng.below(3) {
                0 => w.reserved0 = 1 + rng.below(100) as u32,
                1 => w.release_slot = SLOTS + rng.below(1000) as u32,
                _ => {
                    w.release_handle = unknown_handle();
                    w.release_slot = 0;
                }
            }
            (
                "wait: bad release or reserved",
                raw(fd, ioc::WAIT, &mut w as *mut fpga_p2p_wait as u64),
                &[EINVAL, ERANGE, ENOENT],
            )
        }
        21 => {
            // Right number, wrong size in the encoding.
            let (nr, size) = *rng.pick(&[
                (0x00u32, 8u32),
                (0x01, 16),
                (0x03, 12),
                (0x05, 4),
                (0x08, 24),
                (0x06, 200),
            ]);
            let dir = 1 + rng.below(3) as u32;
            let mut buf = [0u64; 64];
            (
                "raw: wrong struct size",
                raw(fd, ioc(dir, nr, size), buf.as_mut_ptr() as u64),
                &[ENOTTY, EINVAL],
            )
        }
        22 => {
            let nr = 0x09 + rng.below(0xf6) as u32;
            let mut buf = [0u64; 64];
            (
                "raw: unknown command",
                raw(fd, ioc(3, nr, 64), buf.as_mut_ptr() as u64),
                &[ENOTTY],
            )
        }
        23 => {
            let mut buf = [0u64; 64];
            let req = (3 << 30) | (64 << 16) | ((rng.below(256) as u32 ^ 0xF2).max(1) << 8);
            let req = if (req >> 8) & 0xff == FPGA_P2P_IOC_MAGIC as u32 {
                req ^ 0x100
            } else {
                req
            };
            (
                "raw: wrong magic",
                raw(fd, req, buf.as_mut_ptr() as u64),
                &[ENOTTY],
            )
        }
        24 => {
            let req = *rng.pick(&[
                ioc::INFO,
                ioc::REGISTER,
                ioc::START,
                ioc::RELEASE,
                ioc::COUNTERS,
                ioc::TX_SUBMIT,
                ioc::WAIT,
                ioc::UNREGISTER,
                ioc::STOP,
            ]);
            let bad = *rng.pick(&[0u64, 1, t.hole, 0xffff_8880_0000_0000, u64::MAX - 7]);
            ("raw: bad pointer", raw(fd, req, bad), &[EFAULT])
        }
        25 => {
            // The struct starts near the end of a page and runs into PROT_NONE.
            let (req, size) = *rng.pick(&[
                (ioc::REGISTER, size_of::<fpga_p2p_ring>()),
                (ioc::START, size_of::<fpga_p2p_start>()),
                (ioc::WAIT, size_of::<fpga_p2p_wait>()),
                (ioc::INFO, size_of::<fpga_p2p_info>()),
                (ioc::COUNTERS, size_of::<fpga_p2p_counters>()),
                (ioc::TX_SUBMIT, size_of::<fpga_p2p_tx>()),
            ]);
            let cut = 1 + rng.below(size as u64 - 1);
            (
                "raw: truncated struct",
                raw(fd, req, t.edge - cut),
                &[EFAULT],
            )
        }
        26 => {
            // read() with a buffer shorter than one event.
            let mut buf = [0u8; 64];
            let n = 1 + rng.below(size_of::<fpga_p2p_event>() as u64 - 1) as usize;
            // SAFETY: reads at most n <= 63 bytes into a live local buffer.
            let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), n) };
            let res = if r < 0 {
                Err(Errno::last())
            } else {
                Ok(r as i32)
            };
            ("read: short buffer", res, &[EINVAL])
        }
        27 => {
            // read() into an unmapped buffer: EFAULT (or nothing to read yet).
            // SAFETY: the kernel must reject the address; Rust owns nothing there.
            let r = unsafe { libc::read(fd, t.hole as *mut _, size_of::<fpga_p2p_event>()) };
            let res = if r < 0 {
                Err(Errno::last())
            } else {
                Ok(r as i32)
            };
            ("read: bad buffer", res, &[EFAULT, ETIMEDOUT])
        }
        28 => {
            // Unregistering the transmit ring's handle with stop; stopping the
            // transmit ring (not a capture ring).
            let h = t.tx.unwrap_or(unknown_handle());
            (
                "stop: transmit ring",
                raw(fd, ioc::STOP, ptr(&h)),
                &[EINVAL, ENOENT],
            )
        }
        _ => {
            let mut r = good_ring();
            r.handle = rng.below(u32::MAX as u64) as u32; // out field: ignored, but
            r.addr = t.ring_addr; // still overlapping: refused
            (
                "register: same memory twice",
                reg(fd, &mut r),
                &[EBUSY, EEXIST, EINVAL],
            )
        }
    }
}

fn rng_small(x: u32) -> u64 {
    u64::from(x.wrapping_mul(2_654_435_761) & 0xffff)
}

fn reg(fd: i32, r: &mut fpga_p2p_ring) -> Result<i32, Errno> {
    raw(fd, ioc::REGISTER, r as *mut _ as u64)
}
