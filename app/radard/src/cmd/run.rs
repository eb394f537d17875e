//! `radard` with no subcommand: the run. Sets the unit up
//! ([`radard::Radard`]), runs the loop until `--frames`, SIGINT/SIGTERM or
//! a fatal error of the source, prints the summary and writes its JSON.
//! Exit status 3 when the run reached its frame limit with frame errors or
//! misses; 0 when a signal stopped it (its quality is in the summary).

use std::io::Write;

use radard::summary::Summary;
use radard::{Radard, RadardConfig, RadardError};

use crate::cli::Cli;
use crate::signals;

pub fn run(cli: &Cli, cfg: &RadardConfig) -> Result<u8, RadardError> {
    signals::install();
    let mut radard = Radard::builder(cfg)
        .real_time(!cli.no_rt)
        .frames(cli.frames)
        .stop_flag(&signals::STOP)
        .start(&mut |n| println!("radard: {n}"))?;
    let report = radard.run();
    let summary = Summary::new(cfg, &report);
    // A closed stdout must not lose the JSON below.
    let _ = write!(std::io::stdout().lock(), "{summary}");
    if let Some(path) = &cfg.output.stats_json {
        summary.write_json(path)?;
        println!("radard: summary written to {}", path.display());
    }
    report.result?;
    Ok(summary.run_end().exit_code())
}
