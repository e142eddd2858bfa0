//! Simulator configuration: packet size, NIC reorder buffer, switch queues, ECN, PFC.

use crate::error::{config_err, SimError};

/// ECN marking at switch data queues (RED-like, as DCQCN uses it): a data packet
/// arriving at a data queue holding q bytes is marked Congestion Experienced with
/// probability 0 below `kmin`, `pmax * (q - kmin) / (kmax - kmin)` between, 1 at or
/// above `kmax`. The thresholds are given for a 100 Gbit/s port and scale linearly
/// with the port's rate.
#[derive(Clone, Debug, PartialEq)]
pub struct EcnConfig {
    /// Kmin at 100 Gbit/s, bytes (default 100 KB).
    pub kmin_bytes: u64,
    /// Kmax at 100 Gbit/s, bytes (default 400 KB).
    pub kmax_bytes: u64,
    /// Marking probability at Kmax (default 0.2).
    pub pmax: f64,
}

impl Default for EcnConfig {
    fn default() -> Self {
        EcnConfig {
            kmin_bytes: 100 * 1024,
            kmax_bytes: 400 * 1024,
            pmax: 0.2,
        }
    }
}

/// Priority flow control on the data class: when the data bytes a switch holds that
/// arrived through one ingress link exceed `xoff_bytes`, that link's sender (the
/// upstream switch port or host NIC) stops starting data packets; it resumes when
/// they fall below `xon_bytes`. Pause and resume take effect at once (the pause
/// frame's own propagation is not modelled), so `xoff_bytes` plus one link's
/// bandwidth-delay product must stay below the data queue limit.
#[derive(Clone, Debug, PartialEq)]
pub struct PfcConfig {
    /// Pause threshold per ingress link, bytes.
    pub xoff_bytes: u64,
    /// Resume threshold per ingress link, bytes (below `xoff_bytes`).
    pub xon_bytes: u64,
}

impl Default for PfcConfig {
    fn default() -> Self {
        PfcConfig {
            xoff_bytes: 256 * 1024,
            xon_bytes: 128 * 1024,
        }
    }
}

/// How a switch picks among the equal-cost next hops towards a host. Every mode
/// skips failed links; switches of the parallel-path testbeds route by logical
/// path whatever the mode (a parallel path is its own route).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Routing {
    /// A hash of the packet's key (its flow and logical path) and the switch's salt:
    /// one route per (flow, path), as a switch without Rondo's program hashes
    /// the UDP source port. The default of the library; a scenario's default
    /// for every transport but `rondo` (which steers) and `ar` (adaptive).
    #[default]
    Ecmp,
    /// A uniformly random next hop per packet (from the simulator's seeded RNG).
    Spray,
    /// The next hop whose egress data queue holds the fewest bytes, ties broken at
    /// random: switch-local adaptive routing.
    Adaptive,
    /// By logical path, as Rondo's switch program steers by UDP source port
    /// (`p4/`, `rondo fabric`): the flow's logical paths take distinct
    /// equal-cost routes, none shared while there are no more logical paths than
    /// routes, and as evenly as the counts allow when there are more (16 logical
    /// paths over 4 routes: 4 on each). A packet's route is the digits of its
    /// path index plus a per-flow offset, in the mixed radix of the fan-outs it
    /// meets: each switch with `n` equal-cost next hops takes the next digit (its
    /// value mod `n`) and passes the quotient on. The offset (a hash of the flow)
    /// spreads the flows that use fewer logical paths than there are routes.
    /// A scenario's default for `rondo`: the fabric Rondo is built for, as its
    /// probe queue is (docs/engine.md "Steered routes").
    Steer,
}

impl Routing {
    /// The name scenario files write.
    pub fn name(self) -> &'static str {
        match self {
            Routing::Ecmp => "ecmp",
            Routing::Spray => "spray",
            Routing::Adaptive => "adaptive",
            Routing::Steer => "steer",
        }
    }
}

/// Output-queued switch configuration, the same for every switch.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchConfig {
    /// Shared buffer of a switch, bytes, over all its ports and classes.
    pub buffer_bytes: u64,
    /// Drop threshold of one port's data class (and of its control class), bytes.
    pub data_queue_limit_bytes: u64,
    /// Drop threshold of one port's probe class, in MTU-sized probes. The paper asks
    /// for a small one (§4.2.2) without a number; 2 probes is what [`crate::pair::LinkConfig`]
    /// and the P4 program use.
    pub probe_queue_limit_packets: u32,
    /// ECN marking of data packets; `None` disables it.
    pub ecn: Option<EcnConfig>,
    /// PFC on the data class; `None` (default) means lossy queues.
    pub pfc: Option<PfcConfig>,
    /// Probability that a switch drops a packet it forwards, at every switch egress
    /// (random loss, as from corruption: every class; 0 by default). Seeded.
    pub loss: f64,
    /// Next-hop choice among equal-cost links (default: ECMP hashing; scenarios
    /// steer Rondo's paths, `sim/src/scenario/run.rs`).
    pub routing: Routing,
    /// Drop every NAK a switch forwards (default off): the paper's App. A
    /// testbed does this so that a ConnectX-7 selective-repeat receiver keeps
    /// out-of-order packets without its sender resending the hole each time.
    pub drop_naks: bool,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer_bytes: 32 << 20,
            data_queue_limit_bytes: 8 << 20,
            probe_queue_limit_packets: 2,
            ecn: Some(EcnConfig::default()),
            pfc: None,
            loss: 0.0,
            routing: Routing::Ecmp,
            drop_naks: false,
        }
    }
}

/// Hosts that stop now and then, as a software datapath does when its thread waits
/// for a core: at random times (gaps drawn from an exponential distribution of mean
/// `mean_gap`, each host from its own seeded stream) a host stops for a time drawn
/// uniformly from half to one and a half `length`. While stopped it handles nothing:
/// arriving datagrams wait (as in a socket's receive buffer) and are handled, in
/// arrival order, when it resumes; its timers fire then; it sends nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct HostStalls {
    /// Mean time from the end of one stall to the start of the next.
    pub mean_gap: rondo_proto::time::Duration,
    /// Mean length of a stall.
    pub length: rondo_proto::time::Duration,
}

/// Whole-simulation configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Seed of every random choice (ECMP salts, ECN marks, flow seeds).
    pub seed: u64,
    /// Bytes of a full data packet on the wire, engine header included.
    pub mtu: usize,
    /// Shared reorder buffer of each receiving NIC, bytes (default 1200 KB).
    pub reorder_buffer_bytes: usize,
    /// Switch queues.
    pub switch: SwitchConfig,
    /// Hosts that stall now and then (default: never).
    pub host_stalls: Option<HostStalls>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            mtu: 1500,
            reorder_buffer_bytes: 1200 * 1024,
            switch: SwitchConfig::default(),
            host_stalls: None,
        }
    }
}

impl SimConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<(), SimError> {
        let min_mtu = rondo_proto::wire::DATA_HEADER_LEN + 1;
        if !(min_mtu..=9216).contains(&self.mtu) {
            return Err(config_err("mtu", self.mtu, "49 to 9216 bytes"));
        }
        if let Some(h) = &self.host_stalls {
            if h.mean_gap == rondo_proto::time::Duration::ZERO
                || h.length == rondo_proto::time::Duration::ZERO
            {
                return Err(config_err(
                    "host stalls",
                    format!("gap {:?}, length {:?}", h.mean_gap, h.length),
                    "a gap and a length above 0",
                ));
            }
        }
        let s = &self.switch;
        if s.buffer_bytes < self.mtu as u64 {
            return Err(config_err("switch.buffer_bytes", s.buffer_bytes, ">= mtu"));
        }
        if s.data_queue_limit_bytes < self.mtu as u64 {
            return Err(config_err(
                "switch.data_queue_limit_bytes",
                s.data_queue_limit_bytes,
                ">= mtu",
            ));
        }
        if !(s.loss.is_finite() && (0.0..1.0).contains(&s.loss)) {
            return Err(config_err("switch.loss", s.loss, "a probability in [0, 1)"));
        }
        if let Some(e) = &s.ecn {
            if e.kmin_bytes >= e.kmax_bytes {
                return Err(config_err(
                    "switch.ecn.kmin_bytes",
                    e.kmin_bytes,
                    "< kmax_bytes",
                ));
            }
            if !(e.pmax.is_finite() && (0.0..=1.0).contains(&e.pmax)) {
                return Err(config_err("switch.ecn.pmax", e.pmax, "in [0, 1]"));
            }
        }
        if let Some(p) = &s.pfc {
            if p.xon_bytes >= p.xoff_bytes || p.xoff_bytes == 0 {
                return Err(config_err(
                    "switch.pfc.xon_bytes",
                    p.xon_bytes,
                    "< xoff_bytes, and xoff_bytes > 0",
                ));
            }
        }
        Ok(())
    }
}
