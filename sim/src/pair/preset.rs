//! Two hosts over parallel paths: the paper's two-host testbed (Fig. 9a) on the
//! simulator's links.

use super::{HostId, LinkConfig, LinkId, Network};
use rondo_proto::time::Duration;
use rondo_proto::transmit::Host;

/// One path of a [`Pair`], applied to both of its directions.
#[derive(Clone, Debug, PartialEq)]
pub struct PathSpec {
    /// Line rate in Gbit/s.
    pub gbps: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Random loss probability per packet, any class.
    pub loss: f64,
    /// Duplication probability per packet.
    pub duplicate: f64,
    /// Uniform extra delay in `[0, jitter)` per packet.
    pub jitter: Duration,
    /// Tail-drop threshold of the control and the data class, each, in queued
    /// bytes ([`LinkConfig::queue_limit_bytes`]).
    pub queue_limit_bytes: usize,
    /// Tail-drop threshold of the probe class, in queued bytes
    /// ([`LinkConfig::probe_queue_limit_bytes`]: two 1500-byte probes by
    /// default; [`PathSpec::for_mtu`] raises it for larger datagrams).
    pub probe_queue_limit_bytes: usize,
}

/// MTU-sized probes the probe class of a [`PathSpec::for_mtu`] path holds at least.
pub const PROBE_QUEUE_DATAGRAMS: usize = 2;

impl PathSpec {
    /// A lossless path of `gbps` Gbit/s with a one-way delay of `delay_us` microseconds.
    pub fn new(gbps: f64, delay_us: f64) -> PathSpec {
        PathSpec {
            gbps,
            delay: Duration::from_us_f64(delay_us),
            loss: 0.0,
            duplicate: 0.0,
            jitter: Duration::ZERO,
            queue_limit_bytes: LinkConfig::DEFAULT_QUEUE_LIMIT_BYTES,
            probe_queue_limit_bytes: LinkConfig::DEFAULT_PROBE_QUEUE_LIMIT_BYTES,
        }
    }

    /// This path for datagrams of up to `mtu` bytes: its probe class holds at
    /// least [`PROBE_QUEUE_DATAGRAMS`] of them (the default, two 1500-byte
    /// probes, drops every capacity probe of a flow with a larger MTU, and a path
    /// taken out of rotation never comes back).
    pub fn for_mtu(&self, mtu: usize) -> PathSpec {
        PathSpec {
            probe_queue_limit_bytes: self
                .probe_queue_limit_bytes
                .max(PROBE_QUEUE_DATAGRAMS * mtu),
            ..self.clone()
        }
    }

    /// The link configuration of one direction of this path (no ECN).
    pub fn link_config(&self) -> LinkConfig {
        LinkConfig {
            queue_limit_bytes: self.queue_limit_bytes,
            probe_queue_limit_bytes: self.probe_queue_limit_bytes,
            loss: self.loss,
            duplicate: self.duplicate,
            jitter: self.jitter,
            ..LinkConfig::new(self.gbps, self.delay)
        }
    }
}

/// Hosts `a` and `b` joined by parallel paths (quinn's test `Pair`, with paths).
///
/// Path `i` is the path id `i` on both hosts: what `a` sends on it crosses `a`'s NIC
/// then `forward[i]` to `b`; what `b` sends on it crosses `b`'s NIC then
/// `reverse[i]` to `a`. Both directions get the full spec, loss included; change
/// one direction through `net.link_mut(...)`.
pub struct Pair<H: Host> {
    /// The network; use it to reach the hosts, links and clock.
    pub net: Network<H>,
    /// The first host.
    pub a: HostId,
    /// The second host.
    pub b: HostId,
    /// Link of path `i` from `a` to `b`.
    pub forward: Vec<LinkId>,
    /// Link of path `i` from `b` to `a`.
    pub reverse: Vec<LinkId>,
}

impl<H: Host> Pair<H> {
    /// Hosts `a` and `b`, each with a NIC of `host_gbps`, over `paths`, on a
    /// [`Network::new`] of `seed`.
    ///
    /// # Panics
    /// With more than 65 536 paths.
    pub fn new(seed: u64, a: H, b: H, host_gbps: f64, paths: &[PathSpec]) -> Self {
        Self::on(Network::new(seed), a, b, host_gbps, paths)
    }

    /// As [`Pair::new`], on an empty network `net` (e.g. a
    /// [`Network::with_mtu`]).
    ///
    /// # Panics
    /// With more than 65 536 paths.
    pub fn on(mut net: Network<H>, a: H, b: H, host_gbps: f64, paths: &[PathSpec]) -> Self {
        let a = net.add_host(a, host_gbps);
        let b = net.add_host(b, host_gbps);
        let mut forward = Vec::with_capacity(paths.len());
        let mut reverse = Vec::with_capacity(paths.len());
        for (i, spec) in paths.iter().enumerate() {
            let path = u16::try_from(i).expect("at most 65 536 paths");
            let fwd = net.add_link(spec.link_config());
            let rev = net.add_link(spec.link_config());
            net.set_route(a, path, b, &[fwd]);
            net.set_route(b, path, a, &[rev]);
            forward.push(fwd);
            reverse.push(rev);
        }
        Pair {
            net,
            a,
            b,
            forward,
            reverse,
        }
    }

    /// One [`Network::step`]: jumps to the next wake-up and processes it. Returns
    /// false when nothing is pending.
    pub fn drive(&mut self) -> bool {
        self.net.step()
    }
}
