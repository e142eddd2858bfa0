//! The attribute sets of a queue pair's state transitions, as plain data, for UD
//! (this datapath's, [`UdTransition`]) and RC (`rondo perf --transport rc` builds
//! perftest's) queue pairs alike.
//!
//! A UD QP goes RESET -> INIT (pkey index, port, qkey) -> RTR (state only: a UD QP
//! has no remote address, the address handle of each send carries it) -> RTS (send
//! PSN). An RC QP goes RESET -> INIT (pkey index, port, access flags) -> RTR (the
//! peer: address vector, path MTU, its QPN and send PSN, responder resources, RNR
//! timer) -> RTS (send PSN, ACK timeout, retry counts, initiator depth). The FFI
//! layer (`sys`) turns a [`QpAttrs`] into `ibv_qp_attr` and its attribute mask one
//! field at a time, so a field that is `None` here is neither written nor in the
//! mask.

/// `IBV_ACCESS_LOCAL_WRITE`: the NIC may write the region (receives, READ data).
pub const ACCESS_LOCAL_WRITE: u32 = 1;
/// `IBV_ACCESS_REMOTE_WRITE`: the peer may RDMA WRITE the region.
pub const ACCESS_REMOTE_WRITE: u32 = 2;
/// `IBV_ACCESS_REMOTE_READ`: the peer may RDMA READ the region.
pub const ACCESS_REMOTE_READ: u32 = 4;

/// `ibv_mtu` code of a path MTU in bytes (RoCE/IB MTUs only).
pub fn mtu_code(bytes: u32) -> Option<u32> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// Bytes of an `ibv_mtu` value (1 = 256 ... 5 = 4096; 0 for anything else).
pub fn mtu_bytes(code: u32) -> u32 {
    match code {
        1..=5 => 128 << code,
        _ => 0,
    }
}

/// A state of a queue pair, in the order it goes through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QpState {
    /// Just created: no work requests accepted.
    Reset,
    /// Initialised: receives can be posted, nothing is received yet.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
}

/// One state transition of a UD QP, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdTransition {
    /// RESET -> INIT.
    Init {
        /// Index into the port's partition-key table (0: the default partition).
        pkey_index: u16,
        /// Physical port number, from 1.
        port: u8,
        /// Queue key datagrams to this QP must carry; chosen per application.
        qkey: u32,
    },
    /// INIT -> RTR.
    Rtr,
    /// RTR -> RTS.
    Rts {
        /// First packet sequence number of the send queue.
        sq_psn: u32,
    },
}

/// Where a connected QP's peer is: the `ah_attr` of RTR (always with a GRH: RoCE
/// needs one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressVector {
    /// The peer's GID.
    pub dgid: [u8; 16],
    /// The peer's LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// Local GID index.
    pub sgid_index: u8,
    /// IP TTL.
    pub hop_limit: u8,
    /// GRH traffic class (DSCP << 2).
    pub traffic_class: u8,
    /// GRH flow label (0: the NIC picks the RoCEv2 UDP source port, one ECMP path).
    pub flow_label: u32,
    /// Service level.
    pub sl: u8,
    /// Local port.
    pub port: u8,
}

/// The attributes one `ibv_modify_qp` call sets; `None` fields are left out of the
/// attribute mask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrs {
    /// The new state (always set).
    pub state: Option<QpState>,
    /// INIT: partition-key index.
    pub pkey_index: Option<u16>,
    /// INIT: port number.
    pub port: Option<u8>,
    /// INIT (UD): queue key.
    pub qkey: Option<u32>,
    /// INIT (RC): what the peer may do to our regions ([`ACCESS_REMOTE_WRITE`], ...).
    pub access: Option<u32>,
    /// RTR (RC): the peer's address.
    pub av: Option<AddressVector>,
    /// RTR (RC): path MTU (`ibv_mtu` code, [`mtu_code`]).
    pub path_mtu: Option<u32>,
    /// RTR (RC): the peer's QP number.
    pub dest_qpn: Option<u32>,
    /// RTR (RC): the first PSN the peer sends (its send PSN).
    pub rq_psn: Option<u32>,
    /// RTR (RC): READs the peer may have outstanding at us (responder resources).
    pub max_dest_rd_atomic: Option<u8>,
    /// RTR (RC): RNR NAK timer code (12: 0.64 ms).
    pub min_rnr_timer: Option<u8>,
    /// RTS: send-queue PSN (24 bits).
    pub sq_psn: Option<u32>,
    /// RTS (RC): ACK timeout code (4.096 us x 2^timeout).
    pub timeout: Option<u8>,
    /// RTS (RC): transport retries before `IBV_WC_RETRY_EXC_ERR`.
    pub retry_cnt: Option<u8>,
    /// RTS (RC): RNR retries (7: forever).
    pub rnr_retry: Option<u8>,
    /// RTS (RC): READs we may have outstanding (initiator depth).
    pub max_rd_atomic: Option<u8>,
}

impl UdTransition {
    /// The state this transition starts from.
    pub fn from_state(self) -> QpState {
        match self {
            UdTransition::Init { .. } => QpState::Reset,
            UdTransition::Rtr => QpState::Init,
            UdTransition::Rts { .. } => QpState::Rtr,
        }
    }

    /// The state this transition leads to.
    pub fn to_state(self) -> QpState {
        match self {
            UdTransition::Init { .. } => QpState::Init,
            UdTransition::Rtr => QpState::Rtr,
            UdTransition::Rts { .. } => QpState::Rts,
        }
    }

    /// The attributes the `ibv_modify_qp` call of this transition sets.
    pub fn attrs(self) -> QpAttrs {
        let state = Some(self.to_state());
        match self {
            UdTransition::Init {
                pkey_index,
                port,
                qkey,
            } => QpAttrs {
                state,
                pkey_index: Some(pkey_index),
                port: Some(port),
                qkey: Some(qkey),
                ..QpAttrs::default()
            },
            UdTransition::Rtr => QpAttrs {
                state,
                ..QpAttrs::default()
            },
            UdTransition::Rts { sq_psn } => QpAttrs {
                state,
                sq_psn: Some(sq_psn & 0xFF_FFFF),
                ..QpAttrs::default()
            },
        }
    }

    /// The three transitions that bring a new UD QP from RESET to RTS, in order.
    pub fn bring_up(port: u8, qkey: u32, sq_psn: u32) -> [UdTransition; 3] {
        [
            UdTransition::Init {
                pkey_index: 0,
                port,
                qkey,
            },
            UdTransition::Rtr,
            UdTransition::Rts { sq_psn },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bring_up_walks_reset_init_rtr_rts() {
        let steps = UdTransition::bring_up(1, 0x1111_2222, 0x1234_5678);
        let mut state = QpState::Reset;
        for t in steps {
            assert_eq!(t.from_state(), state);
            state = t.to_state();
            assert_eq!(t.attrs().state, Some(state));
        }
        assert_eq!(state, QpState::Rts);
    }

    #[test]
    fn init_sets_pkey_port_qkey_only() {
        let a = UdTransition::Init {
            pkey_index: 0,
            port: 1,
            qkey: 0x1111_2222,
        }
        .attrs();
        assert_eq!(
            a,
            QpAttrs {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                qkey: Some(0x1111_2222),
                ..QpAttrs::default()
            }
        );
    }

    #[test]
    fn mtu_codes_and_bytes_are_inverse_for_roce_mtus() {
        for b in [256, 512, 1024, 2048, 4096] {
            assert_eq!(mtu_bytes(mtu_code(b).unwrap()), b);
        }
        assert_eq!((mtu_code(1500), mtu_bytes(9), mtu_bytes(0)), (None, 0, 0));
    }

    #[test]
    fn rtr_sets_the_state_only_and_rts_the_send_psn() {
        assert_eq!(
            UdTransition::Rtr.attrs(),
            QpAttrs {
                state: Some(QpState::Rtr),
                ..QpAttrs::default()
            }
        );
        let rts = UdTransition::Rts {
            sq_psn: 0xAB12_3456,
        }
        .attrs();
        assert_eq!(rts.state, Some(QpState::Rts));
        assert_eq!(rts.sq_psn, Some(0x12_3456), "PSNs are 24 bits");
        assert_eq!((rts.qkey, rts.port, rts.pkey_index), (None, None, None));
    }
}
