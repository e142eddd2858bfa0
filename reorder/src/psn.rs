//! Packet sequence numbers: 32 bits, compared and subtracted modulo 2^32.
//!
//! Two PSNs are ordered by the sign of their 32-bit wrapping difference, as in
//! TCP (RFC 1982 serial-number arithmetic). The order is meaningful only while
//! the two values are less than 2^31 apart, which the transport guarantees by
//! keeping its window far below that.

use core::cmp::Ordering;
use core::fmt;

/// A 32-bit packet sequence number with wrap-safe arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(pub u32);

impl Psn {
    /// The zero PSN.
    pub const ZERO: Psn = Psn(0);

    /// This PSN plus `n`, wrapping.
    #[inline]
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n))
    }

    /// This PSN minus `n`, wrapping.
    #[inline]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n))
    }

    /// The next PSN.
    #[inline]
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// Signed distance `self - other`: positive when `self` is later.
    #[inline]
    pub const fn diff(self, other: Psn) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// Unsigned distance `self - other` when `self` is not earlier than `other`.
    #[inline]
    pub fn distance_from(self, other: Psn) -> Option<u32> {
        let d = self.diff(other);
        (d >= 0).then_some(d as u32)
    }

    /// True when `self` comes strictly before `other`.
    #[inline]
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// True when `self` comes strictly after `other`.
    #[inline]
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// The later of two PSNs.
    #[inline]
    pub fn max_of(self, other: Psn) -> Psn {
        if self.after(other) {
            self
        } else {
            other
        }
    }

    /// The earlier of two PSNs.
    #[inline]
    pub fn min_of(self, other: Psn) -> Psn {
        if self.before(other) {
            self
        } else {
            other
        }
    }
}

impl PartialOrd for Psn {
    /// Serial-number order; PSNs exactly 2^31 apart are unordered.
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let d = self.diff(*other);
        if d == i32::MIN {
            None
        } else {
            Some(d.cmp(&0))
        }
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "psn{}", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_the_top() {
        let a = Psn(u32::MAX);
        assert_eq!(a.next(), Psn(0));
        assert!(a.before(Psn(0)));
        assert!(Psn(3).after(a));
        assert_eq!(Psn(3).diff(a), 4);
        assert_eq!(Psn(3).distance_from(a), Some(4));
        assert_eq!(a.distance_from(Psn(3)), None);
    }

    #[test]
    fn half_space_apart_is_unordered() {
        assert_eq!(Psn(0).partial_cmp(&Psn(1 << 31)), None);
    }

    proptest! {
        #[test]
        fn order_is_translation_invariant(base: u32, a in 0u32..(1 << 30), b in 0u32..(1 << 30)) {
            let (pa, pb) = (Psn(base).add(a), Psn(base).add(b));
            prop_assert_eq!(pa.before(pb), a < b);
            prop_assert_eq!(pa.after(pb), a > b);
            prop_assert_eq!(pa.diff(pb), a as i32 - b as i32);
            prop_assert_eq!(pa.max_of(pb), Psn(base).add(a.max(b)));
            prop_assert_eq!(pa.min_of(pb), Psn(base).add(a.min(b)));
        }

        #[test]
        fn add_then_sub_is_identity(x: u32, n: u32) {
            prop_assert_eq!(Psn(x).add(n).sub(n), Psn(x));
            prop_assert_eq!(Psn(x).add(n).diff(Psn(x)), n as i32);
        }

        #[test]
        fn antisymmetric(x: u32, y: u32) {
            let (a, b) = (Psn(x), Psn(y));
            if a.diff(b) != i32::MIN {
                prop_assert_eq!(a.before(b), b.after(a));
                prop_assert_eq!(a.diff(b), -b.diff(a));
            }
        }
    }
}
