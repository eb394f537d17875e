//! The `fpga_p2p` kernel module as a frame source.
//!
//! [`Device`] is the checked layer: one method per ioctl, errors naming the
//! device and the operation. [`KmodSource`] is the safe source on top: it owns
//! the ring, registers it once, and waits with the combined release-and-wait
//! ioctl, so the steady-state loop (wait, process, release) costs exactly one
//! system call per frame: a released slot is handed back by the next wait.

use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;

use crate::error::{Error, Result};
use crate::ring::RingMemory;
use crate::source::{
    CaptureClock, ChunkEvent, Counters, Event, Frame, FrameMeta, FrameSource, SlotRelease,
    SourceMode, StartParams, TxTarget,
};
use crate::uapi::{self, *};

/// `/dev/fpga-p2p<index>`.
pub fn device_path(index: u32) -> PathBuf {
    PathBuf::from(format!("/dev/fpga-p2p{index}"))
}

/// What `poll()` says about the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PollState {
    /// Events can be read.
    pub readable: bool,
    /// EPOLLERR: ring revoked or engine fault.
    pub error: bool,
    /// EPOLLHUP: the device went away.
    pub hangup: bool,
}

/// An open `fpga_p2p` device node: the ioctls, checked.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
    name: Arc<str>,
}

impl AsFd for Device {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Device {
    /// Opens a device node (read-write, close-on-exec).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name: Arc<str> = Arc::from(path.display().to_string());
        let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            Error::InvalidArgument {
                what: "device path",
                reason: "contains a NUL byte".into(),
            }
        })?;
        // SAFETY: cpath is a valid NUL-terminated string; the result is checked.
        let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::from_errno(&name, "open", Errno::last()));
        }
        // SAFETY: fd was just returned by open() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd, name })
    }

    /// The node's path, for messages.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    fn err(&self, op: &'static str, e: Errno) -> Error {
        Error::from_errno(&self.name, op, e)
    }

    /// `FPGA_P2P_IOC_INFO`.
    pub fn info(&self) -> Result<fpga_p2p_info> {
        let mut info = fpga_p2p_info::default();
        // SAFETY: the kernel writes one fpga_p2p_info into a live local.
        unsafe { ioctl_info(self.fd.as_raw_fd(), &mut info) }.map_err(|e| match e {
            Errno::ENOTTY | Errno::EINVAL => Error::UapiMismatch {
                device: self.name.clone(),
                found: 0,
                expected: FPGA_P2P_UAPI_VERSION,
                event_bytes: 0,
                expected_event_bytes: size_of::<fpga_p2p_event>() as u32,
            },
            e => self.err("INFO", e),
        })?;
        Ok(info)
    }

    /// INFO, then checks that the module speaks this library's uapi.
    pub fn check_version(&self) -> Result<fpga_p2p_info> {
        let info = self.info()?;
        let ev = size_of::<fpga_p2p_event>() as u32;
        if info.uapi_version != FPGA_P2P_UAPI_VERSION || info.event_bytes != ev {
            return Err(Error::UapiMismatch {
                device: self.name.clone(),
                found: info.uapi_version,
                expected: FPGA_P2P_UAPI_VERSION,
                event_bytes: info.event_bytes,
                expected_event_bytes: ev,
            });
        }
        Ok(info)
    }

    /// `FPGA_P2P_IOC_REGISTER`: returns the ring's handle.
    ///
    /// # Safety
    /// From now until unregistered (or revoked), the engine may write (C2H) or
    /// read (H2C) `ring.addr .. + nr_slots * slot_bytes` at any time; the
    /// caller must keep that memory mapped and must not treat any of it as
    /// Rust-owned data except slots the ownership protocol gives it.
    pub unsafe fn register(&self, ring: &mut fpga_p2p_ring) -> Result<u32> {
        // SAFETY: ring is a live, initialised struct; memory contract above.
        unsafe { ioctl_register(self.fd.as_raw_fd(), ring) }
            .map_err(|e| self.err("REGISTER", e))?;
        Ok(ring.handle)
    }

    /// `FPGA_P2P_IOC_UNREGISTER`.
    pub fn unregister(&self, handle: u32) -> Result<()> {
        // SAFETY: pointer to a live local u32.
        unsafe { ioctl_unregister(self.fd.as_raw_fd(), &handle) }
            .map_err(|e| self.err("UNREGISTER", e))?;
        Ok(())
    }

    /// `FPGA_P2P_IOC_START`.
    pub fn start(&self, start: &fpga_p2p_start) -> Result<()> {
        // SAFETY: pointer to a live struct the kernel only reads.
        unsafe { ioctl_start(self.fd.as_raw_fd(), start) }.map_err(|e| self.err("START", e))?;
        Ok(())
    }

    /// `FPGA_P2P_IOC_STOP`.
    pub fn stop(&self, handle: u32) -> Result<()> {
        // SAFETY: pointer to a live local u32.
        unsafe { ioctl_stop(self.fd.as_raw_fd(), &handle) }.map_err(|e| self.err("STOP", e))?;
        Ok(())
    }

    /// `FPGA_P2P_IOC_RELEASE`.
    pub fn release(&self, handle: u32, slot: u32) -> Result<()> {
        let r = fpga_p2p_release { handle, slot };
        // SAFETY: pointer to a live local struct.
        unsafe { ioctl_release(self.fd.as_raw_fd(), &r) }.map_err(|e| self.err("RELEASE", e))?;
        Ok(())
    }

    /// `FPGA_P2P_IOC_COUNTERS`.
    pub fn counters(&self) -> Result<fpga_p2p_counters> {
        let mut c = fpga_p2p_counters::default();
        // SAFETY: the kernel writes one struct into a live local.
        unsafe { ioctl_counters(self.fd.as_raw_fd(), &mut c) }
            .map_err(|e| self.err("COUNTERS", e))?;
        Ok(c)
    }

    /// `FPGA_P2P_IOC_TX_SUBMIT`.
    pub fn tx_submit(&self, tx: &fpga_p2p_tx) -> Result<()> {
        // SAFETY: pointer to a live struct the kernel only reads.
        unsafe { ioctl_tx_submit(self.fd.as_raw_fd(), tx) }
            .map_err(|e| self.err("TX_SUBMIT", e))?;
        Ok(())
    }

    /// `FPGA_P2P_IOC_WAIT`: releases `w.release_slot` (unless NO_SLOT), then
    /// waits for the next event into `w.event`. A timeout is `Error::Timeout`.
    pub fn wait(&self, w: &mut fpga_p2p_wait) -> Result<()> {
        // SAFETY: pointer to a live struct the kernel reads and writes.
        match unsafe { ioctl_wait(self.fd.as_raw_fd(), w) } {
            Ok(_) => Ok(()),
            Err(Errno::ETIMEDOUT) => Err(Error::Timeout {
                device: self.name.clone(),
                timeout_ms: w.timeout_ms,
            }),
            // The module releases before it waits: the release is done.
            Err(Errno::EINTR) => Err(Error::Interrupted {
                device: self.name.clone(),
            }),
            Err(e) => Err(self.err("WAIT", e)),
        }
    }

    /// Plain `read()` of whole event records; returns how many were read.
    pub fn read_events(&self, buf: &mut [fpga_p2p_event]) -> Result<usize> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        // SAFETY: `bytes` is a live, writable buffer of `bytes.len()` bytes;
        // whatever the kernel writes there is a valid record (`Pod`).
        let n = unsafe { libc::read(self.fd.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len()) };
        if n < 0 {
            return Err(match Errno::last() {
                Errno::ETIMEDOUT => Error::Timeout {
                    device: self.name.clone(),
                    timeout_ms: 0,
                },
                e => self.err("read", e),
            });
        }
        Ok(n as usize / size_of::<fpga_p2p_event>())
    }

    /// `poll()` for input with a timeout in milliseconds (-1 = forever).
    pub fn poll(&self, timeout_ms: i32) -> Result<PollState> {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if n < 0 {
            return Err(self.err("poll", Errno::last()));
        }
        Ok(PollState {
            readable: p.revents & libc::POLLIN != 0,
            error: p.revents & libc::POLLERR != 0,
            hangup: p.revents & libc::POLLHUP != 0,
        })
    }
}

struct TxRing {
    ring: RingMemory,
    handle: u32,
    /// Bit s set: slot s is with the engine.
    busy: Cell<u64>,
}

/// The kernel module as a [`FrameSource`]: owns the ring, registered once.
pub struct KmodSource {
    // Field order matters: the device closes (and unregisters) before the
    // ring memory is freed.
    dev: Device,
    info: fpga_p2p_info,
    handle: u32,
    chunk_bytes: usize,
    /// The start's event timeout (a wait with timeout 0 waits this long).
    event_timeout_ms: Cell<u32>,
    streaming: Cell<bool>,
    /// A released slot the next wait hands back (NO_SLOT if none).
    pending: Cell<u32>,
    /// An error of a release on drop, reported by the next call.
    deferred: Cell<Option<Errno>>,
    tx: Option<TxRing>,
    /// The ring was registered with its status page: the card writes the
    /// slots' completion records.
    completion: bool,
    ring: RingMemory,
}

impl std::fmt::Debug for KmodSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmodSource")
            .field("dev", &self.dev.name)
            .field("handle", &self.handle)
            .field("ring", &self.ring)
            .finish()
    }
}

impl KmodSource {
    /// Opens `/dev/fpga-p2p<index>`, checks the uapi, registers `ring` for capture.
    pub fn open(index: u32, ring: RingMemory, chunk_bytes: usize) -> Result<Self> {
        Self::open_path(device_path(index), ring, chunk_bytes)
    }

    /// Same with an explicit device node.
    pub fn open_path(path: impl AsRef<Path>, ring: RingMemory, chunk_bytes: usize) -> Result<Self> {
        Self::open_inner(path.as_ref(), ring, chunk_bytes, false)
    }

    /// As [`KmodSource::open`], and the ring's status page registered with
    /// it when the card writes completion records
    /// (`FPGA_P2P_CAP_COMPLETION`): then [`FrameSource::completion`] gives
    /// them (GPU-triggered processing); on a card without them the ring is
    /// registered as by `open` and `completion()` is `None`.
    pub fn open_with_records(index: u32, ring: RingMemory, chunk_bytes: usize) -> Result<Self> {
        Self::open_inner(&device_path(index), ring, chunk_bytes, true)
    }

    /// [`KmodSource::open_with_records`] with an explicit device node.
    pub fn open_path_with_records(
        path: impl AsRef<Path>,
        ring: RingMemory,
        chunk_bytes: usize,
    ) -> Result<Self> {
        Self::open_inner(path.as_ref(), ring, chunk_bytes, true)
    }

    fn open_inner(
        path: &Path,
        ring: RingMemory,
        chunk_bytes: usize,
        records: bool,
    ) -> Result<Self> {
        let dev = Device::open(path)?;
        let info = dev.check_version()?;
        if info.caps & FPGA_P2P_CAP_CAPTURE == 0 {
            return Err(Error::Unsupported {
                device: dev.name.clone(),
                what: "capture",
            });
        }
        // The module would refuse these with EINVAL; say which limit instead.
        if ring.slot_bytes() as u64 > info.max_slot_bytes {
            return Err(Error::InvalidArgument {
                what: "ring slot_bytes",
                reason: format!(
                    "{} bytes is more than the {} a slot of {} may hold (a frame must fit one slot)",
                    ring.slot_bytes(),
                    info.max_slot_bytes,
                    dev.name
                ),
            });
        }
        if ring.nr_slots() > info.max_slots {
            return Err(Error::InvalidArgument {
                what: "ring nr_slots",
                reason: format!(
                    "{} slots is more than the {} a ring of {} may have",
                    ring.nr_slots(),
                    info.max_slots,
                    dev.name
                ),
            });
        }
        let chunk = u32::try_from(chunk_bytes).map_err(|_| Error::InvalidArgument {
            what: "chunk_bytes",
            reason: format!("{chunk_bytes} does not fit the uapi"),
        })?;
        let chunks = if chunk_bytes == 0 {
            1
        } else {
            ring.slot_bytes() / chunk_bytes
        };
        // The status page goes with the ring when asked for and the card
        // writes completion records (GPU-triggered processing).
        let completion = records
            && info.caps & FPGA_P2P_CAP_COMPLETION != 0
            && ring.completion_words(chunks as u32).is_some();
        let mut r = fpga_p2p_ring {
            addr: ring.base() as u64,
            slot_bytes: ring.slot_bytes() as u64,
            nr_slots: ring.nr_slots(),
            direction: FPGA_P2P_DIR_C2H,
            chunk_bytes: chunk,
            flags: if completion {
                FPGA_P2P_RING_COMPLETION
            } else {
                0
            },
            ..Default::default()
        };
        // SAFETY: the ring is owned by the returned source, which unregisters
        // (or closes the device) before the memory is freed, and reads a slot
        // only while the module has handed it over; the status page after
        // the slots (registered with the completion flag) is only touched
        // atomically (CompletionWords).
        let (handle, completion) = match unsafe { dev.register(&mut r) } {
            Ok(h) => (h, completion),
            // A DMA path that needs syncs (bounce buffering, caches the
            // card does not snoop): no records, the ring as without them.
            Err(e) if completion && e.errno() == Some(Errno::EOPNOTSUPP) => {
                r.flags = 0;
                // SAFETY: as above.
                (unsafe { dev.register(&mut r) }?, false)
            }
            Err(e) => return Err(e),
        };
        Ok(Self {
            dev,
            info,
            handle,
            // 0 asks the module for one chunk per slot.
            chunk_bytes: if chunk_bytes == 0 {
                ring.slot_bytes()
            } else {
                chunk_bytes
            },
            event_timeout_ms: Cell::new(1000),
            streaming: Cell::new(false),
            pending: Cell::new(FPGA_P2P_NO_SLOT),
            deferred: Cell::new(None),
            tx: None,
            completion,
            ring,
        })
    }

    /// Whether a transmit ring is attached.
    pub fn has_tx(&self) -> bool {
        self.tx.is_some()
    }

    /// Registers a transmit ring (host to card). At most 64 slots.
    pub fn attach_tx(&mut self, ring: RingMemory) -> Result<()> {
        if self.info.caps & FPGA_P2P_CAP_TRANSMIT == 0 {
            return Err(Error::Unsupported {
                device: self.dev.name.clone(),
                what: "transmit",
            });
        }
        if ring.nr_slots() > 64 {
            return Err(Error::InvalidArgument {
                what: "transmit ring",
                reason: "at most 64 slots".into(),
            });
        }
        if let Some(old) = self.tx.take() {
            self.dev.unregister(old.handle)?;
        }
        let mut r = fpga_p2p_ring {
            addr: ring.base() as u64,
            slot_bytes: ring.slot_bytes() as u64,
            nr_slots: ring.nr_slots(),
            direction: FPGA_P2P_DIR_H2C,
            ..Default::default()
        };
        // SAFETY: as for the capture ring; the CPU writes a transmit slot only
        // while it is not with the engine (busy bit clear).
        let handle = unsafe { self.dev.register(&mut r) }?;
        self.tx = Some(TxRing {
            ring,
            handle,
            busy: Cell::new(0),
        });
        Ok(())
    }

    /// The device (for counters, poll, and the checked ioctls).
    pub fn device(&self) -> &Device {
        &self.dev
    }
    /// What INFO said.
    pub fn info(&self) -> &fpga_p2p_info {
        &self.info
    }
    /// The capture ring's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Hands a released slot back now instead of with the next wait.
    pub fn flush_release(&self) -> Result<()> {
        self.take_deferred()?;
        let s = self.pending.replace(FPGA_P2P_NO_SLOT);
        if s != FPGA_P2P_NO_SLOT {
            self.dev.release(self.handle, s)?;
        }
        Ok(())
    }

    /// Reads one event with plain `read()` (instead of the WAIT ioctl).
    pub fn read_event(&self) -> Result<Event<'_>> {
        self.flush_release()?;
        let mut ev = [fpga_p2p_event::default()];
        let n = self.dev.read_events(&mut ev)?;
        if n != 1 {
            return Err(self.dev.err("read", Errno::EIO));
        }
        self.decode(&ev[0])
    }

    /// `poll()` on the device.
    pub fn poll(&self, timeout_ms: i32) -> Result<PollState> {
        self.dev.poll(timeout_ms)
    }

    fn take_deferred(&self) -> Result<()> {
        match self.deferred.take() {
            Some(e) => Err(self.dev.err("RELEASE (on drop)", e)),
            None => Ok(()),
        }
    }

    fn decode(&self, ev: &fpga_p2p_event) -> Result<Event<'_>> {
        let name = &self.dev.name;
        match ev.type_ {
            FPGA_P2P_EV_FRAME => {
                if ev.handle != self.handle || ev.slot >= self.ring.nr_slots() {
                    return Err(self
                        .dev
                        .err("WAIT (frame event for a foreign slot)", Errno::EPROTO));
                }
                // SAFETY: the module delivered this slot: it is READY and the
                // engine does not write it until the application releases it.
                Ok(Event::Frame(unsafe {
                    Frame::new(self, &self.ring, FrameMeta::from_event(ev))
                }))
            }
            FPGA_P2P_EV_CHUNK => {
                let chunks = self.ring.slot_bytes() / self.chunk_bytes.max(1);
                if ev.handle != self.handle
                    || ev.slot >= self.ring.nr_slots()
                    || ev.chunk as usize >= chunks
                {
                    return Err(self.dev.err(
                        "WAIT (chunk event for a foreign slot or chunk)",
                        Errno::EPROTO,
                    ));
                }
                // SAFETY: slot and chunk were checked above; the module
                // reports a chunk once the card's DMA wrote it, the card
                // writes a slot's chunks in order, and the slot is the
                // engine's until its frame is delivered and released.
                unsafe { ChunkEvent::new(&self.ring, ev.slot, ev.chunk, self.chunk_bytes) }
                    .map(Event::Chunk)
                    .ok_or_else(|| {
                        self.dev
                            .err("WAIT (chunk event outside the ring)", Errno::EPROTO)
                    })
            }
            FPGA_P2P_EV_TX_DONE => {
                if let Some(tx) = self.tx.as_ref().filter(|_| ev.slot < 64) {
                    tx.busy.set(tx.busy.get() & !(1u64 << ev.slot));
                }
                Ok(Event::TxDone {
                    slot: ev.slot,
                    cookie: ev.cookie,
                    failed: ev.flags & FPGA_P2P_EVF_TX_ERROR != 0,
                })
            }
            FPGA_P2P_EV_REVOKED => {
                self.streaming.set(false);
                Err(Error::Revoked {
                    device: name.clone(),
                })
            }
            FPGA_P2P_EV_OVERFLOW => Err(Error::Overflow {
                device: name.clone(),
            }),
            FPGA_P2P_EV_FAULT => {
                self.streaming.set(false);
                Err(Error::Fault {
                    device: name.clone(),
                    code: ev.chunk,
                })
            }
            _ => Err(self.dev.err("WAIT (unknown event type)", Errno::EPROTO)),
        }
    }
}

impl SlotRelease for KmodSource {
    fn release_slot(&self, slot: u32) -> Result<()> {
        // The common case defers to the next wait (one syscall per frame).
        if self.pending.get() == FPGA_P2P_NO_SLOT {
            self.pending.set(slot);
            return Ok(());
        }
        self.dev.release(self.handle, slot).inspect_err(|e| {
            if let Some(errno) = e.errno() {
                self.deferred.set(Some(errno));
            }
        })
    }
}

impl FrameSource for KmodSource {
    fn name(&self) -> &str {
        &self.dev.name
    }

    fn ring(&self) -> &RingMemory {
        &self.ring
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn completion(&self) -> Option<crate::ring::CompletionWords<'_>> {
        if !self.completion {
            return None;
        }
        self.ring
            .completion_words((self.ring.slot_bytes() / self.chunk_bytes.max(1)) as u32)
    }

    fn start(&mut self, params: &StartParams) -> Result<()> {
        let (source, frames) = match params.mode {
            SourceMode::Adc => (FPGA_P2P_SRC_ADC, 0),
            SourceMode::TestPattern => (FPGA_P2P_SRC_TEST_PATTERN, 0),
            SourceMode::Playback { frames } => (FPGA_P2P_SRC_PLAYBACK, frames),
        };
        let period_ns = match params.chunk_period {
            None => 0,
            Some(d) => d.as_nanos().clamp(1, u32::MAX as u128) as u32,
        };
        let s = fpga_p2p_start {
            handle: self.handle,
            source,
            chunk_period_ns: period_ns,
            flags: if params.chunk_events {
                FPGA_P2P_START_CHUNK_EVENTS
            } else {
                0
            },
            playback_frames: frames,
            event_timeout_ms: params.event_timeout.as_millis().clamp(1, u32::MAX as u128) as u32,
            reserved: [0; 2],
        };
        self.pending.set(FPGA_P2P_NO_SLOT);
        self.deferred.set(None);
        self.dev.start(&s)?;
        self.event_timeout_ms.set(s.event_timeout_ms);
        self.streaming.set(true);
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        self.pending.set(FPGA_P2P_NO_SLOT);
        self.streaming.set(false);
        self.dev.stop(self.handle)
    }

    fn next_event(&self, timeout: Option<Duration>) -> Result<Event<'_>> {
        self.take_deferred()?;
        let release_slot = self.pending.replace(FPGA_P2P_NO_SLOT);
        let mut w = fpga_p2p_wait {
            release_handle: self.handle,
            release_slot,
            timeout_ms: timeout.map_or(0, |t| t.as_millis().clamp(1, u32::MAX as u128) as u32),
            ..Default::default()
        };
        match self.dev.wait(&mut w) {
            Ok(()) => {}
            Err(Error::Timeout {
                device,
                timeout_ms: 0,
            }) => {
                return Err(Error::Timeout {
                    device,
                    timeout_ms: self.event_timeout_ms.get(),
                });
            }
            Err(e @ Error::Device { .. }) if e.errno() == Some(Errno::EIO) => {
                // EIO: the ring was revoked or faulted. The module marks the
                // ring at once but queues the event that says which only
                // after tearing it down, and a release folded into the WAIT
                // fails the same way; wait a little for that event (events
                // queued before it are stale now) so the error says what
                // happened rather than "EIO".
                let give_up = std::time::Instant::now() + Duration::from_secs(3);
                while std::time::Instant::now() < give_up {
                    let mut again = fpga_p2p_wait {
                        release_handle: self.handle,
                        release_slot: FPGA_P2P_NO_SLOT,
                        timeout_ms: 1,
                        ..Default::default()
                    };
                    match self.dev.wait(&mut again) {
                        Ok(())
                            if again.event.type_ == FPGA_P2P_EV_REVOKED
                                || again.event.type_ == FPGA_P2P_EV_FAULT =>
                        {
                            return self.decode(&again.event);
                        }
                        Ok(()) => {}
                        Err(Error::Device {
                            errno: Errno::EIO, ..
                        }) => std::thread::sleep(Duration::from_millis(10)),
                        Err(_) => break,
                    }
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        self.decode(&w.event)
    }

    fn counters(&self) -> Result<Counters> {
        self.dev.counters()
    }

    fn transmit(&self, target: TxTarget, data: &[u8], cookie: u64) -> Result<()> {
        let Some(tx) = &self.tx else {
            return Err(Error::Unsupported {
                device: self.dev.name.clone(),
                what: "transmit without a transmit ring (attach_tx first)",
            });
        };
        if data.is_empty() || data.len() > tx.ring.slot_bytes() {
            return Err(Error::InvalidArgument {
                what: "transmit",
                reason: format!("{} bytes not in 1..={}", data.len(), tx.ring.slot_bytes()),
            });
        }
        let busy = tx.busy.get();
        let Some(slot) = (0..tx.ring.nr_slots()).find(|s| busy & (1u64 << s) == 0) else {
            return Err(self
                .dev
                .err("transmit (every transmit slot in flight)", Errno::EAGAIN));
        };
        // SAFETY: the slot's busy bit is clear, so the engine does not read it.
        unsafe { tx.ring.slot_mut(slot, 0, data.len()) }.copy_from_slice(data);
        let (target, index) = target.raw();
        self.dev.tx_submit(&fpga_p2p_tx {
            handle: tx.handle,
            slot,
            bytes: data.len() as u32,
            target,
            index,
            reserved0: 0,
            cookie,
        })?;
        tx.busy.set(busy | (1u64 << slot));
        Ok(())
    }

    /// The card's PTP hardware clock, found from the device's sysfs node;
    /// a card without one stamps frames with its own counter.
    fn capture_clock(&self) -> CaptureClock {
        match crate::phc::of_card(&*self.dev.name) {
            Some(p) => CaptureClock::Phc(p),
            None => CaptureClock::CardCounter,
        }
    }
}

impl Drop for KmodSource {
    fn drop(&mut self) {
        // Best effort: closing the device does the same in the module.
        if self.streaming.get() {
            let _ = self.dev.stop(self.handle);
        }
        let _ = self.dev.unregister(self.handle);
        if let Some(tx) = &self.tx {
            let _ = self.dev.unregister(tx.handle);
        }
    }
}

/// Re-exported for the hostile-input suite: raw ioctl numbers.
pub use uapi::ioc;
