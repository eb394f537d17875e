//! `SimSource`: a userspace model of the FPGA capture path, for machines
//! without the card or the kernel module.
//!
//! A producer thread plays the FPGA: at chunk cadence it writes frames into
//! the same ring memory the real DMA would, decides at each frame start
//! whether a FREE slot is there (slots go back to the engine in the order
//! the application released them, as the module hands them over; without
//! one the frame is dropped at the source, counted, and reported with the
//! next delivered frame), computes the CRC as the FPGA does, and
//! publishes one event per frame (and per chunk, if asked) through a lock-free
//! SPSC queue. The consumer side (`next_event`, `release`) allocates nothing,
//! takes no lock, and blocks only in a futex wait when no event is queued.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::{monotonic_ns, sleep_until_ns, tai_of_monotonic};
use crate::dma_copy;
use crate::error::{Error, Result};
use crate::pattern;
use crate::queue::{EventQueue, SlotFifo};
use crate::ring::{CompletionWords, RingMemory};
use crate::source::{
    CaptureClock, ChunkEvent, Counters, Event, Frame, FrameMeta, FrameSource, SlotRelease,
    SourceMode, StartParams, TxTarget,
};
use crate::uapi::{self, fpga_p2p_event};

/// Default frame: 4 MiB (spec preset `orin-4t4r`).
pub const DEFAULT_SLOT_BYTES: usize = 4 << 20;
/// Default DMA chunk: 256 KiB (16 per frame).
pub const DEFAULT_CHUNK_BYTES: usize = 256 << 10;
/// Default slots per ring.
pub const DEFAULT_NR_SLOTS: u32 = 4;
/// Default chunk period: 2 kHz, so a 16-chunk frame every 8 ms.
pub const DEFAULT_CHUNK_PERIOD: Duration = Duration::from_micros(500);

const FREE: u32 = 0;
const FILLING: u32 = 1;
const READY: u32 = 2;

/// Faults the simulated FPGA injects (all off by default). Frame numbers are
/// sequence numbers; "every N" means sequences N-1, 2N-1, ...
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimFaults {
    /// Drop every Nth frame at the source (counted as `drops_fault`).
    pub drop_every: u64,
    /// Drop each frame with this probability (seeded, deterministic).
    pub drop_probability: f64,
    /// Deliver every Nth frame short (flag SHORT, CRC over what was delivered).
    pub short_every: u64,
    /// Corrupt one bit of every Nth frame after the CRC was computed.
    pub corrupt_every: u64,
    /// Flag every Nth frame `FPGA_P2P_EVF_CRC_MISMATCH` (the card's link
    /// CRC check failed on it), counted as `crc_errors`.
    pub crc_error_every: u64,
    /// Before frame `.0` starts, produce nothing for `.1`.
    pub stall: Option<(u64, Duration)>,
    /// Before frame N starts, revoke the ring (as if its memory went away).
    pub revoke_at: Option<u64>,
    /// Before frame `.0` starts, stop with an engine fault of code `.1`.
    pub fault_at: Option<(u64, u32)>,
    /// Seed of the random decisions.
    pub seed: u64,
}

/// Simulator configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// DMA chunk; divides the slot size, multiple of 4096 (as the module requires).
    pub chunk_bytes: usize,
    pub faults: SimFaults,
    /// Frames the playback memory holds.
    pub max_playback_frames: u32,
    /// Largest transmit buffer.
    pub max_tx_bytes: usize,
    /// How long before each chunk is due the producer stops sleeping and
    /// spins (zero: it sleeps to the due time). A wake-up from a sleep can
    /// come late on a loaded or virtual machine; spinning the last stretch
    /// keeps the chunk cadence as exact as the FPGA's, at the cost of a CPU.
    pub spin_before: Duration,
    /// SCHED_FIFO priority for the producer thread; None: it keeps what it
    /// inherits from the thread that starts the stream. The FPGA it stands
    /// for needs no CPU, so an application whose own threads are real-time
    /// puts the producer above them: otherwise, on a machine with fewer
    /// cores than busy real-time threads, chunks wait for a CPU and every
    /// frame arrives late through no fault of the application's.
    pub producer_priority: Option<i32>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            faults: SimFaults::default(),
            max_playback_frames: 64,
            max_tx_bytes: DEFAULT_SLOT_BYTES,
            spin_before: Duration::ZERO,
            producer_priority: None,
        }
    }
}

impl SimConfig {
    /// Default configuration with `chunk_bytes` chunks.
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Self {
        Self {
            chunk_bytes,
            ..Self::default()
        }
    }
}

#[derive(Default)]
struct AtomicCounters {
    frames: AtomicU64,
    chunks: AtomicU64,
    drops_no_slot: AtomicU64,
    drops_fault: AtomicU64,
    short_frames: AtomicU64,
    crc_errors: AtomicU64,
    desc_errors: AtomicU64,
    irqs: AtomicU64,
    revocations: AtomicU64,
    tx_submitted: AtomicU64,
    tx_completed: AtomicU64,
    event_overflows: AtomicU64,
    dma_timeouts: AtomicU64,
    /// The simulator's own pacing (no card counts these): chunks written
    /// more than one chunk period after they were due, and the most late.
    chunks_late: AtomicU64,
    max_lateness_ns: AtomicU64,
}

/// How well the simulator kept its chunk cadence (it writes each chunk in
/// software, and a busy or virtual machine can hold it up): frames it
/// delivers late reach the application late through no fault of the
/// application's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimPacing {
    /// Chunks written more than one chunk period after they were due.
    pub chunks_late: u64,
    /// The latest any chunk was written after it was due (ns).
    pub max_lateness_ns: u64,
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

struct Shared {
    ring: RingMemory,
    states: Box<[AtomicU32]>,
    /// FREE slots in the order they were freed: the engine takes them in
    /// this order (as the module hands released slots over).
    free: SlotFifo,
    events: EventQueue,
    stop: AtomicBool,
    overflow: AtomicBool,
    counters: AtomicCounters,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunState {
    Idle,
    Streaming,
    Revoked,
    Fault(u32),
}

/// The producer thread's scheduling at the last start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerScheduling {
    /// Not started yet, or no priority asked for: it runs as its starter did.
    Inherited,
    /// SCHED_FIFO at this priority.
    Fifo(i32),
    /// The priority asked for was refused (errno); it runs as its starter did.
    Refused { priority: i32, errno: i32 },
}

impl std::fmt::Display for ProducerScheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inherited => write!(f, "the starting thread's scheduling"),
            Self::Fifo(p) => write!(f, "SCHED_FIFO priority {p}"),
            Self::Refused { priority, errno } => write!(
                f,
                "SCHED_FIFO priority {priority} refused ({}); the starting thread's scheduling",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

/// What the simulated FPGA received on its transmit channel, per target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxRecord {
    /// Buffers received.
    pub count: u64,
    /// Bytes of the last buffer.
    pub last_bytes: u32,
    /// CRC-32/IEEE of the last buffer.
    pub last_crc32: u32,
}

/// The userspace FPGA simulator. See the module documentation.
pub struct SimSource {
    shared: Arc<Shared>,
    cfg: SimConfig,
    name: Arc<str>,
    producer: Option<JoinHandle<()>>,
    scheduling: Cell<ProducerScheduling>,
    state: Cell<RunState>,
    timeout: Cell<Duration>,
    playback: RefCell<Vec<Option<Arc<[u8]>>>>,
    tx_done: RefCell<VecDeque<u64>>,
    tx_log: RefCell<[TxRecord; 3]>,
}

impl std::fmt::Debug for SimSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimSource")
            .field("ring", &self.shared.ring)
            .field("cfg", &self.cfg)
            .field("state", &self.state.get())
            .finish()
    }
}

impl SimSource {
    /// A simulator streaming into `ring` (which it owns from now on).
    pub fn new(ring: RingMemory, cfg: SimConfig) -> Result<Self> {
        let slot = ring.slot_bytes();
        let align = uapi::FPGA_P2P_SLOT_ALIGN as usize;
        if cfg.chunk_bytes == 0
            || !cfg.chunk_bytes.is_multiple_of(align)
            || !slot.is_multiple_of(cfg.chunk_bytes)
        {
            return Err(Error::InvalidArgument {
                what: "sim chunk_bytes",
                reason: format!(
                    "{} must be a multiple of {align} that divides the slot size {slot}",
                    cfg.chunk_bytes
                ),
            });
        }
        if ring.nr_slots() < 2 {
            return Err(Error::InvalidArgument {
                what: "sim ring",
                reason: "a capture ring needs at least 2 slots".into(),
            });
        }
        let nchunks = slot / cfg.chunk_bytes;
        let states = (0..ring.nr_slots()).map(|_| AtomicU32::new(FREE)).collect();
        let events = EventQueue::new(ring.nr_slots() as usize * (nchunks + 1) + 8);
        let playback = vec![None; cfg.max_playback_frames as usize];
        Ok(Self {
            shared: Arc::new(Shared {
                free: SlotFifo::new(ring.nr_slots() as usize),
                ring,
                states,
                events,
                stop: AtomicBool::new(false),
                overflow: AtomicBool::new(false),
                counters: AtomicCounters::default(),
            }),
            cfg,
            name: Arc::from("sim"),
            producer: None,
            scheduling: Cell::new(ProducerScheduling::Inherited),
            state: Cell::new(RunState::Idle),
            timeout: Cell::new(Duration::from_secs(1)),
            playback: RefCell::new(playback),
            tx_done: RefCell::new(VecDeque::with_capacity(64)),
            tx_log: RefCell::new([TxRecord::default(); 3]),
        })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Sets the producer thread's SCHED_FIFO priority for the next start
    /// (see [`SimConfig::producer_priority`]).
    pub fn set_producer_priority(&mut self, priority: Option<i32>) {
        self.cfg.producer_priority = priority;
    }

    /// The producer thread's scheduling at the last start.
    pub fn producer_scheduling(&self) -> ProducerScheduling {
        self.scheduling.get()
    }

    /// How well the simulator has kept its chunk cadence since it was made.
    pub fn pacing(&self) -> SimPacing {
        let c = &self.shared.counters;
        SimPacing {
            chunks_late: c.chunks_late.load(Ordering::Relaxed),
            max_lateness_ns: c.max_lateness_ns.load(Ordering::Relaxed),
        }
    }

    /// Changes the fault injection (only while stopped).
    pub fn set_faults(&mut self, faults: SimFaults) -> Result<()> {
        self.require_stopped("set_faults")?;
        self.cfg.faults = faults;
        Ok(())
    }

    /// Puts `frame` into playback memory at `index` (same as transmitting
    /// it with target `Playback { index }`, without the completion event).
    pub fn load_playback(&mut self, index: u32, frame: &[u8]) -> Result<()> {
        self.require_stopped("load_playback")?;
        self.store_playback(index, frame)
    }

    /// What the simulated FPGA last received for each transmit target.
    pub fn tx_record(&self, target: TxTarget) -> TxRecord {
        self.tx_log.borrow()[target.raw().0 as usize]
    }

    fn require_stopped(&self, op: &'static str) -> Result<()> {
        if self.state.get() == RunState::Streaming {
            return Err(Error::InvalidArgument {
                what: op,
                reason: "not allowed while streaming; stop first".into(),
            });
        }
        Ok(())
    }

    fn store_playback(&self, index: u32, frame: &[u8]) -> Result<()> {
        let mut pb = self.playback.borrow_mut();
        let n = pb.len();
        let entry = pb
            .get_mut(index as usize)
            .ok_or_else(|| Error::InvalidArgument {
                what: "playback index",
                reason: format!("{index} >= playback memory of {n} frames"),
            })?;
        if frame.len() != self.shared.ring.slot_bytes() {
            return Err(Error::InvalidArgument {
                what: "playback frame",
                reason: format!(
                    "{} bytes, the frame size is {}",
                    frame.len(),
                    self.shared.ring.slot_bytes()
                ),
            });
        }
        *entry = Some(Arc::from(frame));
        Ok(())
    }

    fn join_producer(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.producer.take() {
            // A panicking producer is a bug; there is nothing to recover here.
            let _ = h.join();
        }
        self.shared.events.kick();
    }

    fn frame_from(&self, ev: &fpga_p2p_event) -> Frame<'_> {
        // SAFETY: the producer set this slot READY before publishing the event
        // and never writes a READY slot; it becomes FREE only via release_slot.
        unsafe { Frame::new(self, &self.shared.ring, FrameMeta::from_event(ev)) }
    }
}

impl SlotRelease for SimSource {
    fn release_slot(&self, slot: u32) -> Result<()> {
        let Some(st) = self.shared.states.get(slot as usize) else {
            return Err(Error::InvalidArgument {
                what: "release",
                reason: format!("slot {slot} out of range"),
            });
        };
        match st.compare_exchange(READY, FREE, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => {
                // Capacity is nr_slots and each slot is in it at most once.
                self.shared.free.push(slot);
                Ok(())
            }
            Err(_) => Err(Error::InvalidArgument {
                what: "release",
                reason: format!("slot {slot} is not owned by the application"),
            }),
        }
    }
}

impl FrameSource for SimSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn ring(&self) -> &RingMemory {
        &self.shared.ring
    }

    fn chunk_bytes(&self) -> usize {
        self.cfg.chunk_bytes
    }

    fn completion(&self) -> Option<CompletionWords<'_>> {
        let ring = &self.shared.ring;
        ring.completion_words((ring.slot_bytes() / self.cfg.chunk_bytes) as u32)
    }

    fn start(&mut self, params: &StartParams) -> Result<()> {
        if self.producer.is_some() {
            return Err(Error::InvalidArgument {
                what: "start",
                reason: "already started; stop first".into(),
            });
        }
        let slot_bytes = self.shared.ring.slot_bytes();
        let mode = match params.mode {
            SourceMode::Adc => {
                return Err(Error::Unsupported {
                    device: self.name.clone(),
                    what: "the ADC source (the simulator has no front end; use playback)",
                });
            }
            SourceMode::TestPattern => Mode::Pattern,
            SourceMode::Playback { frames } => {
                let pb = self.playback.borrow();
                if frames == 0 || frames as usize > pb.len() {
                    return Err(Error::InvalidArgument {
                        what: "playback frames",
                        reason: format!("{frames} not in 1..={}", pb.len()),
                    });
                }
                let mut v = Vec::with_capacity(frames as usize);
                for (i, f) in pb.iter().take(frames as usize).enumerate() {
                    match f {
                        // The CRC of a whole frame, once: the producer then
                        // only copies (at 1 ms frames the copy alone is 4 GB/s).
                        Some(f) if f.len() == slot_bytes => v.push(PlaybackFrame {
                            crc32: crc32fast::hash(f),
                            data: f.clone(),
                        }),
                        _ => {
                            return Err(Error::InvalidArgument {
                                what: "playback frames",
                                reason: format!("frame {i} was never uploaded"),
                            });
                        }
                    }
                }
                Mode::Playback(v)
            }
        };
        // Fresh stream: every slot FREE (handed over in ring order), nothing queued.
        self.shared.free.reset();
        for (i, s) in self.shared.states.iter().enumerate() {
            s.store(FREE, Ordering::SeqCst);
            self.shared.free.push(i as u32);
        }
        self.shared.events.clear();
        self.shared.overflow.store(false, Ordering::SeqCst);
        self.shared.stop.store(false, Ordering::SeqCst);
        let producer = Producer {
            shared: self.shared.clone(),
            mode,
            chunk_bytes: self.cfg.chunk_bytes,
            period: params.chunk_period.unwrap_or(DEFAULT_CHUNK_PERIOD),
            chunk_events: params.chunk_events,
            faults: self.cfg.faults.clone(),
            rng: SplitMix64(self.cfg.faults.seed ^ 0x5EED_F00D),
            spin_ns: self.cfg.spin_before.as_nanos().min(u64::MAX as u128) as u64,
        };
        // The thread sets its own scheduling first and says what it got.
        let priority = self.cfg.producer_priority;
        let (told, scheduling) = std::sync::mpsc::sync_channel(1);
        let h = std::thread::Builder::new()
            .name("fpga-sim".into())
            .spawn(move || {
                let _ = told.send(priority.map_or(ProducerScheduling::Inherited, set_fifo));
                producer.run()
            })
            .map_err(|e| Error::Memory {
                op: "spawn simulator thread",
                reason: e.to_string(),
            })?;
        self.scheduling
            .set(scheduling.recv().unwrap_or(ProducerScheduling::Inherited));
        self.producer = Some(h);
        self.timeout.set(params.event_timeout);
        self.state.set(RunState::Streaming);
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        self.join_producer();
        // No frame handle can be alive (`&mut self`), so every slot is free.
        self.shared.events.clear();
        self.shared.free.reset();
        for (i, s) in self.shared.states.iter().enumerate() {
            s.store(FREE, Ordering::SeqCst);
            self.shared.free.push(i as u32);
        }
        self.state.set(RunState::Idle);
        Ok(())
    }

    fn next_event(&self, timeout: Option<Duration>) -> Result<Event<'_>> {
        if let Some(cookie) = self.tx_done.borrow_mut().pop_front() {
            return Ok(Event::TxDone {
                slot: 0,
                cookie,
                failed: false,
            });
        }
        match self.state.get() {
            RunState::Streaming => {}
            RunState::Idle => {
                return Err(Error::NotStreaming {
                    device: self.name.clone(),
                    op: "wait",
                });
            }
            RunState::Revoked => {
                return Err(Error::Revoked {
                    device: self.name.clone(),
                });
            }
            RunState::Fault(code) => {
                return Err(Error::Fault {
                    device: self.name.clone(),
                    code,
                });
            }
        }
        if self.shared.overflow.load(Ordering::Relaxed) {
            self.shared.overflow.store(false, Ordering::Relaxed);
            return Err(Error::Overflow {
                device: self.name.clone(),
            });
        }
        let t = timeout.unwrap_or(self.timeout.get());
        let Some(ev) = self.shared.events.pop_wait(t) else {
            return Err(Error::Timeout {
                device: self.name.clone(),
                timeout_ms: t.as_millis().min(u32::MAX as u128) as u32,
            });
        };
        match ev.type_ {
            uapi::FPGA_P2P_EV_FRAME => Ok(Event::Frame(self.frame_from(&ev))),
            uapi::FPGA_P2P_EV_CHUNK => {
                // SAFETY: the producer publishes a chunk's event after writing
                // it, writes a slot's chunks in order, and takes the slot
                // again only once the application released its frame.
                unsafe {
                    ChunkEvent::new(&self.shared.ring, ev.slot, ev.chunk, self.cfg.chunk_bytes)
                }
                .map(Event::Chunk)
                .ok_or_else(|| Error::InvalidArgument {
                    what: "chunk event",
                    reason: format!("slot {} chunk {} is outside the ring", ev.slot, ev.chunk),
                })
            }
            uapi::FPGA_P2P_EV_REVOKED => {
                self.state.set(RunState::Revoked);
                Err(Error::Revoked {
                    device: self.name.clone(),
                })
            }
            code => {
                let code = if code == uapi::FPGA_P2P_EV_FAULT {
                    ev.chunk
                } else {
                    u32::MAX
                };
                self.state.set(RunState::Fault(code));
                Err(Error::Fault {
                    device: self.name.clone(),
                    code,
                })
            }
        }
    }

    fn counters(&self) -> Result<Counters> {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Ok(Counters {
            frames: l(&c.frames),
            chunks: l(&c.chunks),
            drops_no_slot: l(&c.drops_no_slot),
            drops_fault: l(&c.drops_fault),
            short_frames: l(&c.short_frames),
            crc_errors: l(&c.crc_errors),
            desc_errors: l(&c.desc_errors),
            irqs: l(&c.irqs),
            revocations: l(&c.revocations),
            tx_submitted: l(&c.tx_submitted),
            tx_completed: l(&c.tx_completed),
            event_overflows: l(&c.event_overflows),
            dma_timeouts: l(&c.dma_timeouts),
            lost_irqs: 0,
            quarantined: 0,
            reserved: [0; 1],
        })
    }

    fn transmit(&self, target: TxTarget, data: &[u8], cookie: u64) -> Result<()> {
        if data.is_empty() || data.len() > self.cfg.max_tx_bytes {
            return Err(Error::InvalidArgument {
                what: "transmit",
                reason: format!("{} bytes not in 1..={}", data.len(), self.cfg.max_tx_bytes),
            });
        }
        if let TxTarget::Playback { index } = target {
            self.require_stopped("transmit to playback memory")?;
            self.store_playback(index, data)?;
        }
        inc(&self.shared.counters.tx_submitted);
        let rec = &mut self.tx_log.borrow_mut()[target.raw().0 as usize];
        rec.count += 1;
        rec.last_bytes = data.len() as u32;
        rec.last_crc32 = pattern::crc32(data);
        self.tx_done.borrow_mut().push_back(cookie);
        inc(&self.shared.counters.tx_completed);
        Ok(())
    }

    /// The simulator stamps frames with the host's CLOCK_TAI.
    fn capture_clock(&self) -> CaptureClock {
        CaptureClock::HostTai
    }
}

/// SCHED_FIFO at `priority` for the calling thread (best effort).
fn set_fifo(priority: i32) -> ProducerScheduling {
    // SAFETY: sched_param is plain integers, all-zero is valid (musl's has
    // more fields than glibc's, so no struct literal).
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: param lives for the call; pthread_self is the calling thread.
    // (pthread_setschedparam, not sched_setscheduler: musl's fails ENOSYS.)
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc == 0 {
        ProducerScheduling::Fifo(priority)
    } else {
        ProducerScheduling::Refused {
            priority,
            errno: rc,
        }
    }
}

impl Drop for SimSource {
    fn drop(&mut self) {
        self.join_producer();
    }
}

enum Mode {
    Pattern,
    Playback(Vec<PlaybackFrame>),
}

/// A frame the simulator plays back, with the CRC32 of all of it.
struct PlaybackFrame {
    data: Arc<[u8]>,
    crc32: u32,
}

/// Deterministic fault decisions.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn every(n: u64, seq: u64) -> bool {
    n != 0 && seq % n == n - 1
}

/// The simulated FPGA: one thread, owns FREE slots it claims until it marks them READY.
struct Producer {
    shared: Arc<Shared>,
    mode: Mode,
    chunk_bytes: usize,
    period: Duration,
    chunk_events: bool,
    faults: SimFaults,
    rng: SplitMix64,
    spin_ns: u64,
}

impl Producer {
    /// Sleeps until `t_ns` (CLOCK_MONOTONIC); false when asked to stop.
    fn sleep_until(&self, t_ns: u64) -> bool {
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = monotonic_ns();
            if now >= t_ns {
                return true;
            }
            if t_ns - now <= self.spin_ns {
                std::hint::spin_loop();
                continue;
            }
            // Wake at least every 20 ms to notice a stop; EINTR just loops.
            sleep_until_ns((t_ns - self.spin_ns).min(now + 20_000_000));
        }
    }

    fn push(&self, ev: fpga_p2p_event) -> bool {
        if self.shared.events.push(ev) {
            true
        } else {
            inc(&self.shared.counters.event_overflows);
            self.shared.overflow.store(true, Ordering::Relaxed);
            false
        }
    }

    fn run(mut self) {
        let sh = self.shared.clone();
        let c = &sh.counters;
        let ring = &sh.ring;
        let slot_bytes = ring.slot_bytes();
        let nchunks = slot_bytes / self.chunk_bytes;
        let words = ring.completion_words(nchunks as u32);
        let period_ns = self.period.as_nanos().min(u64::MAX as u128) as u64;
        let frame_ns = period_ns * nchunks as u64;
        let mut t_next = monotonic_ns();
        let mut pending_drops: u64 = 0;
        let mut seq: u64 = 0;
        // What a chunk that is not played back is made in (the test
        // pattern, a short frame's zeros) before it lands in the ring.
        let mut staging = vec![0u8; self.chunk_bytes];
        loop {
            if sh.stop.load(Ordering::Relaxed) {
                return;
            }
            // The FPGA's clock does not catch up after the host fell behind.
            let now = monotonic_ns();
            if period_ns > 0 && now > t_next + frame_ns {
                t_next = now;
            }
            if let Some((_, d)) = self.faults.stall.filter(|&(at, _)| at == seq) {
                t_next = monotonic_ns() + d.as_nanos() as u64;
                if !self.sleep_until(t_next) {
                    return;
                }
            }
            if self.faults.revoke_at == Some(seq) {
                inc(&c.revocations);
                self.push(fpga_p2p_event {
                    type_: uapi::FPGA_P2P_EV_REVOKED,
                    sequence: seq,
                    ..Default::default()
                });
                return;
            }
            if let Some((_, code)) = self.faults.fault_at.filter(|&(at, _)| at == seq) {
                inc(&c.desc_errors);
                self.push(fpga_p2p_event {
                    type_: uapi::FPGA_P2P_EV_FAULT,
                    sequence: seq,
                    chunk: code,
                    ..Default::default()
                });
                return;
            }
            let fault_drop = every(self.faults.drop_every, seq)
                || (self.faults.drop_probability > 0.0
                    && self.rng.next_f64() < self.faults.drop_probability);
            // Drop at source is decided at frame start: the next FREE slot in
            // the order the application released them, or drop.
            let slot = if fault_drop {
                inc(&c.drops_fault);
                None
            } else if let Some(s) = sh.free.pop() {
                sh.states[s as usize].store(FILLING, Ordering::Relaxed);
                Some(s)
            } else {
                inc(&c.drops_no_slot);
                None
            };
            let Some(slot) = slot else {
                pending_drops += 1;
                seq += 1;
                t_next += frame_ns;
                if !self.sleep_until(t_next) {
                    return;
                }
                continue;
            };
            let short = every(self.faults.short_every, seq);
            // Same lengths and positions as the emulated card's short frames.
            let bytes = if short {
                ((slot_bytes / 2) & !3).max(4)
            } else {
                slot_bytes
            };
            // The frame's first sample is taken at the start of its first
            // chunk's period (unpaced: now), stamped as the card stamps it,
            // on a clock of the site's time: here the host's CLOCK_TAI.
            let host_ns = if period_ns > 0 {
                t_next
            } else {
                monotonic_ns()
            };
            let timestamp_ns = tai_of_monotonic(host_ns);
            // A whole played-back frame's CRC is known; anything else
            // (pattern, short frame) is summed as it is written.
            let known_crc = match &self.mode {
                Mode::Playback(frames) if !short => {
                    Some(frames[(seq % frames.len() as u64) as usize].crc32)
                }
                _ => None,
            };
            let mut crc = crc32fast::Hasher::new();
            for chunk in 0..nchunks {
                t_next += period_ns;
                if !self.sleep_until(t_next) {
                    // Stopped mid-frame; stop() resets every slot.
                    return;
                }
                let off = chunk * self.chunk_bytes;
                if off >= bytes {
                    // A short frame: padded with zeros to the slot's size,
                    // as the card does, and its completion record still
                    // counts every chunk.
                    staging.fill(0);
                    // SAFETY: as below (the slot is FILLING, ours).
                    let dst = unsafe { ring.slot_mut(slot, off, self.chunk_bytes) };
                    dma_copy::copy(dst, &staging);
                    if let Some(words) = &words {
                        words.publish(slot, seq, chunk as u32, monotonic_ns());
                    }
                    continue;
                }
                let len = self.chunk_bytes.min(bytes - off);
                // SAFETY: this thread claimed the slot (FILLING) and is its only writer;
                // the application cannot see it until it is READY.
                let dst = unsafe { ring.slot_mut(slot, off, len) };
                let data: &[u8] = match &self.mode {
                    Mode::Pattern => {
                        pattern::fill_chunk(&mut staging[..len], seq, chunk, self.chunk_bytes);
                        &staging[..len]
                    }
                    Mode::Playback(frames) => {
                        &frames[(seq % frames.len() as u64) as usize].data[off..off + len]
                    }
                };
                // Into memory, not this core's cache, as the card's DMA
                // lands (dma_copy).
                dma_copy::copy(dst, data);
                if known_crc.is_none() {
                    crc.update(data);
                }
                // Due at t_next: how late the write finished (with no
                // period, as fast as possible, nothing is late).
                if period_ns > 0 {
                    let lateness = monotonic_ns().saturating_sub(t_next);
                    if lateness > period_ns {
                        inc(&c.chunks_late);
                    }
                    c.max_lateness_ns.fetch_max(lateness, Ordering::Relaxed);
                }
                // The chunk's completion record after its bytes, as the
                // card writes it (Release: the bytes are visible first).
                if let Some(words) = &words {
                    words.publish(slot, seq, chunk as u32, monotonic_ns());
                }
                inc(&c.chunks);
                inc(&c.irqs);
                if self.chunk_events {
                    // As the card's: the frame's metadata (sequence,
                    // timestamp) comes with its frame event only.
                    self.push(fpga_p2p_event {
                        type_: uapi::FPGA_P2P_EV_CHUNK,
                        slot,
                        chunk: chunk as u32,
                        bytes: len as u32,
                        ..Default::default()
                    });
                }
            }
            let crc32 = known_crc.unwrap_or_else(|| crc.finalize());
            if every(self.faults.corrupt_every, seq) {
                let pos = (seq.wrapping_mul(4099) % bytes as u64) as usize;
                // SAFETY: still FILLING, owned by this thread.
                let b = unsafe { ring.slot_mut(slot, pos, 1) };
                b[0] ^= 0x40;
            }
            let mut flags = 0;
            if short {
                flags |= uapi::FPGA_P2P_EVF_SHORT;
                inc(&c.short_frames);
            }
            if every(self.faults.crc_error_every, seq) {
                flags |= uapi::FPGA_P2P_EVF_CRC_MISMATCH;
                inc(&c.crc_errors);
            }
            // Publish: payload writes happen-before the application's Acquire.
            sh.states[slot as usize].store(READY, Ordering::Release);
            let ev = fpga_p2p_event {
                type_: uapi::FPGA_P2P_EV_FRAME,
                slot,
                flags,
                sequence: seq,
                timestamp_ns,
                host_ns,
                bytes: bytes as u32,
                crc32,
                dropped: pending_drops.min(u32::MAX as u64) as u32,
                ..Default::default()
            };
            if self.push(ev) {
                inc(&c.frames);
            } else {
                // Event lost (never expected: the queue holds every event the
                // slots can produce). The slot stays out of use until restart.
                sh.states[slot as usize].store(FREE, Ordering::Release);
            }
            pending_drops = 0;
            seq += 1;
        }
    }
}
