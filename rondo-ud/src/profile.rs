//! How the engine is tuned over each datapath: one [`HostProfile`] per backend,
//! in one place. The paper's settings (`FlowConfig::default()`) are a NIC's running
//! the whole transport in hardware; under a software engine driven in rounds by a
//! thread, a few of them mean something else, and the profile says which and why.
//!
//! | setting | paper | [`HostProfile::HOST_STACK`] (UDP) | [`HostProfile::NIC`] (ibverbs UD) |
//! |---|---|---|---|
//! | base RTT per path | measured minimum | 500 us | 500 us |
//! | RTO floor | 500 us | 25 ms | 25 ms |
//! | retries | 8 | 8 | 8 |
//! | early-recovery threshold | 4 | 1024 | 4 |
//! | pacing | on | off | off |
//! | capacity probing | on | off | off |
//! | forward-delay tolerance of the scheduler's start | 2 us | 300 us | 300 us |
//! | ACKs | one per data packet | one per path and receive round (64 packets, 0 us) | the same |
//! | packets in a row per path (deficit selector) | 1 | 64 | 1 |
//! | a packet overtaken on its own path is lost (after its ACK deadline) | no | yes | yes |
//!
//! What each value rests on (measurements in `docs/udp.md`, `docs/verbs.md`,
//! `docs/perf.md` and `docs/ibverbs.md`):
//!
//! - **Base RTT 500 us.** DESIGN.md: the base RTT must include serialisation; on a
//!   host it must include the host. A packet waits for its batch on the way out
//!   and for the peer's next datapath round on the way in, and so does its ACK; at
//!   10-20 Gb/s a round of 16-64 datagrams per path takes tens to a hundred
//!   microseconds, and a window must cover about two rounds. With the measured
//!   minimum (5-7 us on loopback) the target queueing delay (0.04 T = 0.2 us) is
//!   below the host's timing noise: ARCC cut every path to one packet, 0.8-3 Gb/s.
//!   `rondo perf` on loopback: 250 us 4.4-4.9 Gb/s, 500 us 7.1 (same minutes).
//!   The verbs datapath runs the same engine in the same kind of rounds (WR chains
//!   of 16, completion polls of 64), so the NIC profile keeps it.
//! - **RTO floor 25 ms.** On a loaded host a thread waits for a core for several
//!   scheduler time slices: a 2 ms floor fired 13-94 spurious RTOs in 3 s on a busy
//!   2-core machine, each resending the window and restarting every path from one
//!   packet. The RTO only covers tail losses; losses inside a flow are repaired by
//!   early recovery. The verbs progress thread is such a thread too.
//! - **8 retries** (the paper's): with the doubling backoff from 25 ms, a vanished
//!   peer is reported (`RetryExcErr`) after about 13 s.
//! - **Early recovery after 1024 later PSNs on UDP, 4 on a NIC.** The UDP datapath
//!   sends one path's queue per `sendmmsg` and receives one path's batch per
//!   `recvmmsg`, so on a lossless host a packet is routinely overtaken by a batch of
//!   every other path. With 4, 0.2-1% of the bare engine's packets and 2.5% of
//!   `rondo perf`'s were resent although loopback lost none; with 256, 0.05-0.35%
//!   at 25 Gb/s (OOD up to 2,900); with 1024, 0-22 packets per 3-second run. A UD
//!   queue pair has neither: the engine's datagrams are posted in the order it
//!   made them, one send queue for all paths, and arrive through one completion
//!   queue in the order the NIC received them, so what reorders them is the
//!   fabric, which is what Rondo's scheduler keeps small; the paper's threshold of
//!   4 (0.05% spurious retransmissions, §6.3) applies. With 1024 on a NIC, a loss
//!   in a message of fewer than 1024 packets would wait for the 25 ms RTO. Not yet
//!   measured on a NIC (none was available).
//! - **A packet overtaken on its own path is lost** (`path_order_loss`), once its
//!   path's ACK deadline has passed. Each path is one socket pair, a FIFO, so a
//!   later packet acknowledged on the same path says the earlier one is not
//!   coming, where the threshold of 1024 sees nothing among a few small messages:
//!   over four shaped paths with 8-packet FIFOs (`tools/scripts/shaped-paths.sh`,
//!   `SIZE=4096 LIMIT=8`), 4 KiB WRITEs moved 0.36 of the paths' sum with the
//!   threshold alone (every loss waited for the RTO) and 0.88 with this rule
//!   (Falcon 0.91); on loopback it resent 0-1 packets per 3-second run, as
//!   before (a threshold of 64 resent 3,500-11,000, RACK per path 600-7,800).
//! - **No pacing**: the driver polls every few microseconds and sends whole batches,
//!   so the window alone clocks the flow (with pacing on, set
//!   `FlowConfig::pacing_burst` to 16-64 so that a round can send a batch);
//!   `FlowConfig::default()`'s paced flow moved 2.2-2.6 Gb/s where the profile
//!   moved 5-8.
//! - **No capacity probing**: probes sent up to the line rate cost a software
//!   engine as much CPU as data packets; on UDP there is no switch priority queue to
//!   drop them first either.
//! - **The scheduler starts on forward-delay samples within 300 us** of their
//!   estimate (8 in a row per path), not 2 us: a host stack's delay samples are
//!   taken by a thread that runs in rounds and waits for a core, so they scatter by
//!   tens of microseconds to milliseconds, and one packet's serialisation at the
//!   fabric emulator's rates is 170-340 us. With 2 us the scheduler never started
//!   over UDP (docs/fabric.md): `rondo testbed --hetero`, alternating runs, OOD avg
//!   15.1 / 17.8 and p99 55 / 69 with 300 us against 49.6 / 45.6 and 92 / 108 with
//!   2 us. In the simulator (`sim/scenarios/host-stalls.toml` with path 0's delay
//!   at 4750 us, `--set host.stall_us=0 --set
//!   transport.delay_stable_tolerance_us=300`): OOD avg 7.3, p99 18, against 53.8
//!   and 61 with 2 us. On equal paths the started scheduler skips nothing, so
//!   loopback runs do not change.
//! - **An ACK per path and receive round** (`AckCoalesce { packets: 64, delay: 0 }`,
//!   docs/engine.md "Coalesced ACKs"): a datapath round hands the engine up to a
//!   batch of datagrams per path at one instant and sends after it, so each path's
//!   ACKs of that round go out as one datagram with ACK blocks, and no ACK waits
//!   longer than it did. `rondo perf` on loopback, 4 paths, six alternating pairs
//!   (docs/perf.md, issue 16): the receiver's CPU per GB 0.298 -> 0.281 s at
//!   64 KiB WRITEs and 0.454 -> 0.423 s at 4 KiB, the sender's 0.297 -> 0.257
//!   and 0.484 -> 0.435, goodput 8.99 -> 10.6 and 5.86 -> 6.46 Gb/s (medians).
//!   The verbs datapath runs in the same kind of rounds (completion polls of 64);
//!   not measured on a NIC.
//! - **64 packets in a row per path** (`FlowConfig::path_burst`; the deficit
//!   selector keeps its shares over the runs): the UDP datapath queues, sends
//!   (`sendmmsg`, GSO trains) and receives (`recvmmsg`) each path's datagrams in
//!   batches of 64 (`UdpConfig::batch`), one system call per path and round.
//!   Spread packet by packet over four paths, a round's packets make four
//!   small batches; in runs of 64, one or two full ones: under `strace -c` the
//!   client sent 36.8 data packets per `sendmmsg` against 15.5 (4 KiB WRITEs).
//!   Loopback reorders about as much either way (NIC-level OOD averaging 27-28
//!   against 19-23 at 4 KiB, 54-105 against 83-102 at 64 KiB). `rondo perf client 127.0.0.1 -p PORT
//!   --transport rondo -s SIZE -D 3 --auth none --json`, each build against its
//!   own server, five alternating rounds with `raw-udp` in each (docs/perf.md):
//!   at 4 KiB 17.3 -> 26.8 Gb/s (medians), 0.33 -> 0.51 of `raw-udp`; at 64 KiB
//!   34.1 -> 39.2, 0.70 -> 0.79. Runs of 8, 16 and 32 gave 20-22 Gb/s at 4 KiB,
//!   128-1024 gave 18-22 (runs longer than a batch end mid-batch). A NIC
//!   interleaves the paths in the fabric, where the paper's packet-by-packet
//!   spreading is what keeps queues even, so the NIC profile keeps 1.
//!
//! The two presets merged here disagreed: the datapath's own (`udp::flow_config`,
//! the verbs datapath's) had a 1 ms base RTT, a 2 ms RTO floor, 30 retries and the
//! paper's threshold of 4; the verbs API's had 500 us, 25 ms, 8 and 1024 on both
//! backends. The bare engine over UDP moved 10.4-10.7 Gb/s with 3,800-5,900 resends
//! and up to 13 RTOs with the first, 24-26 Gb/s with 130-3,100 resends and no RTO
//! with the second (`docs/verbs.md`); `rondo perf` measures with the second.

use rondo_proto::time::Duration;
use rondo_proto::{AckCoalesce, FlowConfig};

/// Datagrams the UDP datapath sends and receives per path and round (its
/// default `UdpConfig::batch`): the host-stack profile's ACK coalescing and path
/// runs are sized to it.
pub(crate) const HOST_STACK_BATCH: u16 = 64;

/// The engine settings a datapath needs, applied over the paper's
/// (`FlowConfig::default()`); the module documentation says why each value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostProfile {
    /// Base RTT given to the engine for every path.
    pub base_rtt: Duration,
    /// Smallest retransmission timeout.
    pub rto_min: Duration,
    /// Retransmission timeouts in a row before the connection fails.
    pub retry_limit: u32,
    /// Later PSNs acknowledged before a packet is declared lost.
    pub early_recovery_threshold: u32,
    /// Flow-level pacing.
    pub pacing: bool,
    /// Capacity probing.
    pub probing: bool,
    /// How close a forward-delay sample must be to its estimate to count toward
    /// starting the packet scheduler.
    pub delay_stable_tolerance: Duration,
    /// How the receiver coalesces ACKs.
    pub ack_coalesce: AckCoalesce,
    /// Packets in a row the deficit selector gives one path.
    pub path_burst: u32,
    /// Selective repeat also takes a packet overtaken on its own path for lost
    /// (`FlowConfig::path_order_loss`).
    pub path_order_loss: bool,
}

impl HostProfile {
    /// Over a host stack: the UDP datapath ([`crate::udp`]).
    pub const HOST_STACK: HostProfile = HostProfile {
        base_rtt: Duration::from_us(500),
        rto_min: Duration::from_ms(25),
        retry_limit: 8,
        early_recovery_threshold: 1024,
        pacing: false,
        probing: false,
        delay_stable_tolerance: Duration::from_us(300),
        ack_coalesce: AckCoalesce {
            packets: HOST_STACK_BATCH,
            delay: Duration::ZERO,
        },
        path_burst: HOST_STACK_BATCH as u32,
        path_order_loss: true,
    };

    /// Over a NIC: the ibverbs UD datapath (`verbs`, cargo feature `verbs`).
    pub const NIC: HostProfile = HostProfile {
        early_recovery_threshold: 4,
        path_burst: 1,
        ..HostProfile::HOST_STACK
    };

    /// A flow configuration over `paths` paths: `FlowConfig::default()` with this
    /// profile's settings. Its `mtu` is the default's; set it to what the datapath
    /// carries (`VerbsDatapath::flow_config` does).
    pub fn flow_config(&self, paths: u16) -> FlowConfig {
        self.apply(FlowConfig {
            paths,
            ..FlowConfig::default()
        })
    }

    /// `cfg` with this profile's settings (base RTT for each of its paths).
    pub fn apply(&self, cfg: FlowConfig) -> FlowConfig {
        FlowConfig {
            base_rtt: Some(vec![self.base_rtt; usize::from(cfg.paths)]),
            rto_min: self.rto_min,
            retry_limit: self.retry_limit,
            early_recovery_threshold: self.early_recovery_threshold,
            pacing: self.pacing,
            probing: self.probing,
            delay_stable_tolerance: self.delay_stable_tolerance,
            ack_coalesce: Some(self.ack_coalesce),
            path_burst: self.path_burst,
            path_order_loss: self.path_order_loss,
            ..cfg
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_sets_its_fields_and_keeps_the_papers_others() {
        let p = HostProfile::HOST_STACK;
        let c = p.flow_config(3);
        c.validate().unwrap();
        assert_eq!(c.paths, 3);
        assert_eq!(c.base_rtt, Some(vec![Duration::from_us(500); 3]));
        assert_eq!(
            (c.rto_min, c.retry_limit, c.early_recovery_threshold),
            (Duration::from_ms(25), 8, 1024)
        );
        assert!(!c.pacing && !c.probing);
        assert_eq!(c.delay_stable_tolerance, Duration::from_us(300));
        let acks = c.ack_coalesce.unwrap();
        assert_eq!((acks.packets, acks.delay), (64, Duration::ZERO));
        assert_eq!(c.path_burst, 64);
        assert!(c.path_order_loss && !FlowConfig::default().path_order_loss);
        let paper = FlowConfig::default();
        assert_eq!(
            (c.mtu, c.q0, c.scheduler),
            (paper.mtu, paper.q0, paper.scheduler)
        );
    }

    #[test]
    fn the_nic_profile_differs_from_the_host_stack_in_early_recovery_and_path_bursts() {
        let (h, n) = (HostProfile::HOST_STACK, HostProfile::NIC);
        assert_eq!((n.early_recovery_threshold, n.path_burst), (4, 1));
        assert_eq!(
            HostProfile {
                early_recovery_threshold: h.early_recovery_threshold,
                path_burst: h.path_burst,
                ..n
            },
            h
        );
        let c = n.apply(FlowConfig {
            paths: 2,
            mtu: 4096,
            ..FlowConfig::default()
        });
        assert_eq!(
            (c.mtu, c.early_recovery_threshold, c.path_burst),
            (4096, 4, 1)
        );
        assert_eq!(c.base_rtt.map(|b| b.len()), Some(2));
    }
}
