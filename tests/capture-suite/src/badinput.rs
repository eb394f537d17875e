//! `badinput`: hostile ioctl arguments, seeded and deterministic. Every call
//! must fail with the errno class the uapi header documents (never succeed,
//! never crash or hang the kernel); afterwards the device still streams.
//! The calls alternate, in blocks, between a device with no ring (so REGISTER
//! validation is reached) and one with a capture (and transmit) ring
//! registered but stopped (so no slot is owned and nothing moves by itself).

use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use tegra_p2p::kmod::Device;
use tegra_p2p::uapi::*;

use crate::common::{self, Check, Ctx, Outcome, Rng, read_key};
use crate::{Env, P2p, ensure};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Hostile calls to make.
    #[arg(long, default_value_t = 100_000)]
    pub calls: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

const PAGE: usize = 4096;
const SLOT: usize = 16 << 10;
const SLOTS: u32 = 4;
const CHUNK: u32 = 4 << 10;

use Errno::*;

/// What the hostile calls aim at.
struct Target {
    dev: Device,
    info: fpga_p2p_info,
    /// Registered rings (None while the block runs with the device empty).
    cap: Option<u32>,
    tx: Option<u32>,
    /// Handles that existed once and were unregistered.
    stale: u32,
    ring_addr: u64,
    tx_addr: u64,
    /// An unmapped range.
    hole: u64,
    /// The first byte of a PROT_NONE page after a readable one.
    edge: u64,
}

impl Target {
    fn up(&mut self) -> Check {
        let mut r = good_ring(self.ring_addr);
        // SAFETY: the mapping lives until the process ends and Rust never
        // references it except for the final pattern check after delivery.
        self.cap = Some(unsafe { self.dev.register(&mut r) }.ctx("register capture ring")?);
        if self.info.caps & FPGA_P2P_CAP_TRANSMIT != 0 {
            let mut t = fpga_p2p_ring {
                addr: self.tx_addr,
                slot_bytes: SLOT as u64,
                nr_slots: 2,
                direction: FPGA_P2P_DIR_H2C,
                ..Default::default()
            };
            // SAFETY: as above.
            self.tx = Some(unsafe { self.dev.register(&mut t) }.ctx("register transmit ring")?);
        }
        Ok(())
    }
    fn down(&mut self) -> Check {
        for h in [self.cap.take(), self.tx.take()].into_iter().flatten() {
            self.dev.unregister(h).ctx("unregister")?;
            self.stale = h;
        }
        Ok(())
    }
}

fn good_ring(addr: u64) -> fpga_p2p_ring {
    fpga_p2p_ring {
        addr,
        slot_bytes: SLOT as u64,
        nr_slots: SLOTS,
        direction: FPGA_P2P_DIR_C2H,
        chunk_bytes: CHUNK,
        ..Default::default()
    }
}

pub fn run(env: &Env, o: &Opts, out: &mut Outcome) -> Check {
    eprintln!("badinput: seed {}", o.seed);
    out.note("seed", o.seed);
    let mut rng = Rng::new(o.seed);
    let dev = Device::open(&env.device).ctx("open")?;
    let info = dev.check_version().ctx("info")?;
    let fd = dev.as_fd().as_raw_fd();
    // Non-blocking reads: an empty queue says EAGAIN at once.
    // SAFETY: fcntl on our own open descriptor.
    unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
    let ring_addr = map(SLOTS as usize * SLOT, libc::PROT_READ | libc::PROT_WRITE)?;
    let tx_addr = map(2 * SLOT, libc::PROT_READ | libc::PROT_WRITE)?;
    let hole = map(16 * PAGE, libc::PROT_NONE)?;
    // SAFETY: unmapping our own reservation: the range becomes truly unmapped.
    unsafe { libc::munmap(hole as *mut _, 16 * PAGE) };
    let edge = map(2 * PAGE, libc::PROT_READ | libc::PROT_WRITE)?;
    // SAFETY: our own mapping's second page becomes inaccessible.
    unsafe { libc::mprotect((edge + PAGE as u64) as *mut _, PAGE, libc::PROT_NONE) };
    let mut t = Target {
        dev,
        info,
        cap: None,
        tx: None,
        stale: 0x7777,
        ring_addr,
        tx_addr,
        hole,
        edge: edge + PAGE as u64,
    };
    let mut by_case = std::collections::BTreeMap::<&'static str, u64>::new();
    let block = 500;
    while out.fuzz_calls < o.calls {
        if out.fuzz_calls.is_multiple_of(block) {
            if (out.fuzz_calls / block).is_multiple_of(2) {
                t.down()?;
            } else {
                t.up()?;
            }
        }
        let Some((case, res, allowed)) = hostile_call(&t, &mut rng)? else {
            continue;
        };
        out.fuzz_calls += 1;
        *by_case.entry(case).or_default() += 1;
        match res {
            Err(e) if allowed.contains(&e) => {}
            other => {
                return Err(format!(
                    "call {} ({case}, rings {}): {other:?}; expected one of {allowed:?} (seed {})",
                    out.fuzz_calls,
                    if t.cap.is_some() {
                        "registered"
                    } else {
                        "none"
                    },
                    o.seed
                ));
            }
        }
    }
    eprintln!(
        "badinput: {} calls in {} cases: {by_case:?}",
        out.fuzz_calls,
        by_case.len()
    );
    out.note("cases", by_case.len() as u64);

    // The same file still streams the test pattern correctly afterwards.
    t.down()?;
    t.up()?;
    let cap = t.cap.ok_or("no capture ring")?;
    t.dev
        .start(&fpga_p2p_start {
            handle: cap,
            source: FPGA_P2P_SRC_TEST_PATTERN,
            event_timeout_ms: 2000,
            ..Default::default()
        })
        .ctx("start after the hostile calls")?;
    let mut w = fpga_p2p_wait {
        release_handle: cap,
        release_slot: FPGA_P2P_NO_SLOT,
        timeout_ms: 2000,
        ..Default::default()
    };
    let mut tracker = tegra_p2p::SequenceTracker::new();
    for _ in 0..4 {
        t.dev.wait(&mut w).ctx("wait after the hostile calls")?;
        let ev = w.event;
        ensure!(
            ev.type_ == FPGA_P2P_EV_FRAME,
            "event {} after the hostile calls",
            ev.type_
        );
        ensure!(
            ev.slot < SLOTS && ev.bytes as usize == SLOT,
            "bad frame event {ev:?}"
        );
        // SAFETY: the module handed this slot to us; it stays unwritten until released.
        let data = unsafe {
            std::slice::from_raw_parts(
                (t.ring_addr + ev.slot as u64 * SLOT as u64) as *const u8,
                SLOT,
            )
        };
        tegra_p2p::verify_test_pattern(data, ev.sequence, CHUNK as usize)
            .map_err(|m| format!("after the hostile calls: {m}"))?;
        ensure!(
            crc32fast::hash(data) == ev.crc32,
            "CRC mismatch after the hostile calls"
        );
        tracker
            .observe(ev.sequence, ev.dropped)
            .map_err(|e| e.to_string())?;
        out.frames_verified += 1;
        w.release_slot = ev.slot;
    }
    t.dev.stop(cap).ctx("stop")?;
    t.down()?;
    let map_failure = failed_dma_map(env, &mut t)?;
    drop(t);
    crate::smoke(env, 4, out)?;
    out.detail = format!(
        "{} hostile calls of {} kinds, each answered with an errno it allows; \
         the same file then streamed verified frames, and a new one too; {map_failure}",
        out.fuzz_calls,
        by_case.len()
    );
    Ok(())
}

/// A DMA map that fails as NVIDIA's does (0 returned, no mapping), injected
/// through the shim: REGISTER says ENOMEM, nothing stays pinned, and the next
/// REGISTER works. NVIDIA's module cannot be made to fail on demand.
fn failed_dma_map(env: &Env, t: &mut Target) -> Check<String> {
    if env.p2p != P2p::Shim {
        return Ok("no DMA map failure injected (NVIDIA's module has no fault injection)".into());
    }
    let stats = env.shim_debugfs.join("stats");
    let knob = env.shim_debugfs.join("fail_dma_map");
    let failed0 = read_key(&stats, "dma_map_failed")?;
    std::fs::write(&knob, "1").map_err(|e| format!("write 1 to {}: {e}", knob.display()))?;
    let mut r = good_ring(t.ring_addr);
    let res = reg(t.dev.as_fd().as_raw_fd(), &mut r);
    // An injection the REGISTER did not consume must not hit the next one.
    let _ = std::fs::write(&knob, "0");
    ensure!(
        res == Err(ENOMEM),
        "REGISTER over a DMA map that returned 0 with no mapping: {res:?}, expected ENOMEM"
    );
    ensure!(
        read_key(&stats, "dma_map_failed")? == failed0 + 1,
        "the injected DMA map failure was not reached"
    );
    common::p2p_clean(env, "after the failed DMA map")?;
    t.up()
        .map_err(|e| format!("after the failed DMA map: {e}"))?;
    t.down()?;
    Ok(
        "a DMA map returning 0 with no mapping made REGISTER fail with ENOMEM, then it worked"
            .into(),
    )
}

type Call = (&'static str, Result<i32, Errno>, &'static [Errno]);

/// One hostile call (None: the drawn case does not apply in this state).
fn hostile_call(t: &Target, rng: &mut Rng) -> Check<Option<Call>> {
    let fd = t.dev.as_fd().as_raw_fd();
    let up = t.cap.is_some();
    let cap = t.cap.unwrap_or(t.stale);
    let unknown = 0x4000_0000 | rng.below(0xffff) as u32;
    // REGISTER while a ring of that direction exists may answer EBUSY first.
    let reg_errs = |with: &'static [Errno], busy: &'static [Errno]| if up { busy } else { with };
    let c: Call = match rng.below(31) {
        0 => {
            let mut r = good_ring(t.ring_addr + 1 + rng.below(PAGE as u64 - 1));
            (
                "register: unaligned address",
                reg(fd, &mut r),
                reg_errs(&[EINVAL], &[EINVAL, EBUSY]),
            )
        }
        1 => {
            let mut r = good_ring(t.ring_addr);
            r.slot_bytes = SLOT as u64 - 1 - rng.below(PAGE as u64 - 1);
            (
                "register: unaligned slot size",
                reg(fd, &mut r),
                reg_errs(&[EINVAL], &[EINVAL, EBUSY]),
            )
        }
        2 => {
            let mut r = good_ring(t.ring_addr);
            if rng.below(2) == 0 {
                r.slot_bytes = 0;
            } else {
                r.nr_slots = rng.below(2) as u32;
            }
            (
                "register: zero size or too few slots",
                reg(fd, &mut r),
                reg_errs(&[EINVAL], &[EINVAL, EBUSY]),
            )
        }
        3 => {
            let mut r = good_ring(t.ring_addr);
            r.nr_slots = t
                .info
                .max_slots
                .saturating_add(1 + rng.below(1 << 20) as u32);
            (
                "register: more slots than INFO allows",
                reg(fd, &mut r),
                reg_errs(&[ENOMEM, EINVAL], &[ENOMEM, EINVAL, EBUSY]),
            )
        }
        4 => {
            let mut r = good_ring(t.ring_addr);
            r.slot_bytes = (t.info.max_slot_bytes + PAGE as u64) << rng.below(20);
            (
                "register: slots larger than INFO allows",
                reg(fd, &mut r),
                reg_errs(&[ENOMEM, EINVAL], &[ENOMEM, EINVAL, EBUSY]),
            )
        }
        5 => {
            let mut r = good_ring(u64::MAX - PAGE as u64 * (1 + rng.below(8)) + 1);
            (
                "register: address overflow",
                reg(fd, &mut r),
                reg_errs(&[EINVAL, EFAULT], &[EINVAL, EFAULT, EBUSY]),
            )
        }
        6 => {
            let mut r = good_ring(t.hole);
            r.nr_slots = 2;
            r.slot_bytes = PAGE as u64 * 4;
            r.chunk_bytes = PAGE as u32;
            (
                "register: unmapped buffer",
                reg(fd, &mut r),
                reg_errs(&[EFAULT], &[EFAULT, EBUSY]),
            )
        }
        7 => {
            let mut r = good_ring(0xffff_8880_0000_0000 + PAGE as u64 * rng.below(1024));
            (
                "register: kernel address",
                reg(fd, &mut r),
                reg_errs(&[EFAULT, EINVAL], &[EFAULT, EINVAL, EBUSY]),
            )
        }
        8 => {
            if !up {
                return Ok(None);
            }
            let mut r = good_ring(t.ring_addr + PAGE as u64 * rng.below(4));
            (
                "register: second capture ring / overlapping",
                reg(fd, &mut r),
                &[EBUSY],
            )
        }
        9 => {
            let mut r = good_ring(t.ring_addr);
            r.direction = 2 + rng.below(1000) as u32;
            ("register: bad direction", reg(fd, &mut r), &[EINVAL])
        }
        10 => {
            let mut r = good_ring(t.ring_addr);
            // (0 is valid: one chunk per slot.)
            r.chunk_bytes = *rng.pick(&[3, 1000, 2048, SLOT as u32 + PAGE as u32, 3 * PAGE as u32]);
            (
                "register: bad chunk size",
                reg(fd, &mut r),
                reg_errs(&[EINVAL], &[EINVAL, EBUSY]),
            )
        }
        11 => {
            let mut r = good_ring(t.ring_addr);
            match rng.below(3) {
                0 => r.reserved[0] = 1 + rng.below(u64::MAX - 1),
                1 => r.reserved0 = 1 + rng.below(u32::MAX as u64 - 1) as u32,
                // A flag the header does not define.
                _ => r.flags = 1 << (1 + rng.below(31)),
            }
            (
                "register: nonzero reserved or unknown flag",
                reg(fd, &mut r),
                reg_errs(&[EINVAL], &[EINVAL, EBUSY]),
            )
        }
        12 => {
            let h = if rng.below(2) == 0 { unknown } else { t.stale };
            (
                "unregister: unknown handle",
                raw(fd, ioc::UNREGISTER, ptr(&h)),
                &[ENOENT],
            )
        }
        13 => {
            let s = fpga_p2p_start {
                handle: unknown,
                source: FPGA_P2P_SRC_TEST_PATTERN,
                ..Default::default()
            };
            (
                "start: unknown handle",
                raw(fd, ioc::START, ptr(&s)),
                &[ENOENT],
            )
        }
        14 => {
            if !up {
                return Ok(None);
            }
            // Double start, then double stop (the valid halves are not counted).
            let good = fpga_p2p_start {
                handle: cap,
                source: FPGA_P2P_SRC_TEST_PATTERN,
                chunk_period_ns: 50_000_000,
                ..Default::default()
            };
            t.dev.start(&good).ctx("valid start")?;
            let mut s = good;
            s.chunk_period_ns = 10_000 + rng.below(1_000_000) as u32;
            let second = raw(fd, ioc::START, ptr(&s));
            t.dev.stop(cap).ctx("valid stop")?;
            if second != Err(EALREADY) {
                ("start: on a running ring", second, &[EALREADY])
            } else {
                (
                    "stop: on a stopped ring",
                    raw(fd, ioc::STOP, ptr(&cap)),
                    &[EALREADY],
                )
            }
        }
        15 => {
            let h = if rng.below(2) == 0 { unknown } else { t.stale };
            (
                "stop: unknown handle",
                raw(fd, ioc::STOP, ptr(&h)),
                &[ENOENT],
            )
        }
        16 => {
            let mut s = fpga_p2p_start {
                handle: cap,
                source: FPGA_P2P_SRC_TEST_PATTERN,
                ..Default::default()
            };
            match rng.below(3) {
                0 => s.source = 3 + rng.below(1000) as u32,
                1 => s.flags = 2 << rng.below(30),
                _ => s.reserved[rng.below(2) as usize] = 1,
            }
            (
                "start: bad source, flags or reserved",
                raw(fd, ioc::START, ptr(&s)),
                if up { &[EINVAL] } else { &[ENOENT, EINVAL] },
            )
        }
        17 => {
            let r = fpga_p2p_release {
                handle: cap,
                slot: SLOTS + rng.below(u32::MAX as u64 - SLOTS as u64) as u32,
            };
            (
                "release: slot out of range",
                raw(fd, ioc::RELEASE, ptr(&r)),
                if up { &[ERANGE] } else { &[ENOENT] },
            )
        }
        18 => {
            let r = fpga_p2p_release {
                handle: cap,
                slot: rng.below(SLOTS as u64) as u32,
            };
            (
                "release: slot not owned",
                raw(fd, ioc::RELEASE, ptr(&r)),
                if up { &[EINVAL] } else { &[ENOENT] },
            )
        }
        19 => {
            let r = fpga_p2p_release {
                handle: unknown,
                slot: 0,
            };
            (
                "release: unknown handle",
                raw(fd, ioc::RELEASE, ptr(&r)),
                &[ENOENT],
            )
        }
        20 => {
            let Some(tx) = t.tx else {
                return Ok(None);
            };
            let mut x = fpga_p2p_tx {
                handle: tx,
                slot: 0,
                bytes: 64,
                target: FPGA_P2P_TX_DETECTIONS,
                ..Default::default()
            };
            let errs: &'static [Errno] = match rng.below(6) {
                0 => {
                    x.handle = cap;
                    &[EINVAL]
                }
                1 => {
                    x.bytes = 0;
                    &[EINVAL]
                }
                2 => {
                    x.bytes = SLOT as u32 + 1 + rng.below(1 << 20) as u32;
                    &[EINVAL]
                }
                3 => {
                    x.slot = 2 + rng.below(1000) as u32;
                    &[ERANGE]
                }
                4 => {
                    x.target = 3 + rng.below(1000) as u32;
                    &[EINVAL]
                }
                _ => {
                    x.reserved0 = 1;
                    &[EINVAL]
                }
            };
            (
                "tx_submit: bad arguments",
                raw(fd, ioc::TX_SUBMIT, ptr(&x)),
                errs,
            )
        }
        21 => {
            let mut w = fpga_p2p_wait {
                release_handle: cap,
                release_slot: FPGA_P2P_NO_SLOT,
                timeout_ms: 1,
                ..Default::default()
            };
            let errs: &'static [Errno] = match rng.below(3) {
                0 => {
                    w.reserved0 = 1 + rng.below(100) as u32;
                    &[EINVAL]
                }
                1 if up => {
                    w.release_slot = SLOTS + rng.below(1000) as u32;
                    &[ERANGE]
                }
                _ => {
                    w.release_handle = unknown;
                    w.release_slot = 0;
                    &[ENOENT]
                }
            };
            (
                "wait: bad release or reserved",
                raw(fd, ioc::WAIT, &mut w as *mut fpga_p2p_wait as u64),
                errs,
            )
        }
        22 => {
            let (nr, size) = *rng.pick(&[
                (0x00u32, 8u32),
                (0x01, 16),
                (0x03, 12),
                (0x05, 4),
                (0x08, 24),
                (0x06, 200),
                (0x02, 8),
                (0x07, 16),
            ]);
            let dir = 1 + rng.below(3) as u32;
            let mut buf = [0u64; 64];
            (
                "raw: wrong struct size",
                raw(fd, ioc(dir, nr, size), buf.as_mut_ptr() as u64),
                &[ENOTTY],
            )
        }
        23 => {
            let nr = 0x09 + rng.below(0xf6) as u32;
            let mut buf = [0u64; 64];
            (
                "raw: unknown command",
                raw(fd, ioc(3, nr, 64), buf.as_mut_ptr() as u64),
                &[ENOTTY],
            )
        }
        24 => {
            let mut buf = [0u64; 64];
            let mut magic = rng.below(256) as u32;
            if magic == FPGA_P2P_IOC_MAGIC as u32 {
                magic ^= 1;
            }
            let req = (3 << 30) | (64 << 16) | (magic << 8) | rng.below(16) as u32;
            (
                "raw: wrong magic",
                raw(fd, req, buf.as_mut_ptr() as u64),
                &[ENOTTY],
            )
        }
        25 => {
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
        26 => {
            let (req, size) = *rng.pick(&[
                (ioc::REGISTER, size_of::<fpga_p2p_ring>()),
                (ioc::START, size_of::<fpga_p2p_start>()),
                // WAIT reads only its 16-byte header (the event is output):
                // truncate that, or the header alone decides the answer.
                (ioc::WAIT, 16),
                (ioc::INFO, size_of::<fpga_p2p_info>()),
                (ioc::COUNTERS, size_of::<fpga_p2p_counters>()),
                (ioc::TX_SUBMIT, size_of::<fpga_p2p_tx>()),
                (ioc::RELEASE, size_of::<fpga_p2p_release>()),
            ]);
            let cut = 1 + rng.below(size as u64 - 1);
            (
                match req {
                    ioc::REGISTER => "raw: truncated register",
                    ioc::START => "raw: truncated start",
                    ioc::WAIT => "raw: truncated wait header",
                    ioc::INFO => "raw: truncated info",
                    ioc::COUNTERS => "raw: truncated counters",
                    ioc::TX_SUBMIT => "raw: truncated tx",
                    _ => "raw: truncated release",
                },
                raw(fd, req, t.edge - cut),
                &[EFAULT],
            )
        }
        27 => {
            let mut buf = [0u8; 64];
            let n = 1 + rng.below(size_of::<fpga_p2p_event>() as u64 - 1) as usize;
            // SAFETY: reads at most n <= 63 bytes into a live local buffer.
            let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), n) };
            (
                "read: shorter than an event",
                if r < 0 {
                    Err(Errno::last())
                } else {
                    Ok(r as i32)
                },
                &[EINVAL],
            )
        }
        28 => {
            // SAFETY: the kernel must reject the address; Rust owns nothing there.
            let r = unsafe { libc::read(fd, t.hole as *mut _, size_of::<fpga_p2p_event>()) };
            (
                "read: unmapped buffer",
                if r < 0 {
                    Err(Errno::last())
                } else {
                    Ok(r as i32)
                },
                &[EFAULT, EAGAIN],
            )
        }
        29 => {
            let Some(tx) = t.tx else {
                return Ok(None);
            };
            let s = fpga_p2p_start {
                handle: tx,
                source: FPGA_P2P_SRC_TEST_PATTERN,
                ..Default::default()
            };
            (
                "start: transmit ring",
                raw(fd, ioc::START, ptr(&s)),
                &[EINVAL],
            )
        }
        _ => {
            if !up {
                return Ok(None);
            }
            // A transmit-direction ring on the capture ring's memory.
            let mut r = good_ring(t.ring_addr);
            r.direction = FPGA_P2P_DIR_H2C;
            r.chunk_bytes = 0;
            (
                "register: memory of another ring",
                reg(fd, &mut r),
                &[EBUSY, EINVAL],
            )
        }
    };
    Ok(Some(c))
}

thread_local! {
    /// The last REGISTER argument, for the failure message.
    static LAST_RING: std::cell::Cell<fpga_p2p_ring> = std::cell::Cell::new(fpga_p2p_ring::default());
}

fn reg(fd: i32, r: &mut fpga_p2p_ring) -> Result<i32, Errno> {
    LAST_RING.with(|c| c.set(*r));
    raw(fd, ioc::REGISTER, r as *mut _ as u64)
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

/// `_IOC(dir, FPGA_P2P_IOC_MAGIC, nr, size)` with any (wrong) size.
fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | ((FPGA_P2P_IOC_MAGIC as u32) << 8) | nr
}

fn ptr<T>(v: &T) -> u64 {
    v as *const T as u64
}
