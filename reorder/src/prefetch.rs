//! A cache hint: [`prefetch`] asks the CPU to bring the cache line holding a
//! value in, without waiting for it. The simulator and the engine call it where
//! they know, one event ahead, which cold line the next event will read (a
//! link's next queued packet, a connection's slot): with thousands of
//! connections and links their state does not fit in the caches, and a
//! dependent chain of misses is what a large run waits for.
//!
//! It lives here, beside the arenas, because the engine and the simulator
//! forbid unsafe code and the instruction is reached through an intrinsic.

/// Hints that `r`'s cache line will be read soon. Reads nothing, cannot fault,
/// changes no result; a no-op where the target has no such hint in stable Rust.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch<T: ?Sized>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it loads nothing into a register, cannot
    // fault (whatever the address), and needs only SSE, which every x86_64 CPU
    // has. `r` is a valid reference besides.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    /// A prefetch changes nothing it is given.
    #[test]
    fn a_prefetch_leaves_the_value_alone() {
        let v = vec![1u64, 2, 3];
        prefetch(&v[1]);
        prefetch(v.as_slice());
        assert_eq!(v, [1, 2, 3]);
    }
}
