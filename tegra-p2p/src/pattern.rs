//! The FPGA test pattern (`board/fpga/test-pattern.md`): generator, verifier,
//! CRC and sequence continuity.
//!
//! A frame is little-endian 32-bit words; word `w` of chunk `c` (index `k` in
//! the chunk) is a chunk marker, the sequence number, the chunk index, or a
//! hash of `w` and the sequence. The verifier compares blocks of words with an
//! OR-accumulated XOR (no branch per word, so the compiler vectorizes it) and
//! only locates the exact word once a block is known to differ.

/// Word 0 of every chunk.
pub const CHUNK_MARKER: u32 = 0x7E57_F00D;
const W_MUL: u32 = 0x9E37_79B1;
const S_MUL: u32 = 0x85EB_CA6B;

/// The first difference between a frame and the pattern it should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "test pattern mismatch at byte offset {offset} (chunk {chunk}): expected {expected:#010x}, got {got:#010x}"
)]
pub struct Mismatch {
    /// Byte offset of the 32-bit word in the frame.
    pub offset: usize,
    /// Chunk that word belongs to.
    pub chunk: usize,
    pub expected: u32,
    pub got: u32,
}

/// Geometry errors of the pattern functions (lengths that are not whole words).
fn check_geometry(len: usize, chunk_bytes: usize) -> Result<(), Mismatch> {
    if chunk_bytes < 16 || !chunk_bytes.is_multiple_of(4) || !len.is_multiple_of(4) {
        return Err(Mismatch {
            offset: 0,
            chunk: 0,
            expected: 0,
            got: 0,
        });
    }
    Ok(())
}

#[inline(always)]
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
fn seq_mix(seq: u64) -> u32 {
    (seq as u32).wrapping_mul(S_MUL) ^ (seq >> 32) as u32
}

/// Expected word at word index `w` (frame-relative) of frame `seq`.
#[inline(always)]
pub fn expected_word(w: u32, seq: u64, chunk_words: u32) -> u32 {
    let c = w / chunk_words;
    match w - c * chunk_words {
        0 => CHUNK_MARKER,
        1 => seq as u32,
        2 => (seq >> 32) as u32,
        3 => c,
        _ => w.wrapping_mul(W_MUL) ^ seq_mix(seq),
    }
}

/// Writes chunk `chunk` of frame `seq` into `dst` (the chunk's bytes; may be
/// shorter than a chunk for a short frame's last piece).
pub fn fill_chunk(dst: &mut [u8], seq: u64, chunk: usize, chunk_bytes: usize) {
    let chunk_words = (chunk_bytes / 4) as u32;
    let base = (chunk as u32).wrapping_mul(chunk_words);
    let mix = seq_mix(seq);
    for (k, out) in dst.chunks_exact_mut(4).enumerate() {
        let k = k as u32;
        let v = if k < 4 {
            match k {
                0 => CHUNK_MARKER,
                1 => seq as u32,
                2 => (seq >> 32) as u32,
                _ => chunk as u32,
            }
        } else {
            base.wrapping_add(k).wrapping_mul(W_MUL) ^ mix
        };
        out.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes the whole test-pattern frame `seq` into `dst`.
pub fn fill_frame(dst: &mut [u8], seq: u64, chunk_bytes: usize) {
    for (c, chunk) in dst.chunks_mut(chunk_bytes).enumerate() {
        fill_chunk(chunk, seq, c, chunk_bytes);
    }
}

/// Checks `frame` (the delivered bytes, possibly a short frame) against the
/// test pattern of sequence `seq` with chunks of `chunk_bytes`.
/// A length or chunk size that is not a whole number of words is reported as
/// a mismatch at offset 0.
pub fn verify_test_pattern(frame: &[u8], seq: u64, chunk_bytes: usize) -> Result<(), Mismatch> {
    check_geometry(frame.len(), chunk_bytes)?;
    for (c, chunk) in frame.chunks(chunk_bytes).enumerate() {
        verify_one_chunk(chunk, seq, c, chunk_bytes)?;
    }
    Ok(())
}

/// Checks chunk `c` of frame `seq` alone (`chunk`: its bytes, a whole chunk
/// of `chunk_bytes`): what a consumer that a completion record told "chunk
/// `c` landed" can check before the frame completes. Offsets in the
/// mismatch are the frame's.
pub fn verify_chunk(chunk: &[u8], seq: u64, c: usize, chunk_bytes: usize) -> Result<(), Mismatch> {
    check_geometry(chunk.len(), chunk_bytes)?;
    if chunk.len() != chunk_bytes {
        return Err(Mismatch {
            offset: c * chunk_bytes,
            chunk: c,
            expected: chunk_bytes as u32,
            got: chunk.len() as u32,
        });
    }
    verify_one_chunk(chunk, seq, c, chunk_bytes)
}

fn verify_one_chunk(chunk: &[u8], seq: u64, c: usize, chunk_bytes: usize) -> Result<(), Mismatch> {
    let chunk_words = (chunk_bytes / 4) as u32;
    let mix = seq_mix(seq);
    let base = (c as u32).wrapping_mul(chunk_words);
    let words = chunk.chunks_exact(4);
    let head = [CHUNK_MARKER, seq as u32, (seq >> 32) as u32, c as u32];
    let nhead = words.len().min(4);
    let mut diff = 0u32;
    for (wb, h) in words.clone().zip(head) {
        diff |= le32(wb) ^ h;
    }
    // Body in blocks: one OR-reduction per block, exact search on failure.
    const BLOCK: usize = 256;
    let body = &chunk[(nhead * 4).min(chunk.len())..];
    let mut k0 = 4u32;
    if diff == 0 {
        for block in body.chunks(BLOCK * 4) {
            let mut acc = 0u32;
            for (i, wb) in block.chunks_exact(4).enumerate() {
                let e = base.wrapping_add(k0 + i as u32).wrapping_mul(W_MUL) ^ mix;
                acc |= le32(wb) ^ e;
            }
            if acc != 0 {
                diff = acc;
                break;
            }
            k0 += (block.len() / 4) as u32;
        }
    }
    if diff != 0 {
        // Slow path: find the first differing word of this chunk.
        for (k, wb) in words.enumerate() {
            let w = base.wrapping_add(k as u32);
            let expected = expected_word(w, seq, chunk_words);
            let got = le32(wb);
            if got != expected {
                return Err(Mismatch {
                    offset: c * chunk_bytes + k * 4,
                    chunk: c,
                    expected,
                    got,
                });
            }
        }
    }
    Ok(())
}

/// CRC-32/IEEE (zlib) of a payload, as the FPGA computes it.
pub fn crc32(payload: &[u8]) -> u32 {
    crc32fast::hash(payload)
}

/// A CRC that does not match the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("CRC mismatch: metadata says {expected:#010x}, payload has {got:#010x}")]
pub struct CrcMismatch {
    pub expected: u32,
    pub got: u32,
}

/// Checks a payload against the CRC that travelled in its metadata.
pub fn check_crc(payload: &[u8], expected: u32) -> Result<(), CrcMismatch> {
    let got = crc32(payload);
    if got == expected {
        Ok(())
    } else {
        Err(CrcMismatch { expected, got })
    }
}

/// A sequence number that no drop count explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "sequence discontinuity: expected {expected} (previous + 1 + dropped {dropped}), got {got}"
)]
pub struct SequenceError {
    pub expected: u64,
    pub got: u64,
    pub dropped: u32,
}

/// Checks `seq(n) = seq(n-1) + 1 + dropped(n)` over delivered frames (the
/// first one after start must be `dropped`, since sequences count from 0),
/// and counts frames and drops.
#[derive(Debug, Clone, Default)]
pub struct SequenceTracker {
    next: Option<u64>,
    /// Frames observed.
    pub delivered: u64,
    /// Drops reported by the frames' metadata.
    pub dropped: u64,
    /// Discontinuities seen (each also returned as an error).
    pub errors: u64,
}

impl SequenceTracker {
    /// A tracker for a stream that started at sequence 0.
    pub fn new() -> Self {
        Self {
            next: Some(0),
            ..Self::default()
        }
    }

    /// A tracker that accepts whatever the first frame says (joining a running stream).
    pub fn joining() -> Self {
        Self::default()
    }

    /// Records one delivered frame. On a discontinuity the tracker resynchronises
    /// to this frame, so one fault is reported once.
    pub fn observe(&mut self, seq: u64, dropped: u32) -> Result<(), SequenceError> {
        self.delivered += 1;
        self.dropped += u64::from(dropped);
        let expected = self.next.map(|n| n + u64::from(dropped));
        self.next = Some(seq + 1);
        match expected {
            Some(e) if e != seq => {
                self.errors += 1;
                Err(SequenceError {
                    expected: e,
                    got: seq,
                    dropped,
                })
            }
            _ => Ok(()),
        }
    }

    /// Frames the source started so far (delivered + dropped) according to the stream.
    pub fn started(&self) -> u64 {
        self.next.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_round_trip_and_detection() {
        let chunk = 1024;
        let mut f = vec![0u8; 4 * chunk];
        let seq = 0x1_2345_6789u64;
        fill_frame(&mut f, seq, chunk);
        assert_eq!(verify_test_pattern(&f, seq, chunk), Ok(()));
        // Word values follow the spec.
        let w = |i: usize| u32::from_le_bytes(f[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!(w(0), CHUNK_MARKER);
        assert_eq!(w(1), 0x2345_6789);
        assert_eq!(w(2), 1);
        assert_eq!(w(3), 0);
        assert_eq!(w(256 + 3), 1);
        let w5 = 5u32.wrapping_mul(W_MUL) ^ 0x2345_6789u32.wrapping_mul(S_MUL) ^ 1;
        assert_eq!(w(5), w5);
        // Wrong sequence.
        let e = verify_test_pattern(&f, seq + 1, chunk).unwrap_err();
        assert_eq!(e.offset, 4);
        // A flipped bit anywhere.
        for off in [0usize, 17, 1023, 1024, 3000, 4095] {
            let mut g = f.clone();
            g[off] ^= 0x10;
            let e = verify_test_pattern(&g, seq, chunk).unwrap_err();
            assert_eq!(e.offset, off / 4 * 4, "flip at {off}");
            assert_eq!(e.chunk, off / chunk);
        }
        // Chunks swapped (a chunk in the wrong place).
        let mut g = f.clone();
        g.copy_within(0..chunk, 2 * chunk);
        assert_eq!(
            verify_test_pattern(&g, seq, chunk).unwrap_err().offset,
            2 * chunk + 12
        );
        // Short frame prefix verifies.
        assert_eq!(verify_test_pattern(&f[..1500], seq, chunk), Ok(()));
        // Bad geometry is an error, not a panic.
        assert!(verify_test_pattern(&f[..7], seq, chunk).is_err());
        assert!(verify_test_pattern(&f, seq, 6).is_err());
    }

    #[test]
    fn crc_is_zlib_crc32() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert!(check_crc(b"123456789", 0xCBF4_3926).is_ok());
        assert!(check_crc(b"123456780", 0xCBF4_3926).is_err());
    }

    #[test]
    fn sequence_tracker() {
        let mut t = SequenceTracker::new();
        assert!(t.observe(0, 0).is_ok());
        assert!(t.observe(1, 0).is_ok());
        assert!(t.observe(4, 2).is_ok());
        assert_eq!(t.observe(6, 0).unwrap_err().expected, 5);
        assert!(t.observe(7, 0).is_ok());
        assert_eq!((t.delivered, t.dropped, t.errors), (5, 2, 1));
        let mut t = SequenceTracker::new();
        assert!(t.observe(3, 3).is_ok());
        assert!(SequenceTracker::new().observe(3, 2).is_err());
        assert!(SequenceTracker::joining().observe(99, 0).is_ok());
    }
}
