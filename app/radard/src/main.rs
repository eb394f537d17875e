//! `radard`: the radar appliance program.
//!
//! Frames arrive from the FPGA (`--source kmod`) or its simulator
//! (`--source sim`, the default); each goes through the processing chain on
//! the GPU or CPU within the frame period; a line per frame and a status line
//! per second go to stdout; a summary at exit (SIGINT/SIGTERM or `--frames`).
//!
//! The program is the library `radard` driven by its command line: `cli`
//! (the options and how they apply to the configuration), `cmd` (one file
//! per subcommand: run, record, replay, decode-record), `signals`
//! (SIGINT/SIGTERM). Errors end it with the exit status of
//! [`RadardError::exit_code`] (0, 1, 2; 3 for a run that reached its frame
//! limit with frame errors; a stop by SIGTERM or SIGINT is 0).

mod cli;
mod cmd;
mod signals;

use std::process::ExitCode;

use clap::Parser;
use radard::RadardError;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::dispatch(&cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            report(&e);
            ExitCode::from(e.exit_code())
        }
    }
}

fn report(e: &RadardError) {
    eprintln!("{}: {e}", e.program());
}
