//! Errors returned by verbs calls (failures of the call itself; failures of a work
//! request are reported later as a [`crate::WcStatus`] in its completion).

use thiserror::Error;

/// Why a verbs call failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerbsError {
    /// `post_send` found the send queue full.
    #[error(
        "send queue full ({depth} work requests outstanding): poll the send CQ, then post again"
    )]
    SendQueueFull {
        /// The queue depth (`QpInitAttr::max_send_wr`).
        depth: usize,
    },
    /// `post_recv` found the receive queue full.
    #[error("receive queue full ({depth} receives posted): wait for receive completions, then post again")]
    RecvQueueFull {
        /// The queue depth (`QpInitAttr::max_recv_wr`).
        depth: usize,
    },
    /// A work request is malformed (missing remote address, immediate on an opcode
    /// without one, too many scatter/gather entries, ...).
    #[error("invalid work request: {0}")]
    InvalidWr(&'static str),
    /// The QP is not in a state that allows the call.
    #[error("queue pair {qpn:#x} is in state {state:?}: {hint}")]
    InvalidState {
        /// The QP number.
        qpn: u32,
        /// Its state.
        state: crate::QpState,
        /// What to do.
        hint: &'static str,
    },
    /// An attribute is out of range.
    #[error("invalid attribute `{name}`: {reason}")]
    InvalidAttr {
        /// Attribute name.
        name: &'static str,
        /// What is allowed.
        reason: String,
    },
    /// The remote endpoint descriptor cannot be used with this QP.
    #[error("endpoint descriptor: {0}")]
    BadEndpoint(String),
    /// A memory-region access is outside the region.
    #[error(
        "access of {len} bytes at offset {offset} is outside the memory region of {region} bytes"
    )]
    OutOfBounds {
        /// Offset asked for.
        offset: usize,
        /// Length asked for.
        len: usize,
        /// Region length.
        region: usize,
    },
    /// Memory for a region or the reorder buffer could not be allocated.
    #[error("cannot allocate {bytes} bytes: {reason}")]
    Alloc {
        /// Bytes asked for.
        bytes: usize,
        /// The OS error.
        reason: String,
    },
    /// The transport engine refused the call.
    #[error("engine: {0}")]
    Engine(String),
    /// An operating-system call (socket, thread, randomness) failed.
    #[error("I/O: {0}")]
    Io(String),
    /// The RDMA device cannot be used (none on the host, another name, a port or GID
    /// that cannot carry Rondo, a verbs call that failed).
    #[error("{0}")]
    Device(String),
    /// A completion queue overran: a completion arrived while it held its depth of
    /// entries and was lost; the CQ is in error, as are the QPs that complete on it.
    #[error("completion queue {cq} overran its {depth} entries: it and its queue pairs are in error; poll more often or create a deeper CQ, and new QPs")]
    CqOverrun {
        /// The CQ's handle ([`crate::CompletionQueue::handle`]).
        cq: u32,
        /// Its depth.
        depth: usize,
    },
    /// The backend is not available in this build or on this host.
    #[error("backend `{0}` is not available: {1}")]
    Unsupported(&'static str, &'static str),
}
