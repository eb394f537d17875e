//! One CAT-010 target report (message type 1): the FSPEC, then the items
//! present in FRN order.

use crate::fspec::{Fspec, Item, MAX_FSPEC_BYTES};
use crate::item::{self, Descriptor, MESSAGE_TYPE_TARGET_REPORT};

/// The longest record this encoder writes: a 4-octet FSPEC, I010/010 (2),
/// I010/000 (1), I010/020 (2 with its extension), I010/140 (3), I010/040
/// (4), I010/200 (4) and I010/131 (1).
pub const MAX_RECORD_BYTES: usize = MAX_FSPEC_BYTES + 2 + 1 + 2 + 3 + 4 + 4 + 1;

/// A primary radar's plot, in physical units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TargetReport {
    /// I010/010: System Area Code and System Identification Code.
    pub sac: u8,
    pub sic: u8,
    /// I010/020.
    pub descriptor: Descriptor,
    /// I010/140 from this UTC time (ns since 1970).
    pub utc_ns: u64,
    /// I010/040: range (m) and azimuth (degrees clockwise from the
    /// sensor's reference direction; any angle, wrapped).
    pub range_m: f64,
    pub azimuth_deg: f64,
    /// I010/200 from the radial velocity (m/s, positive away), when known.
    pub radial_velocity_mps: Option<f64>,
    /// I010/131 from a level in dB above the least detectable, when known.
    pub amplitude_db: Option<f64>,
}

/// What was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// Octets of the record.
    pub len: usize,
    /// Some value was outside its item's field and saturated.
    pub clamped: bool,
}

impl TargetReport {
    fn fspec(&self) -> Fspec {
        let mut f = Fspec::new()
            .with(Item::DataSource)
            .with(Item::MessageType)
            .with(Item::Descriptor)
            .with(Item::TimeOfDay)
            .with(Item::PolarPosition);
        if self.radial_velocity_mps.is_some() {
            f = f.with(Item::PolarVelocity);
        }
        if self.amplitude_db.is_some() {
            f = f.with(Item::Amplitude);
        }
        f
    }

    /// Octets the record takes.
    pub fn encoded_len(&self) -> usize {
        self.fspec().len()
            + 2
            + 1
            + self.descriptor.encode().1
            + 3
            + 4
            + if self.radial_velocity_mps.is_some() {
                4
            } else {
                0
            }
            + usize::from(self.amplitude_db.is_some())
    }

    /// Writes the record at the start of `out`; None (and nothing written)
    /// when `out` is shorter than [`encoded_len`](Self::encoded_len).
    pub fn encode(&self, out: &mut [u8]) -> Option<Encoded> {
        let len = self.encoded_len();
        let out = out.get_mut(..len)?;
        let mut w = Writer { out, at: 0 };
        let fspec = self.fspec();
        w.put(&fspec.bytes()[..fspec.len()]);
        w.put(&item::data_source(self.sac, self.sic));
        w.put(&[MESSAGE_TYPE_TARGET_REPORT]);
        let (d, n) = self.descriptor.encode();
        w.put(&d[..n]);
        w.put(&item::time_of_day(self.utc_ns));
        let pos = item::polar_position(self.range_m, self.azimuth_deg);
        w.put(&pos.raw);
        let mut clamped = pos.clamped;
        if let Some(v) = self.radial_velocity_mps {
            let q = item::polar_velocity(v, self.azimuth_deg);
            w.put(&q.raw);
            clamped |= q.clamped;
        }
        if let Some(a) = self.amplitude_db {
            let q = item::amplitude(a);
            w.put(&[q.raw]);
            clamped |= q.clamped;
        }
        debug_assert_eq!(w.at, len);
        Some(Encoded { len, clamped })
    }
}

/// Sequential writes into a slice known to be long enough.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let end = self.at + bytes.len();
        if let Some(dst) = self.out.get_mut(self.at..end) {
            dst.copy_from_slice(bytes);
        }
        self.at = end;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// 2026-11-26 13:45:30.5 UTC (see item.rs: ToD 0x60BD40).
    pub(crate) const T: u64 = 1_795_651_200_000_000_000 + 49_530_500_000_000;

    pub(crate) fn report() -> TargetReport {
        TargetReport {
            sac: 25,
            sic: 201,
            descriptor: Descriptor::default(),
            utc_ns: T,
            range_m: 1234.4,
            azimuth_deg: 45.0,
            radial_velocity_mps: Some(10.0),
            amplitude_db: Some(23.6),
        }
    }

    /// Item by item, in FRN order (each worked in item.rs / fspec.rs):
    /// FSPEC F5 81 01 20 | I010/010 19 C9 | I010/000 01 | I010/020 60 |
    /// I010/140 60 BD 40 | I010/040 04 D2 20 00 | I010/200 00 58 20 00 |
    /// I010/131 18: 20 octets.
    #[test]
    fn a_full_target_report_is_the_items_in_frn_order() {
        let mut out = [0xEEu8; 32];
        let e = report().encode(&mut out).expect("fits");
        assert_eq!(
            e,
            Encoded {
                len: 20,
                clamped: false
            }
        );
        assert_eq!(
            out[..20],
            [
                0xF5, 0x81, 0x01, 0x20, 0x19, 0xC9, 0x01, 0x60, 0x60, 0xBD, 0x40, 0x04, 0xD2, 0x20,
                0x00, 0x00, 0x58, 0x20, 0x00, 0x18
            ]
        );
        assert_eq!(out[20], 0xEE, "nothing written past the record");
    }

    /// Without the optional items: FSPEC F4 and the mandatory items and
    /// the position, 12 octets. Simulated: I010/020 is 61 80, and with
    /// every item the record is the longest, 21 octets.
    #[test]
    fn optional_items_and_the_descriptor_extension() {
        let r = TargetReport {
            radial_velocity_mps: None,
            amplitude_db: None,
            ..report()
        };
        let mut out = [0u8; 32];
        assert_eq!(r.encode(&mut out).map(|e| e.len), Some(12));
        assert_eq!(
            out[..12],
            [
                0xF4, 0x19, 0xC9, 0x01, 0x60, 0x60, 0xBD, 0x40, 0x04, 0xD2, 0x20, 0x00
            ]
        );
        assert_eq!(r.encode(&mut out[..11]), None, "too short: nothing");
        let sim = TargetReport {
            descriptor: Descriptor {
                simulated: true,
                test_target: false,
            },
            ..report()
        };
        assert_eq!(sim.encoded_len(), MAX_RECORD_BYTES);
        let e = sim.encode(&mut out).expect("fits");
        assert_eq!(e.len, 21);
        assert_eq!(out[7..9], [0x61, 0x80]);
    }
}
