//! Validated inputs. Raw numbers from the caller are checked here, once; what comes out
//! is always valid, so the bucket arithmetic has no error paths.

use super::error::Error;
use super::time::ceil_millis;
use super::wide::div_ceil_small;

/// Largest `max_tokens`: the largest integer a JavaScript number holds exactly.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Tokens are counted in billionths, so fractional costs are exact to 1e-9 and never drift.
pub const UNITS_PER_TOKEN: u64 = 1_000_000_000;

/// The largest capacity whose billionths fit a `u64`. Larger capacities (up to 2^53 - 1)
/// count whole tokens: their fractional costs round up to a whole token.
pub const MAX_TOKENS_IN_BILLIONTHS: u64 = u64::MAX / UNITS_PER_TOKEN;

const NANOS_PER_SECOND: f64 = 1e9;

pub const DEFAULT_MAX_TOKENS: u64 = 10;
pub const DEFAULT_REFILL_EVERY_SECONDS: f64 = 10.0;

/// Options of a bucket: the instance options or a key's policy. Always valid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    max_tokens: u64,
    refill_every_seconds: f64,
    /// May exceed any `Instant` (2^53 s is allowed): such a bucket never refills.
    interval_nanos: u128,
    /// Units per token: `UNITS_PER_TOKEN`, or 1 for capacities above
    /// `MAX_TOKENS_IN_BILLIONTHS`.
    unit: u64,
    /// The window (`max_tokens` intervals in whole milliseconds, rounded up), which every
    /// `limit` decision reports: computed once here, where it is a 128-bit multiplication
    /// and division, not at every call.
    window_ms: f64,
}

/// A partial update of [`Options`]: `None` keeps the current value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OptionsPatch {
    pub max_tokens: Option<f64>,
    pub refill_every_seconds: Option<f64>,
}

impl Default for Options {
    /// 10 tokens, one every 10 s (written out: no error path, no panic in the binary).
    fn default() -> Self {
        let interval_nanos = DEFAULT_REFILL_EVERY_SECONDS as u128 * 1_000_000_000;
        Options {
            max_tokens: DEFAULT_MAX_TOKENS,
            refill_every_seconds: DEFAULT_REFILL_EVERY_SECONDS,
            interval_nanos,
            unit: UNITS_PER_TOKEN,
            window_ms: window_ms(DEFAULT_MAX_TOKENS, interval_nanos),
        }
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
        // generous than asked. Exact up to 2^53 s and beyond (the cast saturates).
        let interval_nanos = ((refill_every_seconds * NANOS_PER_SECOND).ceil() as u128).max(1);
        let max_tokens = max_tokens as u64;
        let unit = if max_tokens <= MAX_TOKENS_IN_BILLIONTHS {
            UNITS_PER_TOKEN
        } else {
            1
        };
        Ok(Options {
            max_tokens,
            refill_every_seconds,
            interval_nanos,
            unit,
            window_ms: window_ms(max_tokens, interval_nanos),
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

    /// The time an empty bucket takes to refill completely, in milliseconds.
    pub fn window_ms(&self) -> f64 {
        self.window_ms
    }

    /// Units per token.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// Capacity in units.
    pub fn capacity_units(&self) -> u64 {
        self.max_tokens * self.unit
    }

    /// `units` counted under `from` instead counted under these options: whole tokens keep,
    /// fractions of a token are dropped when only whole tokens are counted.
    pub fn convert_units(&self, units: u64, from: &Options) -> u64 {
        match self.unit.cmp(&from.unit) {
            core::cmp::Ordering::Equal => units,
            core::cmp::Ordering::Less => units / from.unit,
            // Above this capacity the bucket is full anyway; clamping keeps it in range.
            core::cmp::Ordering::Greater => units.min(self.max_tokens) * self.unit,
        }
    }

    /// Units as the number of tokens a caller sees, correctly rounded below 2^53 units.
    pub fn tokens(&self, units: u64) -> f64 {
        if units < 1 << 53 {
            return units as f64 / self.unit as f64;
        }
        let whole = (units / self.unit) as f64;
        whole + (units % self.unit) as f64 / self.unit as f64
    }
}

/// What a call costs, in billionths of a token. Always finite and >= 0.
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
        if cost.fract() == 0.0 && cost <= MAX_TOKENS_IN_BILLIONTHS as f64 {
            return Ok(Cost(u128::from(cost as u64 * UNITS_PER_TOKEN)));
        }
        // The whole part converts exactly; only the fraction is scaled (and rounded up).
        let whole = cost.trunc();
        let fraction = ((cost - whole) * UNITS_PER_TOKEN as f64).ceil() as u128;
        Ok(Cost(
            (whole as u128)
                .saturating_mul(UNITS_PER_TOKEN.into())
                .saturating_add(fraction),
        ))
    }

    pub const ONE: Cost = Cost(UNITS_PER_TOKEN as u128);
    pub const ZERO: Cost = Cost(0);

    /// Billionths of a token.
    pub fn billionths(self) -> u128 {
        self.0
    }

    /// The cost in the units of `options`, rounded up; `None` when it exceeds the capacity,
    /// so that no bucket under these options can ever pay it.
    pub fn units(self, options: &Options) -> Option<u64> {
        let units = if options.unit == UNITS_PER_TOKEN {
            self.0
        } else {
            div_ceil_small(self.0, UNITS_PER_TOKEN)
        };
        u64::try_from(units)
            .ok()
            .filter(|&u| u <= options.capacity_units())
    }
}

/// `max_tokens` intervals in whole milliseconds, rounded up.
fn window_ms(max_tokens: u64, interval_nanos: u128) -> f64 {
    ceil_millis(u128::from(max_tokens).saturating_mul(interval_nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_ten_tokens_every_ten_seconds() {
        let o = Options::default();
        assert_eq!(Options::new(10.0, 10.0).unwrap(), o);
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
    fn huge_capacities_count_whole_tokens() {
        let billionths = Options::new(MAX_TOKENS_IN_BILLIONTHS as f64, 1.0).unwrap();
        assert_eq!(billionths.unit(), UNITS_PER_TOKEN);
        let whole = Options::new(MAX_SAFE_INTEGER, 1.0).unwrap();
        assert_eq!(whole.unit(), 1);
        assert_eq!(whole.capacity_units(), 9_007_199_254_740_991);
        assert_eq!(Cost::new(0.1).unwrap().units(&whole), Some(1));
        assert_eq!(Cost::new(2.0).unwrap().units(&whole), Some(2));
        assert_eq!(Cost::new(11.0).unwrap().units(&Options::default()), None);
        assert_eq!(whole.convert_units(2_500_000_000, &billionths), 2);
        assert_eq!(billionths.convert_units(3, &whole), 3_000_000_000);
        assert_eq!(Options::default().convert_units(12, &whole), 10_000_000_000);
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
        assert_eq!(Cost::new(0.1).unwrap().billionths(), 100_000_000);
        assert_eq!(Cost::new(0.3).unwrap().billionths(), 300_000_000);
        assert_eq!(Cost::new(1e-12).unwrap().billionths(), 1);
        assert_eq!(Cost::new(-0.0).unwrap(), Cost::ZERO);
        assert_eq!(
            Cost::new(MAX_SAFE_INTEGER).unwrap().billionths(),
            9_007_199_254_740_991 * u128::from(UNITS_PER_TOKEN)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1e-9] {
            assert!(Cost::new(bad).is_err());
        }
        assert_eq!(Options::default().tokens(9_700_000_000), 9.7);
    }
}
