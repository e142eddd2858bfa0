//! What two UD endpoints tell each other before they talk (QPN, qkey, GID, LID,
//! MTU, path count), and its exchange over a TCP connection, as perftest does
//! (its default port is 18515).
//!
//! The record is 40 bytes, big-endian: magic `RNDV`, version 1, pad, path count
//! (u16), QPN (u32), qkey (u32), LID (u16), pad (u16), MTU in bytes (u32), GID (16
//! bytes). Both sides write theirs, then read the peer's.

use std::io::{self, Read, Write};
use thiserror::Error;

/// Default TCP port of the endpoint exchange (perftest's).
pub const EXCHANGE_PORT: u16 = 18515;
/// Bytes of an encoded [`EndpointInfo`].
pub const ENDPOINT_INFO_LEN: usize = 40;
const MAGIC: &[u8; 4] = b"RNDV";
const VERSION: u8 = 1;

/// One endpoint's addressing data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointInfo {
    /// UD QP number (24 bits).
    pub qpn: u32,
    /// Queue key the QP accepts.
    pub qkey: u32,
    /// Port GID at the chosen GID index (RoCE: the IP address).
    pub gid: [u8; 16],
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Largest datagram, in bytes (256 to 4096; the port's active MTU or less).
    pub mtu: u32,
    /// Logical paths the endpoint sprays over.
    pub paths: u16,
}

/// An endpoint record that cannot be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// Not a Rondo record.
    #[error("endpoint record does not start with RNDV: the peer is not a Rondo verbs endpoint (or an old perftest)")]
    BadMagic,
    /// Another version.
    #[error("endpoint record version {0}, this build speaks 1: run the same Rondo version on both hosts")]
    BadVersion(u8),
    /// Values out of range.
    #[error("endpoint record field out of range: {0}")]
    BadField(&'static str),
    /// The TCP exchange failed.
    #[error("endpoint exchange over TCP failed: {0} (is the peer listening, and the port open?)")]
    Io(#[from] io::Error),
}

impl EndpointInfo {
    /// The 40-byte record.
    pub fn encode(&self) -> [u8; ENDPOINT_INFO_LEN] {
        let mut b = [0u8; ENDPOINT_INFO_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4] = VERSION;
        b[6..8].copy_from_slice(&self.paths.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.qkey.to_be_bytes());
        b[16..18].copy_from_slice(&self.lid.to_be_bytes());
        b[20..24].copy_from_slice(&self.mtu.to_be_bytes());
        b[24..40].copy_from_slice(&self.gid);
        b
    }

    /// Reads a record; never panics.
    pub fn decode(b: &[u8]) -> Result<EndpointInfo, ExchangeError> {
        let b: &[u8; ENDPOINT_INFO_LEN] = b
            .get(..ENDPOINT_INFO_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(ExchangeError::BadField("record shorter than 40 bytes"))?;
        if &b[0..4] != MAGIC {
            return Err(ExchangeError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(ExchangeError::BadVersion(b[4]));
        }
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let info = EndpointInfo {
            paths: u16::from_be_bytes([b[6], b[7]]),
            qpn: be32(8),
            qkey: be32(12),
            lid: u16::from_be_bytes([b[16], b[17]]),
            mtu: be32(20),
            gid: b[24..40]
                .try_into()
                .map_err(|_| ExchangeError::BadField("gid"))?,
        };
        if info.qpn > 0xFF_FFFF {
            return Err(ExchangeError::BadField("QPN above 24 bits"));
        }
        if !(256..=4096).contains(&info.mtu) {
            return Err(ExchangeError::BadField("MTU outside 256..=4096 bytes"));
        }
        if info.paths == 0 {
            return Err(ExchangeError::BadField("zero paths"));
        }
        Ok(info)
    }

    /// Sends this record over `stream` and reads the peer's.
    pub fn exchange<S: Read + Write>(&self, stream: &mut S) -> Result<EndpointInfo, ExchangeError> {
        stream.write_all(&self.encode())?;
        stream.flush()?;
        let mut buf = [0u8; ENDPOINT_INFO_LEN];
        stream.read_exact(&mut buf)?;
        EndpointInfo::decode(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn info(qpn: u32) -> EndpointInfo {
        EndpointInfo {
            qpn,
            qkey: 0x1111_2222,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1],
            lid: 0,
            mtu: 4096,
            paths: 8,
        }
    }

    #[test]
    fn round_trips_and_rejects_bad_records() {
        let a = info(0x12_3456);
        assert_eq!(EndpointInfo::decode(&a.encode()).unwrap(), a);
        let mut b = a.encode();
        b[0] = b'X';
        assert!(matches!(
            EndpointInfo::decode(&b),
            Err(ExchangeError::BadMagic)
        ));
        let mut b = a.encode();
        b[4] = 2;
        assert!(matches!(
            EndpointInfo::decode(&b),
            Err(ExchangeError::BadVersion(2))
        ));
        assert!(matches!(
            EndpointInfo::decode(&b[..39]),
            Err(ExchangeError::BadField(_))
        ));
        let bad_mtu = EndpointInfo { mtu: 9000, ..a };
        assert!(matches!(
            EndpointInfo::decode(&bad_mtu.encode()),
            Err(ExchangeError::BadField(_))
        ));
        let odd_mtu = EndpointInfo { mtu: 1500, ..a };
        assert_eq!(
            EndpointInfo::decode(&odd_mtu.encode()).unwrap(),
            odd_mtu,
            "a datagram size below the port MTU"
        );
        let bad_qpn = EndpointInfo { qpn: 1 << 24, ..a };
        assert!(matches!(
            EndpointInfo::decode(&bad_qpn.encode()),
            Err(ExchangeError::BadField(_))
        ));
    }

    #[test]
    fn exchanges_over_loopback_tcp() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            info(2).exchange(&mut s).unwrap()
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let got = info(1).exchange(&mut c).unwrap();
        assert_eq!(got, info(2));
        assert_eq!(server.join().unwrap(), info(1));
    }

    #[test]
    fn a_peer_that_hangs_up_is_an_io_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let mut c = TcpStream::connect(addr).unwrap();
        server.join().unwrap();
        assert!(matches!(
            info(1).exchange(&mut c),
            Err(ExchangeError::Io(_))
        ));
    }

    proptest::proptest! {
        /// Any bytes decode to a record or a typed error, never a panic; a record
        /// that decodes re-encodes to the same 40 bytes.
        #[test]
        fn decoding_any_bytes_never_panics(
            mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            valid_prefix in proptest::prelude::any::<bool>(),
        ) {
            if valid_prefix && bytes.len() >= 5 {
                bytes[..5].copy_from_slice(b"RNDV\x01"); // reach the field checks
            }
            if let Ok(info) = EndpointInfo::decode(&bytes) {
                let mut canonical = bytes[..ENDPOINT_INFO_LEN].to_vec();
                canonical[5] = 0; // padding
                canonical[18..20].fill(0);
                proptest::prop_assert_eq!(info.encode().to_vec(), canonical);
            }
        }
    }
}
