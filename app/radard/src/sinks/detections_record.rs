//! The detections record the `fpga` sink sends on the FPGA's transmit
//! channel (board/fpga/detections-record.md): a 32-byte header and 28 bytes
//! per detection, little-endian. `radard decode-record` decodes one.

use radar_dsp::Detection;
use thiserror::Error;

pub const MAGIC: u32 = 0x5445_4452; // "RDET"
pub const VERSION: u16 = 1;
pub const HEADER_BYTES: usize = 32;
pub const DETECTION_BYTES: usize = 28;

/// Bytes of a record of `n` detections.
pub fn record_bytes(n: usize) -> usize {
    HEADER_BYTES + n * DETECTION_BYTES
}

/// Encodes a record into `out` (cleared; allocates only if `out` is too
/// small). At most `max` detections; the rest are added to the cut.
pub fn encode(
    sequence: u64,
    timestamp_ns: u64,
    dets: &[Detection],
    cut: u32,
    max: usize,
    out: &mut Vec<u8>,
) {
    let n = dets.len().min(max).min(u32::MAX as usize);
    let cut = cut.saturating_add((dets.len() - n) as u32);
    out.clear();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(DETECTION_BYTES as u16).to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&timestamp_ns.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&cut.to_le_bytes());
    for d in &dets[..n] {
        out.extend_from_slice(&d.range_bin.to_le_bytes());
        out.extend_from_slice(&d.doppler_bin.to_le_bytes());
        for v in [
            d.range_m,
            d.velocity_mps,
            d.azimuth_deg,
            d.snr_db,
            d.power_db,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// A decoded detections record (tests, tools).
#[derive(Clone, Debug, PartialEq)]
pub struct DetectionsRecord {
    pub sequence: u64,
    pub timestamp_ns: u64,
    pub cut: u32,
    pub detections: Vec<Detection>,
}

/// What is wrong with bytes that are not a detections record.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("{len} bytes, shorter than the 32-byte header")]
    Short { len: usize },
    #[error("magic {found:#010x}, want {MAGIC:#010x}")]
    Magic { found: u32 },
    #[error("version {version} with {per}-byte detections, want 1 with 28")]
    Version { version: u16, per: usize },
    #[error("{len} bytes for {n} detections, want {want}")]
    Length { len: usize, n: usize, want: usize },
}

/// Decodes a record; the error says what is wrong with it.
pub fn decode(b: &[u8]) -> Result<DetectionsRecord, RecordError> {
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
    if b.len() < HEADER_BYTES {
        return Err(RecordError::Short { len: b.len() });
    }
    if u32_at(0) != MAGIC {
        return Err(RecordError::Magic { found: u32_at(0) });
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    let per = u16::from_le_bytes([b[6], b[7]]) as usize;
    if version != VERSION || per != DETECTION_BYTES {
        return Err(RecordError::Version { version, per });
    }
    let n = u32_at(24) as usize;
    if b.len() != record_bytes(n) {
        return Err(RecordError::Length {
            len: b.len(),
            n,
            want: record_bytes(n),
        });
    }
    let f32_at = |o: usize| f32::from_bits(u32_at(o));
    let detections = (0..n)
        .map(|k| {
            let o = HEADER_BYTES + k * DETECTION_BYTES;
            Detection {
                range_bin: u32_at(o),
                doppler_bin: u32_at(o + 4),
                range_m: f32_at(o + 8),
                velocity_mps: f32_at(o + 12),
                azimuth_deg: f32_at(o + 16),
                snr_db: f32_at(o + 20),
                power_db: f32_at(o + 24),
                ..Detection::default()
            }
        })
        .collect();
    Ok(DetectionsRecord {
        sequence: u64_at(8),
        timestamp_ns: u64_at(16),
        cut: u32_at(28),
        detections,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::test_detection as det;

    #[test]
    fn records_round_trip_and_bad_ones_say_why() {
        let dets: Vec<Detection> = (0..3).map(det).collect();
        let mut b = Vec::new();
        encode(42, 1234, &dets, 2, 2, &mut b);
        assert_eq!(b.len(), record_bytes(2));
        let r = decode(&b).expect("decodes");
        assert_eq!((r.sequence, r.timestamp_ns, r.cut), (42, 1234, 3));
        assert_eq!(r.detections, dets[..2].to_vec());
        assert_eq!(
            decode(&b[..40]).map_err(|e| e.to_string()),
            Err("40 bytes for 2 detections, want 88".to_string())
        );
        assert_eq!(decode(&b[..31]), Err(RecordError::Short { len: 31 }));
        b[0] = 0;
        assert!(decode(&b).is_err_and(|e| e.to_string().contains("magic")));
    }
}
