//! Huge-page and fallback paths of the arena. CI reserves huge pages and sets
//! `RONDO_REQUIRE_HUGEPAGES=1`, so that the huge-page path cannot be skipped silently.

use reorder::{huge_pages_available, Arena, HugePages, ReorderError};

const MIB: usize = 1 << 20;

/// The kernel page size backing `ptr`, in bytes, from `/proc/self/smaps`.
fn kernel_page_size(ptr: *const u8) -> usize {
    let addr = ptr as usize;
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("read /proc/self/smaps");
    let mut inside = false;
    for line in smaps.lines() {
        let range = line
            .split_whitespace()
            .next()
            .and_then(|r| r.split_once('-'));
        if let Some((lo, hi)) = range.and_then(|(a, b)| {
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        }) {
            inside = (lo..hi).contains(&addr);
        } else if let Some(kb) = line.strip_prefix("KernelPageSize:").filter(|_| inside) {
            return kb
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .unwrap()
                * 1024;
        }
    }
    panic!("no mapping at {addr:#x} in /proc/self/smaps");
}

fn check_huge(mut arena: Arena) {
    assert!(arena.is_huge());
    assert_eq!(arena.page_size(), 2 * MIB);
    assert_eq!(arena.len(), 4 * MIB);
    assert_eq!(arena.as_ptr() as usize % (2 * MIB), 0);
    arena.as_mut_slice().fill(0xab); // touch every page: backed, not just reserved
    assert_eq!(kernel_page_size(arena.as_ptr()), 2 * MIB);
}

fn check_normal(mut arena: Arena, bytes: usize) {
    assert!(!arena.is_huge());
    assert_eq!(arena.page_size(), 4096);
    assert_eq!(arena.len(), bytes.next_multiple_of(4096));
    assert_eq!(arena.as_mut_ptr() as usize % 4096, 0);
    arena.as_mut_slice()[bytes - 1] = 1;
    assert_eq!(kernel_page_size(arena.as_ptr()), 4096);
}

#[test]
fn huge_pages_when_reserved_fallback_otherwise() {
    let required = std::env::var("RONDO_REQUIRE_HUGEPAGES").is_ok_and(|v| v == "1");
    let available = huge_pages_available();
    assert!(
        available || !required,
        "RONDO_REQUIRE_HUGEPAGES=1 but no free 2 MiB huge pages: echo 16 > /proc/sys/vm/nr_hugepages"
    );
    if available {
        check_huge(Arena::new(4 * MIB, HugePages::Require).expect("huge pages are free"));
        check_huge(Arena::new(4 * MIB - 100, HugePages::Auto).unwrap());
        println!("tested the huge-page path (2 MiB pages)");
    } else {
        match Arena::new(4 * MIB, HugePages::Require) {
            Err(ReorderError::HugePagesUnavailable | ReorderError::Map { huge: true, .. }) => {}
            other => panic!("Require without huge pages: {other:?}"),
        }
        check_normal(
            Arena::new(4 * MIB - 100, HugePages::Auto).unwrap(),
            4 * MIB - 100,
        );
        println!("tested the fallback path (no free huge pages, 4 KiB pages)");
    }
}

#[test]
fn never_uses_huge_pages() {
    check_normal(Arena::new(4 * MIB, HugePages::Never).unwrap(), 4 * MIB);
    check_normal(Arena::new(10_000, HugePages::Never).unwrap(), 10_000);
}
