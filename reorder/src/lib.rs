//! Rondo's in-order reorder buffer: fixed-size slots in one registrable memory
//! arena (huge pages when available; feature `arena`, on by default) or in heap
//! memory, shared by all flows of a receiving NIC, with the OOD and RBO accounting
//! every Rondo report uses; and every other memory a datapath receives into: the
//! message buffers of in-place receive ([`landing`], feature `arena`). Without the
//! `arena` feature the crate is safe code only, with no `libc`: what the sans-IO
//! engine links.
//!
//! ```
//! use reorder::{BufferConfig, HugePages, Outcome, Psn, ReorderBuffer};
//!
//! let cfg = BufferConfig { capacity_bytes: 4 * 1500, huge_pages: HugePages::Never, ..BufferConfig::default() };
//! let mut buf = ReorderBuffer::<u32>::in_heap(cfg)?;
//! let flow = buf.add_flow(Psn(0));
//!
//! // PSN 1 overtakes PSN 0: it waits in a slot.
//! let a = buf.arrive(flow, Psn(1), 11, b"world")?;
//! assert_eq!((a.outcome, a.ood, a.rbo), (Outcome::Buffered, 0, 0));
//!
//! // PSN 0 is the expected one: the caller places its payload itself (zero copy)...
//! let a = buf.arrive(flow, Psn(0), 10, b"hello")?;
//! assert_eq!((a.outcome, a.ood, a.rbo), (Outcome::InOrder, 1, 1));
//!
//! // ...then drains what became in order.
//! let next = buf.pop_ready(flow, |psn, meta, payload| (psn, meta, payload.to_vec()))?;
//! assert_eq!(next, Some((Psn(1), 11, b"world".to_vec())));
//! assert_eq!(buf.expected(flow)?, Psn(2));
//! assert_eq!(buf.used_slots(), 0);
//! # Ok::<(), reorder::ReorderError>(())
//! ```
#![forbid(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

#[cfg(feature = "arena")]
#[allow(unsafe_code)]
mod arena;
mod buffer;
mod error;
#[cfg(feature = "arena")]
pub mod landing;
mod memory;
mod prefetch;
pub mod psn;

#[cfg(feature = "arena")]
pub use arena::{huge_pages_available, Arena};
pub use buffer::{
    Arrival, BufferConfig, BufferStats, FlowId, FlowIdHash, FlowIdHasher, FlowStats, Outcome,
    ReorderBuffer,
};
pub use error::ReorderError;
pub use memory::{HugePages, SlotMemory};
pub use prefetch::prefetch;
pub use psn::Psn;
