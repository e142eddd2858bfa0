//! Where a reorder buffer's slots live: memory the driver provides (DESIGN.md:
//! the arena is registrable by a NIC or a GPU driver), or plain heap memory.

use std::fmt;

/// Whether an `Arena` (feature `arena`) is backed by 2 MiB huge pages (`MAP_HUGETLB`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HugePages {
    /// Try huge pages; fall back to normal pages (advised for transparent huge pages)
    /// when none can be mapped.
    #[default]
    Auto,
    /// Huge pages or an error.
    Require,
    /// Normal pages only, with transparent huge pages turned off for the mapping.
    Never,
}

/// Contiguous memory that a [`ReorderBuffer`](crate::ReorderBuffer) carves its slots
/// from; slot `i` starts at byte `i * slot_size`.
pub trait SlotMemory: Send + fmt::Debug {
    /// All the bytes.
    fn bytes(&self) -> &[u8];
    /// All the bytes, mutable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// Heap memory (the simulator's and the tests' choice: nothing to register).
impl SlotMemory for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

#[cfg(feature = "arena")]
impl SlotMemory for crate::Arena {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}
