//! The input files the subcommands share: text files, chain configuration.

use std::path::Path;

use radar_dsp::{ChainConfig, DspError};

/// The whole of a text file; the error names the file.
pub fn read_text(path: &Path) -> Result<String, DspError> {
    std::fs::read_to_string(path).map_err(|e| DspError::Io {
        context: path.display().to_string(),
        source: e,
    })
}

/// The chain configuration in TOML file `path`, or the default one; a
/// parse error names the file.
pub fn load_config(path: Option<&Path>) -> Result<ChainConfig, DspError> {
    match path {
        Some(p) => ChainConfig::from_toml(&read_text(p)?).map_err(|e| match e {
            DspError::Parse(m) => DspError::Parse(format!("{}: {m}", p.display())),
            other => other,
        }),
        None => Ok(ChainConfig::default()),
    }
}
