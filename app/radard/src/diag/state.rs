//! The diagnostics server's state over one link, apart from the wire: the
//! board it answers from, the unit's identity, the parameter table, the
//! loop's parameter queue, the health judge, the power map a client is
//! fetching, the topic subscription. The protocol (`server`) and the text
//! console (`console`) both answer from it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use diag_proto::{
    Applied, GpuTelemetry, List, LogPage, LogRequest, Note, ParamError, ParamValue, SnapshotError,
    Status, Subscribe,
};

use crate::frame_loop::param_queue::{PARAM_QUEUE, ParamChange, ParamSender};
use crate::status::{Event, EventKind, StatusBoard, StatusSnapshot};

use super::answers::{self, GpuReader, HealthJudge, HeldMap, UnitInfo};
use super::params::Params;

/// How long a `set` waits for the loop to apply it.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// Everything the server keeps over one link but the frame decoder.
pub struct LinkState<'q> {
    pub board: Arc<StatusBoard>,
    pub info: UnitInfo,
    pub params: Params,
    sender: Option<ParamSender<'q>>,
    gpu: Option<GpuReader>,
    in_flight: usize,
    next_change: u64,
    judge: HealthJudge,
    held: Option<HeldMap>,
    /// Topic pushes asked for, and when each is next due.
    pub subscribe: Subscribe,
    pub next_status: Instant,
    pub next_telemetry: Instant,
    /// Sequence number of the last message the server sent unasked.
    pub topic_seq: u32,
    /// Counters of what came in (for tests and `stats` of the link).
    pub counters: LinkCounters,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub frames: u64,
    pub bad_frames: u64,
    pub lines: u64,
}

impl<'q> LinkState<'q> {
    pub fn new(
        board: Arc<StatusBoard>,
        info: UnitInfo,
        params: Params,
        sender: Option<ParamSender<'q>>,
        gpu: Option<GpuReader>,
    ) -> Self {
        let now = Instant::now();
        LinkState {
            board,
            info,
            params,
            sender,
            gpu,
            in_flight: 0,
            next_change: 1,
            judge: HealthJudge::default(),
            held: None,
            subscribe: Subscribe {
                status_period_ms: 0,
                telemetry_period_ms: 0,
            },
            next_status: now,
            next_telemetry: now,
            topic_seq: 0,
            counters: LinkCounters::default(),
        }
    }

    /// The power map a client is fetching piece by piece.
    pub fn held_map(&self) -> Option<&HeldMap> {
        self.held.as_ref()
    }

    pub fn status(&mut self) -> Status {
        let s = self.board.snapshot();
        let health = self.judge.judge(&s, Instant::now());
        let gpu = self.gpu.as_ref().and_then(|g| g());
        answers::status(&s, &self.board, &self.info, health, gpu)
    }

    pub fn snapshot(&self) -> StatusSnapshot {
        self.board.snapshot()
    }

    pub fn gpu(&self) -> Option<GpuTelemetry> {
        self.gpu.as_ref().and_then(|g| g())
    }

    pub fn log_page(&self, r: LogRequest) -> LogPage {
        let mut events = [Event::default(); 8];
        let max = usize::from(r.max).clamp(1, events.len());
        let head = self.board.events_cursor();
        let oldest = head.saturating_sub(crate::status::EVENT_CAPACITY as u64);
        // A cursor beyond the newest event asks where the log ends.
        let from = r.from.clamp(oldest, head);
        let (n, next) = self.board.events_since(from, &mut events[..max]);
        let mut page = LogPage {
            events: List::new(),
            next,
            lost: oldest.saturating_sub(r.from),
        };
        // The board skips overwritten events: number them from where they are.
        let first = next - n as u64;
        for (i, e) in events[..n].iter().enumerate() {
            page.events.push(answers::log_event(first + i as u64, e));
        }
        page
    }

    pub fn hold_snapshot(&mut self) -> Result<&HeldMap, SnapshotError> {
        let map = self.board.power_map().ok_or(SnapshotError::NoMap)?;
        if map.generation == 0 || map.rows == 0 || map.cols == 0 {
            return Err(SnapshotError::NoMap);
        }
        Ok(&*self.held.insert(answers::hold_map(&map)))
    }

    /// Validates, queues for the loop, waits for its answer (up to
    /// [`APPLY_TIMEOUT`]), logs it.
    pub fn set_param(&mut self, name: &str, value: ParamValue) -> Result<Applied, ParamError> {
        let v = self.params.validate(name, value)?;
        self.collect_replies();
        let not_applied = |why: &str| ParamError::NotApplied {
            reason: Note::truncate_from(why),
        };
        let Some(sender) = self.sender.as_mut() else {
            return Err(not_applied("the frame loop is not running"));
        };
        if self.in_flight >= PARAM_QUEUE - 1 {
            return Err(not_applied(
                "earlier changes are still waiting for the loop",
            ));
        }
        let id = self.next_change;
        self.next_change += 1;
        if sender
            .changes
            .enqueue(ParamChange {
                id,
                param: v.param,
                alpha: v.alpha,
            })
            .is_err()
        {
            return Err(not_applied("the change queue is full"));
        }
        self.in_flight += 1;
        let deadline = Instant::now() + APPLY_TIMEOUT;
        loop {
            if let Some(r) = self.collect_replies_until(id) {
                return r;
            }
            if Instant::now() >= deadline {
                return Err(not_applied(
                    "the frame loop did not take it within 2 s (queued; it applies when frames flow)",
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub fn collect_replies(&mut self) {
        let _ = self.collect_replies_until(0);
    }

    /// Takes the loop's answers (logging each); returns the one for `id`.
    fn collect_replies_until(&mut self, id: u64) -> Option<Result<Applied, ParamError>> {
        let mut found = None;
        while let Some(reply) = self.sender.as_mut().and_then(|l| l.replies.dequeue()) {
            self.in_flight = self.in_flight.saturating_sub(1);
            // reply.alpha (the table buffer) is freed here, off the loop.
            let result = match reply.refused {
                None => {
                    let (applied, pid, value) = self.params.applied(reply.param, reply.at_frame);
                    self.board.post(EventKind::ParameterChange, pid, value);
                    Ok(applied)
                }
                Some(why) => Err(ParamError::NotApplied {
                    reason: Note::truncate_from(why),
                }),
            };
            if reply.id == id {
                found = Some(result);
            }
        }
        found
    }
}
