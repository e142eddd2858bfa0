//! Engine time: integer picoseconds, never wall-clock types or `f64` seconds.
//!
//! Drivers (the simulator, the UDP loop, the verbs loop) read their own clock and
//! hand the engine an [`Instant`]; the engine itself never reads a clock.

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in time, in picoseconds since an arbitrary epoch chosen by the driver.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// A span of time in picoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// The end of time, used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `ps` picoseconds after the epoch.
    pub const fn from_ps(ps: u64) -> Instant {
        Instant(ps)
    }
    /// An instant `ns` nanoseconds after the epoch.
    pub const fn from_ns(ns: u64) -> Instant {
        Instant(ns.saturating_mul(1_000))
    }
    /// An instant `us` microseconds after the epoch.
    pub const fn from_us(us: u64) -> Instant {
        Instant(us.saturating_mul(1_000_000))
    }
    /// Picoseconds since the epoch.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Nanoseconds since the epoch, rounded down.
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// Time elapsed since `earlier`, or `None` if `earlier` is later.
    pub const fn checked_since(self, earlier: Instant) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(d) => Some(Duration(d)),
            None => None,
        }
    }
}

impl Duration {
    /// No time.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// A span of `ps` picoseconds.
    pub const fn from_ps(ps: u64) -> Duration {
        Duration(ps)
    }
    /// A span of `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Duration {
        Duration(ns.saturating_mul(1_000))
    }
    /// A span of `us` microseconds.
    pub const fn from_us(us: u64) -> Duration {
        Duration(us.saturating_mul(1_000_000))
    }
    /// A span of `ms` milliseconds.
    pub const fn from_ms(ms: u64) -> Duration {
        Duration(ms.saturating_mul(1_000_000_000))
    }
    /// A span of (possibly fractional) microseconds, rounded to the picosecond.
    /// Negative or non-finite input gives zero.
    pub fn from_us_f64(us: f64) -> Duration {
        if us.is_finite() && us > 0.0 {
            Duration(round_u64(us * 1e6))
        } else {
            Duration(0)
        }
    }
    /// The time to serialise `bytes` at `bits_per_sec`, rounded up to the picosecond.
    /// A zero rate gives [`Duration::MAX`].
    pub const fn serialisation(bytes: u64, bits_per_sec: u64) -> Duration {
        if bits_per_sec == 0 {
            return Duration::MAX;
        }
        let num = bytes as u128 * 8 * 1_000_000_000_000;
        let d = num.div_ceil(bits_per_sec as u128);
        Duration(if d > u64::MAX as u128 {
            u64::MAX
        } else {
            d as u64
        })
    }
    /// Picoseconds in this span.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Nanoseconds in this span, rounded down.
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    /// Microseconds in this span as a float, for reports only.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Seconds in this span as a float, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
    /// This span times `k`, saturating.
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
    /// This span scaled by a ratio `num / den`, rounded down; `den = 0` gives MAX.
    pub const fn mul_ratio(self, num: u64, den: u64) -> Duration {
        if den == 0 {
            return Duration::MAX;
        }
        let v = self.0 as u128 * num as u128 / den as u128;
        Duration(if v > u64::MAX as u128 {
            u64::MAX
        } else {
            v as u64
        })
    }
    /// This span scaled by a non-negative float factor (for configuration only).
    pub fn mul_f64(self, k: f64) -> Duration {
        if k.is_finite() && k > 0.0 {
            Duration(round_u64(self.0 as f64 * k))
        } else {
            Duration(0)
        }
    }
    /// Difference, zero if `other` is longer.
    pub const fn saturating_sub(self, other: Duration) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, d: Duration) -> Duration {
        Duration(self.0.saturating_sub(d.0))
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

/// `x.round() as u64` (half away from zero, saturating: negative and NaN give 0,
/// 2^64 and more give `u64::MAX`), without the call to libm's `round` that
/// `f64::round` compiles to on a baseline x86-64 target: every rate-to-time
/// conversion of the hot path rounds, and the call was 2% of the engine alone.
/// Exact for every input (`tests::round_u64_is_round_then_cast`): below 2^52 the
/// fraction `x - trunc(x)` is exact, above it every `f64` is an integer.
pub(crate) fn round_u64(x: f64) -> u64 {
    if x >= 18_446_744_073_709_551_615.0 {
        return u64::MAX; // 2^64 as f64, where `t + 1` below would overflow
    }
    let t = x as u64; // truncates; negative and NaN give 0
    if x - t as f64 >= 0.5 {
        t + 1
    } else {
        t
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={:.3}us", self.0 as f64 / 1e6)
    }
}
impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}us", self.0 as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_of_a_packet() {
        // 1500 bytes at 100 Gbps is 120 ns; at 10 Gbps 1.2 us.
        assert_eq!(
            Duration::serialisation(1500, 100_000_000_000),
            Duration::from_ns(120)
        );
        assert_eq!(
            Duration::serialisation(1500, 10_000_000_000),
            Duration::from_ns(1200)
        );
        assert_eq!(Duration::serialisation(1, 0), Duration::MAX);
        // 1 byte at 3 bps rounds up.
        assert_eq!(Duration::serialisation(1, 3).as_ps(), 2_666_666_666_667);
    }

    #[test]
    fn round_u64_is_round_then_cast() {
        let mut cases = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            -0.5,
            -0.7,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            18446744073709549568.0,
            18446744073709551616.0,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
        ];
        // Random bit patterns over every exponent, and values near halves.
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            cases.push(f64::from_bits(s));
            cases.push((s % 1_000_000) as f64 + 0.5);
            cases.push((s >> 11) as f64 / (1u64 << 20) as f64);
        }
        for x in cases {
            assert_eq!(round_u64(x), x.round() as u64, "{x:e}");
        }
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_us(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Duration::from_us(1), Instant::ZERO);
        assert_eq!(
            Instant::from_us(1).saturating_since(Instant::from_us(2)),
            Duration::ZERO
        );
        assert_eq!(Instant::from_us(1).checked_since(Instant::from_us(2)), None);
        assert_eq!(
            Duration::from_us(3).mul_ratio(1, 2),
            Duration::from_ns(1500)
        );
        assert_eq!(Duration::from_us_f64(-1.0), Duration::ZERO);
        assert_eq!(Duration::from_us_f64(2.5), Duration::from_ns(2500));
    }
}
