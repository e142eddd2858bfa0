//! `rondo`: the command-line front end of the Rondo transport.
//!
//! `rondo demo` runs one long transfer over the in-memory two-host testbed and
//! compares Rondo with and without its packet scheduler. Further subcommands
//! (simulation, sweeps, performance runs on real hosts) join [`Command`] as their
//! crates land.

mod chart;
mod demo;
mod perf;
mod table;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Rondo: packet-spraying multipath transport with low reordering.
#[derive(Debug, Parser)]
#[command(name = "rondo", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Send one long message over four unequal paths between two in-memory hosts,
    /// with the packet scheduler on and off, and print goodput, utilization and
    /// reordering (OOD/RBO).
    Demo(demo::Args),
    /// perftest-like bandwidth and latency runs between two hosts over UDP:
    /// `rondo perf server` on one, `rondo perf client HOST` on the other.
    Perf(perf::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Demo(args) => demo::run(&args),
        Command::Perf(args) => perf::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole chain of causes on one line.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
