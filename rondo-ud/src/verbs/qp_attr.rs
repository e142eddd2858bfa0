//! The attribute sets of a UD queue pair's state transitions, as plain data.
//!
//! A UD QP goes RESET -> INIT (pkey index, port, qkey) -> RTR (state only: a UD QP
//! has no remote address, the address handle of each send carries it) -> RTS (send
//! PSN). [`UdTransition::attrs`] says which attributes each step sets; the FFI layer
//! turns a [`QpAttrs`] into `ibv_qp_attr` and its attribute mask one field at a time,
//! so a field that is `None` here is neither written nor in the mask.

/// A state of a queue pair, in the order a UD QP goes through them.
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

/// The attributes one `ibv_modify_qp` call sets; `None` fields are left out of the
/// attribute mask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrs {
    /// The new state (always set).
    pub state: Option<QpState>,
    /// Partition-key index.
    pub pkey_index: Option<u16>,
    /// Port number.
    pub port: Option<u8>,
    /// Queue key.
    pub qkey: Option<u32>,
    /// Send-queue PSN (24 bits).
    pub sq_psn: Option<u32>,
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
                sq_psn: None,
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
                sq_psn: None,
            }
        );
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
