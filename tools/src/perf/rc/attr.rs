//! The RC queue pair's state transitions and its endpoint record, as plain data.
//!
//! An RC QP goes RESET -> INIT (pkey index, port, access flags) -> RTR (the peer:
//! address vector with its GID, path MTU, its QPN, the PSN it starts sending with,
//! responder resources for READ, the RNR timer) -> RTS (our send PSN, ACK timeout,
//! retry counts, initiator depth for READ). [`bring_up`] says which attributes each
//! step sets, with perftest's values, in the attribute sets of `rondo_ud`'s verbs
//! datapath ([`QpAttrs`] is its `QpAttrs`), which its FFI layer turns into
//! `ibv_qp_attr` and its mask one field at a time, so a `None` is neither written
//! nor in the mask.

use rondo_ud::verbs::qp_attr::{
    mtu_code, AddressVector, QpAttrs, QpState, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
};

/// The settings of a run's RC QPs; defaults are perftest's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcParams {
    /// Local port.
    pub port: u8,
    /// Local GID index.
    pub sgid_index: u8,
    /// Path MTU in bytes (256 to 4096, a power of two).
    pub mtu: u32,
    /// Access granted to the peer.
    pub access: u32,
    /// IP TTL.
    pub hop_limit: u8,
    /// DSCP of the QP's packets (Rondo's data class, 26, so both share a queue).
    pub dscp: u8,
    /// ACK timeout code: 14 (67 ms), perftest's.
    pub timeout: u8,
    /// Transport retries: 7.
    pub retry_cnt: u8,
    /// RNR retries: 7 (forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code: 12.
    pub min_rnr_timer: u8,
    /// Outstanding READs, each way: 16 (ConnectX-7's limit, paper appendix A), at
    /// most what the device allows.
    pub rd_atomic: u8,
}

impl Default for RcParams {
    fn default() -> RcParams {
        RcParams {
            port: 1,
            sgid_index: 3,
            mtu: 4096,
            access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
            hop_limit: 64,
            dscp: 26,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            rd_atomic: 16,
        }
    }
}

/// What a peer needs to connect to one RC QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcEndpoint {
    /// QP number (24 bits).
    pub qpn: u32,
    /// First PSN of its send queue (24 bits).
    pub psn: u32,
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// Path MTU it uses, bytes.
    pub mtu: u32,
    /// GID at its GID index.
    pub gid: [u8; 16],
}

/// An RC endpoint record that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// Not `RCQP` version 1, or the wrong length.
    #[error(
        "not an RC endpoint record (RCQP version 1, 33 bytes): is the peer the same rondo version?"
    )]
    Format,
    /// A field out of range.
    #[error("RC endpoint record: {0}")]
    Field(&'static str),
}

/// Bytes of an encoded [`RcEndpoint`].
pub const RECORD_LEN: usize = 33;

impl RcEndpoint {
    /// `RCQP`, version 1, QPN, PSN (u32 each), LID, MTU (u16 each), GID; big-endian.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut b = Vec::with_capacity(RECORD_LEN);
        b.extend_from_slice(b"RCQP");
        b.push(1);
        b.extend_from_slice(&self.qpn.to_be_bytes());
        b.extend_from_slice(&self.psn.to_be_bytes());
        b.extend_from_slice(&self.lid.to_be_bytes());
        b.extend_from_slice(&(self.mtu as u16).to_be_bytes());
        b.extend_from_slice(&self.gid);
        b
    }

    /// Reads [`Self::to_bytes`]' form; never panics.
    pub fn from_bytes(b: &[u8]) -> Result<RcEndpoint, RecordError> {
        if b.len() != RECORD_LEN || &b[..4] != b"RCQP" || b[4] != 1 {
            return Err(RecordError::Format);
        }
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let e = RcEndpoint {
            qpn: be32(5),
            psn: be32(9),
            lid: u16::from_be_bytes([b[13], b[14]]),
            mtu: u32::from(u16::from_be_bytes([b[15], b[16]])),
            gid: b[17..33].try_into().map_err(|_| RecordError::Format)?,
        };
        if e.qpn > 0xFF_FFFF || e.psn > 0xFF_FFFF {
            return Err(RecordError::Field("QPN or PSN above 24 bits"));
        }
        if mtu_code(e.mtu).is_none() {
            return Err(RecordError::Field(
                "MTU is not 256, 512, 1024, 2048 or 4096",
            ));
        }
        Ok(e)
    }
}

/// The first PSN of a QP's send queue: any 24-bit value works; this one is spread
/// from the QPN so that two runs of the same QPN start alike.
pub fn initial_psn(qpn: u32) -> u32 {
    qpn.wrapping_mul(0x9E37_79B1).rotate_left(7) & 0xFF_FFFF
}

/// The three transitions that connect a new RC QP (in RESET) to `remote`, in order:
/// INIT, RTR, RTS.
pub fn bring_up(p: &RcParams, local_psn: u32, remote: &RcEndpoint) -> [QpAttrs; 3] {
    let init = QpAttrs {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(p.port),
        access: Some(p.access),
        ..QpAttrs::default()
    };
    let rtr = QpAttrs {
        state: Some(QpState::Rtr),
        av: Some(AddressVector {
            dgid: remote.gid,
            dlid: remote.lid,
            sgid_index: p.sgid_index,
            hop_limit: p.hop_limit,
            traffic_class: p.dscp << 2,
            flow_label: 0,
            sl: p.dscp >> 3,
            port: p.port,
        }),
        path_mtu: mtu_code(p.mtu.min(remote.mtu)),
        dest_qpn: Some(remote.qpn & 0xFF_FFFF),
        rq_psn: Some(remote.psn & 0xFF_FFFF),
        max_dest_rd_atomic: Some(p.rd_atomic),
        min_rnr_timer: Some(p.min_rnr_timer),
        ..QpAttrs::default()
    };
    let rts = QpAttrs {
        state: Some(QpState::Rts),
        sq_psn: Some(local_psn & 0xFF_FFFF),
        timeout: Some(p.timeout),
        retry_cnt: Some(p.retry_cnt),
        rnr_retry: Some(p.rnr_retry),
        max_rd_atomic: Some(p.rd_atomic),
        ..QpAttrs::default()
    };
    [init, rtr, rts]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_ud::verbs::qp_attr::mtu_bytes;

    fn remote() -> RcEndpoint {
        RcEndpoint {
            qpn: 0x00AB_CDEF,
            psn: 0x12_3456,
            lid: 0,
            mtu: 4096,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 7],
        }
    }

    #[test]
    fn init_sets_pkey_port_and_remote_access_only() {
        let [init, _, _] = bring_up(&RcParams::default(), 1, &remote());
        assert_eq!(
            init,
            QpAttrs {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                access: Some(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ),
                ..QpAttrs::default()
            }
        );
    }

    #[test]
    fn rtr_names_the_peer_and_its_psn() {
        let p = RcParams {
            sgid_index: 5,
            port: 2,
            ..RcParams::default()
        };
        let [_, rtr, _] = bring_up(&p, 1, &remote());
        assert_eq!(rtr.state, Some(QpState::Rtr));
        assert_eq!(rtr.dest_qpn, Some(0xAB_CDEF));
        assert_eq!(rtr.rq_psn, Some(0x12_3456), "we expect the peer's send PSN");
        assert_eq!(rtr.path_mtu, Some(5), "IBV_MTU_4096");
        assert_eq!(rtr.max_dest_rd_atomic, Some(16));
        assert_eq!(rtr.min_rnr_timer, Some(12));
        let av = rtr.av.expect("RTR carries the address vector");
        assert_eq!(av.dgid, remote().gid);
        assert_eq!((av.sgid_index, av.port, av.hop_limit), (5, 2, 64));
        assert_eq!(
            (av.traffic_class, av.sl),
            (26 << 2, 3),
            "Rondo's data class"
        );
        assert_eq!(av.flow_label, 0, "one ECMP path, chosen by the NIC");
        assert_eq!(
            (rtr.sq_psn, rtr.timeout, rtr.retry_cnt, rtr.access),
            (None, None, None, None)
        );
    }

    #[test]
    fn rts_sets_our_psn_timers_retries_and_read_depth() {
        let [_, _, rts] = bring_up(&RcParams::default(), 0xFF12_3456, &remote());
        assert_eq!(
            rts,
            QpAttrs {
                state: Some(QpState::Rts),
                sq_psn: Some(0x12_3456),
                timeout: Some(14),
                retry_cnt: Some(7),
                rnr_retry: Some(7),
                max_rd_atomic: Some(16),
                ..QpAttrs::default()
            }
        );
    }

    #[test]
    fn path_mtu_is_the_smaller_of_both_sides() {
        let p = RcParams {
            mtu: 1024,
            ..RcParams::default()
        };
        assert_eq!(bring_up(&p, 1, &remote())[1].path_mtu, Some(3));
        let small = RcEndpoint {
            mtu: 512,
            ..remote()
        };
        assert_eq!(
            bring_up(&RcParams::default(), 1, &small)[1].path_mtu,
            Some(2)
        );
        for b in [256, 512, 1024, 2048, 4096] {
            assert_eq!(mtu_bytes(mtu_code(b).unwrap()), b);
        }
        assert_eq!((mtu_code(1500), mtu_bytes(9)), (None, 0));
    }

    #[test]
    fn endpoint_records_round_trip_and_refuse_bad_input() {
        let e = remote();
        let b = e.to_bytes();
        assert_eq!(b.len(), RECORD_LEN);
        assert_eq!(RcEndpoint::from_bytes(&b), Ok(e));
        for cut in 0..b.len() {
            assert_eq!(RcEndpoint::from_bytes(&b[..cut]), Err(RecordError::Format));
        }
        let mut v2 = b.clone();
        v2[4] = 2;
        assert_eq!(RcEndpoint::from_bytes(&v2), Err(RecordError::Format));
        let mut big = b.clone();
        big[5] = 1; // QPN 0x01AB_CDEF
        assert!(matches!(
            RcEndpoint::from_bytes(&big),
            Err(RecordError::Field(_))
        ));
        let odd = RcEndpoint { mtu: 1500, ..e };
        assert!(matches!(
            RcEndpoint::from_bytes(&odd.to_bytes()),
            Err(RecordError::Field(_))
        ));
        assert!(initial_psn(0x1234) <= 0xFF_FFFF);
        assert_ne!(initial_psn(1), initial_psn(2));
    }
}
