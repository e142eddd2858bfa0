//! Running a scenario on the [`Simulator`] and turning its metrics into a [`Report`].

use super::error::ScenarioError;
use super::report::{
    Drops, NicDistribution, Percentiles, Queues, Report, Retransmissions, SimStats, WorkloadResult,
};
use super::schema::{
    EventAction, RoutingSpec, Scenario, SwitchSpec, TauQBaseSpec, TauQFloorSpec, TopologySpec,
    TransportKind,
};
use super::workload::{generate, Context, FlowPlan};
use crate::{
    FlowResult, FlowSpec, HostStalls, LinkChange, LinkId, LinkKind, Metrics, PathSpec, Progress,
    Routing, RunEnd, SimConfig, Simulator, SwitchConfig, Topology, Trace,
};
use rondo_proto::time::{Duration, Instant};

/// Options of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Record queue and OOD time series every `trace_interval_us`.
    pub trace: bool,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The numbers.
    pub report: Report,
    /// The time series, when asked for.
    pub trace: Option<Trace>,
    /// Names of the traced links, in [`Trace::links`] order (`edge_up[3]`).
    pub trace_links: Vec<String>,
    /// The simulator's own metrics (per-flow results, every switch queue).
    pub metrics: Metrics,
}

/// The name of a link kind as scenario files write it.
pub fn link_name(kind: LinkKind) -> &'static str {
    match kind {
        LinkKind::HostUp => "host_up",
        LinkKind::HostDown => "host_down",
        LinkKind::PathForward => "path_forward",
        LinkKind::PathReverse => "path_reverse",
        LinkKind::EdgeUp => "edge_up",
        LinkKind::EdgeDown => "edge_down",
        LinkKind::AggUp => "agg_up",
        LinkKind::AggDown => "agg_down",
    }
}

/// Propagation delay of every link of `fig2` and `clos3`, us.
const FIXED_LINK_DELAY_US: f64 = 1.0;

impl Scenario {
    /// The simulator's topology.
    pub fn sim_topology(&self) -> Topology {
        match &self.topology {
            TopologySpec::Parallel(t) => Topology::Parallel {
                host_gbps: t.host_gbps,
                paths: t
                    .paths
                    .iter()
                    .map(|p| PathSpec {
                        gbps: p.gbps,
                        delay: Duration::from_us_f64(p.delay_us),
                    })
                    .collect(),
            },
            TopologySpec::Fig2(_) => Topology::Fig2,
            TopologySpec::Clos3(t) => Topology::Clos3 {
                oversubscription: t.oversubscription,
            },
            TopologySpec::Fattree(t) => Topology::FatTree {
                k: t.k,
                gbps: t.gbps,
                link_delay: Duration::from_us_f64(t.link_delay_us),
            },
        }
    }

    /// The simulator's configuration.
    pub fn sim_config(&self) -> SimConfig {
        SimConfig {
            seed: self.seed,
            mtu: self.mtu as usize,
            reorder_buffer_bytes: (self.transport.reorder_buffer_kb * 1024.0) as usize,
            switch: switch_config(&self.switch, self.transport.kind),
            host_stalls: match (self.host.stall_every_us, self.host.stall_us) {
                (Some(every), Some(length)) if length > 0.0 => Some(HostStalls {
                    mean_gap: Duration::from_us_f64(every),
                    length: Duration::from_us_f64(length),
                }),
                _ => None,
            },
        }
    }

    /// The flows of the workload.
    pub fn flows(&self) -> Vec<FlowPlan> {
        generate(
            &self.workload.0,
            &Context {
                hosts: self.topology.hosts(),
                seed: self.seed,
                host_bps: self.topology.host_gbps() * 1e9,
                duration: Duration::from_us_f64(self.duration_us),
            },
        )
    }
}

fn kb(x: f64) -> u64 {
    (x * 1024.0).round() as u64
}

/// The switches of a scenario: its `[switch]` keys over the simulator's defaults,
/// with, unless `switch.routing` is set, the routing each transport's fabric
/// has: Rondo's switch program steers by logical path (docs/engine.md
/// "Steered routes"), `ar` routes adaptively, the others' switches hash.
fn switch_config(s: &SwitchSpec, transport: TransportKind) -> SwitchConfig {
    let routing = match s.routing {
        Some(RoutingSpec::Ecmp) => Routing::Ecmp,
        Some(RoutingSpec::Spray) => Routing::Spray,
        Some(RoutingSpec::Adaptive) => Routing::Adaptive,
        Some(RoutingSpec::Steer) => Routing::Steer,
        None if transport.name() == "ar" => Routing::Adaptive,
        None if transport.name() == "rondo" => Routing::Steer,
        None => Routing::Ecmp,
    };
    let mut c = SwitchConfig {
        routing,
        ..SwitchConfig::default()
    };
    if let Some(x) = s.buffer_kb {
        c.buffer_bytes = kb(x);
    }
    if let Some(x) = s.data_threshold_kb {
        c.data_queue_limit_bytes = kb(x);
    }
    if let Some(x) = s.probe_threshold_packets {
        c.probe_queue_limit_packets = x;
    }
    let ecn_on = s.ecn.unwrap_or(c.ecn.is_some());
    c.ecn = ecn_on.then(|| {
        let mut e = c.ecn.clone().unwrap_or_default();
        if let Some(x) = s.ecn_kmin_kb {
            e.kmin_bytes = kb(x);
        }
        if let Some(x) = s.ecn_kmax_kb {
            e.kmax_bytes = kb(x);
        }
        if let Some(x) = s.ecn_pmax {
            e.pmax = x;
        }
        e
    });
    let pfc_on = s.pfc.unwrap_or(c.pfc.is_some());
    c.pfc = pfc_on.then(|| {
        let mut p = c.pfc.clone().unwrap_or_default();
        if let Some(x) = s.pfc_xoff_kb {
            p.xoff_bytes = kb(x);
        }
        if let Some(x) = s.pfc_xon_kb {
            p.xon_bytes = kb(x);
        }
        p
    });
    if let Some(x) = s.loss {
        c.loss = x;
    }
    c.drop_naks = s.drop_naks.unwrap_or(false);
    c
}

fn at(us: f64) -> Instant {
    Instant::from_ps(Duration::from_us_f64(us).as_ps())
}

/// Builds the simulator for `scenario` (checked first), with its flows and events.
pub fn build(scenario: &Scenario, file: &str) -> Result<Simulator, ScenarioError> {
    scenario.check(file)?;
    let refused = |e: crate::SimError| ScenarioError::Simulator {
        file: file.to_owned(),
        reason: e.to_string(),
    };
    let mut sim =
        Simulator::new(&scenario.sim_topology(), scenario.sim_config()).map_err(refused)?;
    // One-way delays in force from time 0 (fig2's extra delays, delay events at
    // 0): part of the topology as `base_rtt = "topology"` reads it.
    let mut start_delays: std::collections::HashMap<LinkId, Duration> =
        std::collections::HashMap::new();
    if let TopologySpec::Fig2(t) = &scenario.topology {
        for (i, extra) in t.extra_delay_us.iter().enumerate() {
            if *extra > 0.0 {
                let link = sim
                    .link(LinkKind::EdgeUp, i)
                    .ok_or_else(|| refused(crate::SimError::NoSuchLink(LinkId(i))))?;
                let delay = Duration::from_us_f64(FIXED_LINK_DELAY_US + extra);
                sim.schedule_link_change(Instant::ZERO, link, LinkChange::Delay(delay))
                    .map_err(refused)?;
                start_delays.insert(link, delay);
            }
        }
    }
    // The link events, resolved before the flows (the topology's base RTTs
    // read the delays in force at 0) and scheduled after them, in order.
    let mut changes = Vec::with_capacity(scenario.events.len());
    for (i, e) in scenario.events.iter().enumerate() {
        let key = format!("events[{i}]");
        let links = match (e.path, e.link, e.index, e.percent) {
            (Some(p), _, _, _) => match scenario.topology {
                TopologySpec::Parallel(_) => sim.parallel_path_link(p),
                _ => sim.link(LinkKind::EdgeUp, p),
            }
            .map(|l| vec![l]),
            (None, Some(kind), _, Some(percent)) => {
                Some(random_links(&sim, kind, percent, scenario.seed)).filter(|l| !l.is_empty())
            }
            (None, Some(name), Some(index), None) => sim.link(name, index).map(|l| vec![l]),
            _ => None,
        }
        .ok_or_else(|| {
            let field = match (e.path, e.percent) {
                (Some(_), _) => "path",
                (None, Some(_)) => "link",
                _ => "index",
            };
            ScenarioError::invalid(
                file,
                format!("{key}.{field}"),
                e.path.or(e.index).unwrap_or(0),
                format!(
                    "an existing link of this kind on topology {} (see docs/sim.md)",
                    scenario.topology.kind()
                ),
            )
        })?;
        let change = match e.action {
            EventAction::Rate => LinkChange::Rate(e.gbps.unwrap_or(0.0)),
            EventAction::Delay => {
                LinkChange::Delay(Duration::from_us_f64(e.delay_us.unwrap_or(0.0)))
            }
            EventAction::Fail => LinkChange::Fail,
            EventAction::Restore => LinkChange::Restore,
        };
        let when = at(e.at_us);
        match change {
            LinkChange::Delay(d) if when == Instant::ZERO => {
                start_delays.extend(links.iter().map(|&link| (link, d)));
            }
            _ => {}
        }
        changes.push((when, links, change));
    }
    let host_bps = scenario.topology.host_gbps() * 1e9;
    let network_base_rtt = match scenario.transport.tau_q_base {
        TauQBaseSpec::Network => Some(network_base_rtt(&sim, scenario)?),
        TauQBaseSpec::Flow => None,
    };
    let min_target_queue = match scenario.transport.tau_q_floor {
        TauQFloorSpec::Packet => one_packet_at_slowest_link(&sim, scenario.mtu),
        TauQFloorSpec::None => None,
    };
    // One gate per distinct set of flows waited for (a phase, a ring step).
    let mut gates: std::collections::HashMap<(usize, usize), crate::GateId> =
        std::collections::HashMap::new();
    for (i, f) in scenario.flows().iter().enumerate() {
        let after = match &f.after {
            Some(r) if r.end <= i && !r.is_empty() => match gates.get(&(r.start, r.end)) {
                Some(g) => Some(*g),
                None => {
                    let ids: Vec<usize> = r.clone().collect();
                    let g = sim.add_gate(&ids).map_err(refused)?;
                    gates.insert((r.start, r.end), g);
                    Some(g)
                }
            },
            _ => None,
        };
        // The simulator sets each flow's paths, MTU, line rate and seed itself.
        let mut cfg = scenario.transport.flow_config(scenario.mtu, host_bps);
        // Swift's per-hop target term: the switches on the route.
        cfg.hops = sim
            .route(f.src, f.dst, 0, 0)
            .ok()
            .map(|r| (r.len().saturating_sub(1)) as u16);
        if scenario.transport.base_rtt.from_topology(cfg.transport) {
            cfg.base_rtt = Some(topology_base_rtts(&sim, scenario, f, &start_delays)?);
        }
        cfg.network_base_rtt = network_base_rtt;
        cfg.min_target_queue = min_target_queue;
        sim.add_flow(FlowSpec {
            src: f.src,
            dst: f.dst,
            start: Instant::from_ps(f.start.as_ps()),
            bytes: f.bytes,
            stop: f.stop.map(|d| Instant::from_ps(d.as_ps())),
            paths: f.paths.or(scenario.transport.paths),
            cfg,
            group: f.group,
            messages: f.messages,
            after,
        })
        .map_err(refused)?;
    }
    for (at, links, change) in changes {
        for link in links {
            sim.schedule_link_change(at, link, change)
                .map_err(refused)?;
        }
    }
    if scenario.warmup_us > 0.0 {
        sim.set_warmup(at(scenario.warmup_us));
    }
    Ok(sim)
}

/// The base RTT of each logical path of flow `f` from the topology: a full packet
/// out along the path's route and an ACK back, each link's propagation plus
/// serialisation, no queueing (the flow's index gives its ECMP hash, as it will
/// be once added).
fn topology_base_rtts(
    sim: &Simulator,
    scenario: &Scenario,
    f: &FlowPlan,
    start_delays: &std::collections::HashMap<LinkId, Duration>,
) -> Result<Vec<Duration>, ScenarioError> {
    let refused = |e: crate::SimError| ScenarioError::Simulator {
        file: "base_rtt".to_owned(),
        reason: e.to_string(),
    };
    let paths = match f.paths.or(scenario.transport.paths) {
        Some(p) => p,
        None => sim
            .equal_cost_paths(f.src, f.dst)
            .map_err(refused)?
            .clamp(1, 1024) as u16,
    };
    let flow = 2 * sim.flow_count() as u32;
    let ack = rondo_proto::wire::COMMON_HEADER_LEN + 16;
    (0..paths)
        .map(|p| {
            let out = sim.route(f.src, f.dst, flow, p).map_err(refused)?;
            let back = sim.route(f.dst, f.src, flow + 1, p).map_err(refused)?;
            let delay = |route: &[LinkId], bytes: usize| {
                route.iter().fold(sim.route_delay(route, bytes), |d, l| {
                    match (start_delays.get(l), sim.link_delay(*l)) {
                        (Some(&at_start), Some(built)) => d - built + at_start,
                        _ => d,
                    }
                })
            };
            Ok(delay(&out, scenario.mtu as usize) + delay(&back, ack))
        })
        .collect()
}

/// The topology's largest base RTT (paper §6.2.1's max_base_RTT, which sets one
/// tau_q for every flow): from host 0 to every other host over each equal-cost
/// path, a full packet out and an ACK back with empty queues, plus fig2's largest
/// extra one-way delay. The topologies are symmetric, so host 0 sees the diameter.
fn network_base_rtt(sim: &Simulator, scenario: &Scenario) -> Result<Duration, ScenarioError> {
    let refused = |e: crate::SimError| ScenarioError::Simulator {
        file: "tau_q_base".to_owned(),
        reason: e.to_string(),
    };
    let ack = rondo_proto::wire::COMMON_HEADER_LEN + 16;
    let mut max = Duration::ZERO;
    for dst in 1..sim.hosts() {
        let paths = sim
            .equal_cost_paths(0, dst)
            .map_err(refused)?
            .clamp(1, 1024) as u16;
        for p in 0..paths {
            let out = sim.route(0, dst, 0, p).map_err(refused)?;
            let back = sim.route(dst, 0, 1, p).map_err(refused)?;
            max =
                max.max(sim.route_delay(&out, scenario.mtu as usize) + sim.route_delay(&back, ack));
        }
    }
    if let TopologySpec::Fig2(t) = &scenario.topology {
        let extra = t.extra_delay_us.iter().copied().fold(0.0, f64::max);
        max += Duration::from_us_f64(extra);
    }
    Ok(max)
}

/// One MTU's serialisation at the slowest link of the topology (as built, before
/// any scheduled change): the least queueing delay one waiting packet adds, and
/// so the least tau_q that does not read a single queued packet as a queue above
/// target. `None` without links.
fn one_packet_at_slowest_link(sim: &Simulator, mtu: u32) -> Option<Duration> {
    let slowest = sim
        .links()
        .filter_map(|l| sim.link_stats(l))
        .map(|s| s.gbps)
        .filter(|g| *g > 0.0)
        .fold(f64::INFINITY, f64::min);
    slowest
        .is_finite()
        .then(|| Duration::from_us_f64(f64::from(mtu) * 8.0 / (slowest * 1e3)))
}

/// `percent` of the links of `kind` (at least one), drawn without replacement
/// from a stream seeded by the scenario's seed, the kind and the percentage: the
/// same three give the same links.
fn random_links(sim: &Simulator, kind: LinkKind, percent: f64, seed: u64) -> Vec<LinkId> {
    let all: Vec<LinkId> = (0..).map_while(|i| sim.link(kind, i)).collect();
    let n = ((percent / 100.0 * all.len() as f64).round() as usize).clamp(1, all.len().max(1));
    let mut rng = rondo_proto::rng::Rng::new(
        seed ^ (kind.index() as u64) << 48 ^ percent.to_bits().rotate_left(17),
    );
    let mut pool = all;
    let mut chosen = Vec::with_capacity(n);
    while chosen.len() < n && !pool.is_empty() {
        let j = rng.gen_range(0..pool.len() as u64) as usize;
        chosen.push(pool.swap_remove(j));
    }
    chosen.sort_by_key(|l| l.0);
    chosen
}

/// Links to trace: the path links where the topology has them (parallel paths,
/// fig2's P1-P4), otherwise the links down to the first 16 receiving hosts.
fn trace_links(sim: &Simulator, flows: &[FlowPlan]) -> Vec<LinkId> {
    let paths = sim.path_links();
    if !paths.is_empty() {
        return paths;
    }
    let mut dsts: Vec<usize> = flows.iter().map(|f| f.dst).collect();
    dsts.sort_unstable();
    dsts.dedup();
    dsts.iter()
        .take(16)
        .filter_map(|&d| sim.link(LinkKind::HostDown, d))
        .collect()
}

/// Runs `scenario` (named `file` in messages) and reports. `progress` is called
/// now and then with the simulator's progress.
pub fn run(
    scenario: &Scenario,
    file: &str,
    opts: RunOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Outcome, ScenarioError> {
    let mut sim = build(scenario, file)?;
    let flows = scenario.flows();
    if opts.trace {
        let links = trace_links(&sim, &flows);
        sim.enable_trace(
            Duration::from_us_f64(scenario.trace_interval_us),
            Some(links),
        )
        .map_err(|e| ScenarioError::Simulator {
            file: file.to_owned(),
            reason: e.to_string(),
        })?;
    }
    let wall = std::time::Instant::now();
    let end = sim.run(at(scenario.duration_us), progress);
    let wall_s = wall.elapsed().as_secs_f64();
    let metrics = sim.metrics();
    let report = report(scenario, &sim, &metrics, end, wall_s);
    let trace = sim.trace().cloned();
    let trace_links = trace
        .as_ref()
        .map(|t| {
            t.links
                .iter()
                .map(|&l| match sim.link_stats(l) {
                    Some(s) => format!("{}[{}]", link_name(s.kind), s.index),
                    None => format!("link{}", l.0),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Outcome {
        report,
        trace,
        trace_links,
        metrics,
    })
}

/// The ideal FCT of `bytes` from `src` to `dst`: the flow's wire bytes at the
/// bottleneck rate (the host rate; for `parallel`, min(host, sum of paths)) plus
/// the propagation delay of the route and one MTU's store-and-forward per hop.
fn ideal_fct_us(scenario: &Scenario, sim: &Simulator, src: usize, dst: usize, bytes: u64) -> f64 {
    let mtu = u64::from(scenario.mtu);
    let header = rondo_proto::wire::DATA_HEADER_LEN as u64;
    let payload = mtu.saturating_sub(header).max(1);
    let wire = bytes + bytes.div_ceil(payload) * header;
    let host_bps = scenario.topology.host_gbps() * 1e9;
    let hops = sim.route(src, dst, 0, 0).map_or(2, |r| r.len()) as f64;
    let (bottleneck_bps, propagation_us) = match &scenario.topology {
        TopologySpec::Parallel(t) => (
            host_bps.min(t.paths.iter().map(|p| p.gbps * 1e9).sum()),
            t.paths
                .iter()
                .map(|p| p.delay_us)
                .fold(f64::INFINITY, f64::min),
        ),
        TopologySpec::Fig2(_) | TopologySpec::Clos3(_) => (host_bps, hops * FIXED_LINK_DELAY_US),
        TopologySpec::Fattree(t) => (host_bps, hops * t.link_delay_us),
    };
    let serialise_us = |b: u64| b as f64 * 8.0 / bottleneck_bps * 1e6;
    serialise_us(wire) + propagation_us + (hops - 1.0) * serialise_us(mtu)
}

/// A lower bound on the JCT, us: the busiest host's wire bytes over the finite
/// flows (sent or received, whichever is more) at the host's bottleneck rate.
/// No transport finishes sooner; a JCT near it means the hosts' links, not the
/// fabric, bound the job. `None` without finite flows.
fn jct_bound_us(scenario: &Scenario, finite: &[&FlowResult]) -> Option<f64> {
    let mtu = u64::from(scenario.mtu);
    let header = rondo_proto::wire::DATA_HEADER_LEN as u64;
    let payload = mtu.saturating_sub(header).max(1);
    let mut at_host: std::collections::HashMap<(usize, bool), u64> =
        std::collections::HashMap::new();
    for f in finite {
        let bytes = f.bytes?;
        let wire = bytes + bytes.div_ceil(payload) * header;
        *at_host.entry((f.src, true)).or_default() += wire;
        *at_host.entry((f.dst, false)).or_default() += wire;
    }
    let busiest = at_host.values().copied().max()?;
    let host_bps = scenario.topology.host_gbps() * 1e9;
    let bps = match &scenario.topology {
        TopologySpec::Parallel(t) => host_bps.min(t.paths.iter().map(|p| p.gbps * 1e9).sum()),
        _ => host_bps,
    };
    Some(busiest as f64 * 8.0 / bps * 1e6)
}

/// Time from the first flow's start to the last one's completion, us (`None`
/// without flows, or when one did not complete).
fn jct(finite: &[&FlowResult]) -> Option<f64> {
    if finite.is_empty() || finite.iter().any(|f| f.finish.is_none()) {
        return None;
    }
    let us = |t: Instant| t.as_ps() as f64 / 1e6;
    let first = finite.iter().map(|f| f.start).min()?;
    let last = finite.iter().filter_map(|f| f.finish).max()?;
    Some(us(last) - us(first))
}

fn report(scenario: &Scenario, sim: &Simulator, m: &Metrics, end: RunEnd, wall_s: f64) -> Report {
    let finite: Vec<_> = m.flows.iter().filter(|f| f.bytes.is_some()).collect();
    let jct_us = jct(&finite);
    let us = |t: Instant| t.as_ps() as f64 / 1e6;
    let secs = m.window.as_secs_f64();
    let workloads = scenario
        .workload
        .0
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let mine: Vec<&FlowResult> = m.flows.iter().filter(|f| f.group as usize == i).collect();
            let finite: Vec<&FlowResult> =
                mine.iter().copied().filter(|f| f.bytes.is_some()).collect();
            let bytes: u64 = mine.iter().map(|f| f.delivered_in_window).sum();
            WorkloadResult {
                kind: w.kind().to_owned(),
                flows: mine.len() as u64,
                flows_completed: finite.iter().filter(|f| f.finish.is_some()).count() as u64,
                goodput_gbps: if secs > 0.0 {
                    bytes as f64 * 8.0 / secs / 1e9
                } else {
                    0.0
                },
                jct_us: jct(&finite),
            }
        })
        .collect();
    let mut fcts = Vec::new();
    let mut slowdowns = Vec::new();
    for f in &finite {
        if let (Some(fct), Some(bytes)) = (f.fct(), f.bytes) {
            let fct = fct.as_us_f64();
            fcts.push(fct);
            slowdowns.push(fct / ideal_fct_us(scenario, sim, f.src, f.dst, bytes));
        }
    }
    let jct_bound_us = jct_bound_us(scenario, &finite);
    let fct_us = Percentiles::of(&mut fcts);
    let fct_slowdown_p99 = Percentiles::of(&mut slowdowns).map(|p| p.p99);
    let dist = |h: &rondo_proto::Histogram| NicDistribution {
        nic_avg: h.mean(),
        nic_p99: h.quantile(0.99),
        nic_p999: h.quantile(0.999),
        nic_max: h.max(),
    };
    let max_port = m
        .queues
        .iter()
        .map(|(_, s)| s.max_queue_bytes)
        .max()
        .unwrap_or(0);
    Report {
        scenario: scenario
            .name
            .clone()
            .unwrap_or_else(|| "scenario".to_owned()),
        transport: scenario.transport.kind.name().to_owned(),
        routing: sim.config().switch.routing.name().to_owned(),
        seed: scenario.seed,
        goodput_gbps: m.goodput_gbps,
        throughput_gbps: m.throughput_gbps,
        ideal_gbps: m.ideal_gbps,
        utilization: m.utilization,
        ood: dist(&m.nic_ood),
        rbo: dist(&m.nic_rbo),
        jct_us,
        jct_bound_us,
        fct_slowdown_p99,
        fct_us,
        flows_completed: m.flows_completed as u64,
        flows_total: m.flows_finite as u64,
        flows_long: (m.flows.len() - finite.len()) as u64,
        retx: Retransmissions {
            data_packets: m.retx.data_packets,
            packets: m.retx.packets,
            spurious: m.retx.spurious,
            spurious_ratio: m.retx.spurious_ratio,
            reported_spurious: m.retx.reported_spurious,
            mean_delay_us: m.retx.mean_delay.map_or(0.0, Duration::as_us_f64),
        },
        drops: Drops {
            reorder_buffer: m.drops.reorder_buffer,
            switch: m.drops.switch() + m.drops.link_down + m.drops.no_route,
            probe: m.drops.probe,
            random: m.drops.random,
            naks: m.drops.naks,
        },
        queue: Queues {
            max_interpath_diff_kb: m.max_interpath_queue_diff_bytes as f64 / 1024.0,
            max_port_kb: max_port as f64 / 1024.0,
        },
        fairness_jain: m.fairness_jain,
        long_flow_goodput_gbps: m.long_flow_gbps.clone(),
        workloads,
        sim: SimStats {
            events: m.events,
            wall_s,
            events_per_s: if wall_s > 0.0 {
                m.events as f64 / wall_s
            } else {
                0.0
            },
            stuck_timers: m.stuck_timers,
        },
        end: match end {
            RunEnd::Done => "done",
            RunEnd::Deadline => "deadline",
            _ => "idle",
        }
        .to_owned(),
        simulated_us: us(sim.now()),
        measured_us: m.window.as_us_f64(),
    }
}
