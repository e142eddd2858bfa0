//! Errors of the verbs datapath.

use thiserror::Error;

/// A verbs call or setup step that failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// The device list could not be read.
    #[error("cannot list RDMA devices: {0} (is the ib_uverbs kernel module loaded? `rondo doctor` checks the host)")]
    DeviceList(String),
    /// No device of that name, or it could not be opened.
    #[error("cannot open RDMA device {0:?}: run `rondo doctor` to list the devices")]
    Open(String),
    /// The host has no RDMA device.
    #[error("no RDMA device on this host: `rondo doctor` says what is missing")]
    NoDevice,
    /// A verbs call returned an error.
    #[error("{call} failed: {source}")]
    Call {
        /// The call.
        call: &'static str,
        /// The error it returned.
        source: std::io::Error,
    },
    /// A setting that cannot work.
    #[error("invalid verbs datapath setting: {0}")]
    Config(&'static str),
    /// The port cannot carry Rondo.
    #[error("port {port}: {what}")]
    Port {
        /// The port.
        port: u8,
        /// What is wrong and how to fix it.
        what: String,
    },
    /// Memory for the send or receive buffers could not be mapped.
    #[error("cannot map datapath buffers: {0}")]
    Memory(#[from] reorder::ReorderError),
    /// Send-queue settings that cannot work.
    #[error(transparent)]
    SendQueue(#[from] super::send::SendError),
    /// Receive-ring settings that cannot work.
    #[error(transparent)]
    RxRing(#[from] super::rx_ring::RxRingError),
    /// A flow's datagrams do not fit the send slots (`VerbsDatapath::check_flow`).
    #[error(transparent)]
    BufferTooSmall(#[from] rondo_proto::BufferTooSmall),
    /// The peer's addressing data does not fit.
    #[error("peer endpoint: {0}")]
    Peer(String),
}

impl VerbsError {
    /// A call that returned `rc` (a positive errno, or a negative one).
    pub(crate) fn call(call: &'static str, rc: i32) -> VerbsError {
        VerbsError::Call {
            call,
            source: std::io::Error::from_raw_os_error(rc.abs()),
        }
    }

    /// A call that returned NULL and set errno.
    pub(crate) fn last(call: &'static str) -> VerbsError {
        VerbsError::Call {
            call,
            source: std::io::Error::last_os_error(),
        }
    }
}
