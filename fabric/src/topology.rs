//! The topology file: hosts, paths, the source-port-to-path table and a schedule of
//! changes. The emulator ([`crate::Switch`]) and the P4 control-plane generator
//! ([`crate::p4`]) both read it, so they cannot disagree on where a packet goes.
//!
//! ```toml
//! listen = "127.0.0.1:4900"     # the fabric's UDP port, where every host sends
//! seed = 1                      # random loss
//!
//! [[host]]
//! name = "client"
//! ip = "127.0.0.1"
//! base_port = 20000             # path i's socket is base_port + i
//! ports = 4
//! # peer = "server"             # where its packets go (default: the other host)
//!
//! [[path]]
//! rate_mbps = 250
//! delay_us = 2000               # one-way propagation delay
//! ecn_kb = 64                   # mark CE above this data-queue depth (optional)
//! loss = 0.0                    # random drop probability
//! queue_kb = { control = 64, data = 512, probe = 8 }
//!
//! [[route]]                     # optional: overrides the default i-th port -> path i
//! dst = "server"
//! src_port = 20001
//! path = 2
//!
//! [[change]]                    # optional: the schedule
//! at_ms = 500
//! path = 0
//! down = true
//! ```

use serde::Deserialize;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path as FsPath;

/// The default topology of `rondo fabric` and `rondo testbed`
/// (`fabric/topologies/testbed.toml`): the paper's testbed, four paths in the
/// ratio 25:20:15:10, scaled to 250/200/150/100 Mb/s with 2 ms one-way delays.
pub const TESTBED: &str = include_str!("../topologies/testbed.toml");

/// Why a topology could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// The file could not be read.
    #[error("read topology {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not TOML of the topology schema.
    #[error("topology is not valid: {0}")]
    Parse(#[from] toml::de::Error),
    /// A `--set` override could not be applied.
    #[error("override {given}: {reason}")]
    Override {
        /// The override as given.
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The values parse but do not describe a usable fabric.
    #[error("topology is not usable: {0}")]
    Invalid(String),
}

/// Queue limits of one path's egress, KB (1024 bytes) per priority class.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct QueueKb {
    /// ACKs and NAKs (the highest priority).
    pub control: f64,
    /// Data packets.
    pub data: f64,
    /// Capacity probes (the lowest priority; a small threshold drops them early,
    /// paper §4.2.2).
    pub probe: f64,
}

impl Default for QueueKb {
    fn default() -> Self {
        QueueKb {
            control: 256.0,
            data: 512.0,
            probe: 16.0,
        }
    }
}

/// One path (one egress queue per direction).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    /// Serialisation rate, Mb/s.
    pub rate_mbps: f64,
    /// One-way propagation delay, microseconds.
    #[serde(default)]
    pub delay_us: f64,
    /// Mark data packets CE when the data queue holds more than this many KB on
    /// arrival (none: never mark).
    #[serde(default)]
    pub ecn_kb: Option<f64>,
    /// Probability that a packet is dropped at random.
    #[serde(default)]
    pub loss: f64,
    /// Per-class drop thresholds.
    #[serde(default)]
    pub queue_kb: QueueKb,
}

/// One host: the sockets of its paths.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Its name (routes and `peer` refer to it).
    pub name: String,
    /// Its address.
    pub ip: IpAddr,
    /// Port of its path-0 socket; its socket i is `base_port + i`.
    pub base_port: u16,
    /// How many sockets (source ports) it has.
    pub ports: u16,
    /// Where its packets go (default: the other host, when there are two).
    #[serde(default)]
    pub peer: Option<String>,
    /// P4 switch only: the egress port of each path toward this host (default:
    /// `host_index * paths + path + 1`).
    #[serde(default)]
    pub switch_ports: Option<Vec<u16>>,
}

/// An explicit table entry: packets to `dst` from `src_port` take `path`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Destination host name.
    pub dst: String,
    /// UDP source port.
    pub src_port: u16,
    /// Path index.
    pub path: usize,
}

/// A scheduled change of one path.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChangeSpec {
    /// When, milliseconds after the fabric started.
    pub at_ms: f64,
    /// Which path.
    pub path: usize,
    /// New rate, Mb/s.
    #[serde(default)]
    pub rate_mbps: Option<f64>,
    /// New one-way delay, microseconds.
    #[serde(default)]
    pub delay_us: Option<f64>,
    /// Take the path down (`true`: every packet sent to it is dropped) or up.
    #[serde(default)]
    pub down: Option<bool>,
}

/// DSCP codepoints of the three classes (what the P4 program matches; the UDP
/// backend's defaults).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Dscp {
    /// ACK/NAK.
    pub control: u8,
    /// Data.
    pub data: u8,
    /// Probes.
    pub probe: u8,
}

impl Default for Dscp {
    fn default() -> Self {
        Dscp {
            control: 46,
            data: 26,
            probe: 8,
        }
    }
}

/// A whole topology, checked.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The fabric's UDP address.
    pub listen: SocketAddr,
    /// Seed of the random loss.
    #[serde(default = "one")]
    pub seed: u64,
    /// DSCP codepoints of the classes.
    #[serde(default)]
    pub dscp: Dscp,
    /// The hosts.
    #[serde(rename = "host")]
    pub hosts: Vec<HostSpec>,
    /// The paths.
    #[serde(rename = "path")]
    pub paths: Vec<PathSpec>,
    /// Explicit table entries (override the default mapping).
    #[serde(rename = "route", default)]
    pub routes: Vec<RouteSpec>,
    /// The schedule, in any order.
    #[serde(rename = "change", default)]
    pub changes: Vec<ChangeSpec>,
}

fn one() -> u64 {
    1
}

/// One entry of the forwarding table: (destination host, source address) to path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteEntry {
    /// Index of the source host.
    pub src_host: usize,
    /// Index of the destination host.
    pub dst_host: usize,
    /// The UDP source port.
    pub src_port: u16,
    /// The path.
    pub path: usize,
}

impl Topology {
    /// Parses and checks TOML text, with `--set key=value` overrides applied first.
    pub fn parse(text: &str, overrides: &[&str]) -> Result<Topology, TopologyError> {
        let mut table: toml::Table = text.parse()?;
        for o in overrides {
            apply_override(&mut table, o)?;
        }
        let t: Topology = table.try_into()?;
        t.check()?;
        Ok(t)
    }

    /// Reads, parses and checks a file.
    pub fn load(file: &FsPath, overrides: &[&str]) -> Result<Topology, TopologyError> {
        let text = std::fs::read_to_string(file).map_err(|source| TopologyError::Read {
            file: file.display().to_string(),
            source,
        })?;
        Topology::parse(&text, overrides)
    }

    fn check(&self) -> Result<(), TopologyError> {
        let bad = |s: String| Err(TopologyError::Invalid(s));
        for h in &self.hosts {
            if let Some(p) = &h.switch_ports {
                if p.len() != self.paths.len() {
                    return bad(format!(
                        "host {:?}: switch_ports has {} entries for {} paths",
                        h.name,
                        p.len(),
                        self.paths.len()
                    ));
                }
            }
        }
        if self.hosts.len() < 2 {
            return bad("give at least two [[host]] tables".into());
        }
        if self.paths.is_empty() {
            return bad("give at least one [[path]] table".into());
        }
        let mut names = HashMap::new();
        for (i, h) in self.hosts.iter().enumerate() {
            if names.insert(h.name.as_str(), i).is_some() {
                return bad(format!("two hosts are named {:?}", h.name));
            }
            if h.ports == 0 || u32::from(h.base_port) + u32::from(h.ports) > 65_536 {
                return bad(format!(
                    "host {:?}: ports must be at least 1 and base_port + ports at most 65536",
                    h.name
                ));
            }
            if h.ip.is_ipv6() != self.listen.is_ipv6() {
                return bad(format!(
                    "host {:?}: its address family differs from listen's",
                    h.name
                ));
            }
        }
        for (i, a) in self.hosts.iter().enumerate() {
            for b in &self.hosts[i + 1..] {
                let (a0, a1) = (
                    u32::from(a.base_port),
                    u32::from(a.base_port) + u32::from(a.ports),
                );
                let (b0, b1) = (
                    u32::from(b.base_port),
                    u32::from(b.base_port) + u32::from(b.ports),
                );
                if a.ip == b.ip && a0 < b1 && b0 < a1 {
                    return bad(format!("hosts {:?} and {:?} share ports", a.name, b.name));
                }
            }
            if a.ip == self.listen.ip()
                && (u32::from(a.base_port)..u32::from(a.base_port) + u32::from(a.ports))
                    .contains(&u32::from(self.listen.port()))
            {
                return bad(format!("host {:?} uses the fabric's listen port", a.name));
            }
        }
        for h in &self.hosts {
            match &h.peer {
                Some(p) if !names.contains_key(p.as_str()) => {
                    return bad(format!("host {:?}: peer {p:?} is no host", h.name))
                }
                Some(p) if *p == h.name => {
                    return bad(format!("host {:?} is its own peer", h.name))
                }
                None if self.hosts.len() != 2 => {
                    return bad(format!(
                        "host {:?}: with more than two hosts give each a peer",
                        h.name
                    ))
                }
                _ => {}
            }
        }
        for (i, p) in self.paths.iter().enumerate() {
            check_rate(i, p.rate_mbps)?;
            check_delay(i, p.delay_us)?;
            if !(0.0..1.0).contains(&p.loss) {
                return bad(format!(
                    "path {i}: loss {} is no probability below 1",
                    p.loss
                ));
            }
            let q = p.queue_kb;
            for (name, v) in [("control", q.control), ("data", q.data), ("probe", q.probe)] {
                if !(v.is_finite() && v > 0.0 && v <= 1024.0 * 1024.0) {
                    return bad(format!(
                        "path {i}: queue_kb.{name} {v} must be above 0, at most 1 GiB"
                    ));
                }
            }
            if let Some(e) = p.ecn_kb {
                if !(e.is_finite() && e >= 0.0) {
                    return bad(format!("path {i}: ecn_kb {e} must be 0 or more"));
                }
            }
        }
        for r in &self.routes {
            let Some(&d) = names.get(r.dst.as_str()) else {
                return bad(format!("route: dst {:?} is no host", r.dst));
            };
            if r.path >= self.paths.len() {
                return bad(format!(
                    "route to {:?}: path {} does not exist",
                    r.dst, r.path
                ));
            }
            let sources = (0..self.hosts.len())
                .filter(|&s| self.peer_of(s) == d && self.hosts[s].owns(r.src_port))
                .count();
            if sources == 0 {
                return bad(format!(
                    "route to {:?}: no host that sends there has source port {}",
                    r.dst, r.src_port
                ));
            }
        }
        for c in &self.changes {
            if !(c.at_ms.is_finite() && c.at_ms >= 0.0) {
                return bad(format!("change at {} ms: time must be 0 or more", c.at_ms));
            }
            if c.path >= self.paths.len() {
                return bad(format!(
                    "change at {} ms: path {} does not exist",
                    c.at_ms, c.path
                ));
            }
            if let Some(r) = c.rate_mbps {
                check_rate(c.path, r)?;
            }
            if let Some(d) = c.delay_us {
                check_delay(c.path, d)?;
            }
        }
        Ok(())
    }

    /// Index of the host a host's packets go to.
    pub fn peer_of(&self, host: usize) -> usize {
        match &self.hosts[host].peer {
            Some(p) => self.host_index(p).unwrap_or(0),
            None => 1 - host.min(1),
        }
    }

    /// Index of the host named `name`.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// The whole forwarding table: every source port of every host, sorted by
    /// (source host, destination, port). The emulator routes by it, and
    /// `rondo p4-config` writes it out as table entries.
    pub fn route_table(&self) -> Vec<RouteEntry> {
        let mut out = Vec::new();
        for (s, h) in self.hosts.iter().enumerate() {
            let d = self.peer_of(s);
            for i in 0..h.ports {
                let port = h.base_port + i;
                let path = self
                    .routes
                    .iter()
                    .find(|r| r.src_port == port && self.host_index(&r.dst) == Some(d))
                    .map_or(usize::from(i) % self.paths.len(), |r| r.path);
                out.push(RouteEntry {
                    src_host: s,
                    dst_host: d,
                    src_port: port,
                    path,
                });
            }
        }
        out
    }

    /// The P4 switch's egress port of `path` toward host `dst`.
    pub fn switch_port(&self, dst: usize, path: usize) -> u16 {
        match &self.hosts[dst].switch_ports {
            Some(p) => p[path],
            None => (dst * self.paths.len() + path + 1) as u16,
        }
    }

    /// Sum of the path rates, bits per second (the ideal of one direction).
    pub fn total_bps(&self) -> f64 {
        self.paths.iter().map(|p| p.rate_mbps * 1e6).sum()
    }
}

impl HostSpec {
    /// True when `port` is one of its source ports.
    pub fn owns(&self, port: u16) -> bool {
        (self.base_port..self.base_port.saturating_add(self.ports)).contains(&port)
            && u32::from(port) < u32::from(self.base_port) + u32::from(self.ports)
    }

    /// Address of its socket `i`.
    pub fn addr(&self, i: u16) -> SocketAddr {
        SocketAddr::new(self.ip, self.base_port + i % self.ports)
    }
}

fn check_rate(path: usize, r: f64) -> Result<(), TopologyError> {
    if r.is_finite() && (0.001..=1_000_000.0).contains(&r) {
        Ok(())
    } else {
        Err(TopologyError::Invalid(format!(
            "path {path}: rate_mbps {r} must be 0.001 to 1000000"
        )))
    }
}

fn check_delay(path: usize, d: f64) -> Result<(), TopologyError> {
    if d.is_finite() && (0.0..=10_000_000.0).contains(&d) {
        Ok(())
    } else {
        Err(TopologyError::Invalid(format!(
            "path {path}: delay_us {d} must be 0 to 10 s"
        )))
    }
}

/// Applies one `key.sub=value` override (a number indexes an array:
/// `path.0.rate_mbps=100`) to the TOML table.
fn apply_override(table: &mut toml::Table, given: &str) -> Result<(), TopologyError> {
    let bad = |reason: &str| TopologyError::Override {
        given: given.to_owned(),
        reason: reason.to_owned(),
    };
    let (key, raw) = given
        .split_once('=')
        .ok_or_else(|| bad("expected key=value, for example path.0.rate_mbps=100"))?;
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad("the key has an empty part"));
    }
    let raw = raw.trim();
    let value = match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.to_owned())),
        Err(_) => toml::Value::String(raw.to_owned()),
    };
    let (last, parents) = parts.split_last().ok_or_else(|| bad("the key is empty"))?;
    let mut root = toml::Value::Table(std::mem::take(table));
    let result = set_in(&mut root, parents, last, value).map_err(bad);
    if let toml::Value::Table(t) = root {
        *table = t;
    }
    result
}

/// Writes `value` at `parents.last` below `here`, creating tables on the way.
fn set_in(
    mut here: &mut toml::Value,
    parents: &[&str],
    last: &str,
    value: toml::Value,
) -> Result<(), &'static str> {
    fn index<'a>(a: &'a mut [toml::Value], p: &str) -> Result<&'a mut toml::Value, &'static str> {
        let i: usize = p.parse().map_err(|_| "an array needs a number index")?;
        a.get_mut(i).ok_or("the index is past the array's end")
    }
    for p in parents {
        here = match here {
            toml::Value::Table(t) => t
                .entry((*p).to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new())),
            toml::Value::Array(a) => index(a, p)?,
            _ => return Err("the key goes through a value that is not a table"),
        };
    }
    match here {
        toml::Value::Table(t) => {
            t.insert(last.to_owned(), value);
            Ok(())
        }
        toml::Value::Array(a) => {
            *index(a, last)? = value;
            Ok(())
        }
        _ => Err("the key goes through a value that is not a table"),
    }
}
