//! The simulator: hosts running real [`rondo_proto::Endpoint`]s over a [`Topology`].

mod flows;
mod inspect;
pub(crate) mod metrics;
mod network;
mod stalls;

use crate::config::{Routing, SimConfig};
use crate::error::{topo_err, SimError};
use crate::net::fabric::{Fabric, NONE};
use crate::net::port::Port;
use crate::net::{mix, Agenda, Ev, Slab};
use crate::topology::{LinkKind, Topology};
use crate::trace::Trace;
use rondo_proto::rng::Rng;
use rondo_proto::tap::MetricsTap;
use rondo_proto::time::{Duration, Instant};
use rondo_proto::{BufferConfig, Endpoint, FlowConfig, Histogram, Priority, SharedBuffer};
use stalls::exponential;

pub use flows::{
    FlowResult, FlowSpec, GateId, Messages, Op, LONG_OUTSTANDING, MESSAGE_BYTES, READ_REQUEST_BYTES,
};
use flows::{FlowState, Gate};

/// Names one directed link (see [`Simulator::link`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// A timed change of a link (see [`Simulator::schedule_link_change`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum LinkChange {
    /// New line rate in Gbit/s, from the next packet to start serialising; 0
    /// holds packets in the queue until a later change raises it.
    Rate(f64),
    /// New one-way propagation delay, from the next packet to start; packets
    /// never overtake each other on a wire (a shorter delay waits for the
    /// packets already travelling).
    Delay(Duration),
    /// The link goes down: everything queued or on the wire is lost, and switches
    /// above it hash onto their other equal-cost next hops (instant reconvergence
    /// at that switch only); where it was the only next hop, packets are dropped.
    Fail,
    /// The link comes back.
    Restore,
}

/// A snapshot passed to the progress callback of [`Simulator::run`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Simulated time.
    pub now: Instant,
    /// Events processed so far.
    pub events: u64,
    /// Finite flows completed (or failed).
    pub flows_completed: usize,
    /// Finite flows in all.
    pub flows_finite: usize,
}

/// Why [`Simulator::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunEnd {
    /// Every finite flow completed or failed and no long-lived flow still runs.
    Done,
    /// The deadline was reached.
    Deadline,
    /// Nothing was left to do before the deadline (flows stuck waiting).
    Idle,
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkStats {
    /// What the link is and its index of that kind.
    pub kind: LinkKind,
    /// Index within its kind.
    pub index: usize,
    /// Current rate, Gbit/s.
    pub gbps: f64,
    /// Packets that started serialising since measurement began.
    pub sent_packets: u64,
    /// Bytes that started serialising since measurement began.
    pub sent_bytes: u64,
    /// Bytes queued now (all classes, not the packet being serialised).
    pub queue_bytes: u64,
    /// Largest queue since measurement began.
    pub max_queue_bytes: u64,
    /// Time-averaged queue since measurement began.
    pub mean_queue_bytes: f64,
    /// Data packets marked CE here.
    pub ce_marked: u64,
    /// Times PFC paused this link's data class.
    pub pauses: u64,
    /// Whether it is down.
    pub failed: bool,
}

/// One packet handed to a host, when delivery logging is on
/// ([`Simulator::log_deliveries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// When it arrived.
    pub at: Instant,
    /// The receiving host.
    pub host: usize,
    /// Its priority class.
    pub priority: Priority,
    /// Bytes.
    pub len: usize,
    /// Logical path id.
    pub path: u16,
    /// Marked Congestion Experienced on the way.
    pub ce: bool,
}

/// Counters kept by the network (snapshotted at the start of measurement).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Counters {
    pub unique_data_bytes: u64,
    pub drop_data_threshold: u64,
    pub drop_buffer: u64,
    pub drop_probe: u64,
    pub drop_link_down: u64,
    pub drop_no_route: u64,
    pub drop_random: u64,
    pub drop_nak: u64,
    /// Data packets sent (first transmissions and retransmissions).
    pub data_packets: u64,
    pub retx_packets: u64,
    /// Retransmissions of PSNs with a copy that was not lost.
    pub spurious: u64,
    pub retx_delay_ps: u128,
    pub retx_delay_samples: u64,
    pub stuck_timers: u64,
}

struct HostState {
    ep: Endpoint,
    /// Time of the valid pending timer event, if any.
    timer_at: Option<Instant>,
    gen: u32,
    /// Local flow ids of this host's connections.
    conns: Vec<u32>,
    spin: (Instant, u32),
    /// While stalled (`SimConfig::host_stalls`): when it resumes, and what arrived
    /// meanwhile, in arrival order.
    stalled_until: Option<Instant>,
    backlog: Vec<crate::net::Meta>,
}

/// The simulator. Build it from a [`Topology`] and a [`SimConfig`], add flows,
/// [`run`](Simulator::run), read [`metrics`](Simulator::metrics).
pub struct Simulator {
    cfg: SimConfig,
    fabric: Fabric,
    ports: Vec<Port>,
    slab: Slab,
    agenda: Agenda,
    now: Instant,
    hosts: Vec<HostState>,
    switch_buffered: Vec<u64>,
    pfc_ingress: Vec<u64>,
    salts: Vec<u64>,
    key_seed: u64,
    rng: Rng,
    /// The random loss of `switch.loss`: its own stream, so that turning it on
    /// leaves ECN marking's draws where they were.
    loss_rng: Rng,
    /// Host stalls' times and lengths (`SimConfig::host_stalls`).
    stall_rng: Rng,
    flows: Vec<FlowState>,
    /// Dependencies between flows ([`Simulator::add_gate`]).
    gates: Vec<Gate>,
    changes: Vec<(usize, LinkChange)>,
    counters: Counters,
    at_warmup: Counters,
    nic_ood: Histogram,
    nic_rbo: Histogram,
    measuring: bool,
    window_start: Instant,
    interpath_max: u64,
    trace: Option<Trace>,
    events: u64,
    finite_open: usize,
    finite_total: usize,
    long_running: usize,
    /// Engine counters summed at the start of measurement: spurious retransmissions,
    /// reorder-buffer drops.
    engine_at_warmup: (u64, u64),
    deliveries: Option<Vec<Delivery>>,
    /// Scratch: the connections of one host with events to drain.
    with_events: Vec<rondo_proto::ConnectionHandle>,
    /// Spurious retransmissions of the connections closed so far.
    closed_spurious: u64,
    /// The cuts' capacities (see [`Simulator::ideal_gbps`]) from each time on:
    /// empty until a link changes, then the capacities at time 0 and after each
    /// change, so that the ideal is weighted by how long each held.
    capacity_history: Vec<(Instant, Vec<f64>)>,
}

impl Simulator {
    /// Builds the topology. Errors name the impossible parameter.
    pub fn new(topology: &Topology, cfg: SimConfig) -> Result<Simulator, SimError> {
        cfg.validate()?;
        let fabric = topology.build()?;
        if fabric.hosts >= crate::net::MAX_HOSTS {
            return Err(topo_err(
                format!("{} hosts", fabric.hosts),
                "fewer than 2^28 hosts",
            ));
        }
        for l in &fabric.links {
            if l.bps == 0 {
                return Err(topo_err(
                    "a link rate rounds to 0 bit/s",
                    "rates of at least 1 bit/s",
                ));
            }
        }
        let mut ports: Vec<Port> = fabric
            .links
            .iter()
            .map(|l| {
                let owner = if l.from < fabric.hosts {
                    NONE
                } else {
                    l.from - fabric.hosts
                };
                Port::new(l.to, owner, l.bps, l.delay)
            })
            .collect();
        for &p in &fabric.path_links {
            ports[p as usize].in_path_group = true;
        }
        let mut rng = Rng::new(cfg.seed);
        let salts = (0..fabric.switches).map(|_| rng.next_u64()).collect();
        let key_seed = rng.next_u64();
        let mut hosts = Vec::with_capacity(fabric.hosts as usize);
        for _ in 0..fabric.hosts {
            let mut ep = Endpoint::new(SharedBuffer::in_heap(BufferConfig {
                capacity_bytes: cfg.reorder_buffer_bytes,
                slot_size: cfg.mtu,
                huge_pages: reorder::HugePages::Never,
                ..BufferConfig::default()
            })?);
            // Every measurement comes through the tap, never from the engine's state.
            ep.set_tap(true);
            hosts.push(HostState {
                ep,
                timer_at: None,
                gen: 0,
                conns: Vec::new(),
                spin: (Instant::ZERO, 0),
                stalled_until: None,
                backlog: Vec::new(),
            });
        }
        // Host stalls draw from their own stream: turning them on leaves every
        // other draw where it was.
        let mut stall_rng = Rng::new(cfg.seed ^ 0x7374_616c_6c73);
        let mut agenda = Agenda::default();
        if let Some(st) = &cfg.host_stalls {
            for h in 0..fabric.hosts {
                let first = Instant::ZERO + exponential(&mut stall_rng, st.mean_gap);
                agenda.push(first, Ev::StallStart(h));
            }
        }
        Ok(Simulator {
            slab: Slab::new(cfg.mtu),
            switch_buffered: vec![0; fabric.switches as usize],
            pfc_ingress: vec![0; ports.len()],
            salts,
            key_seed,
            rng,
            loss_rng: Rng::new(cfg.seed ^ 0x6c6f_7373_5f72_6e67),
            ports,
            fabric,
            cfg,
            agenda,
            stall_rng,
            now: Instant::ZERO,
            hosts,
            flows: Vec::new(),
            gates: Vec::new(),
            changes: Vec::new(),
            counters: Counters::default(),
            at_warmup: Counters::default(),
            nic_ood: Histogram::default(),
            nic_rbo: Histogram::default(),
            measuring: true,
            window_start: Instant::ZERO,
            interpath_max: 0,
            trace: None,
            events: 0,
            finite_open: 0,
            finite_total: 0,
            long_running: 0,
            engine_at_warmup: (0, 0),
            deliveries: None,
            with_events: Vec::new(),
            closed_spurious: 0,
            capacity_history: Vec::new(),
        })
    }

    pub(crate) fn packet_key(&self, src: u32, dst: u32, flow: u32, path: u16) -> u64 {
        let flow_key = mix(self.key_seed ^ (u64::from(src) << 32 | u64::from(dst)));
        if self.cfg.switch.routing == Routing::Steer {
            // The route's digits ([`Routing::Steer`]): a per-flow offset (below
            // 2^32, so that the sum never wraps) plus the path index.
            return (mix(flow_key ^ u64::from(flow) << 16) >> 32) + u64::from(path);
        }
        mix(flow_key ^ (u64::from(flow) << 16 | u64::from(path)))
    }

    /// Schedules a change of a link at `at` (at or after now).
    pub fn schedule_link_change(
        &mut self,
        at: Instant,
        link: LinkId,
        change: LinkChange,
    ) -> Result<(), SimError> {
        if link.0 >= self.ports.len() {
            return Err(SimError::NoSuchLink(link));
        }
        if let LinkChange::Rate(g) = change {
            if !(g.is_finite() && (0.0..=100_000.0).contains(&g)) {
                return Err(SimError::LinkChange {
                    what: format!("rate {g} Gbit/s"),
                    allowed: "0 to 100000 Gbit/s",
                });
            }
        }
        if at < self.now {
            return Err(SimError::LinkChange {
                what: format!("at {at:?}, before now ({:?})", self.now),
                allowed: "a time at or after now",
            });
        }
        self.changes.push((link.0, change));
        self.agenda
            .push(at, Ev::Change(self.changes.len() as u32 - 1));
        Ok(())
    }

    /// Measurement starts at `at`: counters, distributions and queue statistics
    /// restart then (OOD/RBO distributions of every connection are cleared).
    pub fn set_warmup(&mut self, at: Instant) {
        if at > self.now {
            self.measuring = false;
            self.agenda.push(at, Ev::Warmup);
        }
    }

    /// Samples the queues of `links` (default: [`Self::path_links`]) and the
    /// NIC-level OOD every `interval` from now on (see [`Self::trace`]).
    pub fn enable_trace(
        &mut self,
        interval: Duration,
        links: Option<Vec<LinkId>>,
    ) -> Result<(), SimError> {
        if interval == Duration::ZERO {
            return Err(SimError::Config {
                name: "trace interval",
                value: "0".into(),
                allowed: "> 0",
            });
        }
        let links = links.unwrap_or_else(|| self.path_links());
        if let Some(l) = links.iter().find(|l| l.0 >= self.ports.len()) {
            return Err(SimError::NoSuchLink(*l));
        }
        self.trace = Some(Trace::new(interval, links));
        self.agenda.push(self.now, Ev::Sample);
        Ok(())
    }

    /// The trace recorded so far, if enabled.
    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }

    /// Runs until `until`, or until every finite flow has completed and no
    /// long-lived flow is still running (without any flow: until nothing is left
    /// to do). `progress` is called every 65 536 events and once at the end.
    pub fn run(&mut self, until: Instant, progress: &mut dyn FnMut(&Progress)) -> RunEnd {
        let end = loop {
            if self.finite_open == 0 && self.long_running == 0 && !self.flows.is_empty() {
                break RunEnd::Done;
            }
            match self.agenda.peek_time() {
                None => break RunEnd::Idle,
                Some(t) if t > until => break RunEnd::Deadline,
                Some(_) => {}
            }
            let Some((at, ev)) = self.agenda.pop() else {
                break RunEnd::Idle;
            };
            self.now = self.now.max(at);
            self.events += 1;
            self.read_ahead();
            self.dispatch(ev);
            if self.events & 0xFFFF == 0 {
                progress(&self.progress());
            }
        };
        if end != RunEnd::Done && until != Instant::MAX {
            self.now = self.now.max(until);
        }
        progress(&self.progress());
        end
    }

    fn progress(&self) -> Progress {
        Progress {
            now: self.now,
            events: self.events,
            flows_completed: self.finite_total - self.finite_open,
            flows_finite: self.finite_total,
        }
    }

    /// Asks for the cache lines that the next three events will read first
    /// ([`reorder::prefetch`]), while the event before them runs: in a run with
    /// thousands of links and connections, a delivery's chain of cold reads
    /// (the link, its next packet's slot in the slab, the receiving
    /// connection's slot, then the connection, its flow's state in the reorder
    /// buffer and the simulator's record of the flow) was most of its time. A
    /// step reads what the step one event earlier asked for, so that the
    /// reading ahead waits for memory as little as it can; nothing changes.
    /// (Four steps, one event apart each, were no faster.)
    #[inline]
    fn read_ahead(&self) {
        // Three events ahead: the link's lines (addresses only, nothing read).
        match self.agenda.upcoming(2) {
            Some(Ev::Arrive(p)) => {
                if let Some(port) = self.ports.get(p as usize) {
                    reorder::prefetch(&port.to);
                    reorder::prefetch(&port.wire);
                }
            }
            Some(Ev::TxDone(p)) => {
                if let Some(port) = self.ports.get(p as usize) {
                    reorder::prefetch(&port.to);
                    reorder::prefetch(&port.queues);
                }
            }
            _ => {}
        }
        // Two ahead: what the link's lines name (its queues' next entries;
        // for a delivery, the packet's slot and the receiving connection's).
        match self.agenda.upcoming(1) {
            Some(Ev::Arrive(p)) => {
                if let Some(port) = self.ports.get(p as usize) {
                    port.wire.prefetch_next();
                    if let Some((h, m)) = self.delivery(port) {
                        self.slab.prefetch(m.slot);
                        h.ep.prefetch_slot(rondo_proto::ConnectionHandle(m.conn as usize));
                    }
                }
            }
            Some(Ev::TxDone(p)) => {
                if let Some(port) = self.ports.get(p as usize) {
                    for q in &port.queues {
                        q.prefetch_next();
                    }
                }
            }
            _ => {}
        }
        // The next: the receiving connection, its flow's reorder state, and
        // the simulator's record of the flow (its id is in the packet's header).
        if let Some(Ev::Arrive(p)) = self.agenda.upcoming(0) {
            if let Some((h, m)) = self
                .ports
                .get(p as usize)
                .and_then(|port| self.delivery(port))
            {
                h.ep.prefetch_connection(rondo_proto::ConnectionHandle(m.conn as usize));
                let head = self
                    .slab
                    .head::<{ rondo_proto::wire::COMMON_HEADER_LEN }>(m.slot);
                let local = rondo_proto::wire::Packet::new_unchecked(&head[..]).flow();
                if let Some(fl) = self.flows.get((local / 2) as usize) {
                    reorder::prefetch(fl);
                }
            }
        }
    }

    /// The host that link `port` delivers to and the packet it delivers next,
    /// when it leads to a host.
    #[inline]
    fn delivery(&self, port: &Port) -> Option<(&HostState, crate::net::Meta)> {
        let &(_, m) = port.wire.front()?;
        Some((self.hosts.get(port.to as usize)?, m))
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::TxDone(p) => {
                self.ports[p as usize].tx_pending = false;
                self.try_start(p);
            }
            Ev::Arrive(p) => self.wire_arrivals(p),
            Ev::Timer { host, gen } => self.on_timer(host, gen),
            Ev::Start(f) => self.start_flow(f),
            Ev::Stop(f) => self.stop_flow(f),
            Ev::Change(i) => {
                let (link, change) = self.changes[i as usize];
                if self.capacity_history.is_empty() {
                    self.capacity_history
                        .push((Instant::ZERO, self.cut_capacities()));
                }
                self.apply_change(link as u32, change);
                let caps = self.cut_capacities();
                self.capacity_history.push((self.now, caps));
            }
            Ev::StallStart(h) => self.stall(h),
            Ev::StallEnd(h) => self.resume(h),
            Ev::Warmup => self.begin_measurement(),
            Ev::Sample => self.sample(),
        }
    }

    fn begin_measurement(&mut self) {
        let now = self.now;
        self.measuring = true;
        self.window_start = now;
        self.at_warmup = self.counters;
        self.nic_ood = Histogram::default();
        self.nic_rbo = Histogram::default();
        self.interpath_max = 0;
        for p in &mut self.ports {
            p.reset_stats(now);
        }
        self.engine_at_warmup = self.engine_totals();
        for f in 0..self.flows.len() {
            self.flows[f].delivered_at_warmup = self.delivered(f);
        }
        for h in &mut self.hosts {
            for i in 0..h.conns.len() {
                if let Some(c) = h.ep.get_mut(rondo_proto::ConnectionHandle(i)) {
                    c.clear_distributions();
                }
            }
        }
    }

    /// (spurious retransmissions, reorder-buffer drops) summed over the hosts'
    /// taps.
    fn engine_totals(&self) -> (u64, u64) {
        let mut spurious = self.closed_spurious;
        let mut rb = 0;
        for h in &self.hosts {
            let t = h.ep.tap_counters();
            spurious += t.spurious_retransmissions;
            rb += t.reorder_drops;
        }
        (spurious, rb)
    }

    fn sample(&mut self) {
        let Some(tr) = self.trace.as_mut() else {
            return;
        };
        let queues = tr
            .links
            .iter()
            .map(|l| self.ports[l.0].queued_bytes())
            .collect();
        let (mut sum, mut max) = (0u64, 0u64);
        for h in &self.hosts {
            let o = h.ep.tap_counters().nic_ood;
            sum += o;
            max = max.max(o);
        }
        tr.push(self.now, queues, sum, max);
        let next = self.now + tr.interval;
        self.agenda.push(next, Ev::Sample);
    }

    pub(crate) fn flow_config_template(
        &self,
        spec: &FlowSpec,
        paths: u16,
        index: usize,
    ) -> FlowConfig {
        let mut cfg = spec.cfg.clone();
        cfg.paths = paths;
        cfg.mtu = self.cfg.mtu;
        cfg.line_rate_bps = self.fabric.links[self.fabric.nic[spec.src] as usize].bps;
        cfg.seed = mix(self.cfg.seed ^ mix(index as u64));
        // A stalled host runs its timers late, at its resume.
        cfg.timers_on_time &= self.cfg.host_stalls.is_none();
        cfg
    }
}
