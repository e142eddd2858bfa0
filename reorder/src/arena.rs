//! One anonymous, page-aligned, contiguous mapping that a NIC or GPU driver can register
//! once: the memory every reorder-buffer slot is carved from.

use crate::{HugePages, ReorderError};
use memmap2::{MmapMut, MmapOptions};

/// Size of one huge page: 2 MiB.
const HUGE_PAGE: usize = 2 << 20;
/// log2 of [`HUGE_PAGE`], the `MAP_HUGE_2MB` selector.
const HUGE_PAGE_BITS: u8 = 21;

/// An anonymous memory mapping, page aligned and contiguous, zero filled at creation.
#[derive(Debug)]
pub struct Arena {
    map: MmapMut,
    huge: bool,
    page_size: usize,
}

impl Arena {
    /// Maps at least `bytes` bytes, rounded up to the page size actually used
    /// (2 MiB when huge pages back the arena).
    ///
    /// Errors: [`ReorderError::ZeroCapacity`] for 0 bytes;
    /// [`ReorderError::HugePagesUnavailable`] for [`HugePages::Require`] on a host without
    /// free huge pages; [`ReorderError::Map`] when the mapping itself fails.
    pub fn new(bytes: usize, huge: HugePages) -> Result<Arena, ReorderError> {
        if bytes == 0 {
            return Err(ReorderError::ZeroCapacity);
        }
        match huge {
            HugePages::Never => Arena::map_normal(bytes, false),
            HugePages::Require => Arena::map_huge(bytes).map_err(|e| match e {
                ReorderError::Map { .. } if !huge_pages_available() => {
                    ReorderError::HugePagesUnavailable
                }
                e => e,
            }),
            HugePages::Auto => Arena::map_huge(bytes).or_else(|_| Arena::map_normal(bytes, true)),
        }
    }

    fn map_huge(bytes: usize) -> Result<Arena, ReorderError> {
        let map_err = |source| ReorderError::Map { huge: true, source };
        let len = round_up(bytes, HUGE_PAGE).map_err(map_err)?;
        if !cfg!(target_os = "linux") {
            return Err(map_err(std::io::ErrorKind::Unsupported.into()));
        }
        let map = MmapOptions::new()
            .len(len)
            .huge(Some(HUGE_PAGE_BITS))
            .map_anon()
            .map_err(map_err)?;
        Ok(Arena {
            map,
            huge: true,
            page_size: HUGE_PAGE,
        })
    }

    fn map_normal(bytes: usize, want_thp: bool) -> Result<Arena, ReorderError> {
        let map_err = |source| ReorderError::Map {
            huge: false,
            source,
        };
        let page_size = normal_page_size();
        let len = round_up(bytes, page_size).map_err(map_err)?;
        let map = MmapOptions::new().len(len).map_anon().map_err(map_err)?;
        // Transparent huge pages are a best-effort hint: a kernel without them refuses the
        // advice, and the mapping works the same.
        #[cfg(target_os = "linux")]
        let _ = map.advise(if want_thp {
            memmap2::Advice::HugePage
        } else {
            memmap2::Advice::NoHugePage
        });
        #[cfg(not(target_os = "linux"))]
        let _ = want_thp;
        Ok(Arena {
            map,
            huge: false,
            page_size,
        })
    }

    /// Length in bytes (a multiple of [`Arena::page_size`]).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Always false: an arena holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// True when the arena is backed by reserved 2 MiB huge pages (`MAP_HUGETLB`);
    /// transparent huge pages under a fallback mapping do not count.
    pub fn is_huge(&self) -> bool {
        self.huge
    }

    /// Size of the pages backing the arena: 2 MiB, or the system page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Start address, aligned to [`Arena::page_size`]; for registration with a NIC.
    pub fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }

    /// Mutable start address, aligned to [`Arena::page_size`]; for registration with a NIC.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// The whole arena.
    pub fn as_slice(&self) -> &[u8] {
        &self.map
    }

    /// The whole arena, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// True when the host has free 2 MiB huge pages: reads
/// `/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages`, or where that is missing,
/// `/proc/sys/vm/nr_hugepages` and `HugePages_Free` in `/proc/meminfo` (when the default
/// huge page size is 2 MiB).
pub fn huge_pages_available() -> bool {
    let number = |s: &str| s.trim().parse::<u64>().ok();
    if let Ok(free) =
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
    {
        return number(&free).is_some_and(|n| n > 0);
    }
    let reserved = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .ok()
        .and_then(|s| number(&s));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| rest.trim_end_matches("kB"))
            .and_then(number)
    };
    reserved.is_some_and(|n| n > 0)
        && field("HugePages_Free:").is_some_and(|n| n > 0)
        && field("Hugepagesize:") == Some(2048)
}

fn round_up(bytes: usize, page: usize) -> std::io::Result<usize> {
    bytes
        .checked_next_multiple_of(page)
        .ok_or_else(|| std::io::ErrorKind::OutOfMemory.into())
}

fn normal_page_size() -> usize {
    // SAFETY: sysconf reads a constant of the running system; it touches no memory of ours.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_to_whole_pages() {
        let arena = Arena::new(1, HugePages::Never).unwrap();
        assert_eq!(arena.len(), arena.page_size());
        assert!(!arena.is_empty());
        assert_eq!(arena.as_ptr() as usize % arena.page_size(), 0);
        assert!(arena.as_slice().iter().all(|&b| b == 0));
        assert_eq!(
            round_up(usize::MAX, 4096).unwrap_err().kind(),
            std::io::ErrorKind::OutOfMemory
        );
    }

    #[test]
    fn zero_bytes_is_an_error() {
        for huge in [HugePages::Auto, HugePages::Require, HugePages::Never] {
            assert!(matches!(
                Arena::new(0, huge),
                Err(ReorderError::ZeroCapacity)
            ));
        }
    }
}
