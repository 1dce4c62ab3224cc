//! `hotlab`: the command line. One file per subcommand ([`commands`]: its flags and its
//! printout) and the measuring commands' runs ([`bench`](mod@bench)); everything they run is in the
//! crates below: `hotlab-lab` (the server, workers), `hotlab-workloads`, `hotlab-train`
//! (the loop and its kernels) and the crates they stand on (`hotlab-spec`, `hotlab-protocol`, `hotlab-report`, `hotlab-env`).

mod bench;
mod commands;
mod failure;
mod trainer;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match commands::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
                let _ = e.print();
                return if e.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            // One line naming the flag and what is allowed; `--help` has the rest.
            let text = e.to_string();
            eprintln!("{}", text.lines().next().unwrap_or("error: invalid arguments"));
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match commands::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        // Invalid values exit with 2 and one line naming the flag; anything else with 1.
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}
