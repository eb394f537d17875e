//! Detections: the output of the chain for one frame.

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};

/// One detected target (spec v1 step 10).
///
/// `repr(C)`: this is also the record the CUDA chain writes to mapped host
/// memory (`struct GpuDetection` in cuda/kernels.cu, field for field), so the
/// host reads it as it is. `Pod`: plain numbers, no padding, any bits valid,
/// so it may be read from and written as bytes or words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, Pod, Zeroable)]
pub struct Detection {
    /// Integer range bin of the CFAR cell.
    pub range_bin: u32,
    /// Integer Doppler bin after fftshift (`N_l/2` is zero velocity).
    pub doppler_bin: u32,
    /// Range in metres from the parabolic-refined range bin.
    pub range_m: f32,
    /// Radial velocity in m/s from the refined Doppler bin.
    pub velocity_mps: f32,
    /// Azimuth in degrees from the refined angle bin.
    pub azimuth_deg: f32,
    /// `10 log10(P / mu)`.
    pub snr_db: f32,
    /// `10 log10(P)`.
    pub power_db: f32,
    /// Refined positions in bins, for comparing backends.
    pub range_bin_refined: f32,
    pub doppler_bin_refined: f32,
    pub angle_bin_refined: f32,
}

// The layout `struct GpuDetection` in cuda/kernels.cu and radard's status
// board rely on: ten 4-byte fields in this order, 4-byte aligned.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    type D = Detection;
    assert!(size_of::<D>() == 40 && align_of::<D>() == 4);
    assert!(offset_of!(D, range_bin) == 0 && offset_of!(D, doppler_bin) == 4);
    assert!(offset_of!(D, range_m) == 8 && offset_of!(D, velocity_mps) == 12);
    assert!(offset_of!(D, azimuth_deg) == 16 && offset_of!(D, snr_db) == 20);
    assert!(offset_of!(D, power_db) == 24 && offset_of!(D, range_bin_refined) == 28);
    assert!(offset_of!(D, doppler_bin_refined) == 32 && offset_of!(D, angle_bin_refined) == 36);
};

/// The detections of one frame, at most `capacity` of them, in ascending
/// range bin then Doppler bin; `cut` counts those dropped by the cap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detections {
    pub list: Vec<Detection>,
    pub cut: u32,
}

impl Detections {
    /// Reserve room for `max` detections once, so processing never allocates.
    pub fn with_capacity(max: usize) -> Self {
        Detections {
            list: Vec::with_capacity(max),
            cut: 0,
        }
    }

    pub fn clear(&mut self) {
        self.list.clear();
        self.cut = 0;
    }
}

/// Version of the detections line format (docs/detections-format.md).
pub const DETECTIONS_FORMAT_VERSION: u32 = 1;

/// A frame's wall-clock time: UTC in nanoseconds since 1970 (leap seconds
/// not counted, as CLOCK_REALTIME), the name of where it came from, its
/// quality and the bound on its error (docs/detections-format.md lists the
/// names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtcTime {
    pub ns: u64,
    pub source: &'static str,
    pub quality: &'static str,
    /// None: no bound (written null).
    pub bound_ns: Option<u64>,
}

/// One frame's detections as one JSON line (docs/detections-format.md):
/// the format `radar-dsp detect` and `radard`'s `jsonl` and `udp` sinks
/// write. `timestamp_ns`, `utc` and `latency_ns` are null where unknown
/// (offline).
pub struct DetectionsLine<'a> {
    pub sequence: u64,
    /// The source's own capture timestamp (the FPGA's clock).
    pub timestamp_ns: Option<u64>,
    /// The frame's wall-clock time and its source.
    pub utc: Option<UtcTime>,
    pub latency_ns: Option<u64>,
    pub detections: &'a [Detection],
    pub cut: u32,
}

impl DetectionsLine<'_> {
    /// Appends the line (with its newline) to `out`. Allocates only when
    /// `out` has to grow.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        // Writes into a Vec cannot fail.
        let _ = write!(
            out,
            "{{\"version\":{},\"sequence\":{},\"timestamp_ns\":",
            DETECTIONS_FORMAT_VERSION, self.sequence
        );
        let _ = match self.timestamp_ns {
            Some(t) => write!(out, "{t}"),
            None => write!(out, "null"),
        };
        let _ = match self.utc {
            // Source and quality names are plain words: no escaping needed.
            Some(u) => write!(
                out,
                ",\"utc_ns\":{},\"utc_source\":\"{}\",\"time_quality\":\"{}\",\"time_bound_ns\":",
                u.ns, u.source, u.quality
            ),
            None => write!(
                out,
                ",\"utc_ns\":null,\"utc_source\":null,\"time_quality\":null,\"time_bound_ns\":"
            ),
        };
        let _ = match self.utc.and_then(|u| u.bound_ns) {
            Some(b) => write!(out, "{b}"),
            None => write!(out, "null"),
        };
        let _ = write!(out, ",\"latency_ns\":");
        let _ = match self.latency_ns {
            Some(t) => write!(out, "{t}"),
            None => write!(out, "null"),
        };
        let _ = write!(
            out,
            ",\"count\":{},\"cut\":{},\"detections\":[",
            self.detections.len(),
            self.cut
        );
        for (i, d) in self.detections.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let _ = write!(
                out,
                "{{\"range_bin\":{},\"doppler_bin\":{}",
                d.range_bin, d.doppler_bin
            );
            for (name, v) in [
                ("range_m", d.range_m),
                ("velocity_mps", d.velocity_mps),
                ("azimuth_deg", d.azimuth_deg),
                ("snr_db", d.snr_db),
                ("power_db", d.power_db),
            ] {
                // JSON has no NaN or infinity: such a value is written null.
                let _ = if v.is_finite() {
                    write!(out, ",\"{name}\":{v}")
                } else {
                    write!(out, ",\"{name}\":null")
                };
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"]}\n");
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    #[test]
    fn a_line_is_json_with_every_field() {
        let d = Detection {
            range_bin: 3,
            doppler_bin: 130,
            range_m: 12.5,
            velocity_mps: -1.25,
            azimuth_deg: 10.0,
            snr_db: 20.0,
            power_db: f32::NAN,
            ..Detection::default()
        };
        let mut out = Vec::new();
        DetectionsLine {
            sequence: 9,
            timestamp_ns: Some(100),
            utc: Some(UtcTime {
                ns: 1_795_700_000_123_456_789,
                source: "card-clock",
                quality: "locked",
                bound_ns: Some(1500),
            }),
            latency_ns: None,
            detections: &[d, d],
            cut: 1,
        }
        .write_to(&mut out);
        assert_eq!(out.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(v["version"], 1);
        assert_eq!(v["sequence"], 9);
        assert_eq!(v["timestamp_ns"], 100);
        assert_eq!(v["utc_ns"], 1_795_700_000_123_456_789u64);
        assert_eq!(v["utc_source"], "card-clock");
        assert_eq!(v["time_quality"], "locked");
        assert_eq!(v["time_bound_ns"], 1500);
        assert!(v["latency_ns"].is_null());
        assert_eq!(v["count"], 2);
        assert_eq!(v["cut"], 1);
        let d0 = &v["detections"][0];
        assert_eq!(d0["range_bin"], 3);
        assert_eq!(d0["doppler_bin"], 130);
        assert_eq!(d0["range_m"], 12.5);
        assert_eq!(d0["velocity_mps"], -1.25);
        assert!(d0["power_db"].is_null());
        out.clear();
        DetectionsLine {
            sequence: 1,
            timestamp_ns: None,
            utc: None,
            latency_ns: None,
            detections: &[],
            cut: 0,
        }
        .write_to(&mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert!(v["utc_ns"].is_null() && v["utc_source"].is_null());
        assert!(v["time_quality"].is_null() && v["time_bound_ns"].is_null());
    }
}
