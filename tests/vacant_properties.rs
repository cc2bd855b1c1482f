#![cfg(not(target_arch = "wasm32"))]
//! Property tests of `holds_nothing`, which lets the shim free a limiter nobody may be using
//! any more (where the runtime has no finalizers): a limiter that holds nothing, replaced at
//! that moment by a new one with the same options, answers every later call exactly as the
//! limiter that was kept. And a limiter left alone long enough always comes to hold nothing,
//! so no limiter stays in memory for ever.

mod shared;

use proptest::prelude::*;
use rate_limiter::engine::{
    Cost, GatePolicy, Instant, Lease, LeaseAsk, Limiter, OptionsPatch, Request,
};
use shared::{cost, keys_of, patch, requests, Granted};

#[derive(Debug, Clone)]
enum Op {
    Consume {
        key: u8,
        cost: f64,
    },
    Check {
        key: u8,
        cost: f64,
    },
    Status {
        key: u8,
    },
    Reset {
        key: u8,
    },
    Limit {
        key: u8,
        cost: f64,
        policy: Option<OptionsPatch>,
        penalty_ms: Option<u32>,
    },
    LimitAll {
        keys: Vec<(u8, f64)>,
    },
    SetOptions(OptionsPatch),
    Advance {
        ms: u32,
    },
    /// A holder's lease call: settles its last lease on the key having spent `used` of it
    /// (if given), then asks for `want` more, or for a share of the refill when `rate` > 0;
    /// with `queue`, for appointments too.
    Lease {
        key: u8,
        cost: f64,
        want: u8,
        used: Option<u8>,
        rate: u8,
        queue: bool,
    },
    Refund {
        key: u8,
        tokens: f64,
    },
    Acquire {
        key: u8,
        cost: u8,
        max: u8,
    },
    /// Releases the `nth` permit granted on the key (released, expired or live).
    Release {
        key: u8,
        nth: u8,
    },
    Block {
        key: u8,
        ms: u32,
    },
    Unblock {
        key: u8,
    },
    /// Where the shim may free the limiter: replaced by a new one if it holds nothing.
    Renew,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..4;
    prop_oneof![
        6 => (key.clone(), cost()).prop_map(|(key, cost)| Op::Consume { key, cost }),
        2 => (key.clone(), cost()).prop_map(|(key, cost)| Op::Check { key, cost }),
        2 => key.clone().prop_map(|key| Op::Status { key }),
        1 => key.clone().prop_map(|key| Op::Reset { key }),
        3 => (key.clone(), cost(), proptest::option::of(patch()), proptest::option::of(1u32..20_000))
            .prop_map(|(key, cost, policy, penalty_ms)| Op::Limit { key, cost, policy, penalty_ms }),
        1 => proptest::collection::vec((key.clone(), cost()), 1..3).prop_map(|keys| Op::LimitAll { keys }),
        1 => patch().prop_map(Op::SetOptions),
        5 => prop_oneof![0u32..3_000, 0u32..40_000, 0u32..200_000].prop_map(|ms| Op::Advance { ms }),
        3 => (key.clone(), cost(), 0u8..8, proptest::option::of(0u8..5), prop_oneof![Just(0u8), 1u8..20])
            .prop_map(|(key, cost, want, used, rate)| Op::Lease { key, cost, want, used, rate, queue: want % 2 == 1 }),
        1 => (key.clone(), cost()).prop_map(|(key, tokens)| Op::Refund { key, tokens }),
        3 => (key.clone(), 1u8..=2, 1u8..=3).prop_map(|(key, cost, max)| Op::Acquire { key, cost, max }),
        2 => (key.clone(), 0u8..6).prop_map(|(key, nth)| Op::Release { key, nth }),
        1 => (key.clone(), 1u32..20_000).prop_map(|(key, ms)| Op::Block { key, ms }),
        1 => key.prop_map(|key| Op::Unblock { key }),
        4 => Just(Op::Renew),
    ]
}

fn key_bytes(key: u8) -> Vec<u8> {
    format!("key-{key}").into_bytes()
}

/// A new limiter with the options of `old`, as the shim makes it: from the options it reads.
fn renewed(old: &Limiter, seed: u64, now: Instant) -> Limiter {
    let options = old.options();
    let mut fresh = Limiter::new(seed);
    let patch = OptionsPatch {
        max_tokens: Some(options.max_tokens() as f64),
        refill_every_seconds: Some(options.refill_every_seconds()),
    };
    fresh.set_options(patch, now).unwrap();
    fresh
}

const START_MS: f64 = 1_800_000_000_000.0;
/// Longer than any state the ops can create lives: 12 tokens at 10 s, a 20 s block, a
/// share's terms, a permit's 5 s.
const QUIET_MS: f64 = 3_600_000.0;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_limiter_that_holds_nothing_can_be_made_anew(ops in proptest::collection::vec(op(), 1..150)) {
        let mut kept = Limiter::new(3);
        let mut renewable = Limiter::new(5);
        let mut seed = 5;
        let mut renewals = 0;
        let mut now_ms = START_MS;
        let mut granted = Granted::default();
        for op in ops {
            let now = Instant::from_millis(now_ms);
            match op {
                Op::Consume { key, cost } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    prop_assert_eq!(renewable.consume(&k, c, now), kept.consume(&k, c, now));
                }
                Op::Check { key, cost } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    prop_assert_eq!(renewable.check(&k, c, now), kept.check(&k, c, now));
                }
                Op::Status { key } => {
                    let k = key_bytes(key);
                    prop_assert_eq!(renewable.status(&k, now), kept.status(&k, now));
                }
                Op::Reset { key } => {
                    let k = key_bytes(key);
                    renewable.reset(&k);
                    kept.reset(&k);
                }
                Op::Limit { key, cost, policy, penalty_ms } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    let penalty = penalty_ms.map(|ms| u64::from(ms) * 1_000_000);
                    let request = [Request { key: &k, cost: c, policy, shadow: false, penalty }];
                    let r = renewable.limit_all(&request, now);
                    let m = kept.limit_all(&request, now);
                    prop_assert_eq!(r.ok(), m.ok());
                }
                Op::LimitAll { keys } => {
                    let owned = keys_of(&keys, key_bytes);
                    let requests = requests(&owned);
                    prop_assert_eq!(renewable.limit_all(&requests, now).unwrap(), kept.limit_all(&requests, now).unwrap());
                }
                Op::SetOptions(patch) => {
                    prop_assert_eq!(renewable.set_options(patch, now).is_ok(), kept.set_options(patch, now).is_ok());
                }
                Op::Lease { key, cost, want, used, rate, queue } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    let want = Cost::new(f64::from(want)).unwrap();
                    let (settle_r, settle_k) = (granted.settlement(0, key, used), granted.settlement(1, key, used));
                    let ask = LeaseAsk { want, rate: f64::from(rate), renew: None, queue, id: None };
                    let r = renewable.limit_shared(&k, c, None, settle_r, ask, now).unwrap();
                    let m = kept.limit_shared(&k, c, None, settle_k, ask, now).unwrap();
                    prop_assert_eq!(r.decision, m.decision);
                    let terms = |l: Option<Lease>| l.map(|l| (l.billionths, l.parts, l.expires_at, l.ends_at()));
                    prop_assert_eq!(terms(r.lease), terms(m.lease));
                    granted.leased(key, [r.lease, m.lease]);
                }
                Op::Refund { key, tokens } => {
                    let (k, t) = (key_bytes(key), Cost::new(tokens).unwrap());
                    renewable.refund(&k, t, now);
                    kept.refund(&k, t, now);
                }
                Op::Acquire { key, cost, max } => {
                    let k = key_bytes(key);
                    let policy = GatePolicy::new(f64::from(max), Some(5.0)).unwrap();
                    let r = renewable.acquire(&k, cost.into(), policy, now);
                    let m = kept.acquire(&k, cost.into(), policy, now);
                    prop_assert_eq!((r.allowed, r.in_flight, r.ttl_ms, r.retry_after_ms), (m.allowed, m.in_flight, m.ttl_ms, m.retry_after_ms));
                    granted.permitted(key, [r.id, m.id]);
                }
                Op::Release { key, nth } => {
                    let k = key_bytes(key);
                    let Some((r_id, m_id)) = granted.permit(key, nth) else {
                        continue;
                    };
                    prop_assert_eq!(renewable.release(&k, r_id, now), kept.release(&k, m_id, now));
                }
                Op::Block { key, ms } => {
                    let k = key_bytes(key);
                    let nanos = u64::from(ms) * 1_000_000;
                    renewable.block(&k, nanos, now);
                    kept.block(&k, nanos, now);
                }
                Op::Unblock { key } => {
                    let k = key_bytes(key);
                    prop_assert_eq!(renewable.unblock(&k, now), kept.unblock(&k, now));
                }
                Op::Advance { ms } => now_ms += f64::from(ms),
                Op::Renew => {
                    if renewable.holds_nothing(now) {
                        seed += 1;
                        renewable = renewed(&renewable, seed, now);
                        renewals += 1;
                    }
                }
            }
            prop_assert_eq!(renewable.options(), kept.options());
        }
        // Left alone, every limiter comes to hold nothing.
        let later = Instant::from_millis(now_ms + QUIET_MS);
        prop_assert!(kept.holds_nothing(later), "still holds something after {} ms alone", QUIET_MS);
        prop_assert!(renewable.holds_nothing(later));
        let _ = renewals;
    }
}

/// A limiter with 2 tokens, one back per second.
fn two_per_second(now: Instant) -> Limiter {
    let mut limiter = Limiter::new(11);
    let patch = OptionsPatch {
        max_tokens: Some(2.0),
        refill_every_seconds: Some(1.0),
    };
    limiter.set_options(patch, now).unwrap();
    limiter
}

#[test]
fn a_bucket_that_is_not_full_is_something_held() {
    let now = Instant::from_millis(START_MS);
    let mut limiter = two_per_second(now);
    assert!(limiter.holds_nothing(now));
    assert!(limiter.consume(b"a", Cost::new(1.0).unwrap(), now));
    assert!(!limiter.holds_nothing(now));
    assert!(!limiter.holds_nothing(Instant::from_millis(START_MS + 999.0)));
    assert!(limiter.holds_nothing(Instant::from_millis(START_MS + 1_000.0)));
}

#[test]
fn a_block_a_permit_or_a_lease_in_force_is_something_held() {
    let now = Instant::from_millis(START_MS);
    let at = |ms: f64| Instant::from_millis(START_MS + ms);

    let mut blocked = two_per_second(now);
    blocked.block(b"a", 5_000_000_000, now);
    assert!(!blocked.holds_nothing(at(4_999.0)));
    assert!(blocked.holds_nothing(at(5_000.0)));

    let mut gated = two_per_second(now);
    let policy = GatePolicy::new(1.0, Some(2.0)).unwrap();
    assert!(gated.acquire(b"a", 1, policy, now).allowed);
    assert!(!gated.holds_nothing(at(1_999.0)));
    assert!(gated.holds_nothing(at(2_000.0)));

    let mut leased = two_per_second(now);
    let ask = LeaseAsk {
        want: Cost::new(1.0).unwrap(),
        ..LeaseAsk::default()
    };
    let granted = leased
        .limit_shared(b"a", Cost::ZERO, None, None, ask, now)
        .unwrap();
    let lease = granted.lease.expect("a lease of one token");
    // Unsettled, the lease counts as spent until it ends; then the bucket refills.
    assert!(!leased.holds_nothing(Instant::from_nanos(lease.ends_at().as_nanos() - 1)));
    assert!(leased.holds_nothing(Instant::from_nanos(
        lease.ends_at().as_nanos() + 1_000_000_000
    )));
}

#[test]
fn a_check_drops_the_full_buckets_it_walks_and_keeps_the_rest() {
    let now = Instant::from_millis(START_MS);
    let mut limiter = two_per_second(now);
    for key in 0..1_000u32 {
        assert!(limiter.consume(&key.to_le_bytes(), Cost::new(1.0).unwrap(), now));
    }
    let later = Instant::from_millis(START_MS + 1_000.0);
    assert!(limiter.stored_buckets() > 100);
    // One bucket that is not full: the check stops there, keeping it.
    assert!(limiter.consume(b"busy", Cost::new(2.0).unwrap(), later));
    assert!(!limiter.holds_nothing(later));
    assert!(limiter.holds(b"busy"));
    assert_eq!(limiter.status(b"busy", later).remaining, 0.0);
    // Once it is full too, one check walks and drops everything.
    let end = Instant::from_millis(START_MS + 3_000.0);
    assert!(limiter.holds_nothing(end));
    assert_eq!(limiter.stored_buckets(), 0);
}
