//! The radar unit's serial diagnostics protocol, shared by `radard` (the
//! server) and `radarctl` (the client). `no_std`; every message has a
//! maximum encoded size known at compile time.
//!
//! The wire format is postcard-rpc 0.12's: a header (a discriminant byte,
//! a 1-8 byte key that is the FNV-1a hash of the endpoint's path and the
//! message's schema, a 1-4 byte sequence number), the postcard-encoded
//! body, the whole COBS-encoded and ended by a 0 byte. postcard-rpc's
//! standard endpoints (ping, schemas) and its error answer are served as
//! well, so a stock postcard-rpc host client can talk to the unit.
//!
//! `icd` lists the endpoints and topics, `messages` their types, `bounded`
//! the fixed-capacity text and lists, `rpc` request decoding and frame
//! building, `link` the split of one serial byte stream into frames and
//! the text console's lines, `cobs` the framing.

#![no_std]

pub mod bounded;
pub mod cobs;
pub mod icd;
pub mod link;
pub mod messages;
pub mod rpc;

pub use bounded::{List, Text};
pub use icd::*;
pub use messages::*;
pub use postcard_rpc::header::{VarHeader, VarKey, VarKeyKind, VarSeq, VarSeqKind};
pub use postcard_rpc::{Endpoint, Key, Topic};
pub use postcard_schema::schema::NamedType;
