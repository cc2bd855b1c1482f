//! Strategies that several property tests draw their calls from.

use proptest::prelude::*;
use rate_limiter::engine::OptionsPatch;

/// A partial options update: capacities of 1 to 12, intervals from a quarter second to 10 s.
pub fn patch() -> impl Strategy<Value = OptionsPatch> {
    (
        proptest::option::of((1u32..=12).prop_map(f64::from)),
        proptest::option::of(prop_oneof![Just(0.25), Just(1.0), Just(2.5), Just(10.0)]),
    )
        .prop_map(|(max_tokens, refill_every_seconds)| OptionsPatch {
            max_tokens,
            refill_every_seconds,
        })
}

/// A cost: mostly 1, sometimes 0, whole or fractional.
pub fn cost() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(1.0),
        Just(0.0),
        (0u32..=6).prop_map(f64::from),
        (0.0f64..4.0)
    ]
}
