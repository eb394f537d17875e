//! The replay source: a recorded frame file (`radard record`, or raw frames
//! from `radar-dsp scene`) played into the ring as if the FPGA delivered
//! it, so `radard replay` runs the same loop, backend and sinks as a run.
//!
//! Each frame is read (`pread`, chunk by chunk; with chunk events asked
//! for, an event per chunk) into a FREE slot, its CRC checked against the
//! sidecar, and handed out as a [`Frame`] with the recorded sequence, drop
//! count, flags and payload size; the capture timestamp is the replay's own
//! (CLOCK_MONOTONIC at delivery, as the simulator stamps frames), since the
//! recorded one is another run's clock. Reading the file is this source's
//! frame wait. Pacing: one frame per period, or as fast as the loop takes
//! them.

use std::cell::{Cell, RefCell};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use tegra_p2p::clock::{monotonic_ns, sleep_until_ns};
use tegra_p2p::source::{ChunkEvent, Event, SlotRelease};
use tegra_p2p::{
    Counters, Error, Frame, FrameMeta, FrameSource, Result, RingMemory, StartParams, uapi,
};

use crate::recording::Recording;

pub struct ReplaySource {
    name: Arc<str>,
    recording: Recording,
    ring: RingMemory,
    chunk_bytes: usize,
    period: Option<Duration>,
    state: RefCell<State>,
    /// Slots the application holds (bit per slot).
    owned: Cell<u64>,
    counters: Cell<Counters>,
}

struct State {
    streaming: bool,
    chunk_events: bool,
    /// Next frame of the file.
    next: u64,
    next_slot: u32,
    /// The frame being read: slot, next chunk, running CRC.
    filling: Option<(u32, usize, crc32fast::Hasher)>,
    due_ns: u64,
}

impl ReplaySource {
    /// `ring` must have slots of the recording's frame size; `period` None
    /// replays as fast as the loop takes frames.
    pub fn new(
        recording: Recording,
        ring: RingMemory,
        chunk_bytes: usize,
        period: Option<Duration>,
    ) -> Result<Self> {
        if ring.slot_bytes() != recording.frame_bytes {
            return Err(Error::InvalidArgument {
                what: "replay",
                reason: format!(
                    "ring slots of {} bytes for frames of {}",
                    ring.slot_bytes(),
                    recording.frame_bytes
                ),
            });
        }
        if ring.nr_slots() > 64
            || chunk_bytes == 0
            || !recording.frame_bytes.is_multiple_of(chunk_bytes)
        {
            return Err(Error::InvalidArgument {
                what: "replay",
                reason: format!(
                    "{} slots, chunks of {chunk_bytes} bytes in frames of {}",
                    ring.nr_slots(),
                    recording.frame_bytes
                ),
            });
        }
        Ok(ReplaySource {
            name: Arc::from(format!("replay:{}", recording.path.display())),
            recording,
            ring,
            chunk_bytes,
            period,
            state: RefCell::new(State {
                streaming: false,
                chunk_events: false,
                next: 0,
                next_slot: 0,
                filling: None,
                due_ns: 0,
            }),
            owned: Cell::new(0),
            counters: Cell::new(Counters::default()),
        })
    }

    /// Frames in the recording.
    pub fn frames(&self) -> u64 {
        self.recording.frames
    }

    /// Whether the metadata was synthesised (raw frames, no sidecar).
    pub fn synthesized(&self) -> bool {
        self.recording.synthesized
    }

    fn error(&self, reason: String) -> Error {
        Error::InvalidArgument {
            what: "replay",
            reason,
        }
    }

    fn free_slot(&self, st: &mut State) -> Result<u32> {
        let n = self.ring.nr_slots();
        for i in 0..n {
            let s = (st.next_slot + i) % n;
            if self.owned.get() & (1 << s) == 0 {
                st.next_slot = (s + 1) % n;
                return Ok(s);
            }
        }
        Err(self.error(format!(
            "all {n} slots are held by the application: release frames"
        )))
    }

    /// Reads chunk `chunk` of frame `st.next` into `slot`.
    fn read_chunk(&self, st: &State, slot: u32, chunk: usize) -> Result<&[u8]> {
        let base = self
            .ring
            .slot_ptr(slot)
            .ok_or_else(|| self.error(format!("slot {slot} out of range")))?;
        let off = chunk * self.chunk_bytes;
        // SAFETY: `slot` is not held by the application (not in `owned`) and
        // only this source writes ring slots; off + chunk_bytes <= slot_bytes
        // (frame_bytes is a multiple of chunk_bytes, checked in new()).
        let dst = unsafe { std::slice::from_raw_parts_mut(base.add(off), self.chunk_bytes) };
        let at = st.next * self.recording.frame_bytes as u64 + off as u64;
        self.recording.file.read_exact_at(dst, at).map_err(|e| {
            self.error(format!(
                "{}: frame {} at byte {at}: {e} (the file changed under replay?)",
                self.recording.path.display(),
                st.next
            ))
        })?;
        Ok(dst)
    }
}

impl SlotRelease for ReplaySource {
    fn release_slot(&self, slot: u32) -> Result<()> {
        let bit = 1u64.checked_shl(slot).unwrap_or(0);
        if slot >= self.ring.nr_slots() || self.owned.get() & bit == 0 {
            return Err(self.error(format!("slot {slot} is not owned by the application")));
        }
        self.owned.set(self.owned.get() & !bit);
        Ok(())
    }
}

impl FrameSource for ReplaySource {
    fn name(&self) -> &str {
        &self.name
    }

    fn ring(&self) -> &RingMemory {
        &self.ring
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn start(&mut self, params: &StartParams) -> Result<()> {
        let st = self.state.get_mut();
        st.streaming = true;
        st.chunk_events = params.chunk_events;
        st.due_ns = monotonic_ns();
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        let st = self.state.get_mut();
        st.streaming = false;
        st.filling = None;
        Ok(())
    }

    fn next_event(&self, _timeout: Option<Duration>) -> Result<Event<'_>> {
        let mut st = self.state.borrow_mut();
        if !st.streaming {
            return Err(Error::NotStreaming {
                device: self.name.clone(),
                op: "next_event",
            });
        }
        if st.next >= self.recording.frames {
            return Err(self.error(format!(
                "{}: end of the recording ({} frames replayed)",
                self.recording.path.display(),
                self.recording.frames
            )));
        }
        let chunks = self.recording.frame_bytes / self.chunk_bytes;
        let (slot, first, mut crc) = match st.filling.take() {
            Some(f) => f,
            None => {
                if let Some(p) = self.period {
                    sleep_until_ns(st.due_ns);
                    st.due_ns += p.as_nanos() as u64;
                }
                let slot = self.free_slot(&mut st)?;
                (slot, 0, crc32fast::Hasher::new())
            }
        };
        // With chunk events: one chunk per call, an event each, then the
        // frame's event on the call after the last chunk's; else the whole
        // frame at once.
        let mut counters = self.counters.get();
        if st.chunk_events && first < chunks {
            crc.update(self.read_chunk(&st, slot, first)?);
            counters.chunks += 1;
            self.counters.set(counters);
            // SAFETY: chunks 0..=first of the slot were just copied in, in
            // order; the slot is not written again before its frame is
            // released (a free slot is taken only at a frame's start).
            let ev = unsafe { ChunkEvent::new(&self.ring, slot, first as u32, self.chunk_bytes) }
                .ok_or_else(|| {
                self.error(format!("chunk {first} of slot {slot} is outside the ring"))
            })?;
            st.filling = Some((slot, first + 1, crc));
            return Ok(Event::Chunk(ev));
        }
        for c in first..chunks {
            crc.update(self.read_chunk(&st, slot, c)?);
        }
        // The frame is complete.
        let crc = crc.finalize();
        let index = st.next;
        let entry = self.recording.entries[index as usize];
        if !self.recording.synthesized && crc != entry.crc32 {
            return Err(self.error(format!(
                "{}: frame {index}: CRC-32 {crc:#010x}, the sidecar says {:#010x}: the file is damaged",
                self.recording.path.display(),
                entry.crc32
            )));
        }
        st.next += 1;
        counters.frames += 1;
        if entry.bytes as usize != self.recording.frame_bytes {
            counters.short_frames += 1;
        }
        self.counters.set(counters);
        let payload_crc = if entry.bytes as usize == self.recording.frame_bytes {
            crc
        } else {
            // A short frame's CRC covers its payload only, as the FPGA's.
            let base = self.ring.slot_ptr(slot).unwrap_or(std::ptr::null_mut());
            // SAFETY: the slot was just filled and is not yet handed out;
            // bytes <= frame_bytes (checked when the sidecar was read).
            crc32fast::hash(unsafe { std::slice::from_raw_parts(base, entry.bytes as usize) })
        };
        // A replay stamps frames on CLOCK_MONOTONIC as it plays them.
        let now = monotonic_ns();
        let meta = FrameMeta {
            slot,
            sequence: entry.sequence,
            timestamp_ns: now,
            host_ns: now,
            flags: entry.flags & !uapi::FPGA_P2P_EVF_TX_ERROR,
            dropped: entry.dropped,
            bytes: entry.bytes,
            crc32: payload_crc,
        };
        self.owned.set(self.owned.get() | (1 << slot));
        drop(st);
        // SAFETY: the slot is now the application's (in `owned`) and this
        // source writes no owned slot until release_slot() clears its bit.
        Ok(Event::Frame(unsafe { Frame::new(self, &self.ring, meta) }))
    }

    fn counters(&self) -> Result<Counters> {
        Ok(self.counters.get())
    }

    fn transmit(&self, _target: tegra_p2p::TxTarget, _data: &[u8], _cookie: u64) -> Result<()> {
        Err(Error::Unsupported {
            device: self.name.clone(),
            what: "the transmit channel (a replay has no FPGA)",
        })
    }
}
