//! What an RC run needs of a NIC, as plain Rust: the work requests it posts, the
//! completions it reads, and the [`RcNic`] trait that the libibverbs layer (`sys`)
//! implements, and an in-memory RC pair implements in the tests.

use rondo_ud::verbs::qp_attr::QpAttrs;

/// A failed verbs call, or a device that cannot run the test.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RcError {
    /// A verbs call returned an error.
    #[error("{call} failed: {source}")]
    Call {
        /// The call.
        call: &'static str,
        /// What it returned.
        source: std::io::Error,
    },
    /// The device or port cannot be used.
    #[error("{0}")]
    Device(String),
    /// A post outside a registered buffer, or with an unknown QP (a bug of the caller).
    #[error("invalid work request: {0}")]
    Invalid(&'static str),
}

/// What the local port offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// GID at the chosen index.
    pub gid: [u8; 16],
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// READs a QP may have outstanding as initiator (`max_qp_init_rd_atom`).
    pub max_rd_atomic: u8,
    /// READs a QP may serve at once as responder (`max_qp_rd_atom`).
    pub max_dest_rd_atomic: u8,
}

/// Operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate (consumes a receive at the peer).
    WriteImm(u32),
    /// SEND.
    Send,
    /// RDMA READ.
    Read,
}

/// One send work request: `len` bytes at `offset` of buffer `buf`, to or from
/// `remote` (address, rkey) for RDMA operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Post {
    /// Echoed by the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local buffer index.
    pub buf: usize,
    /// Offset in it.
    pub offset: usize,
    /// Bytes (0: no scatter/gather entry).
    pub len: usize,
    /// Remote address and key (RDMA operations).
    pub remote: Option<(u64, u32)>,
    /// Ask for a completion.
    pub signaled: bool,
}

/// A work completion, reduced to what the run reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// 0 (`IBV_WC_SUCCESS`) or the error status.
    pub status: u32,
    /// A receive completion (`IBV_WC_RECV` or `IBV_WC_RECV_RDMA_WITH_IMM`).
    pub receive: bool,
    /// Bytes received.
    pub byte_len: u32,
    /// Local QP number.
    pub qp_num: u32,
}

/// A NIC with one PD and one CQ, its RC QPs and registered buffers, by index.
pub trait RcNic {
    /// Creates an RC QP in RESET on the CQ; returns its index.
    fn create_qp(&mut self, max_send_wr: u32, max_recv_wr: u32) -> Result<usize, RcError>;
    /// Registers a zeroed buffer of `len` bytes (local write, remote write and
    /// read); returns its index.
    fn register(&mut self, len: usize) -> Result<usize, RcError>;
    /// QP number of QP `q`.
    fn qpn(&self, q: usize) -> u32;
    /// Address of buffer `b`'s first byte, as the peer names it.
    fn addr(&self, b: usize) -> u64;
    /// Remote key of buffer `b`.
    fn rkey(&self, b: usize) -> u32;
    /// Length of buffer `b`.
    fn len(&self, b: usize) -> usize;
    /// Runs `f` on bytes `range` of buffer `b` (read what a completion says arrived).
    fn read(&self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&[u8]));
    /// Runs `f` on bytes `range` of buffer `b`, to fill them before a send.
    fn write(&mut self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&mut [u8]));
    /// Applies one transition's attributes to QP `q`.
    fn modify(&mut self, q: usize, attrs: &QpAttrs) -> Result<(), RcError>;
    /// Posts one send work request on QP `q`.
    fn post_send(&mut self, q: usize, p: &Post) -> Result<(), RcError>;
    /// Posts one receive on QP `q` (`len` 0: no buffer, for immediates only).
    fn post_recv(
        &mut self,
        q: usize,
        wr_id: u64,
        buf: usize,
        offset: usize,
        len: usize,
    ) -> Result<(), RcError>;
    /// Polls up to `out.len()` completions into `out`; returns how many.
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, RcError>;
    /// A name for a completion status.
    fn status_name(&self, status: u32) -> String;
}
