//! The fabric's counters: per direction, path and class, and for the whole switch.
//! Printed as a table at exit, or as JSON (`rondo fabric --json`).

use crate::switch::Class;
use crate::topology::Topology;
use serde::Serialize;
use std::fmt::Write as _;

/// Counters of one class of one path's egress toward one host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounters {
    /// Packets queued.
    pub enqueued: u64,
    /// Packets dropped because the class's queue was over its threshold.
    pub dropped_queue: u64,
    /// Of those, packets larger than the whole threshold: they can never be
    /// queued (raise the class's `queue_kb`).
    pub oversize: u64,
    /// Packets dropped at random (the path's loss rate).
    pub lost: u64,
    /// Packets dropped because the path was down.
    pub dropped_down: u64,
    /// Packets marked CE.
    pub marked: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Bytes delivered (UDP payload).
    pub bytes_delivered: u64,
    /// Largest queue seen, bytes.
    pub max_queue_bytes: u64,
}

/// One path's egress toward one host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EgressCounters {
    /// The path.
    pub path: usize,
    /// The destination host's name.
    pub to: String,
    /// Control, data, probe.
    pub control: ClassCounters,
    /// Data packets.
    pub data: ClassCounters,
    /// Probes.
    pub probe: ClassCounters,
}

/// Every counter of a switch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Datagrams that reached the fabric.
    pub datagrams_in: u64,
    /// Of those, not Rondo datagrams (dropped).
    pub malformed: u64,
    /// Of those, from an address that is no host's source port (dropped).
    pub unknown_source: u64,
    /// Deliveries whose send failed (the destination vanished, a full socket buffer).
    pub send_errors: u64,
    /// Receive calls that failed.
    pub recv_errors: u64,
    /// Scheduled changes applied.
    pub changes_applied: u64,
    /// Per path and destination, index `dst * paths + path`.
    pub egress: Vec<EgressCounters>,
    #[serde(skip)]
    npaths: usize,
}

impl Counters {
    /// Zero counters for a topology.
    pub fn new(topo: &Topology) -> Counters {
        let npaths = topo.paths.len();
        let mut egress = Vec::new();
        for h in &topo.hosts {
            for path in 0..npaths {
                egress.push(EgressCounters {
                    path,
                    to: h.name.clone(),
                    control: ClassCounters::default(),
                    data: ClassCounters::default(),
                    probe: ClassCounters::default(),
                });
            }
        }
        Counters {
            datagrams_in: 0,
            malformed: 0,
            unknown_source: 0,
            send_errors: 0,
            recv_errors: 0,
            changes_applied: 0,
            egress,
            npaths,
        }
    }

    /// One class's counters toward host `dst` on `path`.
    pub fn class(&self, dst: usize, path: usize, class: Class) -> &ClassCounters {
        let e = &self.egress[dst * self.npaths + path];
        match class {
            Class::Control => &e.control,
            Class::Data => &e.data,
            Class::Probe => &e.probe,
        }
    }

    pub(crate) fn class_mut(
        &mut self,
        dst: usize,
        path: usize,
        class: Class,
    ) -> &mut ClassCounters {
        let e = &mut self.egress[dst * self.npaths + path];
        match class {
            Class::Control => &mut e.control,
            Class::Data => &mut e.data,
            Class::Probe => &mut e.probe,
        }
    }

    /// Everything delivered, packets.
    pub fn delivered(&self) -> u64 {
        self.sum(|e| e.control.delivered + e.data.delivered + e.probe.delivered)
    }

    /// JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A table, one row per egress and class that saw traffic.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "datagrams in {}, malformed {}, unknown source {}, send errors {}, receive errors {}, changes applied {}",
            self.datagrams_in, self.malformed, self.unknown_source, self.send_errors, self.recv_errors, self.changes_applied
        );
        let _ = writeln!(
            s,
            "{:>4} {:<10} {:<7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>10} {:>12} {:>10}",
            "path",
            "to",
            "class",
            "enqueued",
            "dropped",
            "lost",
            "down",
            "marked",
            "delivered",
            "bytes",
            "max_queue"
        );
        for e in &self.egress {
            for (name, c) in [
                ("control", &e.control),
                ("data", &e.data),
                ("probe", &e.probe),
            ] {
                if *c == ClassCounters::default() {
                    continue;
                }
                let _ = writeln!(
                    s,
                    "{:>4} {:<10} {:<7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>10} {:>12} {:>10}",
                    e.path,
                    e.to,
                    name,
                    c.enqueued,
                    c.dropped_queue,
                    c.lost,
                    c.dropped_down,
                    c.marked,
                    c.delivered,
                    c.bytes_delivered,
                    c.max_queue_bytes
                );
            }
        }
        for (name, n) in [
            ("control", self.sum(|e| e.control.oversize)),
            ("data", self.sum(|e| e.data.oversize)),
            ("probe", self.sum(|e| e.probe.oversize)),
        ] {
            if n > 0 {
                let _ = writeln!(
                    s,
                    "warning: {n} {name} datagrams were larger than the {name} class's whole \
                     threshold and can never be queued: raise queue_kb.{name} above the \
                     largest datagram (for Rondo's capacity probes, its MTU)"
                );
            }
        }
        s
    }

    /// `f` summed over every egress.
    fn sum(&self, f: impl Fn(&EgressCounters) -> u64) -> u64 {
        self.egress.iter().map(f).sum()
    }
}
