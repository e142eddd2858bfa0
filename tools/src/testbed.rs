//! `rondo testbed`: the fabric emulator, a `rondo perf server` and `rondo perf
//! client` on loopback in one command, with the JSON keys of `rondo sim --json`.
//!
//! The fabric runs on a thread of this process; server and client are child
//! processes of the same binary (each its own CPU account), killed when this command
//! ends, fails or is interrupted (Ctrl-C). Every run moves 64 KiB WRITEs for the
//! duration; the ideal is the summed path rates of one direction.

use crate::chart::{Line, LineChart, LinePanel};
use crate::fabric as fabric_cmd;
use crate::table::Table;
use anyhow::{bail, ensure, Context as _};
use rondo_fabric::{run as fabric_run, Class, Counters, Fabric, Topology};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Full packets the paper's heterogeneous delay is worth (10 us at 70 Gb/s, 1500 B).
pub const HETERO_PACKETS: f64 = 58.0;

/// The engine's `stall_allowance_us` unless `--set transport.stall_allowance_us`
/// gives it: a thread on a loaded two-core host pauses for several milliseconds.
/// In alternating runs on the homogeneous testbed at load 4.5-5.4, 4 ms filled
/// 74-77% of the paths, 6 ms 68-88%, 8 ms 94-97%; the simulator's host-stall model
/// (`rondo sim --builtin host-stalls`) rides through stalls of up to half the
/// allowance on average (docs/engine.md, "Hosts that pause").
const STALL_ALLOWANCE_US: u32 = 8000;

/// Options of `rondo testbed`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topology file (default: the built-in testbed, `fabric/topologies/testbed.toml`).
    #[arg(value_name = "TOPOLOGY.toml")]
    topology: Option<PathBuf>,
    /// Add to path 0 a delay equal to the time the summed rate takes to send 58 full
    /// datagrams (the paper's 10 us at 70 Gb/s with 1500-byte packets).
    #[arg(long)]
    hetero: bool,
    /// Transports to run, comma-separated, one after another.
    #[arg(long, default_value = "rondo,rrps", value_name = "NAME[,NAME...]")]
    transport: String,
    /// Seconds each run sends.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    duration_s: f64,
    /// Override a key: topology keys (path.0.rate_mbps=100), or transport keys for
    /// both sides' engines (transport.reorder_buffer_kb=64, transport.scheduler=false,
    /// transport.base_rtt_us=..., any `rondo perf --engine` key). Repeatable. The
    /// engines get the topology's base RTTs and transport.stall_allowance_us=8000
    /// unless these set them.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Run once per value of a key, for every transport: --sweep
    /// transport.reorder_buffer_kb=32,64,128; prints a table (and --svg plots it).
    #[arg(long, value_name = "KEY=V1,V2,...")]
    sweep: Option<String>,
    /// Write a plot of the sweep (goodput against the swept value) to this SVG file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print one JSON object (`{"runs": [...]}`, the keys of `rondo sim --json`).
    #[arg(long)]
    json: bool,
}

/// One run's settings.
#[derive(Clone, Debug)]
struct Plan {
    transport: String,
    sets: Vec<String>,
    sweep: Option<(String, String)>,
}

/// Kills a child process when dropped (this command's end, error or interrupt).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `rondo testbed`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    ensure!(
        args.duration_s.is_finite() && (0.1..=3600.0).contains(&args.duration_s),
        "--duration-s {} is out of range: use 0.1 to 3600 seconds",
        args.duration_s
    );
    let transports: Vec<String> = args
        .transport
        .split(',')
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    ensure!(
        !transports.is_empty(),
        "--transport needs at least one name"
    );
    for t in &transports {
        if let Err(e) = rondo_proto::Transport::from_name(t) {
            bail!("--transport {t}: {e}");
        }
    }
    let mut plans = Vec::new();
    let sweep = match &args.sweep {
        None => vec![None],
        Some(s) => {
            let (key, values) = s
                .split_once('=')
                .with_context(|| format!("--sweep {s:?}: write KEY=V1,V2,..."))?;
            let values: Vec<_> = values
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .collect();
            ensure!(!values.is_empty(), "--sweep {s:?}: give at least one value");
            values
                .into_iter()
                .map(|v| Some((key.trim().to_owned(), v.to_owned())))
                .collect()
        }
    };
    for point in &sweep {
        for t in &transports {
            let mut sets = args.set.clone();
            if let Some((k, v)) = point {
                sets.push(format!("{k}={v}"));
            }
            plans.push(Plan {
                transport: t.clone(),
                sets,
                sweep: point.clone(),
            });
        }
    }
    // Every plan's topology and engine settings are checked before anything starts.
    let prepared = plans
        .iter()
        .map(|p| prepare(args, p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    fabric_run::stop_on_signals();
    let mut runs = Vec::new();
    for (plan, (topo, perf)) in plans.iter().zip(&prepared) {
        if fabric_run::signalled() {
            bail!("interrupted");
        }
        let r = run_one(args, plan, topo, perf)?;
        if !args.json {
            eprintln!(
                "{} {}: goodput {:.3} Gb/s, utilization {:.1}%, OOD p99 {}",
                scenario(args),
                plan.transport,
                r["goodput_gbps"].as_f64().unwrap_or(0.0),
                r["utilization"].as_f64().unwrap_or(0.0) * 100.0,
                r["ood"]["nic_p99"]
            );
        }
        runs.push(r);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "runs": runs }))?
        );
    } else {
        println!("{}", table(&runs, args.sweep.is_some()));
    }
    if let Some(file) = &args.svg {
        std::fs::write(file, plot(&runs, args.sweep.as_deref().unwrap_or("")))
            .with_context(|| format!("write {}", file.display()))?;
    }
    Ok(())
}

fn scenario(args: &Args) -> &'static str {
    if args.hetero {
        "testbed-hetero"
    } else {
        "testbed-homo"
    }
}

/// Splits a plan's overrides into the topology's and `rondo perf`'s options, and
/// applies `--hetero`.
fn prepare(args: &Args, plan: &Plan) -> anyhow::Result<(Topology, Vec<String>)> {
    let (transport_sets, topo_sets): (Vec<&String>, Vec<&String>) =
        plan.sets.iter().partition(|s| s.starts_with("transport."));
    let topo_sets: Vec<String> = topo_sets.into_iter().cloned().collect();
    let mut topo = fabric_cmd::load(args.topology.as_ref(), &topo_sets)?;
    ensure!(
        topo.hosts.len() == 2 && topo.hosts[0].ports == topo.hosts[1].ports,
        "rondo testbed needs a topology of two hosts (client first, server second) with as many ports each"
    );
    let mtu = f64::from(crate::perf::DEFAULT_MTU);
    if args.hetero {
        let extra_us = HETERO_PACKETS * mtu * 8.0 / topo.total_bps() * 1e6;
        topo.paths[0].delay_us += extra_us;
    }
    let mut perf = Vec::new();
    let mut base_rtt_set = false;
    let mut allowance_set = false;
    for s in transport_sets {
        let kv = s.trim_start_matches("transport.");
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--set {s:?}: write transport.KEY=VALUE"))?;
        match k {
            "reorder_buffer_kb" => {
                let kb: f64 = v
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x > 0.0)
                    .with_context(|| format!("--set {s}: give KB above 0"))?;
                perf.push("--reorder-buffer".into());
                perf.push(((kb * 1024.0) as u64).to_string());
            }
            "kind" => bail!("--set {s}: choose transports with --transport"),
            _ => {
                base_rtt_set |= k == "base_rtt_us";
                allowance_set |= k == "stall_allowance_us";
                perf.push("--engine".into());
                perf.push(kv.to_owned());
            }
        }
    }
    if !base_rtt_set {
        // The engine's base RTT per path: both directions' propagation, a data
        // packet's and an ACK's serialisation, and the host's own share (the UDP
        // host profile's base RTT, which is all a loopback path has).
        let rtts: Vec<String> = (0..topo.hosts[0].ports)
            .map(|i| {
                let p = &topo.paths[usize::from(i) % topo.paths.len()];
                let ser = (mtu + 100.0) * 8.0 / p.rate_mbps;
                let host = rondo_ud::HostProfile::HOST_STACK.base_rtt.as_us_f64();
                format!("{:.0}", 2.0 * p.delay_us + ser + host)
            })
            .collect();
        perf.push("--engine".into());
        perf.push(format!("base_rtt_us={}", rtts.join(",")));
    }
    if !allowance_set {
        // Fabric, client and server share this host's cores: each stops for
        // milliseconds now and then, and Rondo rides through such pauses only with
        // an allowance for them (docs/engine.md, "Hosts that pause").
        perf.push("--engine".into());
        perf.push(format!("stall_allowance_us={}", STALL_ALLOWANCE_US));
    }
    // The engine checks its settings now, not in a child after the fabric started.
    let engine: Vec<String> = perf
        .chunks(2)
        .filter(|c| c[0] == "--engine")
        .map(|c| c[1].clone())
        .collect();
    crate::perf::check_engine(&engine, topo.hosts[0].ports)?;
    Ok((topo, perf))
}

fn free_tcp_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("find a free TCP port")?;
    Ok(l.local_addr()?.port())
}

/// Waits for `child` to exit, or kills it at `deadline` or on Ctrl-C.
fn wait_for(child: &mut Reaped, deadline: Instant, what: &str) -> anyhow::Result<()> {
    loop {
        if let Some(status) = child.0.try_wait()? {
            ensure!(status.success(), "{what} failed ({status})");
            return Ok(());
        }
        if fabric_run::signalled() {
            bail!("interrupted");
        }
        if Instant::now() > deadline {
            bail!("{what} did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_one(args: &Args, plan: &Plan, topo: &Topology, perf: &[String]) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("find the rondo binary")?;
    let fabric = Fabric::spawn(topo)?;
    let via = fabric.addr().to_string();
    let tcp = free_tcp_port()?.to_string();
    let (client, server) = (&topo.hosts[0], &topo.hosts[1]);
    let paths = client.ports.to_string();
    let mut srv = Reaped(
        Command::new(&exe)
            .args([
                "perf",
                "server",
                "--bind",
                "127.0.0.1",
                "-p",
                &tcp,
                "--clients",
                "1",
            ])
            .args(["--udp-port", &server.base_port.to_string(), "--via", &via])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start rondo perf server")?,
    );
    // The server listens within a moment; the client retries its connection until then.
    let before = fabric.counters();
    let started = Instant::now();
    let duration = format!("{}", args.duration_s);
    let out = loop {
        let cli = Reaped(
            Command::new(&exe)
                .args([
                    "perf",
                    "client",
                    "127.0.0.1",
                    "-p",
                    &tcp,
                    "-D",
                    &duration,
                    "--json",
                ])
                .args(["--paths", &paths, "--transport", &plan.transport])
                .args(["--udp-port", &client.base_port.to_string(), "--via", &via])
                .args(perf)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .context("start rondo perf client")?,
        );
        let out = wait_output(
            cli,
            Instant::now() + Duration::from_secs_f64(args.duration_s + 90.0),
        )?;
        let refused = String::from_utf8_lossy(&out.stderr).contains("Connection refused");
        if out.status.success() || !refused || started.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !out.status.success() {
        let mut e = String::new();
        if let Some(mut s) = srv.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut s, &mut e);
        }
        bail!(
            "rondo perf client failed: {}; server: {}",
            String::from_utf8_lossy(&out.stderr).trim(),
            e.trim()
        );
    }
    wait_for(
        &mut srv,
        Instant::now() + Duration::from_secs(30),
        "rondo perf server",
    )?;
    let report = fabric.stop()?;
    let perf_json: Value =
        serde_json::from_slice(&out.stdout).context("read rondo perf client's JSON")?;
    Ok(result(args, plan, topo, &perf_json, &before, &report))
}

fn wait_output(mut child: Reaped, deadline: Instant) -> anyhow::Result<std::process::Output> {
    // Read the pipes on threads so a full pipe never blocks the child.
    let mut so = child.0.stdout.take();
    let mut se = child.0.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(s) = so.as_mut() {
            let _ = std::io::Read::read_to_end(s, &mut v);
        }
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(s) = se.as_mut() {
            let _ = std::io::Read::read_to_end(s, &mut v);
        }
        v
    });
    let status = loop {
        if let Some(s) = child.0.try_wait()? {
            break s;
        }
        if fabric_run::signalled() {
            bail!("interrupted");
        }
        if Instant::now() > deadline {
            bail!("rondo perf client did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(std::process::Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    })
}

/// Data bytes the fabric delivered to the host named `host` between two snapshots,
/// and the probe drops and the other drops (threshold, random loss) toward it.
fn delta(before: &Counters, after: &Counters, host: &str) -> (u64, u64, u64) {
    let sum = |c: &Counters, f: &dyn Fn(&rondo_fabric::EgressCounters) -> u64| -> u64 {
        c.egress.iter().filter(|e| e.to == host).map(f).sum()
    };
    let bytes = |c: &Counters| sum(c, &|e| e.data.bytes_delivered);
    let probe = |c: &Counters| sum(c, &|e| e.probe.dropped_queue);
    let queue = |c: &Counters| {
        sum(c, &|e| {
            e.data.dropped_queue
                + e.control.dropped_queue
                + e.data.lost
                + e.control.lost
                + e.probe.lost
        })
    };
    (
        bytes(after) - bytes(before),
        probe(after) - probe(before),
        queue(after) - queue(before),
    )
}

fn result(
    args: &Args,
    plan: &Plan,
    topo: &Topology,
    perf: &Value,
    before: &Counters,
    report: &rondo_fabric::Report,
) -> Value {
    let server = &topo.hosts[1].name;
    let (bytes, probe_drops, switch_drops) = delta(before, &report.counters, server);
    let ideal = topo.total_bps() / 1e9;
    let goodput = perf["BW_average"].as_f64().unwrap_or(0.0);
    // The receiver's active time (first to last arrival): goodput is its bytes over
    // it, and the in-flight tail after the duration drains within it.
    let moved =
        perf["n_iterations"].as_f64().unwrap_or(0.0) * perf["MsgSize"].as_f64().unwrap_or(0.0);
    let active_s = if goodput > 0.0 {
        moved * 8.0 / (goodput * 1e9)
    } else {
        args.duration_s
    };
    let throughput = bytes as f64 * 8.0 / active_s / 1e9;
    let paths: Vec<Value> = (0..topo.paths.len())
        .map(|p| {
            let dst = topo.host_index(server).unwrap_or(1);
            let c = report.counters.class(dst, p, Class::Data);
            json!({
                "path": p,
                "rate_mbps": topo.paths[p].rate_mbps,
                "delay_us": topo.paths[p].delay_us,
                "data_gbps": c.bytes_delivered as f64 * 8.0 / active_s / 1e9,
                "marked": c.marked,
                "dropped": c.dropped_queue,
                "max_queue_kb": c.max_queue_bytes as f64 / 1024.0,
            })
        })
        .collect();
    let mut v = json!({
        "scenario": scenario(args),
        "transport": plan.transport,
        "seed": topo.seed,
        "goodput_gbps": goodput,
        "throughput_gbps": throughput,
        "ideal_gbps": ideal,
        "utilization": if ideal > 0.0 { throughput / ideal } else { 0.0 },
        "goodput_utilization": if ideal > 0.0 { goodput / ideal } else { 0.0 },
        "ood": {
            "nic_avg": perf["ood_avg"],
            "nic_p99": perf["ood_p99"],
            "nic_max": perf["ood_max"],
        },
        "retx": { "packets": perf["retx_packets"] },
        "drops": {
            "probe": probe_drops,
            "reorder_buffer": perf["reorder_buffer_drops"],
            "switch": switch_drops,
        },
        "measured_us": active_s * 1e6,
        "fabric": {
            "paths": paths,
            "cpu_us_per_datagram": report.cpu_us_per_datagram(),
            "malformed": report.counters.malformed,
            "unknown_source": report.counters.unknown_source,
            "send_errors": report.counters.send_errors,
        },
        "perf": perf,
    });
    if let Some((k, val)) = &plan.sweep {
        v["sweep"] =
            json!({ "key": k, "value": val.parse::<f64>().map_or(json!(val), |x| json!(x)) });
    }
    v
}

fn table(runs: &[Value], sweep: bool) -> String {
    let mut header = vec!["scenario", "transport"];
    if sweep {
        header.push("value");
    }
    header.extend([
        "goodput Gb/s",
        "throughput Gb/s",
        "ideal Gb/s",
        "util %",
        "OOD avg",
        "OOD p99",
        "OOD max",
        "retx",
        "RB drops",
        "probe drops",
    ]);
    let mut t = Table::new(&header);
    for r in runs {
        let mut row = vec![
            r["scenario"].as_str().unwrap_or("").to_owned(),
            r["transport"].as_str().unwrap_or("").to_owned(),
        ];
        if sweep {
            row.push(r["sweep"]["value"].to_string());
        }
        let f = |v: &Value, d: usize| format!("{:.*}", d, v.as_f64().unwrap_or(0.0));
        row.extend([
            f(&r["goodput_gbps"], 3),
            f(&r["throughput_gbps"], 3),
            f(&r["ideal_gbps"], 3),
            format!("{:.1}", r["utilization"].as_f64().unwrap_or(0.0) * 100.0),
            f(&r["ood"]["nic_avg"], 2),
            r["ood"]["nic_p99"].to_string(),
            r["ood"]["nic_max"].to_string(),
            r["retx"]["packets"].to_string(),
            r["drops"]["reorder_buffer"].to_string(),
            r["drops"]["probe"].to_string(),
        ]);
        t.row(row);
    }
    t.to_string()
}

/// Goodput against the swept value, one line per transport.
fn plot(runs: &[Value], sweep: &str) -> String {
    let mut lines: Vec<Line> = Vec::new();
    for r in runs {
        let name = r["transport"].as_str().unwrap_or("").to_owned();
        let x = r["sweep"]["value"].as_f64().unwrap_or(lines.len() as f64);
        let y = r["goodput_gbps"].as_f64().unwrap_or(0.0);
        match lines.iter_mut().find(|l| l.name == name) {
            Some(l) => l.points.push((x, y)),
            None => lines.push(Line {
                name,
                points: vec![(x, y)],
            }),
        }
    }
    for l in &mut lines {
        l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let key = sweep.split('=').next().unwrap_or("value");
    LineChart {
        title: "rondo testbed: goodput on the real datapath through the fabric".into(),
        x_label: key.into(),
        panels: vec![LinePanel {
            title: "goodput".into(),
            unit: "Gb/s".into(),
            lines,
        }],
    }
    .to_svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(sets: &[&str]) -> Plan {
        Plan {
            transport: "rondo".into(),
            sets: sets.iter().map(|s| (*s).to_owned()).collect(),
            sweep: None,
        }
    }

    fn args() -> Args {
        Args {
            topology: None,
            hetero: false,
            transport: "rondo".into(),
            duration_s: 1.0,
            set: Vec::new(),
            sweep: None,
            svg: None,
            json: false,
        }
    }

    /// The `--engine` values `prepare` passes for `key`.
    fn engine(sets: &[&str], key: &str) -> Vec<String> {
        let (_, perf) = prepare(&args(), &plan(sets)).unwrap();
        perf.chunks(2)
            .filter(|c| c[0] == "--engine" && c[1].starts_with(&format!("{key}=")))
            .map(|c| c[1].clone())
            .collect()
    }

    #[test]
    fn the_engine_gets_a_stall_allowance_unless_one_is_set() {
        assert_eq!(
            engine(&[], "stall_allowance_us"),
            ["stall_allowance_us=8000"]
        );
        assert_eq!(
            engine(&["transport.stall_allowance_us=0"], "stall_allowance_us"),
            ["stall_allowance_us=0"]
        );
        // The base RTT from the topology: both directions' 2 ms, serialisation and
        // the host's 500 us.
        assert_eq!(
            engine(&[], "base_rtt_us"),
            ["base_rtt_us=4637,4672,4729,4844"]
        );
    }
}
