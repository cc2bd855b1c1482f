//! Exact time: whole nanoseconds in `u128`, so epoch milliseconds plus fractional intervals
//! never drift, however many refills are added up.

const NANOS_PER_MILLI: u128 = 1_000_000;

/// A moment, in nanoseconds since the Unix epoch. Built from the milliseconds the caller
/// read from its clock; the engine never reads a clock itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Instant(u128);

impl Instant {
    /// `ms` as `Date.now()` gives it. Negative, NaN and absurd values cannot come from a real
    /// clock; they saturate (to 0 or the largest instant) instead of failing, and a clock that
    /// goes back is handled by the bucket (no refill).
    pub fn from_millis(ms: f64) -> Instant {
        if ms.is_nan() || ms <= 0.0 {
            return Instant(0);
        }
        let whole = ms.trunc();
        // Float-to-int casts saturate, so an infinite `ms` becomes `u128::MAX / 1e6`-ish.
        let nanos = (whole as u128)
            .saturating_mul(NANOS_PER_MILLI)
            .saturating_add(((ms - whole) * 1e6) as u128);
        Instant(nanos)
    }

    pub fn from_nanos(nanos: u128) -> Instant {
        Instant(nanos)
    }

    pub fn as_nanos(self) -> u128 {
        self.0
    }

    /// Nanoseconds from `earlier` to `self`; zero when the clock went back.
    pub fn saturating_since(self, earlier: Instant) -> u128 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn saturating_add(self, nanos: u128) -> Instant {
        Instant(self.0.saturating_add(nanos))
    }
}

/// Whole milliseconds covering `nanos`, rounded up: a client that waits this long is never early.
pub fn ceil_millis(nanos: u128) -> f64 {
    nanos.div_ceil(NANOS_PER_MILLI) as f64
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
        assert!(Instant::from_millis(f64::INFINITY) > Instant::from_millis(8.64e15));
    }

    #[test]
    fn waits_round_up_to_the_next_millisecond() {
        assert_eq!(ceil_millis(0), 0.0);
        assert_eq!(ceil_millis(1), 1.0);
        assert_eq!(ceil_millis(7_000_000_000), 7000.0);
        assert_eq!(ceil_millis(7_000_000_001), 7001.0);
    }
}
