//! Frame geometry, physical constants and chain parameters
//! (docs/requirements.md; the chain in docs/processing-chain.md). Every
//! number is configuration; the defaults are the `orin-4t4r` preset. `validate` names the offending TOML key in its error.

use serde::{Deserialize, Serialize};

use crate::error::DspError;

/// Speed of light in m/s.
pub const SPEED_OF_LIGHT: f64 = 299_792_458.0;

/// Bytes of one complex int16 sample (I then Q, little-endian).
pub const SAMPLE_BYTES: usize = 4;

/// Frame layout `[chirp m][rx j][sample n]` of complex int16.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Geometry {
    /// Transmitters in time division; chirp `m` uses TX `m mod n_tx`.
    pub n_tx: usize,
    /// Receive channels.
    pub n_rx: usize,
    /// Loops per frame (Doppler FFT length).
    pub n_loops: usize,
    /// Complex samples per chirp per RX (range FFT length).
    pub n_samples: usize,
    /// DMA chunks per frame (the FPGA delivers a frame in this many pieces).
    pub chunks_per_frame: usize,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            n_tx: 4,
            n_rx: 4,
            n_loops: 256,
            n_samples: 256,
            chunks_per_frame: 16,
        }
    }
}

impl Geometry {
    pub fn n_chirps(&self) -> usize {
        self.n_tx * self.n_loops
    }

    /// Virtual channels `p = i * n_rx + j`.
    pub fn n_virtual(&self) -> usize {
        self.n_tx * self.n_rx
    }

    pub fn frame_bytes(&self) -> usize {
        self.n_chirps() * self.n_rx * self.n_samples * SAMPLE_BYTES
    }

    pub fn chunk_bytes(&self) -> usize {
        self.frame_bytes() / self.chunks_per_frame
    }

    /// Byte offset of sample `n` of RX `j` in chirp `m`.
    pub fn sample_offset(&self, m: usize, j: usize, n: usize) -> usize {
        ((m * self.n_rx + j) * self.n_samples + n) * SAMPLE_BYTES
    }

    pub fn validate(&self) -> Result<(), DspError> {
        nonzero("geometry.n_tx", self.n_tx)?;
        nonzero("geometry.n_rx", self.n_rx)?;
        power_of_two("geometry.n_loops", self.n_loops)?;
        power_of_two("geometry.n_samples", self.n_samples)?;
        nonzero("geometry.chunks_per_frame", self.chunks_per_frame)?;
        if self.n_loops < 2 {
            return Err(DspError::config("geometry.n_loops", "must be at least 2"));
        }
        if self.n_samples < 2 {
            return Err(DspError::config("geometry.n_samples", "must be at least 2"));
        }
        let frame = self
            .n_tx
            .checked_mul(self.n_loops)
            .and_then(|c| c.checked_mul(self.n_rx))
            .and_then(|c| c.checked_mul(self.n_samples))
            .and_then(|c| c.checked_mul(SAMPLE_BYTES))
            .ok_or_else(|| DspError::config("geometry", "frame size overflows"))?;
        if frame % self.chunks_per_frame != 0
            || !self.n_chirps().is_multiple_of(self.chunks_per_frame)
        {
            return Err(DspError::config(
                "geometry.chunks_per_frame",
                format!(
                    "{} does not divide the {} chirps of a frame",
                    self.chunks_per_frame,
                    self.n_chirps()
                ),
            ));
        }
        Ok(())
    }
}

/// Physical parameters, used only to turn bins into units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Physical {
    pub carrier_hz: f64,
    /// Complex sample rate.
    pub sample_rate_hz: f64,
    /// Chirp slope in Hz per second.
    pub slope_hz_per_s: f64,
    /// Time from one chirp to the next (any TX).
    pub chirp_period_s: f64,
}

impl Default for Physical {
    fn default() -> Self {
        Physical {
            carrier_hz: 77e9,
            sample_rate_hz: 50e6,
            slope_hz_per_s: 60e12,
            chirp_period_s: 7.8125e-6,
        }
    }
}

impl Physical {
    /// Metres per range bin: `c * fs / (2 * slope * N_s)`.
    pub fn range_bin_m(&self, g: &Geometry) -> f64 {
        SPEED_OF_LIGHT * self.sample_rate_hz / (2.0 * self.slope_hz_per_s * g.n_samples as f64)
    }

    /// Metres per second per Doppler bin: `lambda / (2 * N_l * N_tx * T_c)`.
    pub fn velocity_bin_mps(&self, g: &Geometry) -> f64 {
        let lambda = SPEED_OF_LIGHT / self.carrier_hz;
        lambda / (2.0 * g.n_loops as f64 * g.n_tx as f64 * self.chirp_period_s)
    }

    pub fn validate(&self) -> Result<(), DspError> {
        positive("physical.carrier_hz", self.carrier_hz)?;
        positive("physical.sample_rate_hz", self.sample_rate_hz)?;
        positive("physical.slope_hz_per_s", self.slope_hz_per_s)?;
        positive("physical.chirp_period_s", self.chirp_period_s)?;
        Ok(())
    }
}

/// 2D cell-averaging CFAR (spec v1 step 5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CfarConfig {
    pub guard_doppler: usize,
    pub guard_range: usize,
    pub train_doppler: usize,
    pub train_range: usize,
    /// Probability of false alarm per cell, in (0, 1).
    pub pfa: f64,
}

impl Default for CfarConfig {
    fn default() -> Self {
        CfarConfig {
            guard_doppler: 2,
            guard_range: 2,
            train_doppler: 4,
            train_range: 8,
            pfa: 1e-6,
        }
    }
}

impl CfarConfig {
    pub fn validate(&self, g: &Geometry) -> Result<(), DspError> {
        if !(self.pfa > 0.0 && self.pfa < 1.0) {
            return Err(DspError::config(
                "cfar.pfa",
                format!("{} is outside (0, 1)", self.pfa),
            ));
        }
        nonzero("cfar.train_doppler", self.train_doppler)?;
        nonzero("cfar.train_range", self.train_range)?;
        let span_d = 2 * (self.guard_doppler + self.train_doppler) + 1;
        if span_d > g.n_loops {
            return Err(DspError::config(
                "cfar.train_doppler",
                format!(
                    "window of {span_d} Doppler cells (guard + training) exceeds the {} Doppler bins",
                    g.n_loops
                ),
            ));
        }
        let span_r = 2 * (self.guard_range + self.train_range) + 1;
        if span_r > g.n_samples {
            return Err(DspError::config(
                "cfar.train_range",
                format!(
                    "window of {span_r} range cells (guard + training) exceeds the {} range bins",
                    g.n_samples
                ),
            ));
        }
        Ok(())
    }
}

/// The whole chain's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ChainConfig {
    pub geometry: Geometry,
    pub physical: Physical,
    pub cfar: CfarConfig,
    pub chain: ChainParams,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChainParams {
    /// Cap on detections per frame (spec v1 step 7).
    pub max_detections: usize,
    /// Subtract the mean over loops per virtual channel and range bin.
    pub clutter_removal: bool,
    /// Zero-padded angle FFT length (spec v1 step 8).
    pub angle_fft_size: usize,
}

impl Default for ChainParams {
    fn default() -> Self {
        ChainParams {
            max_detections: 512,
            clutter_removal: false,
            angle_fft_size: 64,
        }
    }
}

impl ChainConfig {
    /// Parse TOML text (sections `[geometry]`, `[physical]`, `[cfar]`,
    /// `[chain]`, all optional) and validate it.
    pub fn from_toml(text: &str) -> Result<Self, DspError> {
        let cfg: ChainConfig = toml::from_str(text).map_err(|e| DspError::Parse(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), DspError> {
        self.geometry.validate()?;
        self.physical.validate()?;
        self.cfar.validate(&self.geometry)?;
        nonzero("chain.max_detections", self.chain.max_detections)?;
        power_of_two("chain.angle_fft_size", self.chain.angle_fft_size)?;
        if self.chain.angle_fft_size < self.geometry.n_virtual() {
            return Err(DspError::config(
                "chain.angle_fft_size",
                format!(
                    "{} is smaller than the {} virtual channels",
                    self.chain.angle_fft_size,
                    self.geometry.n_virtual()
                ),
            ));
        }
        Ok(())
    }
}

fn nonzero(key: &str, v: usize) -> Result<(), DspError> {
    if v == 0 {
        return Err(DspError::config(key, "must not be zero"));
    }
    Ok(())
}

fn power_of_two(key: &str, v: usize) -> Result<(), DspError> {
    if !v.is_power_of_two() {
        return Err(DspError::config(
            key,
            format!("{v} is not a power of two (the FFT needs one)"),
        ));
    }
    Ok(())
}

fn positive(key: &str, v: f64) -> Result<(), DspError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(DspError::config(
            key,
            format!("{v} must be a positive number"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_preset_is_the_orin_4t4r_frame() {
        let c = ChainConfig::default();
        c.validate().expect("defaults are valid");
        assert_eq!(c.geometry.frame_bytes(), 4 << 20);
        assert_eq!(c.geometry.chunk_bytes(), 256 << 10);
        assert_eq!(c.geometry.sample_offset(1, 2, 3), ((4 + 2) * 256 + 3) * 4);
        let dr = c.physical.range_bin_m(&c.geometry);
        let dv = c.physical.velocity_bin_mps(&c.geometry);
        assert!((dr - 0.488).abs() < 1e-3, "range bin {dr}");
        assert!((dv - 0.2433).abs() < 1e-3, "velocity bin {dv}");
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[geometry]\nn_samples = 0", "geometry.n_samples"),
            ("[geometry]\nn_loops = 100", "geometry.n_loops"),
            ("[cfar]\npfa = 1.5", "cfar.pfa"),
            ("[cfar]\npfa = 0.0", "cfar.pfa"),
            ("[cfar]\ntrain_range = 200", "cfar.train_range"),
            ("[chain]\nangle_fft_size = 8", "chain.angle_fft_size"),
            (
                "[geometry]\nchunks_per_frame = 3",
                "geometry.chunks_per_frame",
            ),
        ];
        for (text, key) in cases {
            let err = ChainConfig::from_toml(text).expect_err(text).to_string();
            assert!(err.contains(key), "{text:?} gave {err:?}, wanted key {key}");
        }
        let err = ChainConfig::from_toml("[geometry]\nn_sample = 4").expect_err("typo");
        assert!(err.to_string().contains("n_sample"), "{err}");
    }
}
