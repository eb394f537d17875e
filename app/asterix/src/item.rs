//! The data items, each quantised to its field as CAT-010 edition 1.1
//! defines it. A value beyond its field saturates at the limit (a NaN
//! becomes 0) and says so in [`Quantized::clamped`]; angles wrap.

/// A value in an item's units, and whether it had to be clamped to fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantized<T> {
    pub raw: T,
    pub clamped: bool,
}

/// Metres in a nautical mile (the unit of I010/200's ground speed).
pub const METRES_PER_NM: f64 = 1852.0;
/// I010/040 RHO: LSB 1 m, 16 bits unsigned.
pub const RHO_LSB_M: f64 = 1.0;
/// I010/040 THETA and I010/200 TRA: LSB 360/2^16 degrees.
pub const ANGLE_LSB_DEG: f64 = 360.0 / 65536.0;
/// I010/140: LSB 1/128 s.
pub const TIME_OF_DAY_LSB_S: f64 = 1.0 / 128.0;
/// Time of Day counts from midnight and is reset to zero there.
pub const TIME_OF_DAY_WRAP: u32 = 86_400 * 128;
/// I010/200 GSP: LSB 2^-14 NM/s (about 0.113 m/s).
pub const GROUND_SPEED_LSB_MPS: f64 = METRES_PER_NM / 16384.0;
/// I010/200 GSP: the specification's limit, 2 NM/s.
pub const GROUND_SPEED_MAX_RAW: u16 = 2 * 16384;

/// I010/000 Message Type of a target report.
pub const MESSAGE_TYPE_TARGET_REPORT: u8 = 1;
/// I010/020 TYP of a primary surveillance radar.
pub const TYP_PSR: u8 = 3;

/// The nearest integer (halves away from zero); `as` saturates at the
/// limits of i64 and maps NaN to 0.
fn round_i64(x: f64) -> i64 {
    if x >= 0.0 {
        (x + 0.5) as i64
    } else {
        (x - 0.5) as i64
    }
}

/// `x` rounded to the nearest integer and clamped to `lo..=hi`.
fn quantize(x: f64, lo: i64, hi: i64) -> Quantized<i64> {
    if x.is_nan() {
        return Quantized {
            raw: lo.max(0).min(hi),
            clamped: true,
        };
    }
    let r = round_i64(x);
    Quantized {
        raw: r.clamp(lo, hi),
        clamped: r < lo || r > hi,
    }
}

/// I010/010 Data Source Identifier: SAC then SIC.
pub const fn data_source(sac: u8, sic: u8) -> [u8; 2] {
    [sac, sic]
}

/// I010/020 Target Report Descriptor of a primary radar's plot: TYP = PSR,
/// no differential correction, chain 1; the first extension (SIM, TST)
/// only when one of them is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// SIM: a simulated target report (synthetic frames).
    pub simulated: bool,
    /// TST: a test target.
    pub test_target: bool,
}

impl Descriptor {
    /// The item's octets and how many of them are used (1 or 2).
    pub const fn encode(&self) -> ([u8; 2], usize) {
        let first = TYP_PSR << 5;
        if !self.simulated && !self.test_target {
            return ([first, 0], 1);
        }
        let ext = ((self.simulated as u8) << 7) | ((self.test_target as u8) << 6);
        ([first | 1, ext], 2)
    }
}

/// I010/140 Time of Day of a UTC time in nanoseconds since 1970 (leap
/// seconds not counted, as CLOCK_REALTIME): 1/128 s since the last midnight,
/// to the nearest unit; a time within half a unit of midnight is 0.
pub const fn time_of_day_raw(utc_ns: u64) -> u32 {
    const DAY_NS: u64 = 86_400_000_000_000;
    let ns = utc_ns % DAY_NS;
    let units = (ns * 128 + 500_000_000) / 1_000_000_000;
    (units % TIME_OF_DAY_WRAP as u64) as u32
}

/// I010/140's three octets, most significant first.
pub const fn time_of_day(utc_ns: u64) -> [u8; 3] {
    let t = time_of_day_raw(utc_ns);
    [(t >> 16) as u8, (t >> 8) as u8, t as u8]
}

/// I010/040 RHO: metres to the nearest metre, 0 to 65535.
pub fn rho(range_m: f64) -> Quantized<u16> {
    let q = quantize(range_m / RHO_LSB_M, 0, u16::MAX as i64);
    Quantized {
        raw: q.raw as u16,
        clamped: q.clamped,
    }
}

/// An angle in degrees to 360/2^16 units, wrapped into [0, 360): -30 deg
/// is 330 deg. Only a value that is not finite is clamped (to 0).
pub fn angle(deg: f64) -> Quantized<u16> {
    if !deg.is_finite() {
        return Quantized {
            raw: 0,
            clamped: true,
        };
    }
    // Within (-360, 360) first, so that the scaled value is exact enough.
    let r = round_i64((deg % 360.0) / ANGLE_LSB_DEG);
    Quantized {
        raw: r.rem_euclid(65536) as u16,
        clamped: false,
    }
}

/// I010/040 Measured Position in Polar Co-ordinates: RHO then THETA, each
/// 16 bits, most significant octet first.
pub fn polar_position(range_m: f64, azimuth_deg: f64) -> Quantized<[u8; 4]> {
    let (r, t) = (rho(range_m), angle(azimuth_deg));
    let (r2, t2) = (r.raw.to_be_bytes(), t.raw.to_be_bytes());
    Quantized {
        raw: [r2[0], r2[1], t2[0], t2[1]],
        clamped: r.clamped || t.clamped,
    }
}

/// I010/200 GSP: a speed in m/s to 2^-14 NM/s, 0 to 2 NM/s.
pub fn ground_speed(speed_mps: f64) -> Quantized<u16> {
    let q = quantize(
        speed_mps / GROUND_SPEED_LSB_MPS,
        0,
        GROUND_SPEED_MAX_RAW as i64,
    );
    Quantized {
        raw: q.raw as u16,
        clamped: q.clamped,
    }
}

/// I010/200 Calculated Track Velocity in Polar Co-ordinates, carrying the
/// radial (Doppler) velocity of a plot at `azimuth_deg`: the speed is its
/// magnitude, the track angle the line of sight, outward (`azimuth_deg`)
/// for a target moving away (positive) and inward (`azimuth_deg` + 180)
/// for one approaching.
pub fn polar_velocity(radial_mps: f64, azimuth_deg: f64) -> Quantized<[u8; 4]> {
    let approaching = radial_mps < 0.0;
    let speed = ground_speed(if approaching { -radial_mps } else { radial_mps });
    let track = angle(if approaching {
        azimuth_deg + 180.0
    } else {
        azimuth_deg
    });
    let (s2, t2) = (speed.raw.to_be_bytes(), track.raw.to_be_bytes());
    Quantized {
        raw: [s2[0], s2[1], t2[0], t2[1]],
        clamped: speed.clamped || track.clamped,
    }
}

/// I010/131 Amplitude of Primary Plot: radar-dependent, 0 the least
/// detectable; here a level in dB to the nearest dB, 0 to 255.
pub fn amplitude(level_db: f64) -> Quantized<u8> {
    let q = quantize(level_db, 0, u8::MAX as i64);
    Quantized {
        raw: q.raw as u8,
        clamped: q.clamped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_source_is_sac_then_sic() {
        // SAC 25 = 0x19, SIC 201 = 0xC9.
        assert_eq!(data_source(25, 201), [0x19, 0xC9]);
    }

    /// TYP = 3 (PSR) in bits 8-6: 011 0 0 0 0 0 = 0x60, FX = 0. Simulated:
    /// FX = 1 (0x61) and the first extension with SIM (bit 8) = 0x80.
    #[test]
    fn the_descriptor_is_a_psr_plot_and_extends_only_for_sim_or_tst() {
        assert_eq!(Descriptor::default().encode(), ([0x60, 0], 1));
        let sim = Descriptor {
            simulated: true,
            test_target: false,
        };
        assert_eq!(sim.encode(), ([0x61, 0x80], 2));
        let tst = Descriptor {
            simulated: false,
            test_target: true,
        };
        assert_eq!(tst.encode(), ([0x61, 0x40], 2));
    }

    /// 2026-11-26 00:00:00 UTC is 20783 days = 1795651200 s after 1970.
    const DAY: u64 = 1_795_651_200_000_000_000;

    /// 13:45:30.5 is 49530.5 s after midnight = 6339904 units of 1/128 s
    /// = 0x60BD40.
    #[test]
    fn time_of_day_counts_128ths_of_a_second_since_midnight() {
        let t = DAY + 49_530_500_000_000;
        assert_eq!(time_of_day_raw(t), 6_339_904);
        assert_eq!(time_of_day(t), [0x60, 0xBD, 0x40]);
        // Rounded to the nearest unit (7.8125 ms): +3.9 ms stays, +4.0 ms
        // goes up one.
        assert_eq!(time_of_day_raw(t + 3_900_000), 6_339_904);
        assert_eq!(time_of_day_raw(t + 4_000_000), 6_339_905);
    }

    /// The last unit of a day is 86400 * 128 - 1 = 11059199 = 0xA8BFFF;
    /// 23:59:59.999 rounds up to 11059200, which is midnight: 0.
    #[test]
    fn time_of_day_wraps_at_midnight() {
        let last = DAY + 86_399_992_187_500; // 11059199 / 128 s exactly
        assert_eq!(time_of_day(last), [0xA8, 0xBF, 0xFF]);
        assert_eq!(time_of_day(DAY + 86_399_999_000_000), [0, 0, 0]);
        assert_eq!(time_of_day(DAY + 86_400_000_000_000), [0, 0, 0]);
        assert_eq!(time_of_day_raw(0), 0);
        assert!(time_of_day_raw(u64::MAX) < TIME_OF_DAY_WRAP);
    }

    /// 1234.4 m -> RHO 1234 = 0x04D2; 45 deg -> 45 * 65536 / 360 = 8192
    /// = 0x2000.
    #[test]
    fn the_polar_position_is_metres_and_2_16ths_of_a_turn() {
        let p = polar_position(1234.4, 45.0);
        assert_eq!(p.raw, [0x04, 0xD2, 0x20, 0x00]);
        assert!(!p.clamped);
        assert_eq!(rho(0.49).raw, 0);
        assert_eq!(rho(0.5).raw, 1);
        assert_eq!(angle(359.999).raw, 0, "rounds up to a full turn: 0");
        assert_eq!(angle(180.0).raw, 0x8000);
    }

    /// -30 deg is 330 deg: -30 * 65536 / 360 = -5461.33 -> -5461, + 65536
    /// = 60075 = 0xEAAB.
    #[test]
    fn negative_and_large_angles_wrap() {
        assert_eq!(
            angle(-30.0),
            Quantized {
                raw: 0xEAAB,
                clamped: false
            }
        );
        assert_eq!(angle(330.0).raw, 0xEAAB);
        assert_eq!(angle(-390.0).raw, 0xEAAB);
        assert_eq!(angle(720.0 + 45.0).raw, 0x2000);
        assert!(!angle(1e300).clamped);
        assert_eq!(
            angle(f64::NAN),
            Quantized {
                raw: 0,
                clamped: true
            }
        );
        assert!(angle(f64::INFINITY).clamped);
    }

    /// RHO is 16 bits of metres: 70 km saturates at 65535 = 0xFFFF; a
    /// negative or NaN range at 0; each says it was clamped.
    #[test]
    fn ranges_beyond_the_field_saturate() {
        assert_eq!(
            rho(65_535.0),
            Quantized {
                raw: 0xFFFF,
                clamped: false
            }
        );
        assert_eq!(
            rho(70_000.0),
            Quantized {
                raw: 0xFFFF,
                clamped: true
            }
        );
        assert_eq!(
            rho(1e300),
            Quantized {
                raw: 0xFFFF,
                clamped: true
            }
        );
        assert_eq!(
            rho(-1.0),
            Quantized {
                raw: 0,
                clamped: true
            }
        );
        assert_eq!(
            rho(-0.4),
            Quantized {
                raw: 0,
                clamped: false
            }
        );
        assert_eq!(
            rho(f64::NAN),
            Quantized {
                raw: 0,
                clamped: true
            }
        );
        let p = polar_position(70_000.0, -30.0);
        assert_eq!(p.raw, [0xFF, 0xFF, 0xEA, 0xAB]);
        assert!(p.clamped);
    }

    /// +10 m/s: 10 / (1852 / 16384) = 88.47 -> 88 = 0x0058, along the line
    /// of sight (45 deg = 0x2000); -10 m/s: the same speed, track 225 deg =
    /// 225 * 65536 / 360 = 40960 = 0xA000.
    #[test]
    fn the_radial_velocity_is_a_speed_along_the_line_of_sight() {
        let away = polar_velocity(10.0, 45.0);
        assert_eq!(away.raw, [0x00, 0x58, 0x20, 0x00]);
        assert!(!away.clamped);
        let toward = polar_velocity(-10.0, 45.0);
        assert_eq!(toward.raw, [0x00, 0x58, 0xA0, 0x00]);
        // At -170 deg approaching: 10 deg = 1820.44 -> 1820 = 0x071C.
        assert_eq!(polar_velocity(-10.0, -170.0).raw, [0x00, 0x58, 0x07, 0x1C]);
        assert_eq!(polar_velocity(0.0, 45.0).raw, [0, 0, 0x20, 0x00]);
    }

    /// The field's limit is 2 NM/s = 3704 m/s, raw 32768 = 0x8000.
    #[test]
    fn speeds_beyond_the_field_saturate() {
        let q = polar_velocity(5000.0, 0.0);
        assert_eq!(q.raw, [0x80, 0x00, 0, 0]);
        assert!(q.clamped);
        assert_eq!(
            ground_speed(3704.0),
            Quantized {
                raw: 0x8000,
                clamped: false
            }
        );
        let nan = polar_velocity(f64::NAN, 90.0);
        assert_eq!(nan.raw, [0, 0, 0x40, 0x00]);
        assert!(nan.clamped);
    }

    /// 23.6 dB -> 24 = 0x18; below 0 and above 255 saturate.
    #[test]
    fn the_amplitude_is_whole_db_from_0_to_255() {
        assert_eq!(
            amplitude(23.6),
            Quantized {
                raw: 0x18,
                clamped: false
            }
        );
        assert_eq!(
            amplitude(-3.0),
            Quantized {
                raw: 0,
                clamped: true
            }
        );
        assert_eq!(
            amplitude(300.0),
            Quantized {
                raw: 255,
                clamped: true
            }
        );
        assert_eq!(
            amplitude(f64::NAN),
            Quantized {
                raw: 0,
                clamped: true
            }
        );
    }
}
