//! Range checks of a parsed scenario: zero rates, impossible topologies, host indices
//! past the end, times outside the run.

use super::error::ScenarioError;
use super::schema::{
    CollectiveOp, EventAction, HostSpec, Scenario, SwitchSpec, TopologySpec, TransportKind,
    TransportSpec, WorkloadSpec,
};
use super::workload::poisson_cdf;

/// Rondo's measured base RTT expires after this many base RTTs by default in
/// the simulator (`transport.base_rtt_window_rtts`; issue 12 row 5, docs/engine.md
/// "A base RTT that probes confirm").
const BASE_RTT_WINDOW_RTTS: f64 = 10.0;

/// Smallest and largest `mtu` accepted.
pub const MTU_RANGE: (u32, u32) = (128, 9216);

/// Largest `message_bytes` (the engine's default `max_message_len`, 4 GiB).
pub const MAX_MESSAGE_BYTES: u64 = 1 << 32;

/// Most flows one workload table may generate (expected count for `poisson`).
pub const MAX_FLOWS: f64 = 1_000_000.0;

/// Most samples a trace may take (`duration_us / trace_interval_us`).
const MAX_TRACE_SAMPLES: f64 = 10_000_000.0;

impl TopologySpec {
    /// The topology's name as written in `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            TopologySpec::Parallel(_) => "parallel",
            TopologySpec::Fig2(_) => "fig2",
            TopologySpec::Clos3(_) => "clos3",
            TopologySpec::Fattree(_) => "fattree",
        }
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        match self {
            TopologySpec::Parallel(_) => 2,
            TopologySpec::Fig2(_) => 20,
            TopologySpec::Clos3(_) => 320,
            TopologySpec::Fattree(t) => (t.k as usize).pow(3) / 4,
        }
    }

    /// Host link rate, Gbit/s.
    pub fn host_gbps(&self) -> f64 {
        match self {
            TopologySpec::Parallel(t) => t.host_gbps,
            TopologySpec::Fig2(_) | TopologySpec::Clos3(_) => 100.0,
            TopologySpec::Fattree(t) => t.gbps,
        }
    }
}

fn rate(file: &str, key: &str, gbps: f64) -> Result<(), ScenarioError> {
    if gbps.is_finite() && gbps > 0.0 && gbps <= 10_000.0 {
        Ok(())
    } else {
        Err(ScenarioError::invalid(
            file,
            key,
            gbps,
            "a rate in Gbit/s above 0 and at most 10000",
        ))
    }
}

fn non_negative(file: &str, key: &str, x: f64) -> Result<(), ScenarioError> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err(ScenarioError::invalid(
            file,
            key,
            x,
            "a finite number, 0 or more",
        ))
    }
}

fn positive(file: &str, key: &str, x: f64) -> Result<(), ScenarioError> {
    if x.is_finite() && x > 0.0 {
        Ok(())
    } else {
        Err(ScenarioError::invalid(
            file,
            key,
            x,
            "a finite number above 0",
        ))
    }
}

fn host(file: &str, key: &str, h: usize, hosts: usize, kind: &str) -> Result<(), ScenarioError> {
    if h < hosts {
        Ok(())
    } else {
        Err(ScenarioError::invalid(
            file,
            key,
            h,
            format!(
                "a host index from 0 to {} (topology {kind} has {hosts} hosts)",
                hosts - 1
            ),
        ))
    }
}

impl Scenario {
    /// Checks every range; `file` names the scenario in messages.
    pub fn check(&self, file: &str) -> Result<(), ScenarioError> {
        positive(file, "duration_us", self.duration_us)?;
        non_negative(file, "warmup_us", self.warmup_us)?;
        if self.warmup_us >= self.duration_us {
            return Err(ScenarioError::invalid(
                file,
                "warmup_us",
                self.warmup_us,
                format!("less than duration_us ({})", self.duration_us),
            ));
        }
        if !(MTU_RANGE.0..=MTU_RANGE.1).contains(&self.mtu) {
            return Err(ScenarioError::invalid(
                file,
                "mtu",
                self.mtu,
                format!("{} to {} bytes", MTU_RANGE.0, MTU_RANGE.1),
            ));
        }
        positive(file, "trace_interval_us", self.trace_interval_us)?;
        if self.duration_us / self.trace_interval_us > MAX_TRACE_SAMPLES {
            return Err(ScenarioError::invalid(
                file,
                "trace_interval_us",
                self.trace_interval_us,
                format!(
                    "at least duration_us / {MAX_TRACE_SAMPLES} ({} us): the trace would \
                     hold too many samples",
                    self.duration_us / MAX_TRACE_SAMPLES
                ),
            ));
        }
        self.check_topology(file)?;
        check_switch(file, &self.switch)?;
        check_host(file, &self.host)?;
        check_transport(file, &self.transport)?;
        if self.workload.0.is_empty() {
            return Err(ScenarioError::invalid(
                file,
                "workload",
                "[]",
                "at least one [workload] table",
            ));
        }
        for (i, w) in self.workload.0.iter().enumerate() {
            let key = if self.workload.0.len() == 1 {
                "workload".to_owned()
            } else {
                format!("workload[{i}]")
            };
            self.check_workload(file, &key, w)?;
        }
        for (i, e) in self.events.iter().enumerate() {
            let key = format!("events[{i}]");
            non_negative(file, &format!("{key}.at_us"), e.at_us)?;
            match (e.path, e.link, e.index) {
                (Some(p), None, None) => {
                    let paths = match &self.topology {
                        TopologySpec::Parallel(t) => t.paths.len(),
                        TopologySpec::Fig2(_) => 4,
                        other => {
                            return Err(ScenarioError::invalid(
                                file,
                                format!("{key}.path"),
                                p,
                                format!(
                                    "`path` names links on the parallel and fig2 topologies \
                                     only; on {} use `link` and `index`",
                                    other.kind()
                                ),
                            ))
                        }
                    };
                    if p >= paths {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.path"),
                            p,
                            format!("a path index from 0 to {}", paths - 1),
                        ));
                    }
                }
                (None, Some(_), Some(_)) if e.percent.is_none() => {}
                (None, Some(_), None) if e.percent.is_some() => {
                    let p = e.percent.unwrap_or(0.0);
                    if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.percent"),
                            p,
                            "a percentage of the links of the kind, in (0, 100]",
                        ));
                    }
                }
                _ => {
                    return Err(ScenarioError::invalid(
                        file,
                        key.clone(),
                        "..",
                        "name the link with `path` alone, with `link` and `index`, \
                         or pick links at random with `link` and `percent`",
                    ))
                }
            }
            match e.action {
                EventAction::Rate => rate(file, &format!("{key}.gbps"), e.gbps.unwrap_or(0.0))?,
                EventAction::Delay => match e.delay_us {
                    Some(d) => non_negative(file, &format!("{key}.delay_us"), d)?,
                    None => {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.delay_us"),
                            "(missing)",
                            "a one-way delay in microseconds for action = \"delay\"",
                        ))
                    }
                },
                EventAction::Fail | EventAction::Restore => {}
            }
        }
        Ok(())
    }

    fn check_topology(&self, file: &str) -> Result<(), ScenarioError> {
        match &self.topology {
            TopologySpec::Parallel(t) => {
                rate(file, "topology.host_gbps", t.host_gbps)?;
                if t.paths.is_empty() || t.paths.len() > 1024 {
                    return Err(ScenarioError::invalid(
                        file,
                        "topology.paths",
                        t.paths.len(),
                        "1 to 1024 paths, each { gbps = .., delay_us = .. }",
                    ));
                }
                for (i, p) in t.paths.iter().enumerate() {
                    rate(file, &format!("topology.paths[{i}].gbps"), p.gbps)?;
                    non_negative(file, &format!("topology.paths[{i}].delay_us"), p.delay_us)?;
                }
            }
            TopologySpec::Fig2(t) => {
                if t.extra_delay_us.len() > 4 {
                    return Err(ScenarioError::invalid(
                        file,
                        "topology.extra_delay_us",
                        t.extra_delay_us.len(),
                        "at most 4 entries, one per spine path",
                    ));
                }
                for (i, d) in t.extra_delay_us.iter().enumerate() {
                    non_negative(file, &format!("topology.extra_delay_us[{i}]"), *d)?;
                }
            }
            TopologySpec::Clos3(t) => {
                if t.oversubscription != 1 && t.oversubscription != 4 {
                    return Err(ScenarioError::invalid(
                        file,
                        "topology.oversubscription",
                        t.oversubscription,
                        "1 (16 core switches) or 4 (4 core switches)",
                    ));
                }
            }
            TopologySpec::Fattree(t) => {
                rate(file, "topology.gbps", t.gbps)?;
                non_negative(file, "topology.link_delay_us", t.link_delay_us)?;
                if t.k < 2 || t.k % 2 != 0 || t.k > 64 {
                    return Err(ScenarioError::invalid(
                        file,
                        "topology.k",
                        t.k,
                        "an even switch radix from 2 to 64",
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_workload(&self, file: &str, key: &str, w: &WorkloadSpec) -> Result<(), ScenarioError> {
        let hosts = self.topology.hosts();
        let kind = self.topology.kind();
        let bytes = |b: Option<u64>| match b {
            Some(0) => Err(ScenarioError::invalid(
                file,
                format!("{key}.bytes"),
                0,
                "at least 1 byte (leave it out for long-lived flows)",
            )),
            _ => Ok(()),
        };
        let paths = |p: Option<u16>| match p {
            Some(p) if !(1..=1024).contains(&p) => Err(ScenarioError::invalid(
                file,
                format!("{key}.paths"),
                p,
                "1 to 1024 logical paths",
            )),
            _ => Ok(()),
        };
        let times = |start: f64, stop: Option<f64>| -> Result<(), ScenarioError> {
            non_negative(file, &format!("{key}.start_us"), start)?;
            if let Some(stop) = stop {
                if !(stop.is_finite() && stop > start) {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.stop_us"),
                        stop,
                        format!("after start_us ({start})"),
                    ));
                }
            }
            Ok(())
        };
        let group = |n: Option<usize>, name: &str| match n {
            Some(n) if n < 2 || n > hosts => Err(ScenarioError::invalid(
                file,
                format!("{key}.{name}"),
                n,
                format!("2 to {hosts} hosts (topology {kind})"),
            )),
            _ => Ok(()),
        };
        let too_many = |n: f64, name: &str| {
            if n <= MAX_FLOWS {
                Ok(())
            } else {
                Err(ScenarioError::invalid(
                    file,
                    format!("{key}.{name}"),
                    "..",
                    format!("settings that make at most {MAX_FLOWS} flows (these make {n:.0})"),
                ))
            }
        };
        match w {
            WorkloadSpec::LongFlows(s) => {
                too_many(f64::from(s.flows) * s.senders.len() as f64, "flows")?;
                bytes(s.bytes)?;
                if let Some(m) = s.message_bytes {
                    if m == 0 || m > MAX_MESSAGE_BYTES {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.message_bytes"),
                            m,
                            format!("1 to {MAX_MESSAGE_BYTES} bytes per message"),
                        ));
                    }
                }
                if s.tx_depth.is_some_and(|d| d == 0 || d > 4096) {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.tx_depth"),
                        s.tx_depth.unwrap_or(0),
                        "1 to 4096 messages posted",
                    ));
                }
                paths(s.paths)?;
                times(s.start_us, s.stop_us)?;
                if s.senders.is_empty() || s.receivers.is_empty() {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.senders"),
                        "[]",
                        "at least one sender and one receiver",
                    ));
                }
                for (i, &h) in s.senders.iter().enumerate() {
                    host(file, &format!("{key}.senders[{i}]"), h, hosts, kind)?;
                    let dst = s.receivers[i % s.receivers.len()];
                    host(file, &format!("{key}.receivers"), dst, hosts, kind)?;
                    if dst == h {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.receivers"),
                            dst,
                            format!("a host other than its sender {h}"),
                        ));
                    }
                }
            }
            WorkloadSpec::Incast(s) => {
                bytes(s.bytes)?;
                paths(s.paths)?;
                times(s.start_us, s.stop_us)?;
                host(file, &format!("{key}.receiver"), s.receiver, hosts, kind)?;
                host(
                    file,
                    &format!("{key}.first_sender"),
                    s.first_sender,
                    hosts,
                    kind,
                )?;
                if s.senders == 0 || s.senders >= hosts {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.senders"),
                        s.senders,
                        format!("1 to {} senders (topology {kind})", hosts - 1),
                    ));
                }
            }
            WorkloadSpec::Permutation(s) => {
                bytes(s.bytes)?;
                paths(s.paths)?;
                times(s.start_us, s.stop_us)?;
                group(s.hosts, "hosts")?;
            }
            WorkloadSpec::AllToAll(s) => {
                match s.receivers {
                    Some(k) => too_many(hosts as f64 * k as f64, "receivers")?,
                    None => {
                        let size = s.group_size.unwrap_or(hosts) as f64;
                        too_many(hosts as f64 * (size - 1.0), "group_size")?;
                    }
                }
                if let Some(k) = s.receivers {
                    if s.group_size.is_some() {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.receivers"),
                            k,
                            "either receivers (random) or group_size (consecutive groups), not both",
                        ));
                    }
                    if k == 0 || k >= hosts {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.receivers"),
                            k,
                            format!("1 to {} (the other hosts)", hosts.saturating_sub(1)),
                        ));
                    }
                }
                bytes(Some(s.bytes))?;
                paths(s.paths)?;
                times(s.start_us, None)?;
                group(s.group_size, "group_size")?;
                if !(s.skew.is_finite() && (0.0..=4.0).contains(&s.skew)) {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.skew"),
                        s.skew,
                        "a Zipf exponent from 0 (uniform) to 4",
                    ));
                }
            }
            WorkloadSpec::Poisson(s) => {
                paths(s.paths)?;
                times(s.start_us, s.stop_us)?;
                group(s.hosts, "hosts")?;
                if !(s.load.is_finite() && s.load > 0.0 && s.load <= 1.0) {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.load"),
                        s.load,
                        "a fraction of the host link rate in (0, 1]",
                    ));
                }
                let cdf = poisson_cdf(s).map_err(|e| {
                    ScenarioError::invalid(file, format!("{key}.cdf_points"), "[..]", e.to_string())
                })?;
                let span_s = (s.stop_us.unwrap_or(self.duration_us) - s.start_us).max(0.0) * 1e-6;
                let per_host =
                    s.load * self.topology.host_gbps() * 1e9 / (8.0 * cdf.mean().max(1.0));
                let n = s.hosts.unwrap_or(hosts) as f64;
                let expected = (n * per_host * span_s).min(s.flows.map_or(f64::MAX, |f| f as f64));
                too_many(expected, "load")?;
            }
            WorkloadSpec::Collective(s) => {
                paths(s.paths)?;
                times(s.start_us, None)?;
                let last = s.first_host + s.ranks.saturating_sub(1) * s.stride;
                if s.ranks < 2 || s.stride == 0 || last >= hosts {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.ranks"),
                        s.ranks,
                        format!(
                            "2 or more ranks, stride 1 or more, all on hosts below {hosts} (topology {kind}): first_host + (ranks - 1) x stride = {last}"
                        ),
                    ));
                }
                if s.phases.is_empty() {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.phases"),
                        "[]",
                        "at least one phase",
                    ));
                }
                let n = s.ranks as f64;
                let mut flows = 0.0;
                for (i, ph) in s.phases.iter().enumerate() {
                    if ph.bytes < s.ranks as u64 {
                        return Err(ScenarioError::invalid(
                            file,
                            format!("{key}.phases[{i}].bytes"),
                            ph.bytes,
                            format!("at least one byte per rank ({})", s.ranks),
                        ));
                    }
                    flows += n
                        * (n - 1.0)
                        * if ph.op == CollectiveOp::AllReduce {
                            2.0
                        } else {
                            1.0
                        };
                }
                too_many(flows, "phases")?;
            }
            WorkloadSpec::Background(s) => {
                too_many(f64::from(s.flows), "flows")?;
                bytes(s.bytes)?;
                times(s.start_us, s.stop_us)?;
                host(file, &format!("{key}.src"), s.src, hosts, kind)?;
                host(file, &format!("{key}.dst"), s.dst, hosts, kind)?;
                if s.src == s.dst {
                    return Err(ScenarioError::invalid(
                        file,
                        format!("{key}.dst"),
                        s.dst,
                        "a host other than src",
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_switch(file: &str, s: &SwitchSpec) -> Result<(), ScenarioError> {
    let kb = [
        ("switch.buffer_kb", s.buffer_kb),
        ("switch.data_threshold_kb", s.data_threshold_kb),
        ("switch.ecn_kmin_kb", s.ecn_kmin_kb),
        ("switch.ecn_kmax_kb", s.ecn_kmax_kb),
        ("switch.pfc_xoff_kb", s.pfc_xoff_kb),
        ("switch.pfc_xon_kb", s.pfc_xon_kb),
    ];
    for (key, v) in kb {
        if let Some(v) = v {
            non_negative(file, key, v)?;
        }
    }
    if let (Some(lo), Some(hi)) = (s.ecn_kmin_kb, s.ecn_kmax_kb) {
        if lo > hi {
            return Err(ScenarioError::invalid(
                file,
                "switch.ecn_kmin_kb",
                lo,
                format!("at most ecn_kmax_kb ({hi})"),
            ));
        }
    }
    if let Some(p) = s.ecn_pmax {
        if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
            return Err(ScenarioError::invalid(
                file,
                "switch.ecn_pmax",
                p,
                "a probability from 0 to 1",
            ));
        }
    }
    if let Some(p) = s.loss {
        if !(p.is_finite() && (0.0..1.0).contains(&p)) {
            return Err(ScenarioError::invalid(
                file,
                "switch.loss",
                p,
                "a probability from 0 up to (not including) 1",
            ));
        }
    }
    if let (Some(off), Some(on)) = (s.pfc_xoff_kb, s.pfc_xon_kb) {
        if on > off {
            return Err(ScenarioError::invalid(
                file,
                "switch.pfc_xon_kb",
                on,
                format!("at most pfc_xoff_kb ({off})"),
            ));
        }
    }
    Ok(())
}

fn check_host(file: &str, h: &HostSpec) -> Result<(), ScenarioError> {
    match (h.stall_every_us, h.stall_us) {
        (None, None) => Ok(()),
        (Some(every), Some(length)) => {
            if !(every.is_finite() && every > 0.0 && every <= 1e9) {
                return Err(ScenarioError::invalid(
                    file,
                    "host.stall_every_us",
                    every,
                    "microseconds above 0 (up to 1e9)",
                ));
            }
            if !(length.is_finite() && (0.0..=1e9).contains(&length)) {
                return Err(ScenarioError::invalid(
                    file,
                    "host.stall_us",
                    length,
                    "microseconds from 0 (no stalls) up to 1e9",
                ));
            }
            Ok(())
        }
        (Some(_), None) | (None, Some(_)) => Err(ScenarioError::invalid(
            file,
            "host",
            "one of stall_every_us, stall_us",
            "both stall_every_us and stall_us, or neither",
        )),
    }
}

fn check_transport(file: &str, t: &TransportSpec) -> Result<(), ScenarioError> {
    if let TransportKind::Planned(kind) = t.kind {
        return Err(ScenarioError::TransportNotImplemented {
            file: file.to_owned(),
            kind: kind.to_owned(),
        });
    }
    positive(file, "transport.reorder_buffer_kb", t.reorder_buffer_kb)?;
    if let Some(p) = t.paths {
        if !(1..=1024).contains(&p) {
            return Err(ScenarioError::invalid(
                file,
                "transport.paths",
                p,
                "1 to 1024 logical paths",
            ));
        }
    }
    if let Some(rto) = t.rto_min_us {
        positive(file, "transport.rto_min_us", rto)?;
    }
    if let Some(w) = t.min_window_packets {
        positive(file, "transport.min_window_packets", w)?;
    }
    if let Some(s) = t.stall_allowance_us {
        non_negative(file, "transport.stall_allowance_us", s)?;
    }
    if let Some(s) = t.delay_stable_tolerance_us {
        non_negative(file, "transport.delay_stable_tolerance_us", s)?;
    }
    if let Some(s) = t.scheduler_start_gap_us {
        non_negative(file, "transport.scheduler_start_gap_us", s)?;
    }
    if let Some(s) = t.ack_coalesce_us {
        non_negative(file, "transport.ack_coalesce_us", s)?;
    }
    for (key, x) in [
        ("transport.dcqcn_rai", t.dcqcn_rai),
        ("transport.dcqcn_rhai", t.dcqcn_rhai),
        (
            "transport.dcqcn_increase_timer_us",
            t.dcqcn_increase_timer_us,
        ),
        ("transport.swift_fs_range", t.swift_fs_range),
        ("transport.swift_ai", t.swift_ai),
    ] {
        if let Some(x) = x {
            positive(file, key, x)?;
        }
    }
    // The engine checks its own parameters: report its verdict under our key names.
    let cfg = t.flow_config(1500, 100e9);
    cfg.validate().map_err(|e| match e {
        rondo_proto::ConfigError::OutOfRange {
            name,
            value,
            allowed,
        } => {
            // Our key where its name differs from the engine's field.
            let key = match name {
                "min_window" => "min_window_packets",
                other => other,
            };
            ScenarioError::invalid(file, format!("transport.{key}"), value, allowed)
        }
        other => ScenarioError::invalid(file, "transport", "..", other.to_string()),
    })
}

impl TransportSpec {
    /// The engine configuration of a flow (the simulator still sets its paths and
    /// seed).
    pub fn flow_config(&self, mtu: u32, host_bps: f64) -> rondo_proto::FlowConfig {
        let mut c = rondo_proto::FlowConfig {
            transport: match self.kind {
                TransportKind::Engine(t) => t,
                TransportKind::Planned(_) => rondo_proto::Transport::RONDO, // refused by check()
            },
            mtu: mtu as usize,
            line_rate_bps: host_bps as u64,
            scheduler: self.scheduler,
            probing: self.probing,
            pacing: self.pacing,
            path_selection: match self.path_selection {
                super::schema::PathSelectionSpec::Deficit => rondo_proto::PathSelection::Deficit,
                super::schema::PathSelectionSpec::Random => rondo_proto::PathSelection::Random,
            },
            loss_recovery: match self.loss_recovery {
                super::schema::LossRecoverySpec::SelectiveRepeat => {
                    rondo_proto::LossRecoveryKind::SelectiveRepeat
                }
                super::schema::LossRecoverySpec::RackFlow => {
                    rondo_proto::LossRecoveryKind::RackFlow
                }
                super::schema::LossRecoverySpec::RackPath => {
                    rondo_proto::LossRecoveryKind::RackPath
                }
            },
            early_recovery: match self.early_recovery {
                super::schema::EarlyRecoverySpec::GapAndRtt => {
                    rondo_proto::EarlyRecovery::GapAndRtt
                }
                super::schema::EarlyRecoverySpec::Gap => rondo_proto::EarlyRecovery::Gap,
            },
            margin_scope: match self.margin_scope {
                super::schema::MarginScopeSpec::Flow => rondo_proto::MarginScope::Flow,
                super::schema::MarginScopeSpec::Path => rondo_proto::MarginScope::Path,
            },
            ..rondo_proto::FlowConfig::default()
        };
        if let Some(p) = self.paths {
            c.paths = p;
        }
        if let Some(x) = self.initial_window {
            c.initial_window = x;
        }
        if let Some(x) = self.q0 {
            c.q0 = x;
        }
        if let Some(x) = self.target_queue_rtts {
            c.target_queue_rtts = x;
        }
        if let Some(x) = self.alpha {
            c.alpha = x;
        }
        if let Some(x) = self.gamma {
            c.gamma = x;
        }
        if let Some(x) = self.early_recovery_threshold {
            c.early_recovery_threshold = x;
        }
        if let Some(x) = self.rto_min_us {
            c.rto_min = rondo_proto::Duration::from_us_f64(x);
        }
        if let Some(x) = self.update_interval_rtts {
            c.update_interval_rtts = x;
        }
        // 10 base RTTs unless set; 0: never.
        c.base_rtt_window_rtts = match self.base_rtt_window_rtts {
            None => Some(BASE_RTT_WINDOW_RTTS),
            Some(0.0) => None,
            x => x,
        };
        c.probe_pacing_burst = self.probe_pacing_burst_packets;
        if let Some(x) = self.probe_pacing_after_refusal {
            c.probe_pacing_after_refusal = x;
        }
        c.receiver_span = self.receiver_span;
        if let Some(x) = self.receiver_span_step {
            c.receiver_span_step = x;
        }
        if let Some(x) = self.dcqcn_rai {
            c.dcqcn.rai = x;
        }
        if let Some(x) = self.dcqcn_rhai {
            c.dcqcn.rhai = x;
        }
        if let Some(x) = self.dcqcn_increase_timer_us {
            c.dcqcn.increase_timer = rondo_proto::Duration::from_us_f64(x);
        }
        if let Some(x) = self.swift_fs_range {
            c.swift.fs_range = x;
        }
        if let Some(x) = self.swift_ai {
            c.swift.ai = x;
        }
        if let Some(x) = self.queue_rounding_packets {
            c.queue_rounding_packets = x;
        }
        if let Some(x) = self.min_window_packets {
            c.min_window = x;
        }
        if let Some(x) = self.stall_allowance_us {
            c.stall_allowance = rondo_proto::Duration::from_us_f64(x);
        }
        if let Some(x) = self.delay_stable_tolerance_us {
            c.delay_stable_tolerance = rondo_proto::Duration::from_us_f64(x);
        }
        if let Some(x) = self.scheduler_start_gap_us {
            c.scheduler_start_gap = (x > 0.0).then(|| rondo_proto::Duration::from_us_f64(x));
        }
        if let Some(x) = self.scheduler_ahead {
            c.scheduler_ahead = x;
        }
        if let Some(x) = self.intervals_run_on {
            c.intervals_run_on = x;
        }
        // The simulator runs timers on time (host stalls turn it off again:
        // `Simulator::flow_config_template`).
        c.timers_on_time = self.timers_on_time.unwrap_or(true);
        if self.ack_coalesce_packets.is_some() || self.ack_coalesce_us.is_some() {
            let mut a = c.ack_coalescing();
            if let Some(n) = self.ack_coalesce_packets {
                a.packets = n;
            }
            if let Some(us) = self.ack_coalesce_us {
                a.delay = rondo_proto::Duration::from_us_f64(us);
            }
            c.ack_coalesce = Some(a);
        }
        c
    }
}
