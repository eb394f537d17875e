//! The Field Specification (FSPEC) that opens every record: one bit per
//! item of the User Application Profile, seven per octet in FRN order from
//! the most significant bit, and the least significant bit (FX) set in
//! every octet that another follows. Trailing octets with no item are
//! left out.

/// The items of the CAT-010 UAP this encoder writes, with their Field
/// Reference Numbers (edition 1.1's UAP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// I010/010 Data Source Identifier.
    DataSource,
    /// I010/000 Message Type.
    MessageType,
    /// I010/020 Target Report Descriptor.
    Descriptor,
    /// I010/140 Time of Day.
    TimeOfDay,
    /// I010/040 Measured Position in Polar Co-ordinates.
    PolarPosition,
    /// I010/200 Calculated Track Velocity in Polar Co-ordinates.
    PolarVelocity,
    /// I010/131 Amplitude of Primary Plot.
    Amplitude,
}

impl Item {
    /// The item's Field Reference Number in the UAP.
    pub const fn frn(self) -> u8 {
        match self {
            Item::DataSource => 1,
            Item::MessageType => 2,
            Item::Descriptor => 3,
            Item::TimeOfDay => 4,
            Item::PolarPosition => 6,
            Item::PolarVelocity => 8,
            Item::Amplitude => 24,
        }
    }
}

/// Octets of the longest FSPEC of CAT-010 (FRN 1 to 28).
pub const MAX_FSPEC_BYTES: usize = 4;

/// An FSPEC being built: the items present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fspec {
    octets: [u8; MAX_FSPEC_BYTES],
}

impl Fspec {
    pub const fn new() -> Self {
        Fspec {
            octets: [0; MAX_FSPEC_BYTES],
        }
    }

    /// Marks `item` present.
    pub const fn with(mut self, item: Item) -> Self {
        let i = (item.frn() - 1) as usize;
        // FRN 1 is bit 8 of the first octet, FRN 7 bit 2, FRN 8 bit 8 of
        // the second, ...; bit 1 of each is FX.
        self.octets[i / 7] |= 0x80 >> (i % 7);
        self
    }

    /// Octets of the encoded FSPEC (at least one).
    pub const fn len(&self) -> usize {
        let mut n = MAX_FSPEC_BYTES;
        while n > 1 && self.octets[n - 1] == 0 {
            n -= 1;
        }
        n
    }

    /// Never empty: an FSPEC has at least one octet.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The encoded FSPEC, FX bits set, in the first `len()` octets.
    pub const fn bytes(&self) -> [u8; MAX_FSPEC_BYTES] {
        let mut out = self.octets;
        let n = self.len();
        let mut k = 0;
        while k + 1 < n {
            out[k] |= 1;
            k += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked from the UAP: FRN 1-4 and 6 are bits 8, 7, 6, 5 and 3 of the
    /// first octet: 1111 0100 = 0xF4, nothing after it, FX = 0.
    #[test]
    fn the_mandatory_items_and_the_position_fit_one_octet() {
        let f = Fspec::new()
            .with(Item::DataSource)
            .with(Item::MessageType)
            .with(Item::Descriptor)
            .with(Item::TimeOfDay)
            .with(Item::PolarPosition);
        assert_eq!(f.len(), 1);
        assert_eq!(f.bytes()[0], 0xF4);
    }

    /// FRN 8 is bit 8 of the second octet (0x80); FRN 24 is the third item
    /// of the fourth octet (FRN 22, 23, 24 -> bit 6: 0010 0000 = 0x20).
    /// Every octet before the last has FX = 1: F5 81 01 20.
    #[test]
    fn fx_bits_chain_the_octets_up_to_the_last_item() {
        let all = Fspec::new()
            .with(Item::DataSource)
            .with(Item::MessageType)
            .with(Item::Descriptor)
            .with(Item::TimeOfDay)
            .with(Item::PolarPosition)
            .with(Item::PolarVelocity)
            .with(Item::Amplitude);
        assert_eq!(all.len(), 4);
        assert_eq!(all.bytes(), [0xF5, 0x81, 0x01, 0x20]);
        // Velocity without amplitude: two octets, F5 80.
        let v = Fspec::new()
            .with(Item::DataSource)
            .with(Item::MessageType)
            .with(Item::Descriptor)
            .with(Item::TimeOfDay)
            .with(Item::PolarPosition)
            .with(Item::PolarVelocity);
        assert_eq!((v.len(), &v.bytes()[..2]), (2, &[0xF5, 0x80][..]));
        // Amplitude without velocity: the empty second and third octets
        // are still sent, with FX set: F5 01 01 20.
        let a = Fspec::new().with(Item::PolarPosition).with(Item::Amplitude);
        assert_eq!(a.bytes(), [0x05, 0x01, 0x01, 0x20]);
        assert_eq!(Fspec::new().len(), 1);
    }
}
