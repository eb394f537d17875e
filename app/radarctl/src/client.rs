//! The client end of the diagnostics link: requests out as postcard-rpc
//! frames, answers matched by key and sequence number, topic pushes kept
//! for whoever asks, everything else on the line skipped.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use diag_proto::rpc::{encode_frame, split_frame};
use diag_proto::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LinkError {
    #[error("{port}: no such serial port (check --port; `ls /dev/tty*` lists them)")]
    NoPort { port: String },
    #[error("{port}: cannot open: {reason}")]
    Open { port: String, reason: String },
    #[error(
        "{port}: the unit did not answer {what} within {secs:.1} s (is radard running with [diag] port on this line, at {baud} baud?)"
    )]
    Timeout {
        port: String,
        what: &'static str,
        secs: f64,
        baud: u32,
    },
    #[error("{port}: {reason}")]
    Io { port: String, reason: String },
    #[error(
        "protocol version mismatch: radarctl speaks diagnostics protocol {ours}, the unit (radard {radard}) speaks {theirs} and answers clients of {oldest} .. {theirs}; use the radarctl of that radard release"
    )]
    Version {
        ours: u16,
        theirs: u16,
        oldest: u16,
        radard: String,
    },
    #[error("the unit refused {what}: {error}")]
    Wire { what: &'static str, error: String },
    #[error(
        "the unit refused {what}: unknown key (the unit does not serve {path}: a different protocol version or not radard)"
    )]
    UnknownKey {
        what: &'static str,
        path: &'static str,
    },
    #[error("the unit's answer to {what} does not decode ({reason})")]
    Decode { what: &'static str, reason: String },
}

/// A topic message pushed by the unit.
pub struct Pushed {
    pub key: Key,
    pub body: Vec<u8>,
}

pub struct Client {
    port: Box<dyn serialport::SerialPort>,
    name: String,
    baud: u32,
    timeout: Duration,
    seq: u32,
    rx: Vec<u8>,
    pub pushed: VecDeque<Pushed>,
}

impl Client {
    pub fn open(port: &str, baud: u32, timeout: Duration) -> Result<Self, LinkError> {
        if !std::path::Path::new(port).exists() {
            return Err(LinkError::NoPort { port: port.into() });
        }
        let mut p = serialport::new(port, baud)
            .timeout(Duration::from_millis(20))
            .open()
            .map_err(|e| LinkError::Open {
                port: port.into(),
                reason: e.to_string(),
            })?;
        // Start clean: forget what arrived before us, and end whatever the
        // unit was receiving (a half-typed console line, a cut frame) with a
        // 0 byte, so the first request is read as a frame.
        let _ = p.clear(serialport::ClearBuffer::Input);
        p.write_all(&[0])
            .and_then(|_| p.flush())
            .map_err(|e| LinkError::Io {
                port: port.into(),
                reason: format!("write: {e}"),
            })?;
        Ok(Client {
            port: p,
            name: port.into(),
            baud,
            timeout,
            seq: 1,
            rx: Vec::new(),
            pushed: VecDeque::new(),
        })
    }

    /// Asks for the unit's protocol version and refuses a different one.
    pub fn check_version(&mut self, claim: u16) -> Result<VersionInfo, LinkError> {
        let v = self.call::<VersionEndpoint>(&claim, "the version request")?;
        if v.protocol != claim || claim < v.oldest_supported {
            return Err(LinkError::Version {
                ours: claim,
                theirs: v.protocol,
                oldest: v.oldest_supported,
                radard: v.radard.to_string(),
            });
        }
        Ok(v)
    }

    /// One request, its answer.
    pub fn call<E: Endpoint>(
        &mut self,
        req: &E::Request,
        what: &'static str,
    ) -> Result<E::Response, LinkError>
    where
        E::Request: Serialize,
        E::Response: DeserializeOwned,
    {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.send(E::REQ_KEY, seq, req)?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let Some(frame) = self.next_frame(deadline)? else {
                return Err(LinkError::Timeout {
                    port: self.name.clone(),
                    what,
                    secs: self.timeout.as_secs_f64(),
                    baud: self.baud,
                });
            };
            let Some((hdr, body)) = split_frame(&frame) else {
                continue;
            };
            let is_ours = hdr.seq_no == VarSeq::Seq4(seq);
            if is_ours && hdr.key == VarKey::Key8(E::RESP_KEY) {
                return postcard::from_bytes(body).map_err(|e| LinkError::Decode {
                    what,
                    reason: e.to_string(),
                });
            }
            if is_ours && hdr.key == VarKey::Key8(ERROR_KEY) {
                let error = match postcard::from_bytes::<WireError>(body) {
                    Ok(WireError::UnknownKey) => {
                        return Err(LinkError::UnknownKey {
                            what,
                            path: E::PATH,
                        });
                    }
                    Ok(e) => e.to_string(),
                    Err(e) => format!("an error that does not decode ({e})"),
                };
                return Err(LinkError::Wire { what, error });
            }
            if let VarKey::Key8(key) = hdr.key
                && TOPICS_OUT.iter().any(|(_, k)| *k == key)
            {
                if self.pushed.len() > 64 {
                    self.pushed.pop_front();
                }
                self.pushed.push_back(Pushed {
                    key,
                    body: body.to_vec(),
                });
            }
        }
    }

    /// The frames' clock (`radar/time`), or None from a unit that does not
    /// report it (a radard from before the endpoint).
    pub fn time(&mut self) -> Result<Option<TimeStatus>, LinkError> {
        match self.call::<TimeEndpoint>(&(), "the time request") {
            Ok(t) => Ok(Some(t)),
            Err(LinkError::UnknownKey { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits up to `wait` for a pushed topic message.
    pub fn wait_push(&mut self, wait: Duration) -> Result<Option<Pushed>, LinkError> {
        if let Some(p) = self.pushed.pop_front() {
            return Ok(Some(p));
        }
        let deadline = Instant::now() + wait;
        while let Some(frame) = self.next_frame(deadline)? {
            if let Some((hdr, body)) = split_frame(&frame)
                && let VarKey::Key8(key) = hdr.key
                && TOPICS_OUT.iter().any(|(_, k)| *k == key)
            {
                return Ok(Some(Pushed {
                    key,
                    body: body.to_vec(),
                }));
            }
        }
        Ok(None)
    }

    fn send<T: Serialize + ?Sized>(
        &mut self,
        key: Key,
        seq: u32,
        msg: &T,
    ) -> Result<(), LinkError> {
        let mut wire = [0u8; MAX_WIRE_FRAME];
        let n = encode_frame(key, VarSeq::Seq4(seq), &VarKey::Key8(key), msg, &mut wire).map_err(
            |_| LinkError::Io {
                port: self.name.clone(),
                reason: "request too large for a frame".into(),
            },
        )?;
        self.port
            .write_all(&wire[..n])
            .and_then(|_| self.port.flush())
            .map_err(|e| LinkError::Io {
                port: self.name.clone(),
                reason: format!("write: {e}"),
            })
    }

    /// The next COBS frame (decoded) before `deadline`, or None.
    fn next_frame(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>, LinkError> {
        let mut buf = [0u8; 1024];
        loop {
            if let Some(frame) = take_frame(&mut self.rx) {
                return Ok(Some(frame));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            match self.port.read(&mut buf) {
                Ok(n) => {
                    self.rx.extend_from_slice(&buf[..n]);
                    if self.rx.len() > 64 * 1024 {
                        self.rx.clear();
                    }
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::TimedOut
                        || e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(LinkError::Io {
                        port: self.name.clone(),
                        reason: format!("read: {e}"),
                    });
                }
            }
        }
    }
}

/// Takes the next frame out of `rx` (bytes as read from the line), decoded,
/// or None when no complete one is there; bytes that are no frame are
/// dropped. A frame can arrive glued to stray bytes before it (the text
/// console's prompt, written after its answer, can reach the line after the
/// client emptied its input on opening; noise on the line): without a 0
/// between them, the stray bytes and the frame read as one bad frame. So
/// where the bytes up to a 0 are no frame of this protocol (a header of one
/// of its keys), the frame is looked for at each later start.
fn take_frame(rx: &mut Vec<u8>) -> Option<Vec<u8>> {
    while let Some(end) = rx.iter().position(|&b| b == 0) {
        let chunk: Vec<u8> = rx.drain(..=end).take(end).collect();
        let mut frame = Vec::with_capacity(MAX_WIRE_FRAME);
        for start in frame_starts(chunk.len()) {
            frame.clear();
            frame.extend_from_slice(&chunk[start..]);
            let Some(n) = diag_proto::cobs::decode_in_place(&mut frame) else {
                continue;
            };
            frame.truncate(n);
            if is_ours(&frame) {
                return Some(frame);
            }
        }
    }
    None
}

/// Where in a chunk of `len` bytes (up to a 0) a frame may start: a frame
/// is the chunk's tail, and none is longer than MAX_WIRE_FRAME, so a long
/// run of noise before it costs no more tries than that.
fn frame_starts(len: usize) -> std::ops::Range<usize> {
    len.saturating_sub(MAX_WIRE_FRAME)..len
}

/// A frame whose header names a key this protocol sends: a response of one
/// of its endpoints, its error, or one of its topics.
fn is_ours(frame: &[u8]) -> bool {
    let Some((hdr, _)) = split_frame(frame) else {
        return false;
    };
    let VarKey::Key8(key) = hdr.key else {
        return false;
    };
    key == ERROR_KEY
        || ENDPOINTS.iter().any(|(_, _, resp)| *resp == key)
        || TOPICS_OUT.iter().any(|(_, k)| *k == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(seq: u32) -> Vec<u8> {
        let mut w = [0u8; MAX_WIRE_FRAME];
        let info = VersionInfo {
            protocol: PROTOCOL_VERSION,
            oldest_supported: OLDEST_SUPPORTED,
            radard: Text::truncate_from("test"),
        };
        let n = encode_frame(
            VersionEndpoint::RESP_KEY,
            VarSeq::Seq4(seq),
            &VarKey::Key8(VersionEndpoint::RESP_KEY),
            &info,
            &mut w,
        )
        .expect("encode");
        w[..n].to_vec()
    }

    fn seq_of(frame: &[u8]) -> VarSeq {
        split_frame(frame).expect("a header").0.seq_no
    }

    #[test]
    fn a_frame_after_stray_bytes_is_still_found() {
        let clean = wire(7);
        assert_eq!(*clean.last().expect("bytes"), 0, "frames end with their 0");
        // The console's prompt, a run of printable text, a byte that reads as
        // a long COBS run: each glued to the front of the frame.
        for junk in [&b"> "[..], b"status frames=1234 ", b" ", b"\xff\x01"] {
            let mut rx = junk.to_vec();
            rx.extend_from_slice(&clean);
            let f = take_frame(&mut rx).unwrap_or_else(|| panic!("frame after {junk:?}"));
            assert_eq!(seq_of(&f), VarSeq::Seq4(7), "after {junk:?}");
            assert!(rx.is_empty());
        }
    }

    #[test]
    fn frames_come_out_in_order_and_noise_alone_gives_none() {
        let mut rx = b"noise\0".to_vec();
        rx.extend_from_slice(&wire(1));
        rx.extend_from_slice(b"> ");
        rx.extend_from_slice(&wire(2));
        rx.extend_from_slice(&wire(3)[..4]);
        assert_eq!(
            take_frame(&mut rx).map(|f| seq_of(&f)),
            Some(VarSeq::Seq4(1))
        );
        assert_eq!(
            take_frame(&mut rx).map(|f| seq_of(&f)),
            Some(VarSeq::Seq4(2))
        );
        assert_eq!(take_frame(&mut rx), None, "the third is not complete yet");
        assert_eq!(rx, wire(3)[..4].to_vec(), "its bytes wait for the rest");
        // A long run of noise before a frame (the client keeps up to 64 KiB).
        let mut rx: Vec<u8> = (0..60_000u32).map(|i| (i % 251 + 1) as u8).collect();
        rx.extend_from_slice(&wire(4));
        assert_eq!(
            take_frame(&mut rx).map(|f| seq_of(&f)),
            Some(VarSeq::Seq4(4))
        );
        // The search is bounded by the longest frame, not by the noise.
        let len = 60_000 + wire(4).len();
        assert_eq!(frame_starts(len), len - MAX_WIRE_FRAME..len);
        assert_eq!(frame_starts(3), 0..3, "a short chunk: every start");
        let mut noise = b"\x05abc\0\x02\0".to_vec();
        assert_eq!(take_frame(&mut noise), None);
        assert!(noise.is_empty());
    }
}
