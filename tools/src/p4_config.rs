//! `rondo p4-config`: the control-plane commands of the P4 programs in `p4/` for a
//! topology (the forwarding table the emulator routes by, classes, ECN thresholds,
//! queues).

use rondo_fabric::p4::{self, Target};
use std::path::PathBuf;

/// The P4 targets.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum TargetArg {
    /// Tofino (`p4/rondo_tna.p4`): bfrt_python.
    Tna,
    /// BMv2 simple_switch (`p4/rondo_v1model.p4`): simple_switch_CLI.
    Bmv2,
}

/// Options of `rondo p4-config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topology file (default: the built-in testbed).
    #[arg(value_name = "TOPOLOGY.toml")]
    topology: Option<PathBuf>,
    /// Which switch.
    #[arg(long, value_enum)]
    target: TargetArg,
    /// Override a topology key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Largest datagram, bytes (BMv2 queues count packets of this size).
    #[arg(long, default_value_t = crate::perf::DEFAULT_MTU as usize)]
    mtu: usize,
}

/// Runs `rondo p4-config`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        (64..=65_535).contains(&args.mtu),
        "--mtu {} is out of range: use 64 to 65535 bytes",
        args.mtu
    );
    let topo = crate::fabric::load(args.topology.as_ref(), &args.set)?;
    let target = match args.target {
        TargetArg::Tna => Target::Tna,
        TargetArg::Bmv2 => Target::Bmv2,
    };
    print!("{}", p4::config(&topo, target, args.mtu));
    Ok(())
}
