//! Strategies that several property tests draw their calls from.

use std::collections::HashMap;

use proptest::prelude::*;
use rate_limiter::engine::{Cost, Lease, OptionsPatch, Request, Settlement};

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

/// The keys of a `limit_all` call: each key once, in key order, named by `name`, with its cost.
pub fn keys_of(keys: &[(u8, f64)], name: impl Fn(u8) -> Vec<u8>) -> Vec<(Vec<u8>, Cost)> {
    let mut keys = keys.to_vec();
    keys.sort_by_key(|(k, _)| *k);
    keys.dedup_by_key(|(k, _)| *k);
    keys.iter()
        .map(|(k, c)| (name(*k), Cost::new(*c).unwrap()))
        .collect()
}

/// The requests of a `limit_all` call over `keys` (from [`keys_of`]): no policy, no penalty.
pub fn requests(keys: &[(Vec<u8>, Cost)]) -> Vec<Request<'_>> {
    keys.iter()
        .map(|(key, cost)| Request {
            key,
            cost: *cost,
            policy: None,
            shadow: false,
            penalty: None,
        })
        .collect()
}

/// What two limiters that must answer alike granted, side by side (each has its own ids): the
/// last lease per key, and the permits per key in the order granted.
#[derive(Default)]
pub struct Granted {
    leases: [HashMap<u8, Lease>; 2],
    permits: [HashMap<u8, Vec<u64>>; 2],
}

impl Granted {
    /// Settles `side`'s last lease on `key` having spent `used` of it, if `used` is given.
    pub fn settlement(&mut self, side: usize, key: u8, used: Option<u8>) -> Option<Settlement> {
        let used = Cost::new(f64::from(used?)).unwrap();
        let lease = self.leases[side].remove(&key)?;
        Some(Settlement {
            id: lease.id,
            used,
            left: None,
        })
    }

    /// The leases each side granted on `key` now, if any.
    pub fn leased(&mut self, key: u8, granted: [Option<Lease>; 2]) {
        for (side, lease) in granted.into_iter().enumerate() {
            if let Some(lease) = lease {
                self.leases[side].insert(key, lease);
            }
        }
    }

    /// The permits each side granted on `key` now, if any.
    pub fn permitted(&mut self, key: u8, granted: [Option<u64>; 2]) {
        for (side, id) in granted.into_iter().enumerate() {
            if let Some(id) = id {
                self.permits[side].entry(key).or_default().push(id);
            }
        }
    }

    /// Each side's `nth` permit on `key`, when both granted one.
    pub fn permit(&self, key: u8, nth: u8) -> Option<(u64, u64)> {
        let nth = usize::from(nth);
        let of = |side: usize| self.permits[side].get(&key)?.get(nth).copied();
        Some((of(0)?, of(1)?))
    }
}
