//! How the simulator writes every chunk into the ring (played back, test
//! pattern, a short frame's zero padding): the way the card's DMA lands,
//! in memory rather than in a CPU core's cache.
//!
//! A plain copy leaves the chunk's lines modified in the simulator core's
//! cache, so a reader that is not that core (the GPU across PCIe, the
//! CPU chain on another core) has every line snooped out of it first: a
//! cost and a jitter the card's writes never cause. On x86_64 the copy
//! uses streaming (non-temporal) stores, which go to memory and drop any
//! cached copy, then a store fence, so that the chunk's completion record,
//! written after it with Release ordering, is not seen before the bytes
//! (streaming stores are not ordered by Release alone). Elsewhere it is a
//! plain copy.

/// Copies `src` into `dst` (the same length) as the card's DMA would land.
///
/// # Panics
/// When the lengths differ (a caller's bug, as with `copy_from_slice`).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "dma_copy::copy: lengths differ");
    imp::copy(dst, src);
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    pub(super) fn copy(dst: &mut [u8], src: &[u8]) {
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let body = (dst.len() - head) / 16 * 16;
        dst[..head].copy_from_slice(&src[..head]);
        let mut i = head;
        while i < head + body {
            // SAFETY: i + 16 <= dst.len() == src.len(); dst + i is 16-byte
            // aligned (head aligns it, and i - head is a multiple of 16);
            // the load is unaligned-tolerant; SSE2 is part of x86_64.
            unsafe {
                let v = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
                _mm_stream_si128(dst.as_mut_ptr().add(i).cast::<__m128i>(), v);
            }
            i += 16;
        }
        dst[head + body..].copy_from_slice(&src[head + body..]);
        // SAFETY: SSE (part of x86_64); orders the streaming stores above
        // before every later store of this thread.
        unsafe { _mm_sfence() };
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    pub(super) fn copy(dst: &mut [u8], src: &[u8]) {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::copy;

    #[test]
    fn copies_every_byte_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut buf = vec![0u8; 4096 + 64];
        for offset in 0..17 {
            for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 1024, 4000] {
                buf.fill(0xEE);
                copy(&mut buf[offset..offset + len], &src[..len]);
                assert_eq!(
                    &buf[offset..offset + len],
                    &src[..len],
                    "offset {offset} len {len}"
                );
                assert!(
                    buf[..offset].iter().all(|&b| b == 0xEE),
                    "wrote before the range"
                );
                assert!(
                    buf[offset + len..].iter().all(|&b| b == 0xEE),
                    "wrote after the range"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn different_lengths_are_a_bug() {
        let mut d = [0u8; 4];
        copy(&mut d, &[1, 2, 3]);
    }
}
