//! Requests as the unit receives them, and frames as either end sends them:
//! a postcard-rpc header (discriminant, key, sequence number), then the
//! postcard body, COBS-encoded with a 0 at the end.

use postcard_rpc::header::{VarHeader, VarKey, VarSeq};
use postcard_rpc::{Endpoint, Key};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::icd::*;
use crate::messages::*;

/// A request the unit understands.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Ping(u32),
    Schemas,
    Version(u16),
    Identity,
    Status,
    Stats,
    Log(LogRequest),
    ParamList(ParamListRequest),
    ParamGet(ParamName),
    ParamSet(SetParam),
    SnapshotInfo,
    SnapshotPiece(PieceRequest),
    Subscribe(Subscribe),
    Time,
}

/// Why a frame got no answer of its endpoint. `header` is the request's,
/// when it could be read (the error answer then carries its sequence number).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestFault {
    pub header: Option<VarHeader>,
    pub error: WireErrorKind,
}

/// The postcard-rpc wire errors this unit sends (see [`WireError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireErrorKind {
    FrameTooShort { len: u32 },
    FrameTooLong { len: u32 },
    DeserFailed,
    UnknownKey,
}

impl WireErrorKind {
    pub fn to_wire(self) -> WireError {
        use postcard_rpc::standard_icd::{FrameTooLong, FrameTooShort};
        match self {
            WireErrorKind::FrameTooShort { len } => WireError::FrameTooShort(FrameTooShort { len }),
            WireErrorKind::FrameTooLong { len } => WireError::FrameTooLong(FrameTooLong {
                len,
                max: MAX_FRAME as u32,
            }),
            WireErrorKind::DeserFailed => WireError::DeserFailed,
            WireErrorKind::UnknownKey => WireError::UnknownKey,
        }
    }
}

fn is<E: Endpoint>(key: &VarKey) -> bool {
    *key == VarKey::Key8(E::REQ_KEY)
}

fn body<T: DeserializeOwned>(hdr: VarHeader, body: &[u8]) -> Result<T, RequestFault> {
    match postcard::take_from_bytes::<T>(body) {
        // Trailing bytes are refused too: a frame is exactly one message.
        Ok((v, [])) => Ok(v),
        _ => Err(RequestFault {
            header: Some(hdr),
            error: WireErrorKind::DeserFailed,
        }),
    }
}

/// Decodes a COBS-decoded frame into its header and request.
pub fn decode_request(frame: &[u8]) -> Result<(VarHeader, Request), RequestFault> {
    if frame.len() > MAX_FRAME {
        return Err(RequestFault {
            header: None,
            error: WireErrorKind::FrameTooLong {
                len: frame.len() as u32,
            },
        });
    }
    let Some((hdr, rest)) = VarHeader::take_from_slice(frame) else {
        return Err(RequestFault {
            header: None,
            error: WireErrorKind::FrameTooShort {
                len: frame.len() as u32,
            },
        });
    };
    let k = &hdr.key;
    let req = if is::<PingEndpoint>(k) {
        Request::Ping(body(hdr, rest)?)
    } else if is::<GetAllSchemasEndpoint>(k) {
        body::<()>(hdr, rest)?;
        Request::Schemas
    } else if is::<VersionEndpoint>(k) {
        Request::Version(body(hdr, rest)?)
    } else if is::<IdentityEndpoint>(k) {
        body::<()>(hdr, rest)?;
        Request::Identity
    } else if is::<StatusEndpoint>(k) {
        body::<()>(hdr, rest)?;
        Request::Status
    } else if is::<StatsEndpoint>(k) {
        body::<()>(hdr, rest)?;
        Request::Stats
    } else if is::<LogEndpoint>(k) {
        Request::Log(body(hdr, rest)?)
    } else if is::<ParamListEndpoint>(k) {
        Request::ParamList(body(hdr, rest)?)
    } else if is::<ParamGetEndpoint>(k) {
        Request::ParamGet(body(hdr, rest)?)
    } else if is::<ParamSetEndpoint>(k) {
        Request::ParamSet(body(hdr, rest)?)
    } else if is::<SnapshotInfoEndpoint>(k) {
        body::<()>(hdr, rest)?;
        Request::SnapshotInfo
    } else if is::<SnapshotPieceEndpoint>(k) {
        Request::SnapshotPiece(body(hdr, rest)?)
    } else if is::<SubscribeEndpoint>(k) {
        Request::Subscribe(body(hdr, rest)?)
    } else if is::<TimeEndpoint>(k) {
        body::<()>(hdr, rest)?;
        Request::Time
    } else {
        return Err(RequestFault {
            header: Some(hdr),
            error: WireErrorKind::UnknownKey,
        });
    };
    Ok((hdr, req))
}

/// Error while building a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The message does not fit [`MAX_FRAME`] or the output buffer.
    TooLarge,
}

/// Builds the wire bytes (COBS, with the 0 at the end) of a message with
/// `key` and `seq`, the key shortened to `kind_of`'s length (an answer
/// uses the request's key length and sequence number). Returns the length
/// written to `wire`.
pub fn encode_frame<T: Serialize + ?Sized>(
    key: Key,
    seq: VarSeq,
    kind_of: &VarKey,
    msg: &T,
    wire: &mut [u8],
) -> Result<usize, EncodeError> {
    let mut raw = [0u8; MAX_FRAME];
    let mut vk = VarKey::Key8(key);
    vk.shrink_to(kind_of.kind());
    let hdr = VarHeader {
        key: vk,
        seq_no: seq,
    };
    let (_, rest) = hdr.write_to_slice(&mut raw).ok_or(EncodeError::TooLarge)?;
    let free = rest.len();
    let used = postcard::to_slice(msg, rest)
        .map_err(|_| EncodeError::TooLarge)?
        .len();
    let n = MAX_FRAME - free + used;
    crate::cobs::encode(&raw[..n], wire).ok_or(EncodeError::TooLarge)
}

/// A decoded frame as a client sees it: header and body.
pub fn split_frame(frame: &[u8]) -> Option<(VarHeader, &[u8])> {
    VarHeader::take_from_slice(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_request_round_trip() {
        let mut wire = [0u8; MAX_WIRE_FRAME];
        let n = encode_frame(
            StatusEndpoint::REQ_KEY,
            VarSeq::Seq4(7),
            &VarKey::Key8(StatusEndpoint::REQ_KEY),
            &(),
            &mut wire,
        )
        .unwrap();
        let mut buf = [0u8; MAX_WIRE_FRAME];
        buf[..n - 1].copy_from_slice(&wire[..n - 1]);
        let m = crate::cobs::decode_in_place(&mut buf[..n - 1]).unwrap();
        let (hdr, req) = decode_request(&buf[..m]).unwrap();
        assert_eq!(req, Request::Status);
        assert_eq!(hdr.seq_no, VarSeq::Seq4(7));
    }

    #[test]
    fn unknown_key_and_bad_body_name_the_header() {
        let raw = [0xE0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0];
        let e = decode_request(&raw).unwrap_err();
        assert_eq!(e.error, WireErrorKind::UnknownKey);
        assert!(e.header.is_some());
        let e = decode_request(&[0xE0, 1]).unwrap_err();
        assert!(matches!(e.error, WireErrorKind::FrameTooShort { .. }));
    }
}
