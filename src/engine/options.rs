//! Validated inputs. Raw numbers from the caller are checked here, once; what comes out
//! is always valid, so the bucket arithmetic has no error paths.

use super::error::Error;

/// Largest `max_tokens`: the largest integer a JavaScript number holds exactly.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Tokens are counted in billionths, so fractional costs are exact to 1e-9 and never drift.
pub const UNITS_PER_TOKEN: u128 = 1_000_000_000;

const NANOS_PER_SECOND: f64 = 1e9;

pub const DEFAULT_MAX_TOKENS: u64 = 10;
pub const DEFAULT_REFILL_EVERY_SECONDS: f64 = 10.0;

/// Options shared by every bucket of a limiter. Always valid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    max_tokens: u64,
    refill_every_seconds: f64,
    interval_nanos: u128,
}

/// A partial update of [`Options`]: `None` keeps the current value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OptionsPatch {
    pub max_tokens: Option<f64>,
    pub refill_every_seconds: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options::new(DEFAULT_MAX_TOKENS as f64, DEFAULT_REFILL_EVERY_SECONDS)
            .expect("the defaults are valid")
    }
}

impl Options {
    /// `max_tokens`: a whole number from 1 to 2^53 - 1. `refill_every_seconds`: finite, > 0.
    pub fn new(max_tokens: f64, refill_every_seconds: f64) -> Result<Options, Error> {
        let max_ok = max_tokens.fract() == 0.0 && (1.0..=MAX_SAFE_INTEGER).contains(&max_tokens);
        if !max_ok {
            return Err(Error::OutOfRange {
                field: "max_tokens".into(),
                expected: "a whole number from 1 to 9007199254740991",
                got: max_tokens,
            });
        }
        if !(refill_every_seconds.is_finite() && refill_every_seconds > 0.0) {
            return Err(Error::OutOfRange {
                field: "refill_every_seconds".into(),
                expected: "a finite number > 0",
                got: refill_every_seconds,
            });
        }
        // Rounded up to whole nanoseconds (at least one): the limiter is never more
        // generous than asked. The cast saturates for absurdly long intervals.
        let interval_nanos = ((refill_every_seconds * NANOS_PER_SECOND).ceil() as u128).max(1);
        Ok(Options {
            max_tokens: max_tokens as u64,
            refill_every_seconds,
            interval_nanos,
        })
    }

    /// These options with `patch` applied; all or nothing.
    pub fn patched(&self, patch: OptionsPatch) -> Result<Options, Error> {
        Options::new(
            patch.max_tokens.unwrap_or(self.max_tokens as f64),
            patch
                .refill_every_seconds
                .unwrap_or(self.refill_every_seconds),
        )
    }

    pub fn max_tokens(&self) -> u64 {
        self.max_tokens
    }

    pub fn refill_every_seconds(&self) -> f64 {
        self.refill_every_seconds
    }

    /// Nanoseconds between two refilled tokens (>= 1).
    pub fn interval_nanos(&self) -> u128 {
        self.interval_nanos
    }

    /// Capacity in token units.
    pub fn capacity_units(&self) -> u128 {
        self.max_tokens as u128 * UNITS_PER_TOKEN
    }
}

/// What a call costs, in token units. Always finite and >= 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost(u128);

impl Cost {
    /// A finite number >= 0 (fractions allowed), rounded up to a billionth of a token so a
    /// fraction is never under-charged.
    pub fn new(cost: f64) -> Result<Cost, Error> {
        if !(cost.is_finite() && cost >= 0.0) {
            return Err(Error::OutOfRange {
                field: "cost".into(),
                expected: "a finite number >= 0",
                got: cost,
            });
        }
        // The whole part converts exactly; only the fraction is scaled (and rounded up).
        let whole = cost.trunc();
        let fraction = ((cost - whole) * UNITS_PER_TOKEN as f64).ceil() as u128;
        Ok(Cost(
            (whole as u128)
                .saturating_mul(UNITS_PER_TOKEN)
                .saturating_add(fraction),
        ))
    }

    pub const ONE: Cost = Cost(UNITS_PER_TOKEN);
    pub const ZERO: Cost = Cost(0);

    pub fn units(self) -> u128 {
        self.0
    }
}

/// Token units as the number of tokens a caller sees, correctly rounded while the units fit
/// an f64 exactly (below 2^53, about nine million tokens), within one ulp above that.
pub fn units_to_tokens(units: u128) -> f64 {
    if units < 1 << 53 {
        return units as f64 / UNITS_PER_TOKEN as f64;
    }
    let whole = (units / UNITS_PER_TOKEN) as f64;
    let fraction = (units % UNITS_PER_TOKEN) as f64 / UNITS_PER_TOKEN as f64;
    whole + fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_ten_tokens_every_ten_seconds() {
        let o = Options::default();
        assert_eq!(o.max_tokens(), 10);
        assert_eq!(o.interval_nanos(), 10_000_000_000);
    }

    #[test]
    fn max_tokens_must_be_a_safe_whole_number() {
        for bad in [
            0.0,
            -1.0,
            1.5,
            f64::NAN,
            f64::INFINITY,
            9_007_199_254_740_992.0,
        ] {
            let err = Options::new(bad, 1.0).unwrap_err();
            assert!(!err.is_type_error());
            assert!(err.to_string().starts_with("max_tokens must be"), "{err}");
        }
        assert_eq!(
            Options::new(MAX_SAFE_INTEGER, 1.0).unwrap().max_tokens(),
            9_007_199_254_740_991
        );
    }

    #[test]
    fn refill_interval_must_be_finite_and_positive() {
        for bad in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Options::new(10.0, bad).unwrap_err();
            assert!(err.to_string().starts_with("refill_every_seconds must be"));
        }
    }

    #[test]
    fn fractional_intervals_round_up_to_whole_nanoseconds() {
        assert_eq!(
            Options::new(1.0, 0.25).unwrap().interval_nanos(),
            250_000_000
        );
        assert_eq!(
            Options::new(1.0, 1.0 / 3.0).unwrap().interval_nanos(),
            333_333_334
        );
        assert_eq!(Options::new(1.0, 1e-300).unwrap().interval_nanos(), 1);
    }

    #[test]
    fn a_patch_is_all_or_nothing() {
        let o = Options::default();
        let bad = OptionsPatch {
            max_tokens: Some(5.0),
            refill_every_seconds: Some(-1.0),
        };
        assert!(o.patched(bad).is_err());
        assert_eq!(o.patched(OptionsPatch::default()).unwrap(), o);
        let five = o
            .patched(OptionsPatch {
                max_tokens: Some(5.0),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(five.max_tokens(), 5);
        assert_eq!(five.interval_nanos(), o.interval_nanos());
    }

    #[test]
    fn costs_are_exact_to_a_billionth_and_round_up() {
        assert_eq!(Cost::new(0.1).unwrap().units(), 100_000_000);
        assert_eq!(Cost::new(0.3).unwrap().units(), 300_000_000);
        assert_eq!(Cost::new(1e-12).unwrap().units(), 1);
        assert_eq!(Cost::new(-0.0).unwrap(), Cost::ZERO);
        assert_eq!(
            Cost::new(MAX_SAFE_INTEGER).unwrap().units(),
            9_007_199_254_740_991 * UNITS_PER_TOKEN
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1e-9] {
            assert!(Cost::new(bad).is_err());
        }
        assert_eq!(units_to_tokens(9_700_000_000), 9.7);
    }
}
