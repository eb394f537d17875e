//! Windows of spec v1 steps 1 and 3.

/// Periodic Hann window `w[n] = 0.5 - 0.5 cos(2 pi n / len)`, evaluated in
/// float64 and rounded once to float32. Every backend uses these exact
/// float32 values (the CUDA backend uploads this table).
pub fn hann_periodic(len: usize) -> Vec<f32> {
    (0..len)
        .map(|n| {
            let x = 2.0 * std::f64::consts::PI * n as f64 / len as f64;
            (0.5 - 0.5 * x.cos()) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_hann_has_the_textbook_sums() {
        let w = hann_periodic(256);
        assert_eq!(w[0], 0.0);
        assert_eq!(w[128], 1.0);
        // Periodic (not symmetric): w[n] = w[N - n], and no second zero at the end.
        for n in 1..256 {
            assert_eq!(w[n], w[256 - n], "n = {n}");
        }
        let sum: f64 = w.iter().map(|&v| f64::from(v)).sum();
        let sum_sq: f64 = w.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        assert!((sum - 128.0).abs() < 1e-4, "{sum}");
        assert!((sum_sq - 96.0).abs() < 1e-4, "{sum_sq}");
    }
}
