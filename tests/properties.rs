#![cfg(not(target_arch = "wasm32"))]
//! Property tests over random operation sequences: the engine against a deliberately naive
//! model of the contract (docs/SPEC.md, sections 2 and 3; it keeps every bucket and never
//! sweeps), plus the invariants.

use std::collections::HashMap;

use proptest::prelude::*;
use rate_limiter::engine::{Cost, Instant, Limiter, OptionsPatch, Request};

/// Billionths of a token, as the engine counts them for capacities like these.
const UNITS_PER_TOKEN: u128 = 1_000_000_000;

const NANOS_PER_MS: u128 = 1_000_000;

#[derive(Debug, Clone)]
enum Op {
    Consume {
        key: usize,
        cost: f64,
    },
    Check {
        key: usize,
        cost: f64,
    },
    Status {
        key: usize,
    },
    Reset {
        key: usize,
    },
    SetOptions {
        max_tokens: Option<f64>,
        refill_every_seconds: Option<f64>,
    },
    /// Milliseconds forward. (A clock that goes back is covered by the rule tests: the sweep
    /// decides fullness at the time of the call that runs it, so the model would need it too.)
    Advance {
        ms: i64,
    },
}

fn cost() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(1.0),
        Just(0.0),
        (0u32..=12).prop_map(f64::from),
        (1u32..=40).prop_map(|tenths| f64::from(tenths) / 10.0),
        (0.0f64..15.0),
    ]
}

fn op(keys: usize, options_change: bool) -> impl Strategy<Value = Op> {
    let key = 0..keys;
    let set_options = if options_change { 1 } else { 0 };
    prop_oneof![
        6 => (key.clone(), cost()).prop_map(|(key, cost)| Op::Consume { key, cost }),
        2 => (key.clone(), cost()).prop_map(|(key, cost)| Op::Check { key, cost }),
        2 => key.clone().prop_map(|key| Op::Status { key }),
        1 => key.prop_map(|key| Op::Reset { key }),
        set_options => (
            proptest::option::of((1u32..=12).prop_map(f64::from)),
            proptest::option::of(prop_oneof![Just(0.25), Just(1.0), Just(2.5), Just(10.0)]),
        )
            .prop_map(|(max_tokens, refill_every_seconds)| Op::SetOptions {
                max_tokens,
                refill_every_seconds
            }),
        4 => prop_oneof![0i64..3_000, 0i64..40_000].prop_map(|ms| Op::Advance { ms }),
    ]
}

/// The contract (docs/SPEC.md, sections 2 and 3) written as plainly as possible, tokens in
/// exact units. It keeps every bucket that is not full; a full one is forgotten, as the
/// memory rule (section 5) makes it equal to an absent one (so raising `max_tokens` leaves
/// full buckets full).
#[derive(Default)]
struct Model {
    max_tokens: u128,
    interval: u128,
    buckets: HashMap<usize, (u128, u128)>,
}

impl Model {
    fn new(max_tokens: u128, interval_ms: u128) -> Model {
        Model {
            max_tokens,
            interval: interval_ms * NANOS_PER_MS,
            buckets: HashMap::new(),
        }
    }

    fn refilled(&mut self, key: usize, now: u128) -> (u128, u128) {
        let cap = self.max_tokens * UNITS_PER_TOKEN;
        let (mut tokens, mut last) = *self.buckets.get(&key).unwrap_or(&(cap, now));
        let k = if now > last {
            (now - last) / self.interval
        } else {
            0
        };
        // Only a full bucket is forgotten; a refill is not stored until a consume changes
        // the bucket (reads change nothing).
        if tokens + k * UNITS_PER_TOKEN >= cap {
            tokens = cap;
            last = now;
            self.buckets.remove(&key);
        } else {
            tokens += k * UNITS_PER_TOKEN;
            last += k * self.interval;
        }
        (tokens, last)
    }

    /// A capacity raised or an interval lengthened does not empty buckets already full.
    fn set_options(&mut self, max_tokens: Option<f64>, every: Option<f64>, now: u128) {
        let max_tokens = max_tokens.map_or(self.max_tokens, |m| m as u128);
        let interval = every.map_or(self.interval, |s| (s * 1e9) as u128);
        if max_tokens > self.max_tokens || interval > self.interval {
            let cap = self.max_tokens * UNITS_PER_TOKEN;
            let old_interval = self.interval;
            self.buckets.retain(|_, &mut (tokens, last)| {
                let k = if now > last {
                    (now - last) / old_interval
                } else {
                    0
                };
                tokens + k * UNITS_PER_TOKEN < cap
            });
        }
        self.max_tokens = max_tokens;
        self.interval = interval;
    }

    fn consume(&mut self, key: usize, cost: u128, now: u128) -> bool {
        let (tokens, last) = self.refilled(key, now);
        if tokens >= cost {
            if tokens - cost < self.max_tokens * UNITS_PER_TOKEN {
                self.buckets.insert(key, (tokens - cost, last));
            }
            true
        } else {
            false
        }
    }

    fn remaining_units(&mut self, key: usize, now: u128) -> u128 {
        self.refilled(key, now).0
    }

    fn reset_in_ms(&mut self, key: usize, now: u128) -> u128 {
        let (tokens, last) = self.refilled(key, now);
        if tokens == self.max_tokens * UNITS_PER_TOKEN {
            0
        } else {
            (last + self.interval)
                .saturating_sub(now)
                .div_ceil(NANOS_PER_MS)
        }
    }
}

fn key_bytes(key: usize) -> Vec<u8> {
    // Keys that share prefixes and differ only in their tail.
    format!("key-{key}").into_bytes()
}

const START_MS: u128 = 1_800_000_000_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The engine answers exactly like the naive model, whatever the sequence, so the
    /// sweep and the full-bucket shortcut never lose state; the invariants hold throughout.
    #[test]
    fn engine_matches_the_naive_model(ops in proptest::collection::vec(op(6, true), 1..200)) {
        let mut engine = Limiter::new(42);
        let mut model = Model::new(10, 10_000);
        let mut now = START_MS;
        for op in ops {
            let at = Instant::from_millis(now as f64);
            let now_ns = now * NANOS_PER_MS;
            match op {
                Op::Consume { key, cost } => {
                    let c = Cost::new(cost).unwrap();
                    let before = engine.status(&key_bytes(key), at);
                    let would = engine.check(&key_bytes(key), c, at);
                    let did = engine.consume(&key_bytes(key), c, at);
                    prop_assert_eq!(would, did, "check must predict consume");
                    prop_assert_eq!(did, model.consume(key, c.billionths(), now_ns));
                    if !did {
                        prop_assert_eq!(engine.status(&key_bytes(key), at), before);
                    }
                }
                Op::Check { key, cost } => {
                    let c = Cost::new(cost).unwrap();
                    let before = engine.status(&key_bytes(key), at);
                    let answer = engine.check(&key_bytes(key), c, at);
                    prop_assert_eq!(answer, model.remaining_units(key, now_ns) >= c.billionths());
                    prop_assert_eq!(engine.status(&key_bytes(key), at), before);
                }
                Op::Status { key } => {
                    let s = engine.status(&key_bytes(key), at);
                    let units = model.remaining_units(key, now_ns);
                    prop_assert_eq!(s.remaining, units as f64 / UNITS_PER_TOKEN as f64);
                    prop_assert_eq!(s.reset_in_ms, model.reset_in_ms(key, now_ns) as f64);
                    prop_assert!(s.remaining >= 0.0 && s.remaining <= s.limit);
                    prop_assert_eq!(s.limit, model.max_tokens as f64);
                }
                Op::Reset { key } => {
                    engine.reset(&key_bytes(key));
                    model.buckets.remove(&key);
                    let s = engine.status(&key_bytes(key), at);
                    prop_assert_eq!((s.remaining, s.reset_in_ms), (s.limit, 0.0));
                }
                Op::SetOptions { max_tokens, refill_every_seconds } => {
                    engine.set_options(OptionsPatch { max_tokens, refill_every_seconds }, at).unwrap();
                    model.set_options(max_tokens, refill_every_seconds, now_ns);
                }
                Op::Advance { ms } => now += ms as u128,
            }
        }
    }

    /// For any window of time of length `T`, the tokens consumed inside it never exceed
    /// `max_tokens + floor(T / interval)` when costs are whole numbers. A window can hold
    /// `floor(T / interval) + 1` refill moments, and with fractional costs the bucket can
    /// enter one with more than `max_tokens - 1` tokens, so then the sharp bound is
    /// `< max_tokens + floor(T / interval) + 1` (README, "The guarantee").
    #[test]
    fn the_token_bucket_bound_holds_over_every_window(
        max_tokens in 1u32..=8,
        interval_ms in prop_oneof![Just(250u32), Just(1_000), Just(3_333), 1u32..20_000],
        whole_costs in any::<bool>(),
        ops in proptest::collection::vec(op(2, false), 1..300),
    ) {
        let mut engine = Limiter::new(3);
        engine.set_options(OptionsPatch {
            max_tokens: Some(max_tokens.into()),
            refill_every_seconds: Some(f64::from(interval_ms) / 1000.0),
        }, Instant::default()).unwrap();
        let interval = u128::from(interval_ms) * NANOS_PER_MS;
        let mut now = START_MS;
        let mut taken: [Vec<(u128, u128)>; 2] = [Vec::new(), Vec::new()];
        for op in ops {
            match op {
                Op::Consume { key, cost } => {
                    let c = Cost::new(if whole_costs { cost.ceil() } else { cost }).unwrap();
                    if engine.consume(&key_bytes(key), c, Instant::from_millis(now as f64)) {
                        taken[key].push((now * NANOS_PER_MS, c.billionths()));
                    }
                }
                Op::Advance { ms } => now += ms as u128,
                _ => {}
            }
        }
        for events in &taken {
            for i in 0..events.len() {
                let mut sum = 0;
                for j in i..events.len() {
                    sum += events[j].1;
                    let window = events[j].0 - events[i].0;
                    let whole = (u128::from(max_tokens) + window / interval) * UNITS_PER_TOKEN;
                    if whole_costs {
                        prop_assert!(sum <= whole, "{} units in {} ns, bound {}", sum, window, whole);
                    } else {
                        let bound = whole + UNITS_PER_TOKEN;
                        prop_assert!(sum < bound, "{} units in {} ns, bound {}", sum, window, bound);
                    }
                }
            }
        }
    }

    /// Under key churn the store holds little more than the buckets that are not yet full.
    #[test]
    fn stored_buckets_stay_bounded_under_key_churn(
        step_ms in 1u64..50,
        keys in 2_000u32..6_000,
    ) {
        let mut engine = Limiter::new(9);
        engine.set_options(OptionsPatch { max_tokens: Some(2.0), refill_every_seconds: Some(1.0) }, Instant::default()).unwrap();
        let mut peak = 0;
        for i in 0..keys {
            let now = Instant::from_millis((START_MS as u64 + u64::from(i) * step_ms) as f64);
            engine.consume(&i.to_le_bytes(), Cost::ONE, now);
            peak = peak.max(engine.stored_buckets());
        }
        // A bucket refills to full 1 s after its only use: at most 1000/step_ms + 1 are live.
        let live = 1000 / step_ms as usize + 1;
        prop_assert!(peak <= 2 * live, "peak {} with {} live", peak, live);
    }

    /// `limit` agrees with `check` + `consume` + `getStatus` on a twin limiter, and its
    /// retry time is exact: the same call fails 1 ms earlier and succeeds right then.
    #[test]
    fn limit_agrees_with_check_consume_and_status(
        ops in proptest::collection::vec(op(3, true), 1..150),
    ) {
        let mut one_call = Limiter::new(5);
        let mut three_calls = Limiter::new(6);
        let mut now = START_MS;
        for op in ops {
            let at = Instant::from_millis(now as f64);
            match op {
                Op::Consume { key, cost } | Op::Check { key, cost } => {
                    let c = Cost::new(cost).unwrap();
                    let k = key_bytes(key);
                    let d = one_call.limit(&k, c, None, at).unwrap();
                    let would = three_calls.check(&k, c, at);
                    prop_assert_eq!(d.allowed, would);
                    prop_assert_eq!(three_calls.consume(&k, c, at), would);
                    prop_assert_eq!(d.status, three_calls.status(&k, at));
                    match d.retry_after_ms {
                        Some(ms) if !d.allowed => {
                            let earlier = Instant::from_millis(now as f64 + ms - 1.0);
                            let ready = Instant::from_millis(now as f64 + ms);
                            prop_assert!(!one_call.clone().check(&k, c, earlier));
                            prop_assert!(one_call.clone().check(&k, c, ready));
                        }
                        Some(ms) => prop_assert_eq!(ms, 0.0),
                        None => prop_assert!(c.billionths() > u128::from(one_call.options().max_tokens()) * UNITS_PER_TOKEN),
                    }
                }
                Op::Status { key } => {
                    let k = key_bytes(key);
                    prop_assert_eq!(one_call.status(&k, at), three_calls.status(&k, at));
                }
                Op::Reset { key } => {
                    one_call.reset(&key_bytes(key));
                    three_calls.reset(&key_bytes(key));
                }
                Op::SetOptions { max_tokens, refill_every_seconds } => {
                    let patch = OptionsPatch { max_tokens, refill_every_seconds };
                    one_call.set_options(patch, at).unwrap();
                    three_calls.set_options(patch, at).unwrap();
                }
                Op::Advance { ms } => now += ms as u128,
            }
        }
    }

    /// `limit_all` is all or nothing over its enforced members: either every enforced
    /// member consumed exactly as a lone `limit` would have, or no bucket lost a token (each
    /// only took its policy). Shadow members never change the answer; when it is yes, each
    /// behaves exactly as a lone `limit` (takes its cost if it has room), else takes nothing.
    #[test]
    fn limit_all_consumes_everywhere_or_nowhere(
        ops in proptest::collection::vec(op(4, false), 1..60),
        members in proptest::collection::vec((cost(), proptest::option::of((1u32..=12, prop_oneof![Just(0.25), Just(1.0), Just(10.0)])), proptest::bool::weighted(0.3)), 1..4),
    ) {
        let mut engine = Limiter::new(8);
        let mut now = START_MS;
        for op in ops {
            let at = Instant::from_millis(now as f64);
            match op {
                Op::Consume { key, cost } => { engine.consume(&key_bytes(key), Cost::new(cost).unwrap(), at); }
                Op::Advance { ms } => now += ms as u128,
                _ => {}
            }
            let keys: Vec<Vec<u8>> = (0..members.len()).map(key_bytes).collect();
            let requests: Vec<Request<'_>> = members.iter().zip(&keys).map(|((c, p, shadow), key)| Request {
                key,
                cost: Cost::new(*c).unwrap(),
                policy: p.map(|(m, s)| OptionsPatch { max_tokens: Some(m.into()), refill_every_seconds: Some(s) }),
                shadow: *shadow,
                penalty: None,
            }).collect();
            let at = Instant::from_millis(now as f64);
            let before = engine.clone();
            let all = engine.limit_all(&requests, at).unwrap();
            for (request, result) in requests.iter().zip(&all.results) {
                let mut alone = before.clone();
                let d = alone.limit(request.key, request.cost, request.policy, at).unwrap();
                prop_assert_eq!(result.allowed, d.allowed);
                if all.allowed {
                    prop_assert_eq!(result, &d);
                    prop_assert_eq!(engine.status(request.key, at), alone.status(request.key, at));
                }
            }
            let enforced = || requests.iter().zip(&all.results).filter(|(r, _)| !r.shadow).map(|(_, d)| d);
            prop_assert_eq!(all.allowed, enforced().all(|d| d.allowed));
            let wait = enforced().try_fold(0.0, |most: f64, d| d.retry_after_ms.map(|ms| most.max(ms)));
            prop_assert_eq!(all.retry_after_ms, wait);
            if !all.allowed {
                // Nothing consumed: each bucket is as it was, with its policy applied.
                for request in &requests {
                    let mut expected = before.clone();
                    expected.limit(request.key, Cost::ZERO, request.policy, at).unwrap();
                    prop_assert_eq!(engine.status(request.key, at), expected.status(request.key, at));
                }
            }
        }
    }

    /// Waiting exactly `retry_after_ms` makes the same `limit` call succeed and 1 ms less
    /// does not, also when calls bring changing policies.
    #[test]
    fn retry_times_are_exact_when_policies_change(
        calls in proptest::collection::vec((
            0usize..2,
            cost(),
            proptest::option::of((1u32..=12, prop_oneof![Just(0.25), Just(1.0), Just(3.0), Just(10.0)])),
            0u32..20_000,
        ), 1..80),
    ) {
        let mut engine = Limiter::new(11);
        let mut now = START_MS as f64;
        for (key, c, policy, advance) in calls {
            now += f64::from(advance);
            let k = key_bytes(key);
            let c = Cost::new(c).unwrap();
            let p = policy.map(|(m, s)| OptionsPatch { max_tokens: Some(m.into()), refill_every_seconds: Some(s) });
            let d = engine.limit(&k, c, p, Instant::from_millis(now)).unwrap();
            if let (false, Some(ms)) = (d.allowed, d.retry_after_ms) {
                let early = engine.clone().limit(&k, c, p, Instant::from_millis(now + ms - 1.0)).unwrap();
                prop_assert!(!early.allowed, "allowed 1 ms before the {} ms it reported", ms);
                let ready = engine.clone().limit(&k, c, p, Instant::from_millis(now + ms)).unwrap();
                prop_assert!(ready.allowed, "still denied after the {} ms it reported", ms);
            }
        }
    }
}
