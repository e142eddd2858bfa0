//! `rondo fabric`: the userspace switch (`rondo-fabric`) on this host, until Ctrl-C
//! or for a duration, then its counters; `--measure` reports its accuracy instead.

use anyhow::Context as _;
use rondo_fabric::{accuracy, run as fabric_run, Fabric, Topology};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `rondo fabric`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topology file (TOML; see docs/fabric.md). Default: the built-in testbed
    /// (four paths, 250/200/150/100 Mb/s, 2 ms).
    #[arg(value_name = "TOPOLOGY.toml")]
    pub topology: Option<PathBuf>,
    /// Override a topology key: --set path.0.rate_mbps=100 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECONDS")]
    pub duration_s: Option<f64>,
    /// Print the counters (or the accuracy) as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Measure the emulator instead of serving: delivered rate and added delay per
    /// path against the topology, and CPU time per datagram (binds the first two
    /// hosts' ports).
    #[arg(long)]
    pub measure: bool,
    /// Seconds of the rate phase of --measure.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub measure_s: f64,
    /// Datagram size of --measure, bytes.
    #[arg(long, default_value_t = 1500)]
    pub size: usize,
}

/// Reads the topology named (or the built-in one) with the overrides.
pub fn load(file: Option<&PathBuf>, set: &[String]) -> anyhow::Result<Topology> {
    let sets: Vec<&str> = set.iter().map(String::as_str).collect();
    Ok(match file {
        Some(f) => Topology::load(f, &sets)?,
        None => Topology::parse(rondo_fabric::topology::TESTBED, &sets)?,
    })
}

/// Runs `rondo fabric`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let topo = load(args.topology.as_ref(), &args.set)?;
    if args.measure {
        anyhow::ensure!(
            args.measure_s.is_finite() && (0.1..=600.0).contains(&args.measure_s),
            "--measure-s {} is out of range: use 0.1 to 600 seconds",
            args.measure_s
        );
        anyhow::ensure!(
            (32..=65_507).contains(&args.size),
            "--size {} is out of range: use 32 to 65507 bytes",
            args.size
        );
        let a =
            accuracy::measure(&topo, args.measure_s, args.size).context("measure the fabric")?;
        if args.json {
            println!("{}", serde_json::to_string(&a)?);
        } else {
            print!("{}", a.to_table());
        }
        return Ok(());
    }
    if let Some(d) = args.duration_s {
        anyhow::ensure!(
            d.is_finite() && d > 0.0 && d <= 86_400.0,
            "--duration-s {d} is out of range: use above 0, at most a day"
        );
    }
    fabric_run::stop_on_signals();
    let fabric = Fabric::spawn(&topo)?;
    eprintln!(
        "rondo fabric listening on {} ({} paths, {} hosts); Ctrl-C prints the counters",
        fabric.addr(),
        topo.paths.len(),
        topo.hosts.len()
    );
    let start = Instant::now();
    while !fabric_run::signalled()
        && fabric.is_running()
        && args
            .duration_s
            .is_none_or(|d| start.elapsed() < Duration::from_secs_f64(d))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = fabric.stop()?;
    if args.json {
        let mut v = serde_json::to_value(&report.counters)?;
        v["cpu_us_per_datagram"] = report.cpu_us_per_datagram().into();
        println!("{v}");
    } else {
        print!("{}", report.counters.to_table());
        println!(
            "fabric thread CPU {:.3} s, {:.2} us per datagram",
            report.cpu_ns as f64 / 1e9,
            report.cpu_us_per_datagram()
        );
    }
    Ok(())
}
