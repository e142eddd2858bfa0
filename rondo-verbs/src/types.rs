//! Work requests, work completions, attributes and counters, in ibverbs' vocabulary.

use crate::mr::MemoryRegion;
use rondo_proto::{Duration, FlowConfig};
use rondo_ud::HostProfile;

/// Access rights of a memory region (`IBV_ACCESS_*`). Local read is always allowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessFlags(u32);

impl AccessFlags {
    /// No remote access, no local writes by the transport.
    pub const NONE: AccessFlags = AccessFlags(0);
    /// The transport may write into the region (receives, READ responses).
    pub const LOCAL_WRITE: AccessFlags = AccessFlags(1);
    /// Peers may RDMA WRITE into the region.
    pub const REMOTE_WRITE: AccessFlags = AccessFlags(2);
    /// Peers may RDMA READ from the region.
    pub const REMOTE_READ: AccessFlags = AccessFlags(4);
    /// Every flag.
    pub const ALL: AccessFlags = AccessFlags(7);

    /// True when every flag of `other` is set in `self`.
    pub const fn contains(self, other: AccessFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl core::ops::BitOr for AccessFlags {
    type Output = AccessFlags;
    fn bitor(self, rhs: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 | rhs.0)
    }
}

/// One scatter/gather entry (`ibv_sge`): `len` bytes at virtual address `addr` of
/// the region named by `lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address (from [`MemoryRegion::addr`] plus an offset).
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// Local key of the region.
    pub lkey: u32,
}

impl Sge {
    /// `len` bytes at `offset` in `mr`.
    pub fn new(mr: &MemoryRegion, offset: usize, len: u32) -> Sge {
        Sge {
            addr: mr.addr().wrapping_add(offset as u64),
            len,
            lkey: mr.lkey(),
        }
    }
}

/// Where an RDMA operation acts at the peer (`wr.rdma`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key of the peer's region.
    pub rkey: u32,
}

/// Operation of a send work request (`IBV_WR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opcode {
    /// Two-sided send: consumes a receive at the peer.
    Send,
    /// Send with 32-bit immediate data.
    SendWithImm,
    /// One-sided write into the peer's region.
    RdmaWrite,
    /// Write that also consumes a receive at the peer and delivers the immediate.
    RdmaWriteWithImm,
    /// One-sided read from the peer's region into the local scatter list.
    RdmaRead,
}

/// A send work request (`ibv_send_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub opcode: Opcode,
    /// Local buffers: gathered for SEND/WRITE, scattered into for READ.
    pub sg_list: Vec<Sge>,
    /// Remote address and key; required for RDMA operations, refused otherwise.
    pub remote: Option<RemoteAddr>,
    /// Immediate data; required for the `*WithImm` opcodes, refused otherwise.
    pub imm: Option<u32>,
    /// Whether a successful completion is reported (errors always are).
    pub signaled: bool,
    /// SEND and WRITE_WITH_IMM: the receive completion at the peer fires a
    /// solicited-only notification (`IBV_SEND_SOLICITED`,
    /// [`CompletionQueue::arm_notify_solicited`](crate::CompletionQueue::arm_notify_solicited)).
    pub solicited: bool,
}

impl SendWr {
    /// A signaled SEND of `sg_list`.
    pub fn send(wr_id: u64, sg_list: Vec<Sge>) -> SendWr {
        SendWr {
            wr_id,
            opcode: Opcode::Send,
            sg_list,
            remote: None,
            imm: None,
            signaled: true,
            solicited: false,
        }
    }
    /// A signaled RDMA WRITE of `sg_list` to `remote`.
    pub fn write(wr_id: u64, sg_list: Vec<Sge>, remote: RemoteAddr) -> SendWr {
        SendWr {
            opcode: Opcode::RdmaWrite,
            remote: Some(remote),
            ..SendWr::send(wr_id, sg_list)
        }
    }
    /// A signaled RDMA READ from `remote` into `sg_list`.
    pub fn read(wr_id: u64, sg_list: Vec<Sge>, remote: RemoteAddr) -> SendWr {
        SendWr {
            opcode: Opcode::RdmaRead,
            remote: Some(remote),
            ..SendWr::send(wr_id, sg_list)
        }
    }
    /// The same request with immediate data `imm` (SEND becomes SEND_WITH_IMM,
    /// WRITE becomes WRITE_WITH_IMM).
    pub fn with_imm(mut self, imm: u32) -> SendWr {
        self.opcode = match self.opcode {
            Opcode::Send => Opcode::SendWithImm,
            Opcode::RdmaWrite => Opcode::RdmaWriteWithImm,
            other => other,
        };
        self.imm = Some(imm);
        self
    }
    /// The same request, unsignaled.
    pub fn unsignaled(mut self) -> SendWr {
        self.signaled = false;
        self
    }
    /// Bytes in the scatter/gather list.
    pub fn total_len(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.len)).sum()
    }
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where an incoming SEND's bytes are scattered, in order.
    pub sg_list: Vec<Sge>,
}

/// Status of a work completion (`IBV_WC_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcStatus {
    /// Success.
    Success,
    /// Local length error: the message is larger than the receive buffers, or
    /// larger than the largest message.
    LocLenErr,
    /// Local protection error: bad lkey, access outside the region, or a region
    /// without `LOCAL_WRITE` as a destination.
    LocProtErr,
    /// The peer refused a WRITE or READ: outside its region, bad rkey, or no access flag.
    RemAccessErr,
    /// The peer found the request invalid (e.g. larger than its receive buffers).
    RemInvReq,
    /// The peer failed to carry out a valid request (its receive buffer had a bad lkey).
    RemOpErr,
    /// The peer had no receive posted, `rnr_retry` times in a row.
    RnrRetryExcErr,
    /// The transport gave up: no progress after `retry_limit` timeouts (peer gone).
    RetryExcErr,
    /// The QP went to the error state before this request completed.
    WrFlushErr,
}

/// What completed (`IBV_WC_*` opcodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcOpcode {
    /// A SEND or SEND_WITH_IMM.
    Send,
    /// An RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A receive consumed by a SEND.
    Recv,
    /// A receive consumed by a WRITE_WITH_IMM.
    RecvRdmaWithImm,
}

/// A work completion (`ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes transferred (receives: bytes placed; READ: bytes read).
    pub byte_len: u64,
    /// Immediate data of a SEND_WITH_IMM / WRITE_WITH_IMM.
    pub imm: Option<u32>,
    /// The local QP number.
    pub qp_num: u32,
}

impl Default for WorkCompletion {
    fn default() -> Self {
        WorkCompletion {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm: None,
            qp_num: 0,
        }
    }
}

/// An error the transport reports outside any work request (`ibv_get_async_event`);
/// taken with [`Context::poll_async_event`](crate::Context::poll_async_event).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AsyncEvent {
    /// A completion queue overran and is in error (`IBV_EVENT_CQ_ERR`): a completion
    /// arrived while it held its depth of entries and was lost.
    CqError {
        /// The CQ's [`handle`](crate::CompletionQueue::handle).
        cq: u32,
    },
    /// A queue pair went to the error state on its own (`IBV_EVENT_QP_FATAL`): it
    /// completes on a CQ that overran. Its work requests are flushed.
    QpFatal {
        /// The QP's number.
        qp_num: u32,
    },
}

/// State of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QpState {
    /// Created, not connected: receives may be posted, sends may not.
    Init,
    /// Connected: ready to send and receive.
    Rts,
    /// Failed: every outstanding request was flushed; new ones complete flushed.
    Error,
}

/// Context attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextAttr {
    /// Bytes of the NIC-level reorder buffer shared by every QP of the context.
    pub reorder_buffer_bytes: usize,
    /// Largest MTU of the context's QPs (the reorder buffer's slot size follows it).
    pub max_mtu: usize,
    /// Seed of the `mem` backend's keys and QP numbers (real backends use OS randomness).
    pub seed: u64,
}

impl Default for ContextAttr {
    fn default() -> Self {
        ContextAttr {
            reorder_buffer_bytes: 4 << 20,
            max_mtu: 9000,
            seed: 1,
        }
    }
}

/// Queue pair attributes (`ibv_qp_init_attr` plus the transport's own).
#[derive(Clone, Debug, PartialEq)]
pub struct QpInitAttr {
    /// Send queue depth: outstanding send work requests (signaled or not).
    pub max_send_wr: usize,
    /// Receive queue depth.
    pub max_recv_wr: usize,
    /// Largest scatter/gather list.
    pub max_sge: usize,
    /// Logical paths the QP sprays over (the peer must use the same count).
    pub paths: u16,
    /// Largest datagram (engine header included); the peer must use the same.
    pub mtu: usize,
    /// Receiver-not-ready retries before `RnrRetryExcErr`; 7 means "forever" as in ibverbs.
    pub rnr_retry: u8,
    /// Wait before a request refused for lack of a receive is sent again.
    pub rnr_timer: Duration,
    /// Local ACK timeout, as ibverbs' `timeout`: 4.096 us x 2^`timeout` without
    /// an answer to the oldest request counts one retry (0: wait forever; values
    /// above 31 count as 31).
    pub timeout: u8,
    /// Timeouts in a row after the first one before the oldest request completes
    /// with `RetryExcErr` and the QP goes to the error state (ibverbs' `retry_cnt`).
    pub retry_cnt: u8,
    /// Engine parameters; `paths`, `mtu`, `seed`, `line_rate_bps`, `initial_psn` and the
    /// token are set by the QP.
    pub flow: FlowConfig,
    /// Datagram authentication on real backends (`udp`, `verbs`): an X25519 key
    /// agreed through the descriptors, a tag and a replay window on every
    /// datagram (`docs/wire.md`, "Authentication trailer"). Both sides must use
    /// the same (checked at `connect`). The `mem` fabric always uses
    /// `AuthMode::None` (its runs stay deterministic and identical to before).
    pub auth: rondo_proto::auth::AuthMode,
}

impl QpInitAttr {
    /// Attributes for QPs on the `udp` backend: `paths` paths, 9000-byte MTU, and
    /// the engine settings for host stacks ([`HostProfile::HOST_STACK`]: no pacing
    /// or probing, a 500 us base RTT, a 25 ms RTO floor, 8 retries, early recovery
    /// after 1024 later packets).
    #[cfg(target_os = "linux")]
    pub fn udp(paths: u16) -> QpInitAttr {
        QpInitAttr {
            paths,
            mtu: 9000,
            flow: HostProfile::HOST_STACK.flow_config(paths),
            ..QpInitAttr::default()
        }
    }
}

impl QpInitAttr {
    /// Attributes for QPs on the `verbs` backend: `paths` paths, datagrams of `mtu`
    /// bytes (at most the port's active MTU, 256 to 4096), and the engine settings
    /// for NICs ([`HostProfile::NIC`]: the host stack's, with the paper's early
    /// recovery after 4 later packets).
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    pub fn verbs(paths: u16, mtu: usize) -> QpInitAttr {
        QpInitAttr {
            paths,
            mtu,
            flow: FlowConfig {
                mtu,
                ..HostProfile::NIC.flow_config(paths)
            },
            ..QpInitAttr::default()
        }
    }
}

impl QpInitAttr {
    /// The local ACK timeout, `None` for "forever" (`timeout` 0).
    pub fn ack_timeout(&self) -> Option<Duration> {
        (self.timeout != 0).then(|| Duration::from_ns(4096u64 << self.timeout.min(31)))
    }
}

impl Default for QpInitAttr {
    fn default() -> Self {
        QpInitAttr {
            max_send_wr: 128,
            max_recv_wr: 128,
            max_sge: 8,
            paths: 4,
            mtu: 4096,
            rnr_retry: 7,
            rnr_timer: Duration::from_us(10),
            timeout: 14,
            retry_cnt: 7,
            flow: FlowConfig::default(),
            auth: rondo_proto::auth::AuthMode::default(),
        }
    }
}

/// Counters of one queue pair, transport and verbs layer together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QpStats {
    /// Data packets retransmitted by the engine.
    pub retx_packets: u64,
    /// Data packets sent, retransmissions included.
    pub data_packets_sent: u64,
    /// Data packets sent with their payload straight from where it lies (the
    /// region, by address, on the UDP backend) instead of a copy.
    pub payloads_by_reference: u64,
    /// Largest OOD seen by this QP's receiver (packets).
    pub ood_max: u64,
    /// 99th percentile of the receiver's OOD.
    pub ood_p99: u64,
    /// Average of the receiver's OOD over its data packets.
    pub ood_avg: f64,
    /// Data packets received (duplicates included).
    pub data_packets_received: u64,
    /// Payload bytes delivered in order by the engine (verbs headers included).
    pub bytes_delivered: u64,
    /// Data packets the receiver dropped: PSN too far outside the window.
    pub dropped_out_of_window: u64,
    /// Data packets the receiver dropped: reorder buffer full.
    pub dropped_buffer_full: u64,
    /// Data packets whose message fields contradicted the stream.
    pub dropped_inconsistent: u64,
    /// Data packets placed straight from the datagram, in PSN order.
    pub placed_in_order: u64,
    /// Of those, packets the datapath had already received at their final place.
    pub placed_in_place: u64,
    /// Data packets that arrived out of order and were placed from the reorder
    /// buffer ("repaired").
    pub placed_repaired: u64,
    /// Payload bytes of requests (SEND, WRITE) copied straight from the datagrams
    /// into memory regions at this responder, without a reassembly buffer.
    pub bytes_placed_direct: u64,
    /// Requests sent (verbs messages, RNR resends included).
    pub requests_sent: u64,
    /// ACK messages sent (one acknowledges every request up to its id).
    pub acks_sent: u64,
    /// Requests refused because no receive was posted (RNR NAKs sent).
    pub rnr_naks_sent: u64,
    /// Requests sent again after an RNR NAK.
    pub rnr_resends: u64,
    /// Incoming requests refused for access or validity (never applied).
    pub requests_refused: u64,
    /// Incoming verbs messages that did not parse or matched nothing (dropped).
    pub bad_messages: u64,
    /// Local ACK timeouts: the oldest request waited `QpInitAttr::timeout` for
    /// an answer (after `retry_cnt` in a row it fails with `RetryExcErr`).
    pub ack_timeouts: u64,
    /// Data packets received again (duplicates: retransmissions that crossed,
    /// or replayed datagrams), answered and dropped by the engine.
    pub duplicates_received: u64,
    /// Engine ACKs and NAKs refused or partly ignored as impossible (forged,
    /// replayed or corrupt): referring to nothing sent, a probe ACK for no
    /// outstanding probe, a highest PSN or a cumulative ACK past what was sent.
    pub rejected_acks: u64,
    /// Probes the engine sent: capacity probes, and probes of paths it took out
    /// of rotation.
    pub probes_sent: u64,
    /// Probes the peer answered.
    pub probes_acked: u64,
    /// Times a path was taken out of rotation (it rejoins when a probe on it is
    /// answered).
    pub path_downs: u64,
}

/// Counters of a context's datagram input: what was dropped before any QP saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextStats {
    /// Datagrams handed to the engine.
    pub datagrams: u64,
    /// Datagrams that did not parse (truncated, bad version, unknown type).
    pub malformed: u64,
    /// Datagrams for no QP of this context (wrong QP number).
    pub unknown_qp: u64,
    /// Datagrams whose connection token was missing or wrong.
    pub bad_token: u64,
    /// Incoming messages for a QP that was destroyed.
    pub for_destroyed_qp: u64,
    /// `udp` fault injection: datagrams dropped on arrival.
    pub fault_dropped: u64,
    /// `udp` fault injection: datagrams held back and delivered after a later one.
    pub fault_reordered: u64,
    /// Authentication: datagrams dropped because their tag did not match (forged,
    /// mangled, another key or mode).
    pub auth_bad_tag: u64,
    /// Authentication: datagrams dropped as replays (sequence number seen or
    /// below the window).
    pub auth_replayed: u64,
    /// Authentication: datagrams dropped as too short for the trailer.
    pub auth_truncated: u64,
    /// Authentication: connections whose datagrams are sealed now (a gauge: a
    /// destroyed QP's key goes when its connection does, after it stopped refusing
    /// requests).
    pub auth_flows: u64,
    /// `udp`, `verbs`: flows the datapath has a route for (a gauge: a destroyed
    /// QP's route goes with its connection, as its key).
    pub routes: u64,
    /// `udp`, `verbs` with a progress thread: datapath rounds that a thread
    /// polling an empty completion queue ran itself, the progress thread not
    /// being at it (its completion then waits for no other thread).
    pub polled_rounds: u64,
}

/// One device a [`crate::Context`] can open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `mem`, `udp`, or `verbs:<name>` (an RDMA device, `verbs` feature).
    pub name: String,
    /// What it is.
    pub description: &'static str,
}
