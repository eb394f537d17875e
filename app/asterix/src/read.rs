//! Reads back the data blocks this encoder writes, as raw item values
//! (radard's tests and tools). Only the items [`crate::fspec::Item`] lists
//! are understood: a record with any other is an error, as is a block whose
//! LEN disagrees with its octets. It is a check of our own output, not a
//! general ASTERIX decoder.

use crate::CATEGORY;
use crate::block::BLOCK_HEADER_BYTES;

/// A record's items as raw field values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawReport {
    pub sac: u8,
    pub sic: u8,
    pub message_type: u8,
    /// I010/020's first octet and its first extension (0 when absent).
    pub descriptor: [u8; 2],
    /// 1/128 s since midnight.
    pub time_of_day: u32,
    /// Metres; 360/2^16 degrees.
    pub rho: u16,
    pub theta: u16,
    /// 2^-14 NM/s; 360/2^16 degrees.
    pub velocity: Option<(u16, u16)>,
    pub amplitude: Option<u8>,
}

/// What is wrong with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Shorter than its header, or than its LEN says.
    Short,
    /// CAT is not 10.
    Category(u8),
    /// LEN disagrees with the block's octets.
    Length { len: usize, octets: usize },
    /// A record has an item this reader does not know (its FRN).
    UnknownItem(u8),
    /// A record ends past the block.
    Truncated,
}

/// The records of one data block, in order.
pub struct Records<'a> {
    rest: &'a [u8],
}

/// The records of `block`, after checking its header.
pub fn records(block: &[u8]) -> Result<Records<'_>, ReadError> {
    if block.len() < BLOCK_HEADER_BYTES {
        return Err(ReadError::Short);
    }
    if block[0] != CATEGORY {
        return Err(ReadError::Category(block[0]));
    }
    let len = usize::from(u16::from_be_bytes([block[1], block[2]]));
    if len != block.len() {
        return Err(ReadError::Length {
            len,
            octets: block.len(),
        });
    }
    Ok(Records {
        rest: &block[BLOCK_HEADER_BYTES..],
    })
}

impl Iterator for Records<'_> {
    type Item = Result<RawReport, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = read_record(self.rest);
        match r {
            Ok((report, used)) => {
                self.rest = &self.rest[used..];
                Some(Ok(report))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn read_record(b: &[u8]) -> Result<(RawReport, usize), ReadError> {
    let mut at = 0;
    let mut take = |n: usize| -> Result<&[u8], ReadError> {
        let s = b.get(at..at + n).ok_or(ReadError::Truncated)?;
        at += n;
        Ok(s)
    };
    // The FSPEC's octets, up to the first without FX.
    let mut fspec = [0u8; 8];
    let mut n = 0;
    loop {
        let o = take(1)?[0];
        if n == fspec.len() {
            return Err(ReadError::Truncated);
        }
        fspec[n] = o;
        n += 1;
        if o & 1 == 0 {
            break;
        }
    }
    let mut r = RawReport::default();
    for frn in 1..=(n * 7) as u8 {
        let i = usize::from(frn - 1);
        if fspec[i / 7] & (0x80 >> (i % 7)) == 0 {
            continue;
        }
        match frn {
            1 => {
                let s = take(2)?;
                (r.sac, r.sic) = (s[0], s[1]);
            }
            2 => r.message_type = take(1)?[0],
            3 => {
                r.descriptor[0] = take(1)?[0];
                let mut more = r.descriptor[0] & 1 != 0;
                let mut k = 1;
                while more {
                    let o = take(1)?[0];
                    if k == 1 {
                        r.descriptor[1] = o;
                    }
                    k += 1;
                    more = o & 1 != 0;
                }
            }
            4 => {
                let s = take(3)?;
                r.time_of_day = u32::from_be_bytes([0, s[0], s[1], s[2]]);
            }
            6 => {
                let s = take(4)?;
                r.rho = u16::from_be_bytes([s[0], s[1]]);
                r.theta = u16::from_be_bytes([s[2], s[3]]);
            }
            8 => {
                let s = take(4)?;
                r.velocity = Some((
                    u16::from_be_bytes([s[0], s[1]]),
                    u16::from_be_bytes([s[2], s[3]]),
                ));
            }
            24 => r.amplitude = Some(take(1)?[0]),
            other => return Err(ReadError::UnknownItem(other)),
        }
    }
    Ok((r, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataBlock;
    use crate::record::tests::{T, report};

    #[test]
    fn what_the_encoder_writes_reads_back() {
        let mut buf = [0u8; 128];
        let mut b = DataBlock::new(&mut buf).expect("room");
        b.push(&report());
        b.push(&crate::TargetReport {
            radial_velocity_mps: None,
            amplitude_db: None,
            range_m: 70_000.0,
            azimuth_deg: -30.0,
            ..report()
        });
        let block = b.finish();
        let got: std::vec::Vec<_> = records(block).expect("header").collect();
        assert_eq!(got.len(), 2);
        let first = got[0].expect("record");
        assert_eq!((first.sac, first.sic, first.message_type), (25, 201, 1));
        assert_eq!(first.descriptor, [0x60, 0]);
        assert_eq!(first.time_of_day, crate::item::time_of_day_raw(T));
        assert_eq!((first.rho, first.theta), (1234, 0x2000));
        assert_eq!(first.velocity, Some((88, 0x2000)));
        assert_eq!(first.amplitude, Some(24));
        let second = got[1].expect("record");
        assert_eq!((second.rho, second.theta), (0xFFFF, 0xEAAB));
        assert_eq!((second.velocity, second.amplitude), (None, None));
    }

    #[test]
    fn bad_blocks_say_why() {
        let mut buf = [0u8; 64];
        let mut b = DataBlock::new(&mut buf).expect("room");
        b.push(&report());
        let block = b.finish();
        assert_eq!(records(&block[..2]).err(), Some(ReadError::Short));
        assert_eq!(
            records(&block[..22]).err(),
            Some(ReadError::Length {
                len: 23,
                octets: 22
            })
        );
        let mut other = [0u8; 23];
        other.copy_from_slice(block);
        other[0] = 48;
        assert_eq!(records(&other).err(), Some(ReadError::Category(48)));
        other[0] = 10;
        other[2] = 22;
        let cut = &other[..22];
        let first = records(cut).expect("header").next();
        assert_eq!(first, Some(Err(ReadError::Truncated)));
        // FRN 5 (I010/041, WGS-84) is not one of ours.
        let unknown = [0x0A, 0x00, 0x05, 0x08, 0x00];
        let first = records(&unknown).expect("header").next();
        assert_eq!(first, Some(Err(ReadError::UnknownItem(5))));
    }
}
