//! Rondo's verbs-like application API: ibverbs' objects and semantics (RC queue
//! pairs) over the Rondo packet-spraying transport.
//!
//! ```
//! use rondo_verbs::*;
//!
//! // An in-process fabric of four 25 Gbit/s paths, and two contexts on it.
//! let fabric = MemFabric::new(1, FabricConfig::default())?;
//! let open = |seed| -> Result<_, VerbsError> {
//!     let ctx = Context::open_mem(&fabric, ContextAttr { seed, ..ContextAttr::default() })?;
//!     let pd = ctx.alloc_pd()?;
//!     let cq = ctx.create_cq(64)?;
//!     let qp = ctx.create_qp(&pd, &cq, &cq, QpInitAttr::default())?;
//!     let mr = pd.register(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
//!     Ok((ctx, cq, qp, mr))
//! };
//! let (_ca, cq_a, qp_a, mr_a) = open(1)?;
//! let (_cb, cq_b, qp_b, mr_b) = open(2)?;
//! // Exchange endpoint descriptors (bytes, e.g. over TCP) and connect.
//! qp_a.connect(&QpEndpoint::from_bytes(&qp_b.endpoint().to_bytes())?)?;
//! qp_b.connect(&qp_a.endpoint())?;
//!
//! // RDMA WRITE 5 bytes into B's region.
//! mr_a.write(0, b"hello")?;
//! let remote = RemoteAddr { addr: mr_b.addr() + 100, rkey: mr_b.rkey() };
//! qp_a.post_send(&SendWr::write(1, vec![Sge::new(&mr_a, 0, 5)], remote))?;
//! let mut wc = [WorkCompletion::default(); 4];
//! while cq_a.poll(&mut wc)? == 0 {} // polling runs the in-process fabric
//! assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
//!
//! // SEND 5 bytes into a posted receive.
//! qp_b.post_recv(&RecvWr { wr_id: 7, sg_list: vec![Sge::new(&mr_b, 0, 64)] })?;
//! qp_a.post_send(&SendWr::send(2, vec![Sge::new(&mr_a, 0, 5)]))?;
//! while cq_b.poll(&mut wc)? == 0 {}
//! assert_eq!((wc[0].wr_id, wc[0].opcode, wc[0].byte_len), (7, WcOpcode::Recv, 5));
//! let mut got = [0; 5];
//! mr_b.read(100, &mut got)?;
//! assert_eq!(&got, b"hello");
//! # Ok::<(), VerbsError>(())
//! ```
//!
//! # Objects
//! [`devices`] lists the backends; a [`Context`] is one opened device (an engine
//! endpoint with its NIC-level reorder buffer, [`ContextAttr::reorder_buffer_bytes`]).
//! From it come [`ProtectionDomain`]s, [`MemoryRegion`]s (memory owned by the
//! region, random lkey/rkey per registration), [`CompletionQueue`]s and
//! [`QueuePair`]s. Every object holds its parents through `Arc`s: a QP keeps its
//! PD, CQs and context alive; dropping the last handle destroys it.
//!
//! # Semantics
//! RC semantics over Rondo's in-order delivery: each work request is one engine
//! message with a small verbs header ([`header`], `docs/verbs.md`); the responder
//! checks and executes requests in order and answers each with an ACK (or a READ
//! response) carrying its verdict, so send completions carry remote errors. Send
//! completions come in posting order when the answer arrives; receive completions
//! in posting order. Statuses mean what ibverbs' do ([`WcStatus`]). A full queue
//! makes `post_*` fail; nothing is dropped silently. Regions own their memory and
//! a request's bytes are copied from them when it is handed to the engine, so
//! posting is safe; as in ibverbs, leave them unchanged until the completion.
//!
//! # Progress
//! `mem`: explicit progress inside [`CompletionQueue::poll`] (and
//! [`MemFabric::run_until`]): the fabric runs in virtual time only when asked,
//! so a single-threaded program is deterministic (same seed, same run). `udp`: a
//! progress thread per context by default, because one-sided WRITE and READ must
//! be served while the responder's application does not poll (a NIC's job);
//! `UdpAttr::progress_thread = false` switches to explicit progress in `poll`
//! (one thread per process, faster on a busy host, but every side must keep
//! polling). Both backends drive the same sans-IO verbs host. `docs/verbs.md`
//! has the measurements behind these choices. On `udp`, create QPs with
//! `QpInitAttr::udp(paths)`. `verbs` (cargo feature `verbs`, an RDMA NIC;
//! `Context::open_verbs`, `QpInitAttr::verbs(paths, mtu)`): the same progress
//! thread over a UD queue pair, sleeping briefly when idle since the NIC's
//! completion queues have no eventfd to wait on (`docs/ibverbs.md`).
// Unsafe only where the external-memory contract needs it (`memory`,
// `ProtectionDomain::register_external`).
#![deny(unsafe_code)]

mod context;
mod cq;
mod error;
mod fabric;
mod gid;
pub mod header;
mod host;
mod memory;
mod mr;
#[cfg(target_os = "linux")]
mod progress;
mod qp;
mod types;
#[cfg(target_os = "linux")]
mod udp;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod verbs_backend;

pub use context::{devices, Context};
pub use cq::{CompletionQueue, NotifyHook};
pub use error::VerbsError;
pub use fabric::{FabricConfig, MemFabric};
pub use gid::{gid_rank, pick_gid_index, GID_TYPE_IB, GID_TYPE_ROCE_V2};
pub use host::MAX_MESSAGE_BYTES;
pub use mr::{MemoryRegion, ProtectionDomain};
pub use qp::{PeerAddr, QpEndpoint, QueuePair};
pub use rondo_proto::{Duration, FlowConfig, Instant};
pub use rondo_sim::pair::PathSpec;
#[cfg(target_os = "linux")]
pub use rondo_ud::udp::UdpConfig;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use rondo_ud::verbs::{exchange::EndpointInfo, VerbsStats};
pub use rondo_ud::HostProfile;
pub use types::*;
#[cfg(target_os = "linux")]
pub use udp::UdpAttr;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use verbs_backend::{VerbsAttr, VerbsContextStats, IDLE_SLEEP, NO_DEVICE};
