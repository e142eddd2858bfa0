//! The control plane of `p4/rondo_tna.p4` and `p4/rondo_v1model.p4` for a topology
//! (`rondo p4-config`): the forwarding table from [`Topology::route_table`] (the
//! same one the emulator routes by), the DSCP-to-class table, the ECN thresholds, and
//! the queue configuration (strict priority, per-queue depth and rate).
//!
//! Propagation delay and random loss are the emulator's alone: a switch has the
//! links' real delay and loss.

use crate::topology::{RouteEntry, Topology};
use std::fmt::Write as _;

/// The switch target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Tofino (TNA), through `bfrt_python`.
    Tna,
    /// BMv2 `simple_switch` (v1model), through `simple_switch_CLI`.
    Bmv2,
}

/// Queue (TNA `qid`) or priority (BMv2 `standard_metadata.priority`) of each class.
/// TNA: queue 0 is control, 1 data, 2 probes (strict priority 7, 5, 1). BMv2: with
/// `--priority-queues 3` priority 2 is served first: control 2, data 1, probes 0.
pub const TNA_QID: [u8; 3] = [0, 1, 2];
/// See [`TNA_QID`].
pub const BMV2_PRIORITY: [u8; 3] = [2, 1, 0];

/// One generated forwarding entry: packets to `dst_ip` from `src_port` leave on
/// `egress_port` and count as `path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PathEntry {
    /// Destination address.
    pub dst_ip: std::net::IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// Switch egress port.
    pub egress_port: u16,
    /// The path (the counter index).
    pub path: usize,
}

/// The forwarding entries of a topology.
pub fn path_entries(topo: &Topology) -> Vec<PathEntry> {
    topo.route_table()
        .iter()
        .map(|r: &RouteEntry| PathEntry {
            dst_ip: topo.hosts[r.dst_host].ip,
            src_port: r.src_port,
            egress_port: topo.switch_port(r.dst_host, r.path),
            path: r.path,
        })
        .collect()
}

/// BMv2 measures queues in packets: a KB threshold as full packets of `mtu` bytes.
fn packets(kb: f64, mtu: usize) -> u64 {
    ((kb * 1024.0) / mtu as f64).floor().max(1.0) as u64
}

/// The control-plane commands of `target` for `topo`, `mtu` the largest datagram
/// (BMv2 queue depths and rates are in packets).
pub fn config(topo: &Topology, target: Target, mtu: usize) -> String {
    match target {
        Target::Bmv2 => bmv2(topo, mtu),
        Target::Tna => tna(topo),
    }
}

fn dscps(topo: &Topology) -> [(u8, usize); 3] {
    [
        (topo.dscp.control, 0),
        (topo.dscp.data, 1),
        (topo.dscp.probe, 2),
    ]
}

fn bmv2(topo: &Topology, mtu: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// simple_switch_CLI commands for p4/rondo_v1model.p4 (start simple_switch with --priority-queues 3)"
    );
    for e in path_entries(topo) {
        let _ = writeln!(
            s,
            "table_add RondoIngress.path_table RondoIngress.set_path {} {} => {} {}",
            e.dst_ip, e.src_port, e.egress_port, e.path
        );
    }
    for (dscp, class) in dscps(topo) {
        let _ = writeln!(
            s,
            "table_add RondoIngress.class_table RondoIngress.set_class {dscp} => {}",
            BMV2_PRIORITY[class]
        );
    }
    for dst in 0..topo.hosts.len() {
        for (p, path) in topo.paths.iter().enumerate() {
            let port = topo.switch_port(dst, p);
            if let Some(kb) = path.ecn_kb {
                let _ = writeln!(
                    s,
                    "table_add RondoEgress.ecn_table RondoEgress.set_ecn_threshold {port} => {}",
                    packets(kb, mtu)
                );
            }
            let pps = (path.rate_mbps * 1e6 / (8.0 * mtu as f64)).round().max(1.0) as u64;
            let q = path.queue_kb;
            for (class, kb) in [(0, q.control), (1, q.data), (2, q.probe)] {
                let prio = BMV2_PRIORITY[class];
                let _ = writeln!(s, "set_queue_depth {} {port} {prio}", packets(kb, mtu));
                let _ = writeln!(s, "set_queue_rate {pps} {port} {prio}");
            }
        }
    }
    s
}

fn tna(topo: &Topology) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# bfrt_python for p4/rondo_tna.p4 (run in bfshell: bfrt_python this_file)"
    );
    let _ = writeln!(s, "p = bfrt.rondo_tna.pipe");
    let _ = writeln!(s, "ig = p.RondoIngress");
    let _ = writeln!(s, "eg = p.RondoEgress");
    for e in path_entries(topo) {
        let _ = writeln!(
            s,
            "ig.path_table.add_with_set_path(dst_addr=\"{}\", src_port={}, port={}, path={})",
            e.dst_ip, e.src_port, e.egress_port, e.path
        );
    }
    for (dscp, class) in dscps(topo) {
        let _ = writeln!(
            s,
            "ig.class_table.add_with_set_class(dscp={dscp}, qid={})",
            TNA_QID[class]
        );
    }
    // Tofino counts queue depth in 80-byte cells.
    let cells = |kb: f64| ((kb * 1024.0) / 80.0).ceil().max(1.0) as u64;
    for dst in 0..topo.hosts.len() {
        for (p, path) in topo.paths.iter().enumerate() {
            let port = topo.switch_port(dst, p);
            if let Some(kb) = path.ecn_kb {
                let _ = writeln!(
                    s,
                    "eg.ecn_table.add_with_set_ecn_threshold(egress_port={port}, cells={})",
                    cells(kb)
                );
            }
            let _ = writeln!(
                s,
                "bfrt.tf1.tm.port.sched_cfg.mod(dev_port={port}, max_rate_enable=True)\n\
                 bfrt.tf1.tm.port.sched_shaping.mod(dev_port={port}, unit=\"BPS\", max_rate={}, max_burst_size=9000)",
                (path.rate_mbps * 1e3).round() as u64
            );
            let q = path.queue_kb;
            for (class, kb, prio) in [(0, q.control, 7), (1, q.data, 5), (2, q.probe, 1)] {
                let qid = TNA_QID[class];
                let _ = writeln!(
                    s,
                    "bfrt.tf1.tm.queue.sched_cfg.mod(pg_id=port_pg({port}), pg_queue={qid}, max_priority={prio}, min_priority={prio})\n\
                     bfrt.tf1.tm.queue.buffer.mod(pg_id=port_pg({port}), pg_queue={qid}, guaranteed_cells={}, pool_usage=\"NONE\")",
                    cells(kb)
                );
            }
        }
    }
    s.insert_str(
        s.find("p = bfrt").unwrap_or(0),
        "def port_pg(dev_port):\n    # the port group of a dev port (pipe-local port / 8); check against your SDE\n    return (dev_port & 0x7f) // 8\n",
    );
    s
}
