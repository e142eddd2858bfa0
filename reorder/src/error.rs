//! The one error type of this crate.

use crate::buffer::FlowId;

/// Why a reorder-buffer or arena operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReorderError {
    /// The flow was never added, or was removed.
    #[error("unknown flow {0:?}: add it with ReorderBuffer::add_flow, and stop using it after remove_flow")]
    UnknownFlow(FlowId),
    /// A payload longer than one slot; nothing was written.
    #[error("payload of {len} bytes does not fit a {slot_size}-byte slot: set BufferConfig::slot_size to the largest payload (the MTU less headers)")]
    PayloadTooLarge {
        /// Length of the payload offered.
        len: usize,
        /// Size of one slot.
        slot_size: usize,
    },
    /// `BufferConfig::slot_size` was 0.
    #[error(
        "slot size is 0: set BufferConfig::slot_size to the largest payload (the MTU less headers)"
    )]
    ZeroSlotSize,
    /// The memory given for the slots is shorter than they need.
    #[error("slot memory of {len} bytes cannot hold the {need} bytes of slots asked for: give more memory or lower BufferConfig::capacity_bytes")]
    MemoryTooSmall {
        /// Bytes given.
        len: usize,
        /// Bytes the slots need.
        need: usize,
    },
    /// An arena of 0 bytes was requested.
    #[error("an arena of 0 bytes was requested: ask for at least one byte")]
    ZeroCapacity,
    /// The anonymous mapping failed.
    #[error("mapping the arena with {} failed: {source}; {}", if *huge { "2 MiB huge pages" } else { "normal pages" }, if *huge { "reserve more huge pages (echo 16 > /proc/sys/vm/nr_hugepages) or use HugePages::Auto" } else { "ask for less memory or raise the process memory limit" })]
    Map {
        /// Whether huge pages were being mapped.
        huge: bool,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `HugePages::Require` on a host with no free 2 MiB huge pages.
    #[error("huge pages are required but none are free: reserve huge pages (echo 16 > /proc/sys/vm/nr_hugepages) or use HugePages::Auto")]
    HugePagesUnavailable,
}
