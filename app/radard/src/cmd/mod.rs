//! The subcommands, one file each; [`dispatch`] picks one. Each returns
//! the process's exit status or the error that ends it.

mod decode_record;
mod record;
mod replay;
mod run;

use radard::RadardError;

use crate::cli::{Cli, Command};

/// Runs what the command line asks for.
pub fn dispatch(cli: &Cli) -> Result<u8, RadardError> {
    // A detections record is decoded without any configuration.
    if let Some(Command::DecodeRecord { input }) = &cli.command {
        return decode_record::decode_record(input);
    }
    let sources = cli.config_sources()?;
    let cfg = cli.config(&sources)?;
    if cli.print_config {
        print!("{}{}", sources.header(), toml::to_string_pretty(&cfg)?);
        return Ok(0);
    }
    println!("radard: {}", sources.summary_line());
    match &cli.command {
        Some(Command::Record { output }) => record::record(cli, &cfg, output),
        Some(Command::Replay { .. }) => replay::replay(cli, &cfg),
        Some(Command::DecodeRecord { .. }) | None => run::run(cli, &cfg),
    }
}
