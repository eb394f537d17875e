//! The parameters the diagnostics link lists, reads and changes: each with
//! its type, range and unit. The server validates a change here; the CFAR
//! scale factors of a new Pfa are computed here too, off the frame loop.

use diag_proto::{
    Applied, Note, ParamError, ParamInfo, ParamKind, ParamName, ParamValue, Text, Unit,
};
use radar_dsp::ChainConfig;
use radar_dsp::cfar::CfarTables;

use crate::frame_loop::param_queue::LoopParam;

/// Parameter numbers in the events log (`ParameterChange` a).
pub const PARAM_ID_PFA: u64 = 1;
pub const PARAM_ID_CONSOLE: u64 = 2;

pub const PFA_MIN: f64 = 1e-12;
pub const PFA_MAX: f64 = 0.1;
const WINDOW_MAX: i64 = 32;

// Fits a Note (64 bytes). Fixed because the CUDA kernels are built for it.
const WINDOW_READ_ONLY: &str = "fixed at start-up: change [cfar] in radard.toml, restart";

/// The parameters and their current values as the server knows them
/// (updated from the loop's answers).
#[derive(Clone, Debug)]
pub struct Params {
    chain: ChainConfig,
    console: bool,
}

/// A validated change, ready for the loop.
pub struct Validated {
    pub param: LoopParam,
    pub alpha: Option<Box<[f64]>>,
}

impl Params {
    pub fn new(chain: ChainConfig, console_on: bool) -> Self {
        Params {
            chain,
            console: console_on,
        }
    }

    pub fn names() -> [&'static str; 6] {
        [
            "cfar.pfa",
            "cfar.guard_doppler",
            "cfar.guard_range",
            "cfar.train_doppler",
            "cfar.train_range",
            "sink.console",
        ]
    }

    pub fn count() -> usize {
        Self::names().len()
    }

    pub fn info_at(&self, i: usize) -> Option<ParamInfo> {
        Self::names().get(i).and_then(|n| self.info(n))
    }

    pub fn info(&self, name: &str) -> Option<ParamInfo> {
        let c = &self.chain.cfar;
        let window = |v: usize, help: &str| {
            info(
                name,
                ParamValue::Int(v as i64),
                ParamValue::Int(0),
                ParamValue::Int(WINDOW_MAX),
                "bins",
                false,
                help,
            )
        };
        Some(match name {
            "cfar.pfa" => info(
                name,
                ParamValue::Real(c.pfa),
                ParamValue::Real(PFA_MIN),
                ParamValue::Real(PFA_MAX),
                "1",
                true,
                "CFAR probability of false alarm per cell",
            ),
            "cfar.guard_doppler" => window(c.guard_doppler, "CFAR guard cells each side, Doppler"),
            "cfar.guard_range" => window(c.guard_range, "CFAR guard cells each side, range"),
            "cfar.train_doppler" => {
                window(c.train_doppler, "CFAR training cells each side, Doppler")
            }
            "cfar.train_range" => window(c.train_range, "CFAR training cells each side, range"),
            "sink.console" => info(
                name,
                ParamValue::Bool(self.console),
                ParamValue::Bool(false),
                ParamValue::Bool(true),
                "",
                true,
                "frame lines on radard's standard output",
            ),
            _ => return None,
        })
    }

    /// Checks a change and prepares what the loop needs (the CFAR table of
    /// a new Pfa). Errors say why, with the allowed range.
    pub fn validate(&self, name: &str, value: ParamValue) -> Result<Validated, ParamError> {
        let info = self.info(name).ok_or(ParamError::Unknown)?;
        if !info.writable {
            return Err(ParamError::ReadOnly {
                reason: Note::truncate_from(WINDOW_READ_ONLY),
            });
        }
        let out_of_range = || ParamError::OutOfRange {
            min: info.min,
            max: info.max,
            unit: info.unit.clone(),
        };
        match name {
            "cfar.pfa" => {
                let pfa = match value {
                    ParamValue::Real(v) => v,
                    ParamValue::Int(v) => v as f64,
                    ParamValue::Bool(_) => {
                        return Err(ParamError::WrongType {
                            expected: ParamKind::Real,
                        });
                    }
                };
                if !(PFA_MIN..=PFA_MAX).contains(&pfa) {
                    return Err(out_of_range());
                }
                let mut chain = self.chain.clone();
                chain.cfar.pfa = pfa;
                let tables = CfarTables::new(&chain).map_err(|e| ParamError::NotApplied {
                    reason: Note::truncate_from(&e.to_string()),
                })?;
                Ok(Validated {
                    param: LoopParam::CfarPfa(pfa),
                    alpha: Some(tables.alpha.into_boxed_slice()),
                })
            }
            "sink.console" => match value {
                ParamValue::Bool(on) => Ok(Validated {
                    param: LoopParam::ConsoleSink(on),
                    alpha: None,
                }),
                _ => Err(ParamError::WrongType {
                    expected: ParamKind::Bool,
                }),
            },
            _ => Err(ParamError::Unknown),
        }
    }

    /// Records what the loop applied; returns the answer and the event's
    /// (parameter id, value) for the log.
    pub fn applied(&mut self, param: LoopParam, at_frame: u64) -> (Applied, u64, u64) {
        let (name, id, value) = match param {
            LoopParam::CfarPfa(p) => {
                self.chain.cfar.pfa = p;
                ("cfar.pfa", PARAM_ID_PFA, p.to_bits())
            }
            LoopParam::ConsoleSink(on) => {
                self.console = on;
                ("sink.console", PARAM_ID_CONSOLE, u64::from(on))
            }
        };
        let param = self.info(name).unwrap_or_else(|| {
            info(
                name,
                ParamValue::Bool(false),
                ParamValue::Bool(false),
                ParamValue::Bool(false),
                "",
                false,
                "",
            )
        });
        (Applied { param, at_frame }, id, value)
    }
}

/// The text of a parameter-change event.
pub fn describe_change(id: u64, value: u64) -> String {
    match id {
        PARAM_ID_PFA => format!("cfar.pfa set to {:e}", f64::from_bits(value)),
        PARAM_ID_CONSOLE => format!(
            "sink.console set to {}",
            if value != 0 { "on" } else { "off" }
        ),
        _ => format!("parameter {id} set to {value:#x}"),
    }
}

fn info(
    name: &str,
    value: ParamValue,
    min: ParamValue,
    max: ParamValue,
    unit: &str,
    writable: bool,
    help: &str,
) -> ParamInfo {
    ParamInfo {
        name: ParamName::truncate_from(name),
        value,
        min,
        max,
        unit: Unit::truncate_from(unit),
        writable,
        help: Text::truncate_from(help),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfa_is_checked_and_its_table_computed() {
        let p = Params::new(ChainConfig::default(), true);
        let v = p
            .validate("cfar.pfa", ParamValue::Real(1e-3))
            .expect("valid");
        assert_eq!(v.param, LoopParam::CfarPfa(1e-3));
        assert_eq!(
            v.alpha.as_ref().map(|a| a.len()),
            Some(ChainConfig::default().geometry.n_samples)
        );
        let e = p
            .validate("cfar.pfa", ParamValue::Real(0.5))
            .err()
            .expect("refused");
        assert!(
            e.describe("cfar.pfa")
                .to_string()
                .contains("allowed 1e-12 .. 1e-1"),
            "{e:?}"
        );
        assert!(matches!(
            p.validate("cfar.pfa", ParamValue::Real(f64::NAN)),
            Err(ParamError::OutOfRange { .. })
        ));
        assert!(matches!(
            p.validate("cfar.guard_range", ParamValue::Int(3)),
            Err(ParamError::ReadOnly { .. })
        ));
        assert!(matches!(
            p.validate("nope", ParamValue::Int(3)),
            Err(ParamError::Unknown)
        ));
        assert!(matches!(
            p.validate("sink.console", ParamValue::Int(3)),
            Err(ParamError::WrongType { .. })
        ));
    }
}
