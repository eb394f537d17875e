//! The FPGA's reset line, pulsed by `radard` at start-up through the GPIO
//! character device (`gpiocdev`, an embedded-hal 1.0 `OutputPin`).
//!
//! The line is named in the configuration by its chip's label and its own
//! name (`gpioinfo` shows both), never by a number: chip numbering changes
//! with probe order and kernel version, names do not.
//!
//! ```toml
//! [fpga_reset]
//! enabled = true            # off by default
//! chip = "tegra234-gpio"    # the GPIO chip's label
//! line = "PQ.05"            # the line's name on that chip
//! active_low = true         # FPGA_RESET_N: low holds the FPGA in reset
//! pulse_us = 1000           # how long reset is held
//! settle_ms = 10            # wait after release before the first access
//! ```
//!
//! After the pulse the line stays requested, released from reset, for the
//! life of the process: nobody else can reset the FPGA under the running
//! loop, and the level does not fall back to the line's bias.

use std::path::PathBuf;
use std::time::Duration;

use embedded_hal::digital::{OutputPin as _, PinState};
use gpiocdev::line::Value;
use gpiocdev::request::Request;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The consumer name the kernel shows for the line while radard holds it.
pub const CONSUMER: &str = "radard-fpga-reset";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FpgaResetConfig {
    pub enabled: bool,
    /// Label of the GPIO chip (e.g. "tegra234-gpio").
    pub chip: String,
    /// Name of the line on that chip (e.g. "PQ.05").
    pub line: String,
    /// Reset is asserted by driving the line low.
    pub active_low: bool,
    /// How long reset is held, in microseconds.
    pub pulse_us: u32,
    /// Wait after releasing reset, in milliseconds.
    pub settle_ms: u32,
}

impl Default for FpgaResetConfig {
    fn default() -> Self {
        FpgaResetConfig {
            enabled: false,
            chip: "tegra234-gpio".into(),
            line: "PQ.05".into(),
            active_low: true,
            pulse_us: 1000,
            settle_ms: 10,
        }
    }
}

#[derive(Debug, Error)]
pub enum FpgaResetError {
    #[error("fpga_reset.{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error("fpga_reset.chip: no GPIO chip labelled {label:?} (chips: {available})")]
    NoChip { label: String, available: String },
    #[error("fpga_reset.line: no line named {line:?} on GPIO chip {label:?} ({path})")]
    NoLine {
        label: String,
        line: String,
        path: String,
    },
    #[error("fpga_reset: {what} {path}: {source}")]
    Gpio {
        what: &'static str,
        path: String,
        #[source]
        source: gpiocdev::Error,
    },
    #[error("fpga_reset: driving line {line:?} on {path}: {source}")]
    Pin {
        line: String,
        path: String,
        #[source]
        source: gpiocdev_embedded_hal::Error,
    },
}

impl FpgaResetConfig {
    pub fn validate(&self) -> Result<(), FpgaResetError> {
        if !self.enabled {
            return Ok(());
        }
        if self.chip.trim().is_empty() {
            return Err(FpgaResetError::Invalid {
                key: "chip",
                reason: "empty: name the GPIO chip by its label".into(),
            });
        }
        if self.line.trim().is_empty() {
            return Err(FpgaResetError::Invalid {
                key: "line",
                reason: "empty: name the reset line".into(),
            });
        }
        if self.pulse_us == 0 || self.pulse_us > 10_000_000 {
            return Err(FpgaResetError::Invalid {
                key: "pulse_us",
                reason: format!("{} is outside 1..=10000000", self.pulse_us),
            });
        }
        if self.settle_ms > 60_000 {
            return Err(FpgaResetError::Invalid {
                key: "settle_ms",
                reason: format!("{} is more than 60000", self.settle_ms),
            });
        }
        Ok(())
    }

    fn asserted(&self) -> PinState {
        if self.active_low {
            PinState::Low
        } else {
            PinState::High
        }
    }

    fn released(&self) -> PinState {
        if self.active_low {
            PinState::High
        } else {
            PinState::Low
        }
    }
}

/// The reset line, held (released from reset) while this lives.
pub struct FpgaReset {
    _pin: gpiocdev_embedded_hal::OutputPin,
    /// Where the line was found, for the start-up log.
    pub description: String,
}

/// Finds the chip by label and the line by name.
fn find_line(cfg: &FpgaResetConfig) -> Result<(PathBuf, u32), FpgaResetError> {
    let paths = gpiocdev::chip::chips().map_err(|source| FpgaResetError::Gpio {
        what: "listing GPIO chips in",
        path: "/dev".into(),
        source,
    })?;
    let mut labels = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        let chip = match gpiocdev::chip::Chip::from_path(&path) {
            Ok(c) => c,
            Err(source) => {
                return Err(FpgaResetError::Gpio {
                    what: "opening",
                    path: shown,
                    source,
                });
            }
        };
        let info = chip.info().map_err(|source| FpgaResetError::Gpio {
            what: "reading chip info of",
            path: shown.clone(),
            source,
        })?;
        if info.label != cfg.chip {
            labels.push(format!("{} ({})", info.label, info.name));
            continue;
        }
        return match chip.find_line_info(&cfg.line) {
            Some(line) => Ok((path, line.offset)),
            None => Err(FpgaResetError::NoLine {
                label: cfg.chip.clone(),
                line: cfg.line.clone(),
                path: shown,
            }),
        };
    }
    Err(FpgaResetError::NoChip {
        label: cfg.chip.clone(),
        available: if labels.is_empty() {
            "none".into()
        } else {
            labels.join(", ")
        },
    })
}

fn value_of(state: PinState) -> Value {
    match state {
        PinState::High => Value::Active,
        PinState::Low => Value::Inactive,
    }
}

/// Pulses the FPGA's reset line when `[fpga_reset] enabled`: request it
/// asserted, hold for `pulse_us`, release, wait `settle_ms`. Returns the
/// held line (keep it for the life of the process); `None` when disabled.
pub fn pulse(cfg: &FpgaResetConfig) -> Result<Option<FpgaReset>, FpgaResetError> {
    if !cfg.enabled {
        return Ok(None);
    }
    cfg.validate()?;
    let (path, offset) = find_line(cfg)?;
    let shown = path.display().to_string();
    let pin_err = |source| FpgaResetError::Pin {
        line: cfg.line.clone(),
        path: shown.clone(),
        source,
    };
    // Requested straight into the asserted level: no glitch through the
    // released level before the pulse.
    let req = Request::builder()
        .on_chip(&path)
        .with_consumer(CONSUMER)
        .with_line(offset)
        .as_output(value_of(cfg.asserted()))
        .request()
        .map_err(|source| FpgaResetError::Gpio {
            what: "requesting the reset line on",
            path: shown.clone(),
            source,
        })?;
    let mut pin = gpiocdev_embedded_hal::OutputPin::try_from(req).map_err(pin_err)?;
    std::thread::sleep(Duration::from_micros(u64::from(cfg.pulse_us)));
    pin.set_state(cfg.released()).map_err(pin_err)?;
    std::thread::sleep(Duration::from_millis(u64::from(cfg.settle_ms)));
    Ok(Some(FpgaReset {
        _pin: pin,
        description: format!(
            "FPGA reset pulsed: line {:?} (offset {offset}) of chip {:?} at {shown}, {} us {}, then released",
            cfg.line,
            cfg.chip,
            cfg.pulse_us,
            if cfg.active_low { "low" } else { "high" }
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_does_nothing() {
        let cfg = FpgaResetConfig::default();
        assert!(!cfg.enabled);
        assert!(pulse(&cfg).expect("disabled").is_none());
    }

    #[test]
    fn validation_names_the_key() {
        let base = FpgaResetConfig {
            enabled: true,
            ..Default::default()
        };
        let cases = [
            (
                FpgaResetConfig {
                    chip: " ".into(),
                    ..base.clone()
                },
                "fpga_reset.chip",
            ),
            (
                FpgaResetConfig {
                    line: String::new(),
                    ..base.clone()
                },
                "fpga_reset.line",
            ),
            (
                FpgaResetConfig {
                    pulse_us: 0,
                    ..base.clone()
                },
                "fpga_reset.pulse_us",
            ),
            (
                FpgaResetConfig {
                    settle_ms: 70_000,
                    ..base.clone()
                },
                "fpga_reset.settle_ms",
            ),
        ];
        for (cfg, key) in cases {
            let err = cfg.validate().expect_err(key).to_string();
            assert!(err.contains(key), "{err:?} does not name {key}");
        }
    }

    #[test]
    fn a_missing_chip_is_named() {
        // No chip on a build machine (or in CI) carries this label.
        let cfg = FpgaResetConfig {
            enabled: true,
            chip: "no-such-gpio-chip-label".into(),
            ..Default::default()
        };
        match pulse(&cfg) {
            Err(e) => {
                let msg = e.to_string();
                // Where chips exist but cannot be opened (no permission),
                // the error names the chip's path instead; either way it
                // names the section.
                assert!(msg.contains("fpga_reset"), "{msg}");
                if let FpgaResetError::NoChip { label, .. } = &e {
                    assert_eq!(label, "no-such-gpio-chip-label");
                    assert!(msg.contains("fpga_reset.chip"), "{msg}");
                }
            }
            Ok(_) => panic!("a chip labelled no-such-gpio-chip-label was found"),
        }
    }
}
