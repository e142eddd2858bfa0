//! The 40-byte Global Routing Header in front of every UD receive.
//!
//! A UD receive buffer starts with 40 bytes the NIC fills with the packet's GRH
//! (whether or not one was on the wire, `IBV_WC_GRH` says which): for InfiniBand,
//! RoCE v1 and RoCEv2 over IPv6 it is laid out as an IPv6 header; for RoCEv2 over
//! IPv4 the first 20 bytes are undefined and bytes 20..40 hold the IPv4 header.
//! The completion's `byte_len` counts these 40 bytes.

use thiserror::Error;

/// Bytes of the GRH at the start of every UD receive buffer.
pub const GRH_LEN: usize = 40;

/// A receive completion that cannot hold a GRH and a datagram.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum GrhError {
    /// `byte_len` is shorter than the GRH.
    #[error("receive of {0} bytes is shorter than the 40-byte GRH: a receive buffer without GRH room, or a driver bug")]
    Short(usize),
    /// `byte_len` exceeds the buffer the receive was posted with.
    #[error("completion says {byte_len} bytes but the receive buffer has {buffer}: post receives with MTU + 40 bytes")]
    Overrun {
        /// The completion's byte count.
        byte_len: usize,
        /// The buffer's length.
        buffer: usize,
    },
}

/// The datagram of a receive: `buf` is the posted buffer, `byte_len` the
/// completion's byte count (GRH included).
pub fn strip_grh(buf: &[u8], byte_len: usize) -> Result<&[u8], GrhError> {
    if byte_len < GRH_LEN {
        return Err(GrhError::Short(byte_len));
    }
    buf.get(GRH_LEN..byte_len).ok_or(GrhError::Overrun {
        byte_len,
        buffer: buf.len(),
    })
}

/// The traffic-class byte (DSCP and ECN) of a received GRH: the IPv6 traffic
/// class, or for RoCEv2 over IPv4 the TOS of the IPv4 header in bytes 20..40.
/// `None` when neither layout is recognised.
pub fn traffic_class(grh: &[u8]) -> Option<u8> {
    let grh = grh.get(..GRH_LEN)?;
    if grh[20] >> 4 == 4 && grh[20] & 0x0F == 5 {
        return Some(grh[21]); // IPv4 header with IHL 5 in the second half
    }
    if grh[0] >> 4 == 6 {
        return Some((grh[0] << 4) | (grh[1] >> 4));
    }
    None
}

/// True when the received GRH carries ECN Congestion Experienced.
pub fn ecn_ce(grh: &[u8]) -> bool {
    traffic_class(grh).is_some_and(|tc| tc & 0b11 == 0b11)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_forty_bytes() {
        let mut buf = vec![0xEE; GRH_LEN];
        buf.extend_from_slice(b"rondo header and payload");
        buf.extend_from_slice(&[0; 16]); // unused tail of the receive buffer
        let n = GRH_LEN + 24;
        assert_eq!(strip_grh(&buf, n).unwrap(), b"rondo header and payload");
        assert_eq!(strip_grh(&buf, GRH_LEN).unwrap(), b"");
        assert_eq!(strip_grh(&buf, 39), Err(GrhError::Short(39)));
        assert_eq!(
            strip_grh(&buf, buf.len() + 1),
            Err(GrhError::Overrun {
                byte_len: buf.len() + 1,
                buffer: buf.len()
            })
        );
    }

    #[test]
    fn reads_ecn_from_ipv6_and_ipv4_layouts() {
        // IPv6: version 6, traffic class 0x6B (DSCP 26, ECN CE).
        let mut v6 = [0u8; GRH_LEN];
        v6[0] = 0x60 | (0x6B >> 4);
        v6[1] = (0x6B & 0x0F) << 4;
        assert_eq!(traffic_class(&v6), Some(0x6B));
        assert!(ecn_ce(&v6));
        // RoCEv2 over IPv4: IPv4 header at byte 20, TOS 0x6A (ECT0, not CE).
        let mut v4 = [0u8; GRH_LEN];
        v4[20] = 0x45;
        v4[21] = 0x6A;
        assert_eq!(traffic_class(&v4), Some(0x6A));
        assert!(!ecn_ce(&v4));
        v4[21] = 0x6B;
        assert!(ecn_ce(&v4));
        assert_eq!(traffic_class(&[0u8; GRH_LEN]), None);
        assert_eq!(traffic_class(&[0x60; 10]), None, "too short");
    }

    proptest::proptest! {
        /// Any buffer and completion length give a datagram inside the buffer
        /// or a typed error, never a panic.
        #[test]
        fn stripping_never_panics(len in 0usize..200, byte_len in 0usize..300) {
            let buf = vec![0x45u8; len];
            match strip_grh(&buf, byte_len) {
                Ok(d) => proptest::prop_assert_eq!(d.len(), byte_len - GRH_LEN),
                Err(GrhError::Short(n)) => proptest::prop_assert!(n < GRH_LEN),
                Err(GrhError::Overrun { buffer, .. }) => proptest::prop_assert!(byte_len > buffer),
            }
            let _ = traffic_class(&buf);
        }
    }
}
