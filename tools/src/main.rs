//! `rondo`: the command-line front end of the Rondo transport.
//!
//! `rondo sim` runs scenario files and the paper's figures on the packet-level
//! simulator; `rondo perf` measures Rondo (and the raw-UDP ceiling) between two
//! hosts, perftest style; `rondo doctor` checks a host for the verbs datapath;
//! `rondo demo` sends one message over the `fig9` built-ins' testbed with the packet
//! scheduler on and off.

mod chart;
mod demo;
mod doctor;
mod fabric;
mod p4_config;
mod parallel;
mod perf;
mod reproduce;
mod sim;
mod sweep;
mod table;
mod testbed;

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
    /// Check this host for Rondo's verbs datapath: RDMA devices, ports, GIDs, MTU,
    /// huge pages, `ulimit -l`; say what is missing and how to fix it.
    Doctor(doctor::Args),
    /// Run a scenario file or a built-in (the paper's figures) on the packet-level
    /// simulator and print goodput, utilization, OOD/RBO, completion times.
    Sim(sim::Args),
    /// Run a scenario over a list of values of any key, for several transports and
    /// seeds, on every core: a table, one JSON object, a plot; --shard K/N and
    /// --merge DIR split a sweep over machines (tools/slurm/).
    Sweep(sweep::Args),
    /// Run the paper's comparisons (every transport beside Rondo) and write
    /// docs/results.md with the paper's numbers beside ours, and SVG plots.
    Reproduce(reproduce::Args),
    /// perftest-like bandwidth and latency runs between two hosts over UDP:
    /// `rondo perf server` on one, `rondo perf client HOST` on the other.
    Perf(perf::Args),
    /// The userspace switch: steers by UDP source port, strict priority (control,
    /// data, probes), per-class thresholds, path rate and delay, ECN, loss, from a
    /// topology file; counters at exit (Ctrl-C); --measure reports its accuracy.
    Fabric(fabric::Args),
    /// The fabric, a `rondo perf` server and client on loopback in one command:
    /// Rondo (and rrps) through emulated paths of unequal rate and delay, with the
    /// JSON keys of `rondo sim --json`; --sweep over a key with a table and a plot.
    Testbed(testbed::Args),
    /// Print the control-plane commands of the P4 switch programs in p4/ for a
    /// topology: bfrt_python (--target tna) or simple_switch_CLI (--target bmv2).
    P4Config(p4_config::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Demo(args) => demo::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::Perf(args) => perf::run(&args),
        Command::Fabric(args) => fabric::run(&args),
        Command::Testbed(args) => testbed::run(&args),
        Command::P4Config(args) => p4_config::run(&args),
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
