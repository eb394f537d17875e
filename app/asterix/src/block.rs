//! A data block: CAT (one octet, 10), LEN (two octets, most significant
//! first: the whole block's length, header included), then records. A
//! [`DataBlock`] fills a caller's buffer; a record that does not fit is
//! refused whole, so blocks split on record boundaries.

use crate::CATEGORY;
use crate::record::{Encoded, TargetReport};

/// CAT and LEN.
pub const BLOCK_HEADER_BYTES: usize = 3;
/// LEN is 16 bits.
pub const MAX_BLOCK_BYTES: usize = u16::MAX as usize;

/// Why a block cannot be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// The buffer cannot hold the header.
    BufferTooSmall { len: usize },
}

impl core::fmt::Display for BlockError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BlockError::BufferTooSmall { len } => write!(
                f,
                "a buffer of {len} bytes cannot hold a data block's {BLOCK_HEADER_BYTES}-byte header"
            ),
        }
    }
}

/// A data block being filled in a caller's buffer (at most its first
/// 65535 octets are used).
pub struct DataBlock<'a> {
    buf: &'a mut [u8],
    len: usize,
    records: usize,
}

impl<'a> DataBlock<'a> {
    /// An empty block in `buf`.
    pub fn new(buf: &'a mut [u8]) -> Result<Self, BlockError> {
        if buf.len() < BLOCK_HEADER_BYTES {
            return Err(BlockError::BufferTooSmall { len: buf.len() });
        }
        let cap = buf.len().min(MAX_BLOCK_BYTES);
        Ok(DataBlock {
            buf: &mut buf[..cap],
            len: BLOCK_HEADER_BYTES,
            records: 0,
        })
    }

    /// Appends a record; None (the block unchanged) when it does not fit.
    pub fn push(&mut self, report: &TargetReport) -> Option<Encoded> {
        let e = report.encode(&mut self.buf[self.len..])?;
        self.len += e.len;
        self.records += 1;
        Some(e)
    }

    /// Records in the block.
    pub fn records(&self) -> usize {
        self.records
    }

    /// Octets so far, header included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No record yet.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Writes the header; the block's octets.
    pub fn finish(self) -> &'a [u8] {
        self.buf[0] = CATEGORY;
        // At most MAX_BLOCK_BYTES by construction.
        let len = (self.len as u16).to_be_bytes();
        self.buf[1] = len[0];
        self.buf[2] = len[1];
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_RECORD_BYTES;
    use crate::record::tests::report;

    /// One 20-octet record: CAT 0x0A, LEN 3 + 20 = 23 = 0x0017.
    #[test]
    fn a_block_is_cat_len_and_its_records() {
        let mut buf = [0u8; 64];
        let mut b = DataBlock::new(&mut buf).expect("room");
        assert!(b.is_empty());
        assert!(b.push(&report()).is_some());
        let bytes = b.finish();
        assert_eq!(bytes.len(), 23);
        assert_eq!(bytes[..4], [0x0A, 0x00, 0x17, 0xF5]);
        // Two: LEN 43 = 0x002B.
        let mut b = DataBlock::new(&mut buf).expect("room");
        b.push(&report());
        b.push(&report());
        assert_eq!(b.records(), 2);
        assert_eq!(b.finish()[..3], [0x0A, 0x00, 0x2B]);
    }

    /// A 50-octet buffer takes the header and two 20-octet records; the
    /// third is refused whole and the block stays as it was.
    #[test]
    fn a_record_that_does_not_fit_is_refused_whole() {
        let mut buf = [0u8; 50];
        let mut b = DataBlock::new(&mut buf).expect("room");
        assert!(b.push(&report()).is_some());
        assert!(b.push(&report()).is_some());
        assert_eq!(b.push(&report()), None);
        assert_eq!((b.records(), b.len()), (2, 43));
        assert_eq!(b.finish()[..3], [0x0A, 0x00, 0x2B]);
        let mut small = [0u8; 2];
        assert_eq!(
            DataBlock::new(&mut small).err(),
            Some(BlockError::BufferTooSmall { len: 2 })
        );
        let mut header_only = [0u8; BLOCK_HEADER_BYTES + MAX_RECORD_BYTES - 1];
        let mut b = DataBlock::new(&mut header_only).expect("room");
        let long = TargetReport {
            descriptor: crate::item::Descriptor {
                simulated: true,
                test_target: false,
            },
            ..report()
        };
        assert_eq!(b.push(&long), None);
        assert_eq!(b.finish(), [0x0A, 0x00, 0x03]);
    }

    /// LEN is 16 bits: a larger buffer is used up to 65535 octets, 3276
    /// records of 20 (65523 octets), never more.
    #[test]
    fn a_block_never_outgrows_its_length_field() {
        let mut buf = std::vec![0u8; 70_000];
        let mut b = DataBlock::new(&mut buf).expect("room");
        while b.push(&report()).is_some() {}
        assert_eq!(b.records(), (MAX_BLOCK_BYTES - 3) / 20);
        let bytes = b.finish();
        assert_eq!(bytes.len(), 3 + 3276 * 20);
        assert_eq!(
            u16::from_be_bytes([bytes[1], bytes[2]]) as usize,
            bytes.len()
        );
    }
}
