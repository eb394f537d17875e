//! The diagnostics server's protocol logic, apart from the serial port:
//! bytes in, bytes out. It splits the link into postcard-rpc frames and
//! console lines, answers each from the status board, and passes parameter
//! changes to the loop. It never panics on input (the fuzz harness in
//! `tests/diag_fuzz.rs` feeds it millions of hostile inputs).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diag_proto::link::{FrameFault, LinkDecoder, LinkEvent};
use diag_proto::rpc::{Request, WireErrorKind, decode_request, encode_frame};
use diag_proto::*;
use postcard_rpc::standard_icd::{GetAllSchemaDataTopic, SchemaTotals};
use postcard_rpc::{Key, TopicDirection};
use serde::Serialize;

use crate::frame_loop::param_queue::ParamSender;
use crate::status::StatusBoard;

use super::answers::{self, GpuReader, UnitInfo};
use super::console;
use super::params::Params;
use super::state::{LinkCounters, LinkState};

/// Shortest period of a topic push.
pub const MIN_PUSH_PERIOD_MS: u32 = 100;

/// The server's state over one link.
pub struct Server<'q> {
    decoder: LinkDecoder<MAX_WIRE_FRAME>,
    state: LinkState<'q>,
}

impl<'q> Server<'q> {
    pub fn new(
        board: Arc<StatusBoard>,
        info: UnitInfo,
        params: Params,
        link: Option<ParamSender<'q>>,
        gpu: Option<GpuReader>,
    ) -> Self {
        Server {
            decoder: LinkDecoder::new(),
            state: LinkState::new(board, info, params, link, gpu),
        }
    }

    pub fn counters(&self) -> LinkCounters {
        self.state.counters
    }

    /// Bytes from the link; answers go to `out`.
    pub fn on_bytes(&mut self, bytes: &[u8], out: &mut dyn Write) {
        let Server { decoder, state } = self;
        for &b in bytes {
            decoder.push(b, &mut |ev| state.on_event(ev, out));
        }
    }

    /// The link has been quiet for a while.
    pub fn on_idle(&mut self, out: &mut dyn Write) {
        let Server { decoder, state } = self;
        decoder.idle(&mut |ev| state.on_event(ev, out));
    }

    /// Periodic work: topic pushes, late answers of the loop.
    pub fn tick(&mut self, now: Instant, out: &mut dyn Write) {
        self.state.collect_replies();
        self.state.push_topics(now, out);
    }
}

/// The protocol's dispatch: link events and requests answered from the
/// link's state.
impl LinkState<'_> {
    fn on_event(&mut self, ev: LinkEvent<'_>, out: &mut dyn Write) {
        match ev {
            LinkEvent::Frame(f) => {
                self.counters.frames += 1;
                self.on_frame(f, out);
            }
            LinkEvent::BadFrame(fault) => {
                self.counters.bad_frames += 1;
                let kind = match fault {
                    FrameFault::TooLong { len } => WireErrorKind::FrameTooLong {
                        len: len.min(u32::MAX as usize) as u32,
                    },
                    FrameFault::Cobs { .. } => WireErrorKind::DeserFailed,
                };
                // No header could be read: the error goes out with sequence 0.
                send(
                    out,
                    ERROR_KEY,
                    VarSeq::Seq4(0),
                    &VarKey::Key8(ERROR_KEY),
                    &kind.to_wire(),
                );
            }
            LinkEvent::Echo(bytes) => {
                let _ = out.write_all(bytes);
                let _ = out.flush();
            }
            LinkEvent::Erase => {
                let _ = out.write_all(b"\x08 \x08");
                let _ = out.flush();
            }
            LinkEvent::Line { text, overflowed } => {
                self.counters.lines += 1;
                let answer = if overflowed {
                    format!(
                        "\r\nError -1 line longer than {} characters\r\n",
                        diag_proto::link::MAX_LINE
                    )
                } else {
                    console::answer(self, text)
                };
                let _ = out.write_all(answer.as_bytes());
                let _ = out.write_all(console::PROMPT.as_bytes());
                let _ = out.flush();
            }
        }
    }

    fn on_frame(&mut self, frame: &[u8], out: &mut dyn Write) {
        let (hdr, req) = match decode_request(frame) {
            Ok(v) => v,
            Err(fault) => {
                self.counters.bad_frames += 1;
                let (seq, kind) = fault
                    .header
                    .map_or((VarSeq::Seq4(0), VarKey::Key8(ERROR_KEY)), |h| {
                        (h.seq_no, h.key)
                    });
                send(out, ERROR_KEY, seq, &kind, &fault.error.to_wire());
                return;
            }
        };
        let seq = hdr.seq_no;
        let k = &hdr.key;
        match req {
            Request::Ping(v) => {
                send(out, PingEndpoint::RESP_KEY, seq, k, &v);
            }
            Request::Schemas => self.send_schemas(seq, k, out),
            Request::Version(_) => {
                send(
                    out,
                    VersionEndpoint::RESP_KEY,
                    seq,
                    k,
                    &VersionInfo {
                        protocol: PROTOCOL_VERSION,
                        oldest_supported: OLDEST_SUPPORTED,
                        radard: Text::truncate_from(env!("CARGO_PKG_VERSION")),
                    },
                );
            }
            Request::Identity => {
                send(
                    out,
                    IdentityEndpoint::RESP_KEY,
                    seq,
                    k,
                    &answers::identity(&self.board, &self.info),
                );
            }
            Request::Status => {
                let s = self.status();
                send(out, StatusEndpoint::RESP_KEY, seq, k, &s);
            }
            Request::Stats => {
                let s = self.board.snapshot();
                send(
                    out,
                    StatsEndpoint::RESP_KEY,
                    seq,
                    k,
                    &answers::stats(&s, &self.info),
                );
            }
            Request::Log(r) => {
                let page = self.log_page(r);
                send(out, LogEndpoint::RESP_KEY, seq, k, &page);
            }
            Request::ParamList(r) => {
                let mut page = ParamPage {
                    total: Params::count() as u8,
                    first: r.first,
                    params: List::new(),
                };
                for i in usize::from(r.first)..Params::count() {
                    let Some(p) = self.params.info_at(i) else {
                        break;
                    };
                    if !page.params.push(p) {
                        break;
                    }
                }
                send(out, ParamListEndpoint::RESP_KEY, seq, k, &page);
            }
            Request::ParamGet(name) => {
                let r = self.params.info(&name).ok_or(ParamError::Unknown);
                send(out, ParamGetEndpoint::RESP_KEY, seq, k, &r);
            }
            Request::ParamSet(set) => {
                let r = self.set_param(&set.name, set.value);
                send(out, ParamSetEndpoint::RESP_KEY, seq, k, &r);
            }
            Request::SnapshotInfo => {
                let r = self.hold_snapshot().map(|h| h.info.clone());
                send(out, SnapshotInfoEndpoint::RESP_KEY, seq, k, &r);
            }
            Request::SnapshotPiece(p) => {
                let r = match self.held_map() {
                    Some(h) => answers::piece(h, p.generation, p.index),
                    None => Err(SnapshotError::Gone),
                };
                send(out, SnapshotPieceEndpoint::RESP_KEY, seq, k, &r);
            }
            Request::Subscribe(s) => {
                let clamp = |ms: u32| {
                    if ms == 0 {
                        0
                    } else {
                        ms.max(MIN_PUSH_PERIOD_MS)
                    }
                };
                self.subscribe = Subscribe {
                    status_period_ms: clamp(s.status_period_ms),
                    telemetry_period_ms: clamp(s.telemetry_period_ms),
                };
                let now = Instant::now();
                self.next_status = now;
                self.next_telemetry = now;
                send(out, SubscribeEndpoint::RESP_KEY, seq, k, &self.subscribe);
            }
            Request::Time => {
                let t = answers::time(&self.board, &self.info);
                send(out, TimeEndpoint::RESP_KEY, seq, k, &t);
            }
        }
    }

    fn send_schemas(&mut self, seq: VarSeq, k: &VarKey, out: &mut dyn Write) {
        /// postcard-rpc's schema-data message (its variant order).
        #[derive(Serialize)]
        enum SchemaData<'a> {
            Type(&'a NamedType),
            Endpoint {
                path: &'a str,
                request_key: Key,
                response_key: Key,
            },
            Topic {
                path: &'a str,
                key: Key,
                direction: TopicDirection,
            },
        }
        let mut totals = SchemaTotals {
            types_sent: 0,
            endpoints_sent: 0,
            topics_in_sent: 0,
            topics_out_sent: 0,
            errors: 0,
        };
        // The types first: a host client finds each endpoint's types among
        // them by key (postcard-rpc's own server sends them first too).
        let mut types: Vec<&NamedType> = Vec::new();
        let all = ENDPOINT_SCHEMAS
            .iter()
            .flat_map(|&(req, resp)| [req, resp])
            .chain(TOPIC_SCHEMAS);
        for t in all {
            if !types.contains(&t) {
                types.push(t);
            }
        }
        for t in types {
            self.topic_seq = self.topic_seq.wrapping_add(1);
            if send(
                out,
                GetAllSchemaDataTopic::TOPIC_KEY,
                VarSeq::Seq4(self.topic_seq),
                k,
                &SchemaData::Type(t),
            ) {
                totals.types_sent += 1;
            } else {
                totals.errors += 1;
            }
        }
        for (path, request_key, response_key) in ENDPOINTS {
            let m = SchemaData::Endpoint {
                path,
                request_key,
                response_key,
            };
            self.topic_seq = self.topic_seq.wrapping_add(1);
            if send(
                out,
                GetAllSchemaDataTopic::TOPIC_KEY,
                VarSeq::Seq4(self.topic_seq),
                k,
                &m,
            ) {
                totals.endpoints_sent += 1;
            } else {
                totals.errors += 1;
            }
        }
        for (path, key) in TOPICS_OUT {
            let m = SchemaData::Topic {
                path,
                key,
                direction: TopicDirection::ToClient,
            };
            self.topic_seq = self.topic_seq.wrapping_add(1);
            if send(
                out,
                GetAllSchemaDataTopic::TOPIC_KEY,
                VarSeq::Seq4(self.topic_seq),
                k,
                &m,
            ) {
                totals.topics_out_sent += 1;
            } else {
                totals.errors += 1;
            }
        }
        send(out, GetAllSchemasEndpoint::RESP_KEY, seq, k, &totals);
    }

    fn push_topics(&mut self, now: Instant, out: &mut dyn Write) {
        let sub = self.subscribe;
        if sub.status_period_ms > 0 && now >= self.next_status {
            self.next_status = now + Duration::from_millis(u64::from(sub.status_period_ms));
            let s = self.status();
            self.topic_seq = self.topic_seq.wrapping_add(1);
            send(
                out,
                StatusTopic::TOPIC_KEY,
                VarSeq::Seq4(self.topic_seq),
                &VarKey::Key8(StatusTopic::TOPIC_KEY),
                &s,
            );
        }
        if sub.telemetry_period_ms > 0 && now >= self.next_telemetry {
            self.next_telemetry = now + Duration::from_millis(u64::from(sub.telemetry_period_ms));
            let s = self.board.snapshot();
            let t = answers::telemetry(&s, &self.board, &self.info, self.gpu());
            self.topic_seq = self.topic_seq.wrapping_add(1);
            send(
                out,
                TelemetryTopic::TOPIC_KEY,
                VarSeq::Seq4(self.topic_seq),
                &VarKey::Key8(TelemetryTopic::TOPIC_KEY),
                &t,
            );
        }
    }
}

/// Writes one frame; false when it could not be built or written.
fn send<T: Serialize + ?Sized>(
    out: &mut dyn Write,
    key: Key,
    seq: VarSeq,
    kind_of: &VarKey,
    msg: &T,
) -> bool {
    let mut wire = [0u8; MAX_WIRE_FRAME];
    match encode_frame(key, seq, kind_of, msg, &mut wire) {
        Ok(n) => out.write_all(&wire[..n]).and_then(|_| out.flush()).is_ok(),
        Err(_) => false,
    }
}
