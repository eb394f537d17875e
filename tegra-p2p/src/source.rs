//! The frame-source abstraction shared by the kernel module and the simulator:
//! the same events, the same slot ownership, the same errors.

use std::path::PathBuf;
use std::ptr::NonNull;
use std::time::Duration;

use crate::error::Result;
use crate::ring::{CompletionWords, RingMemory};
use crate::uapi;

/// Counters of a source (the kernel module's `struct fpga_p2p_counters`).
pub type Counters = uapi::fpga_p2p_counters;

/// What the FPGA streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceMode {
    /// The radar front end (the simulator has none and refuses it).
    Adc,
    /// The checkable test pattern of `board/fpga/test-pattern.md`.
    TestPattern,
    /// Frames uploaded beforehand, cycled: frame `seq` plays `seq % frames`.
    Playback { frames: u32 },
}

/// Parameters of `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartParams {
    pub mode: SourceMode,
    /// Time per chunk; None = the device default (2 kHz). `Some(ZERO)` on the
    /// simulator means "as fast as the CPU goes".
    pub chunk_period: Option<Duration>,
    /// Also deliver an event per completed chunk.
    pub chunk_events: bool,
    /// A wait without a timeout of its own gives up after this.
    pub event_timeout: Duration,
}

impl StartParams {
    /// Test pattern at the default cadence, frame events only, 1 s timeout.
    pub fn test_pattern() -> Self {
        Self {
            mode: SourceMode::TestPattern,
            chunk_period: None,
            chunk_events: false,
            event_timeout: Duration::from_secs(1),
        }
    }
    /// The card's ADC stream (the radar front end) at the default cadence.
    pub fn adc() -> Self {
        Self {
            mode: SourceMode::Adc,
            ..Self::test_pattern()
        }
    }
    /// Playback of `frames` uploaded frames at the default cadence.
    pub fn playback(frames: u32) -> Self {
        Self {
            mode: SourceMode::Playback { frames },
            ..Self::test_pattern()
        }
    }
    /// Same, with `period` per chunk.
    pub fn with_chunk_period(mut self, period: Duration) -> Self {
        self.chunk_period = Some(period);
        self
    }
    /// Same, with chunk events on.
    pub fn with_chunk_events(mut self) -> Self {
        self.chunk_events = true;
        self
    }
    /// Same, with another event timeout.
    pub fn with_event_timeout(mut self, t: Duration) -> Self {
        self.event_timeout = t;
        self
    }
}

/// Where a transmit buffer goes inside the FPGA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxTarget {
    /// The detection list for the host link.
    Detections,
    /// The chirp waveform table.
    Waveform,
    /// Playback memory, frame `index`.
    Playback { index: u32 },
}

impl TxTarget {
    pub(crate) fn raw(self) -> (u32, u32) {
        match self {
            TxTarget::Detections => (uapi::FPGA_P2P_TX_DETECTIONS, 0),
            TxTarget::Waveform => (uapi::FPGA_P2P_TX_WAVEFORM, 0),
            TxTarget::Playback { index } => (uapi::FPGA_P2P_TX_PLAYBACK, index),
        }
    }
}

/// Metadata of a delivered frame (travels beside the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameMeta {
    pub slot: u32,
    /// Counts every frame the source started since start, delivered or dropped.
    pub sequence: u64,
    /// Capture time of the frame's first sample, on the source's clock
    /// ([`FrameSource::capture_clock`]), ns.
    pub timestamp_ns: u64,
    /// The same instant on this host's CLOCK_MONOTONIC, ns; 0 when the
    /// source cannot say (a card without a clock).
    pub host_ns: u64,
    /// `uapi::FPGA_P2P_EVF_*`.
    pub flags: u32,
    /// Frames dropped at the source since the previous delivered frame.
    pub dropped: u32,
    /// Payload bytes delivered (a whole slot unless SHORT).
    pub bytes: u32,
    /// CRC-32/IEEE of the payload as the FPGA computed it.
    pub crc32: u32,
}

impl FrameMeta {
    pub(crate) fn from_event(ev: &uapi::fpga_p2p_event) -> Self {
        Self {
            slot: ev.slot,
            sequence: ev.sequence,
            timestamp_ns: ev.timestamp_ns,
            host_ns: ev.host_ns,
            flags: ev.flags,
            dropped: ev.dropped,
            bytes: ev.bytes,
            crc32: ev.crc32,
        }
    }
    /// The frame ended early.
    pub fn is_short(&self) -> bool {
        self.flags & uapi::FPGA_P2P_EVF_SHORT != 0
    }
}

/// A chunk of the frame being captured landed (chunk-streamed mode). The
/// chunk's bytes, and those of the chunks before it in the slot, stay
/// unwritten until that frame's slot is released: chunks land in order, and
/// the engine writes a slot once per capture.
///
/// The chunk belongs to the next [`Event::Frame`] of its slot: events come
/// in order, and a frame's chunk events come after the previous frame's
/// event. There is no sequence number: the card reports a frame's sequence
/// (with its CRC and drop count) only when the frame completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkEvent<'a> {
    pub slot: u32,
    pub chunk: u32,
    /// Byte offset of the chunk in the slot.
    pub offset: usize,
    /// Device address of the chunk (CUDA memory only).
    pub device_ptr: Option<u64>,
    /// The slot's bytes from its start through the end of the chunk.
    landed: &'a [u8],
}

impl<'a> ChunkEvent<'a> {
    /// Chunk `chunk` (of `chunk_bytes`) of `slot` of `ring`; None when the
    /// slot or the chunk is outside the ring.
    ///
    /// # Safety
    /// Chunks `0..=chunk` of `slot` must have landed, and stay unwritten
    /// while the event (and the slices it hands out) is used: until the
    /// frame they belong to is released, or the stream stops.
    pub unsafe fn new(
        ring: &'a RingMemory,
        slot: u32,
        chunk: u32,
        chunk_bytes: usize,
    ) -> Option<Self> {
        let offset = (chunk as usize).checked_mul(chunk_bytes)?;
        let end = offset.checked_add(chunk_bytes)?;
        if chunk_bytes == 0 || end > ring.slot_bytes() {
            return None;
        }
        let base = ring.slot_ptr(slot)?;
        // SAFETY: the range lies inside the slot (checked above), and the
        // caller guarantees it is written and stays unwritten meanwhile.
        let landed = unsafe { std::slice::from_raw_parts(base.cast_const(), end) };
        Some(Self {
            slot,
            chunk,
            offset,
            device_ptr: ring.slot_device_ptr(slot).map(|d| d + offset as u64),
            landed,
        })
    }

    /// The chunk's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        &self.landed[self.offset..]
    }

    /// The slot's bytes from its start through the end of the chunk: every
    /// chunk of the frame landed so far.
    pub fn landed(&self) -> &'a [u8] {
        self.landed
    }

    /// Host address of the chunk.
    pub fn host_ptr(&self) -> *const u8 {
        self.bytes().as_ptr()
    }
}

/// One event of a source.
#[derive(Debug)]
pub enum Event<'a> {
    /// A frame is complete; its slot is the application's until released.
    Frame(Frame<'a>),
    /// A chunk landed.
    Chunk(ChunkEvent<'a>),
    /// A transmit buffer was consumed; its slot is free again. `failed`: the
    /// FPGA did not take it (`FPGA_P2P_EVF_TX_ERROR`).
    TxDone {
        slot: u32,
        cookie: u64,
        failed: bool,
    },
}

/// Implemented by sources: hands a slot back to the engine.
pub trait SlotRelease {
    /// Returns `slot` to the engine. Called once per delivered frame.
    fn release_slot(&self, slot: u32) -> Result<()>;
}

/// A delivered frame. The slot belongs to the application until the handle
/// is released (explicitly with [`Frame::release`] or by dropping it); after
/// that the handle is gone, so its bytes cannot be read any more.
pub struct Frame<'a> {
    owner: &'a dyn SlotRelease,
    meta: FrameMeta,
    host: NonNull<u8>,
    device: Option<u64>,
    slot_bytes: usize,
    released: bool,
}

impl std::fmt::Debug for Frame<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("meta", &self.meta)
            .field("host", &self.host)
            .field("device", &self.device)
            .finish()
    }
}

impl<'a> Frame<'a> {
    /// Public so that sources outside this crate (radard's replay of a
    /// recorded file) hand out frames with the same ownership rules.
    ///
    /// # Safety
    /// `slot` of `ring` must be owned by the application (READY) and stay
    /// unwritten until `owner.release_slot(slot)` is called.
    pub unsafe fn new(owner: &'a dyn SlotRelease, ring: &RingMemory, meta: FrameMeta) -> Self {
        let host = ring
            .slot_ptr(meta.slot)
            .and_then(NonNull::new)
            .unwrap_or(NonNull::dangling());
        Self {
            owner,
            meta,
            host,
            device: ring.slot_device_ptr(meta.slot),
            slot_bytes: ring.slot_bytes(),
            released: false,
        }
    }

    /// All metadata.
    pub fn meta(&self) -> &FrameMeta {
        &self.meta
    }
    pub fn slot(&self) -> u32 {
        self.meta.slot
    }
    pub fn sequence(&self) -> u64 {
        self.meta.sequence
    }
    pub fn timestamp_ns(&self) -> u64 {
        self.meta.timestamp_ns
    }
    pub fn flags(&self) -> u32 {
        self.meta.flags
    }
    pub fn dropped_before(&self) -> u32 {
        self.meta.dropped
    }
    pub fn crc32(&self) -> u32 {
        self.meta.crc32
    }
    /// Payload bytes delivered.
    pub fn len(&self) -> usize {
        (self.meta.bytes as usize).min(self.slot_bytes)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The delivered payload.
    pub fn data(&self) -> &[u8] {
        // SAFETY: the slot is owned by the application while this handle
        // lives (constructor contract), and len() <= slot_bytes.
        unsafe { std::slice::from_raw_parts(self.host.as_ptr(), self.len()) }
    }
    /// Host address of the slot (for FFI; valid while the handle lives).
    pub fn host_ptr(&self) -> *const u8 {
        self.host.as_ptr()
    }
    /// CUDA device address of the slot (CUDA ring memory only).
    pub fn device_ptr(&self) -> Option<u64> {
        self.device
    }
    /// Checks the payload against the metadata's CRC.
    pub fn check_crc(&self) -> Result<(), crate::pattern::CrcMismatch> {
        crate::pattern::check_crc(self.data(), self.meta.crc32)
    }
    /// Hands the slot back to the engine.
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.owner.release_slot(self.meta.slot)
    }
}

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        if !self.released {
            // Errors of a release on drop are kept by the source and reported
            // by its next call.
            let _ = self.owner.release_slot(self.meta.slot);
        }
    }
}

/// The clock a source stamps frames with ([`FrameMeta::timestamp_ns`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureClock {
    /// The card's clock, a PTP hardware clock: its device node. linuxptp
    /// keeps it on TAI.
    Phc(PathBuf),
    /// This host's CLOCK_TAI (the simulator, standing in for a card whose
    /// clock is locked to the system clock).
    HostTai,
    /// CLOCK_MONOTONIC: no time of day (a replay).
    Monotonic,
    /// A card without a clock: its own counter, no time of day.
    CardCounter,
}

/// A source of frames: the kernel module ([`crate::KmodSource`]) or the
/// simulator ([`crate::SimSource`]).
pub trait FrameSource: SlotRelease {
    /// Name for messages (device node or "sim").
    fn name(&self) -> &str;
    /// The ring frames land in.
    fn ring(&self) -> &RingMemory;
    /// DMA chunk size.
    fn chunk_bytes(&self) -> usize;
    /// The slots' completion records, when the source writes them (the
    /// simulator always; the kernel module when the card writes them and
    /// the ring was registered with its status page): what GPU-triggered
    /// processing waits on (docs/capture-path.md).
    fn completion(&self) -> Option<CompletionWords<'_>> {
        None
    }
    /// Starts streaming.
    fn start(&mut self, params: &StartParams) -> Result<()>;
    /// Stops streaming; undelivered frames are discarded and their slots freed.
    fn stop(&mut self) -> Result<()>;
    /// Waits for the next event; `timeout` None = the start's event timeout.
    /// Revocation and engine faults are errors ([`crate::Error::Revoked`],
    /// [`crate::Error::Fault`]); so is a timeout, and a wait a signal
    /// interrupted ([`crate::Error::Interrupted`]: wait again).
    fn next_event(&self, timeout: Option<Duration>) -> Result<Event<'_>>;
    /// Waits for the next frame, passing over chunk and transmit events.
    fn next_frame(&self, timeout: Option<Duration>) -> Result<Frame<'_>> {
        loop {
            if let Event::Frame(f) = self.next_event(timeout)? {
                return Ok(f);
            }
        }
    }
    /// Counters since load (kernel module) or creation (simulator).
    fn counters(&self) -> Result<Counters>;
    /// Copies `data` into a free transmit slot and hands it to the FPGA;
    /// completion arrives as [`Event::TxDone`] with `cookie`.
    fn transmit(&self, target: TxTarget, data: &[u8], cookie: u64) -> Result<()>;
    /// The clock of the frames' `timestamp_ns`.
    fn capture_clock(&self) -> CaptureClock {
        CaptureClock::Monotonic
    }
}
