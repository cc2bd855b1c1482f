//! Exact time: whole nanoseconds since the Unix epoch in a `u64` (enough until the year
//! 2554), so epoch milliseconds plus fractional intervals never drift, however many refills
//! are added up.

use super::wide::div_ceil_small;

const NANOS_PER_MILLI: u64 = 1_000_000;

/// The latest moment a `u64` of nanoseconds holds, in milliseconds.
const MAX_MILLIS: f64 = (u64::MAX / NANOS_PER_MILLI) as f64;

/// A moment, in nanoseconds since the Unix epoch. Built from the milliseconds the caller
/// read from its clock; the engine never reads a clock itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Instant(u64);

impl Instant {
    /// `ms` as `Date.now()` gives it. Readings no real clock gives (NaN, negative, past the
    /// year 2554) saturate instead of failing; a clock that goes back is handled by the bucket.
    pub fn from_millis(ms: f64) -> Instant {
        if ms.is_nan() || ms <= 0.0 {
            return Instant(0);
        }
        if ms >= MAX_MILLIS {
            return Instant(u64::MAX);
        }
        let whole = ms as u64;
        let fraction = ((ms - whole as f64) * 1e6) as u64;
        Instant(whole * NANOS_PER_MILLI + fraction)
    }

    pub fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Nanoseconds from `earlier` to `self`; zero when the clock went back.
    pub fn saturating_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn saturating_add(self, nanos: u64) -> Instant {
        Instant(self.0.saturating_add(nanos))
    }
}

/// Whole milliseconds covering `nanos`, rounded up: a client that waits this long is never early.
pub fn ceil_millis(nanos: u128) -> f64 {
    // Nearly every wait fits 64 bits, whose division by a constant is a multiplication;
    // a 128-bit one is a library call.
    match u64::try_from(nanos) {
        Ok(nanos) => nanos.div_ceil(NANOS_PER_MILLI) as f64,
        // The windows of big buckets that `limit` reports: four native divisions.
        Err(_) => div_ceil_small(nanos, NANOS_PER_MILLI) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_millis_convert_exactly() {
        assert_eq!(
            Instant::from_millis(1_800_000_000_123.0).as_nanos(),
            1_800_000_000_123_000_000
        );
        assert_eq!(Instant::from_millis(0.5).as_nanos(), 500_000);
    }

    #[test]
    fn impossible_clock_readings_saturate() {
        assert_eq!(Instant::from_millis(f64::NAN).as_nanos(), 0);
        assert_eq!(Instant::from_millis(-5.0).as_nanos(), 0);
        assert_eq!(Instant::from_millis(f64::INFINITY).as_nanos(), u64::MAX);
        assert_eq!(Instant::from_millis(8.64e15).as_nanos(), u64::MAX);
        assert!(Instant::from_millis(MAX_MILLIS - 1.0) < Instant::from_millis(MAX_MILLIS));
    }

    #[test]
    fn waits_round_up_to_the_next_millisecond() {
        assert_eq!(ceil_millis(0), 0.0);
        assert_eq!(ceil_millis(1), 1.0);
        assert_eq!(ceil_millis(7_000_000_000), 7000.0);
        assert_eq!(ceil_millis(7_000_000_001), 7001.0);
        assert_eq!(ceil_millis(u128::from(u64::MAX)), 18_446_744_073_710.0);
        assert_eq!(ceil_millis(u128::from(u64::MAX) + 1), 18_446_744_073_710.0);
    }

    #[test]
    fn wide_waits_divide_as_128_bit_numbers_do() {
        let cases = [
            u128::from(u64::MAX) + 1,
            3_600_000_000_000 * 1_000_000_000_000_000,
            9_007_199_254_740_991 * 1_000_000_000 * 1_000_000_000_000,
            u128::MAX - 1_000_000,
            u128::MAX,
        ];
        for nanos in cases
            .into_iter()
            .chain((0..64).map(|i| (u128::MAX >> i) - i))
        {
            assert_eq!(
                div_ceil_small(nanos, NANOS_PER_MILLI),
                nanos.div_ceil(1_000_000),
                "{nanos}"
            );
        }
    }
}
