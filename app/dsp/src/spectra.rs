//! The stored range spectra (spec v1 step 1, docs/processing-chain.md).
//!
//! The range spectra are the chain's only frame-sized intermediate: written
//! once after the range FFT and read once by the Doppler FFT. Both backends
//! store each float32 component rounded to nearest, ties to even, at 16
//! significant bits (sign, exponent and the top 15 fraction bits: 24 bits).
//! The CUDA backend keeps the 24 bits in 6 bytes a complex value instead of
//! 8, which takes about a fifth off the chain's memory traffic (21.5 to
//! 17.5 MiB a frame); the CPU backend rounds the same way so that the two
//! give the same detections.
//!
//! The rounding error is at most 2^-16 of the value, far below the
//! quantisation noise of the 16-bit samples it comes from (the range FFT
//! of a full-scale int16 chirp has a dynamic range of about 96 dB; 2^-16 is
//! -96 dB of the value itself, not of full scale).

use rustfft::num_complex::Complex32;

/// Fraction bits dropped from a float32 (23 stored, 15 kept).
const DROPPED_BITS: u32 = 8;

/// Bytes a stored value takes where the spectra are packed (the CUDA
/// backend's `x`): 24 bits for each of the two components.
pub const PACKED_BYTES: usize = 6;

/// `v` rounded to nearest, ties to even, at 16 significant bits. Exact on
/// the bit pattern, so the CUDA kernels (`round_stored` in kernels.cu) give
/// the same value for the same input. A carry out of the fraction moves
/// into the exponent, which is the correct rounding; the inputs are finite
/// and far from `f32::MAX`, so it never reaches infinity.
#[inline]
pub fn round_stored(v: f32) -> f32 {
    let u = v.to_bits();
    let half = (1u32 << (DROPPED_BITS - 1)) - 1 + ((u >> DROPPED_BITS) & 1);
    f32::from_bits(u.wrapping_add(half) & !((1u32 << DROPPED_BITS) - 1))
}

/// Both components of `v` rounded by [`round_stored`].
#[inline]
pub fn round_stored_complex(v: Complex32) -> Complex32 {
    Complex32::new(round_stored(v.re), round_stored(v.im))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_values_that_fit_and_rounds_the_rest_to_nearest_even() {
        for v in [0.0f32, -0.0, 1.0, -2.5, 65535.0, 1.0e-30] {
            let fits = f32::from_bits(v.to_bits() & !0xff);
            assert_eq!(round_stored(fits).to_bits(), fits.to_bits(), "{fits:e}");
        }
        let one = 1.0f32.to_bits();
        // Below half of the dropped unit: down; above: up.
        assert_eq!(round_stored(f32::from_bits(one | 0x7f)).to_bits(), one);
        assert_eq!(
            round_stored(f32::from_bits(one | 0x81)).to_bits(),
            one + 0x100
        );
        // Exactly half: to the even neighbour.
        assert_eq!(round_stored(f32::from_bits(one | 0x80)).to_bits(), one);
        assert_eq!(
            round_stored(f32::from_bits(one | 0x180)).to_bits(),
            one + 0x200
        );
        // Negative values round their magnitude the same way.
        let minus = (-1.0f32).to_bits();
        assert_eq!(
            round_stored(f32::from_bits(minus | 0x81)).to_bits(),
            minus + 0x100
        );
        // The largest fraction carries into the exponent: 2 - 2^-23 -> 2.
        assert_eq!(round_stored(f32::from_bits(0x3fff_ffff)), 2.0);
    }

    #[test]
    fn the_error_is_at_most_two_to_the_minus_16_of_the_value() {
        let mut u = 0x1234_5678u32;
        for _ in 0..100_000 {
            // xorshift: finite values of every exponent in a sane range.
            u ^= u << 13;
            u ^= u >> 17;
            u ^= u << 5;
            let v = f32::from_bits((u & 0x807f_ffff) | ((100 + (u >> 24) % 60) << 23));
            let r = round_stored(v);
            let err = (f64::from(r) - f64::from(v)).abs();
            assert!(err <= f64::from(v).abs() * 2f64.powi(-16), "{v:e} -> {r:e}");
            assert_eq!(round_stored(r), r, "rounding twice changes nothing");
            assert_eq!(r.to_bits() & 0xff, 0, "{r:e} has 16 significant bits");
        }
    }
}
