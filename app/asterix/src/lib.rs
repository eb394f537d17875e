//! An encoder for ASTERIX Category 010, "Transmission of Monosensor Surface
//! Movement Data", **edition 1.1 (March 2007)** of the EUROCONTROL Standard
//! Document for Surveillance Data Exchange, Part 7: the category
//! short-range ground radars use for their target reports. docs/asterix.md
//! says how radard uses it.
//!
//! `no_std` and allocation-free: a record is written into a caller's
//! `&mut [u8]`, and a [`DataBlock`] fills a caller's buffer with records up
//! to its size, so that a sender can split a frame's reports over datagrams
//! on record boundaries.
//!
//! One target report ([`TargetReport`], message type 1) carries these items
//! of the standard User Application Profile, in FRN order:
//!
//! | FRN | item | what | encoding |
//! |---|---|---|---|
//! | 1 | I010/010 | Data Source Identifier | SAC, SIC: one octet each |
//! | 2 | I010/000 | Message Type | 1 = target report |
//! | 3 | I010/020 | Target Report Descriptor | TYP = 3 (PSR); SIM in the first extension when set |
//! | 4 | I010/140 | Time of Day | 24 bits, LSB 1/128 s since midnight UTC |
//! | 6 | I010/040 | Measured Position in Polar Co-ordinates | RHO 16 bits LSB 1 m; THETA 16 bits LSB 360/2^16 deg |
//! | 8 | I010/200 | Calculated Track Velocity in Polar Co-ordinates | the radial (Doppler) velocity: ground speed LSB 2^-14 NM/s, track angle LSB 360/2^16 deg (optional) |
//! | 24 | I010/131 | Amplitude of Primary Plot | 8 bits, radar-dependent, 0 the least detectable (optional) |
//!
//! Values out of an item's range saturate at its limits and are reported
//! as clamped ([`item::Quantized`]); nothing here panics on any input.

#![no_std]

#[cfg(test)]
extern crate std;

pub mod block;
pub mod fspec;
pub mod item;
pub mod read;
pub mod record;

pub use block::{BLOCK_HEADER_BYTES, BlockError, DataBlock, MAX_BLOCK_BYTES};
pub use record::{MAX_RECORD_BYTES, TargetReport};

/// The category number, the first octet of every data block.
pub const CATEGORY: u8 = 10;

/// The edition of the CAT-010 specification this encoder follows.
pub const EDITION: &str = "1.1 (March 2007)";
