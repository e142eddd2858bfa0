//! Workload generators: from the `[workload]` tables to a list of flows, seeded.

use super::cdf::FlowSizeCdf;
use super::schema::{
    AllToAllSpec, CdfName, CollectiveOp, CollectiveSpec, IncastSpec, LongFlowsSpec,
    PermutationSpec, PoissonSpec, WorkloadSpec,
};
use crate::{Messages, MESSAGE_BYTES};
use rondo_proto::rng::Rng;
use rondo_proto::Duration;
use std::ops::Range;

/// One flow to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowPlan {
    /// Sending host index.
    pub src: usize,
    /// Receiving host index.
    pub dst: usize,
    /// Start time from the beginning of the run.
    pub start: Duration,
    /// Bytes to send; `None`: long-lived.
    pub bytes: Option<u64>,
    /// Stop time of a long-lived flow.
    pub stop: Option<Duration>,
    /// Logical paths (`None`: the scenario's or the topology's default).
    pub paths: Option<u16>,
    /// Index of the workload table that made the flow.
    pub group: u32,
    /// WRITE or READ, message size, posting depth.
    pub messages: Messages,
    /// Start only when the flows with these indices (earlier in the list)
    /// have finished: a collective's dependencies.
    pub after: Option<Range<usize>>,
}

/// What the generators need to know about the run.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// Number of hosts of the topology.
    pub hosts: usize,
    /// Seed of the scenario.
    pub seed: u64,
    /// Host link rate, bit/s (sets Poisson arrival rates).
    pub host_bps: f64,
    /// End of the run.
    pub duration: Duration,
}

/// The flows of every workload, in the order they were generated.
///
/// Host indices and ranges must have been checked (`Scenario::check`); an index past
/// `ctx.hosts` is skipped rather than trusted.
pub fn generate(workloads: &[WorkloadSpec], ctx: &Context) -> Vec<FlowPlan> {
    let mut all = Vec::new();
    for (i, w) in workloads.iter().enumerate() {
        let mut out = Vec::new();
        let group = i as u32;
        // One stream per workload table, so adding a table leaves the others unchanged.
        let mut rng = Rng::new(ctx.seed ^ (0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(i as u64 + 1)));
        match w {
            WorkloadSpec::LongFlows(s) => long_flows(s, group, &mut out),
            WorkloadSpec::Incast(s) => incast(s, ctx.hosts, group, &mut out),
            WorkloadSpec::Permutation(s) => permutation(s, ctx.hosts, group, &mut rng, &mut out),
            WorkloadSpec::AllToAll(s) => all_to_all(s, ctx.hosts, group, &mut rng, &mut out),
            WorkloadSpec::Poisson(s) => poisson(s, ctx, group, &mut rng, &mut out),
            WorkloadSpec::Background(s) => {
                for _ in 0..s.flows {
                    let (src, dst, one_path) = (s.src, s.dst, Some(1));
                    out.push(plan(
                        src, dst, group, s.start_us, s.bytes, s.stop_us, one_path,
                    ));
                }
            }
            WorkloadSpec::Collective(s) => collective(s, group, &mut out),
        }
        let valid = |f: &FlowPlan| f.src < ctx.hosts && f.dst < ctx.hosts && f.src != f.dst;
        if out.iter().all(valid) {
            // Dependencies name flows of the same table: shift them to the list's.
            let base = all.len();
            for f in &mut out {
                f.after = f.after.take().map(|r| r.start + base..r.end + base);
            }
        } else {
            out.retain(|f| valid(f) && f.after.is_none());
        }
        all.extend(out);
    }
    all
}

fn us(x: f64) -> Duration {
    Duration::from_us_f64(x.max(0.0))
}

/// A flow from `src` to `dst` made by workload table `group`, times in microseconds.
fn plan(
    src: usize,
    dst: usize,
    group: u32,
    start_us: f64,
    bytes: Option<u64>,
    stop_us: Option<f64>,
    paths: Option<u16>,
) -> FlowPlan {
    FlowPlan {
        src,
        dst,
        start: us(start_us),
        bytes,
        stop: stop_us.map(us),
        paths,
        group,
        messages: Messages::default(),
        after: None,
    }
}

/// Shuffles `v` uniformly (Fisher-Yates).
fn shuffle(v: &mut [usize], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.gen_range(0..i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn long_flows(s: &LongFlowsSpec, group: u32, out: &mut Vec<FlowPlan>) {
    if s.receivers.is_empty() {
        return;
    }
    let defaults = Messages::default();
    let messages = Messages {
        op: s.op,
        bytes: s.message_bytes.unwrap_or(defaults.bytes),
        depth: s.tx_depth.unwrap_or(defaults.depth),
    };
    for (i, &src) in s.senders.iter().enumerate() {
        let dst = s.receivers[i % s.receivers.len()];
        for _ in 0..s.flows {
            out.push(FlowPlan {
                messages,
                ..plan(src, dst, group, s.start_us, s.bytes, s.stop_us, s.paths)
            });
        }
    }
}

/// The flows of a collective, in phase order: ring phases one flow per rank
/// and step (rank r to rank r + 1), the step waiting for the flow that brought
/// rank r the previous step's chunk; all-to-all one flow per ordered pair of
/// ranks. A phase's first flows wait for every flow of the phase before.
/// Indices in `after` are this table's.
pub fn collective(s: &CollectiveSpec, group: u32, out: &mut Vec<FlowPlan>) {
    let n = s.ranks;
    if n < 2 {
        return;
    }
    let host = |r: usize| s.first_host + (r % n) * s.stride;
    let mut previous: Option<Range<usize>> = None;
    for phase in &s.phases {
        let first = out.len();
        let chunk = (phase.bytes / n as u64).max(1);
        let flow = |src: usize, dst: usize, after: Option<Range<usize>>| FlowPlan {
            messages: Messages {
                bytes: chunk.min(MESSAGE_BYTES),
                ..Messages::default()
            },
            after,
            ..plan(src, dst, group, s.start_us, Some(chunk), None, s.paths)
        };
        match phase.op {
            CollectiveOp::AllToAll => {
                for a in 0..n {
                    for b in (0..n).filter(|&b| b != a) {
                        out.push(flow(host(a), host(b), previous.clone()));
                    }
                }
            }
            ring => {
                let steps = match ring {
                    CollectiveOp::AllReduce => 2 * (n - 1),
                    _ => n - 1,
                };
                for step in 0..steps {
                    for r in 0..n {
                        // The flow of the previous step into rank r came from r - 1.
                        let after = match step {
                            0 => previous.clone(),
                            _ => {
                                let i = first + (step - 1) * n + (r + n - 1) % n;
                                Some(i..i + 1)
                            }
                        };
                        out.push(flow(host(r), host(r + 1), after));
                    }
                }
            }
        }
        previous = Some(first..out.len());
    }
}

/// The senders of an incast: `senders` hosts from `first_sender` on, skipping the
/// receiver, wrapping around.
pub fn incast_senders(s: &IncastSpec, hosts: usize) -> Vec<usize> {
    (0..hosts)
        .map(|i| (s.first_sender + i) % hosts)
        .filter(|&h| h != s.receiver)
        .take(s.senders)
        .collect()
}

fn incast(s: &IncastSpec, hosts: usize, group: u32, out: &mut Vec<FlowPlan>) {
    for src in incast_senders(s, hosts) {
        out.push(plan(
            src, s.receiver, group, s.start_us, s.bytes, s.stop_us, s.paths,
        ));
    }
}

/// A uniformly random derangement of `0..n` (no host sends to itself); `n >= 2`.
pub fn derangement(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    if n < 2 {
        return p;
    }
    loop {
        shuffle(&mut p, rng);
        // About 1/e of permutations are derangements: a few tries on average.
        if p.iter().enumerate().all(|(i, &d)| i != d) {
            return p;
        }
    }
}

fn permutation(
    s: &PermutationSpec,
    hosts: usize,
    group: u32,
    rng: &mut Rng,
    out: &mut Vec<FlowPlan>,
) {
    let n = s.hosts.unwrap_or(hosts).min(hosts);
    for (src, dst) in derangement(n, rng).into_iter().enumerate() {
        out.push(plan(
            src, dst, group, s.start_us, s.bytes, s.stop_us, s.paths,
        ));
    }
}

/// Bytes each member of an all-to-all group receives from each other member: expert
/// popularity follows Zipf(`skew`) over a seeded ranking, scaled so the mean over
/// destinations is `bytes`.
pub fn all_to_all_sizes(bytes: u64, group_size: usize, skew: f64, rng: &mut Rng) -> Vec<u64> {
    if group_size == 0 {
        return Vec::new();
    }
    let mut rank: Vec<usize> = (0..group_size).collect();
    shuffle(&mut rank, rng);
    let weight: Vec<f64> = rank
        .iter()
        .map(|&r| 1.0 / ((r + 1) as f64).powf(skew))
        .collect();
    let total: f64 = weight.iter().sum();
    weight
        .iter()
        .map(|w| ((bytes as f64 * group_size as f64 * w / total).round() as u64).max(1))
        .collect()
}

fn all_to_all(s: &AllToAllSpec, hosts: usize, group: u32, rng: &mut Rng, out: &mut Vec<FlowPlan>) {
    if let Some(k) = s.receivers {
        return random_receivers(s, k, hosts, group, rng, out);
    }
    let size = s.group_size.unwrap_or(hosts).clamp(1, hosts.max(1));
    for base in (0..hosts).step_by(size) {
        let members = size.min(hosts - base);
        let sizes = all_to_all_sizes(s.bytes, members, s.skew, rng);
        for i in 0..members {
            for (j, &b) in sizes.iter().enumerate() {
                if i != j {
                    let (src, dst) = (base + i, base + j);
                    out.push(plan(src, dst, group, s.start_us, Some(b), None, s.paths));
                }
            }
        }
    }
}

/// Each host sends to `k` distinct other hosts drawn uniformly at random (a
/// partial Fisher-Yates shuffle per host), `bytes` each on average, skewed by
/// `skew` as in a group.
fn random_receivers(
    s: &AllToAllSpec,
    k: usize,
    hosts: usize,
    group: u32,
    rng: &mut Rng,
    out: &mut Vec<FlowPlan>,
) {
    if hosts < 2 {
        return;
    }
    let k = k.min(hosts - 1);
    let mut others: Vec<usize> = Vec::with_capacity(hosts - 1);
    for src in 0..hosts {
        others.clear();
        others.extend((0..hosts).filter(|&h| h != src));
        let sizes = all_to_all_sizes(s.bytes, k, s.skew, rng);
        for (i, &b) in sizes.iter().enumerate() {
            let j = i + rng.gen_range(0..(others.len() - i) as u64) as usize;
            others.swap(i, j);
            out.push(plan(
                src,
                others[i],
                group,
                s.start_us,
                Some(b),
                None,
                s.paths,
            ));
        }
    }
}

/// The CDF a Poisson workload samples (`cdf_points` wins over `cdf`; WebSearch when
/// neither is given). Errors only for invalid `cdf_points`, which `check` reports.
pub fn poisson_cdf(s: &PoissonSpec) -> Result<FlowSizeCdf, super::cdf::CdfError> {
    match (&s.cdf_points, s.cdf) {
        (Some(points), _) => {
            let points: Vec<(f64, f64)> = points.iter().map(|p| (p[0], p[1])).collect();
            FlowSizeCdf::new(&points)
        }
        (None, Some(CdfName::Hadoop)) => Ok(FlowSizeCdf::hadoop()),
        (None, _) => Ok(FlowSizeCdf::web_search()),
    }
}

/// Poisson arrivals at every host: rate `load x host rate / mean size`, each flow to a
/// uniformly random other host, sizes from the CDF.
fn poisson(s: &PoissonSpec, ctx: &Context, group: u32, rng: &mut Rng, out: &mut Vec<FlowPlan>) {
    let Ok(cdf) = poisson_cdf(s) else { return };
    let n = s.hosts.unwrap_or(ctx.hosts).min(ctx.hosts);
    if n < 2 || s.load <= 0.0 {
        return;
    }
    let start = s.start_us.max(0.0) * 1e-6;
    let stop = s.stop_us.map_or(ctx.duration.as_secs_f64(), |t| t * 1e-6);
    let per_host = s.load * ctx.host_bps / (8.0 * cdf.mean());
    let mut flows = Vec::new();
    for src in 0..n {
        let mut t = start;
        loop {
            // Exponential inter-arrival time; 1 - u is in (0, 1].
            t += -(1.0 - rng.gen_f64()).ln() / per_host;
            if t >= stop {
                break;
            }
            let mut dst = rng.gen_range(0..n as u64 - 1) as usize;
            if dst >= src {
                dst += 1;
            }
            flows.push(FlowPlan {
                src,
                dst,
                start: Duration::from_ps((t * 1e12) as u64),
                bytes: Some(cdf.sample(rng)),
                stop: None,
                paths: s.paths,
                group,
                messages: Messages::default(),
                after: None,
            });
        }
    }
    flows.sort_by_key(|f| (f.start, f.src));
    if let Some(max) = s.flows {
        flows.truncate(max);
    }
    out.extend(flows);
}
