//! The rules of blocks (docs/SPEC.md, section 13), one by one, on the engine, and a property:
//! a blocked key admits nothing before its block ends and, once it has, answers exactly as a
//! key that never met the calls of the block.

use proptest::prelude::*;
use rate_limiter::engine::{block_nanos, Cost, Instant, LeaseAsk, Limiter, OptionsPatch, Request};

fn at_ms(ms: f64) -> Instant {
    Instant::from_millis(1_800_000_000_000.0 + ms)
}

fn cost(c: f64) -> Cost {
    Cost::new(c).unwrap()
}

const SECOND: u64 = 1_000_000_000;

#[test]
fn a_blocked_key_is_denied_every_call_with_the_time_left_and_takes_nothing() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(3.0), at_ms(0.0)));
    l.block(b"k", 5 * SECOND, at_ms(0.0));
    assert!(!l.check(b"k", cost(1.0), at_ms(1.0)));
    assert!(!l.consume(b"k", cost(1.0), at_ms(1.0)));
    let d = l.limit(b"k", cost(1.0), None, at_ms(1_000.0)).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, Some(4_000.0));
    assert_eq!(d.status.remaining, 7.0, "the bucket is left as it was");
    let all = l
        .limit_all(
            &[Request {
                key: b"k",
                cost: cost(1.0),
                policy: None,
                shadow: false,
                penalty: None,
            }],
            at_ms(1_000.0),
        )
        .unwrap();
    assert!(!all.allowed);
    assert_eq!(all.retry_after_ms, Some(4_000.0));
    // A cost no wait can pass stays so.
    assert_eq!(
        l.limit(b"k", cost(11.0), None, at_ms(1_000.0))
            .unwrap()
            .retry_after_ms,
        None
    );
    // Once the block ends, the bucket has refilled as usual.
    assert!(l.consume(b"k", cost(1.0), at_ms(5_000.0)));
    assert_eq!(l.status(b"k", at_ms(5_000.0)).remaining, 6.0);
}

#[test]
fn a_blocked_key_is_granted_and_renewed_nothing() {
    let mut l = Limiter::new(1);
    let ask = LeaseAsk {
        want: cost(4.0),
        ..LeaseAsk::default()
    };
    l.block(b"k", SECOND, at_ms(0.0));
    let d = l
        .limit_shared(b"k", cost(1.0), None, None, ask, at_ms(0.0))
        .unwrap();
    assert!(!d.decision.allowed && d.lease.is_none());
    let share = LeaseAsk {
        rate: 50.0,
        ..LeaseAsk::default()
    };
    assert!(l
        .limit_shared(b"k", cost(0.0), None, None, share, at_ms(1.0))
        .unwrap()
        .lease
        .is_none());
    assert!(l
        .limit_shared(b"k", cost(1.0), None, None, ask, at_ms(1_000.0))
        .unwrap()
        .lease
        .is_some());
}

#[test]
fn a_blocked_enforced_member_denies_all_and_a_blocked_shadow_member_nothing() {
    let mut l = Limiter::new(1);
    l.block(b"daily", 10 * SECOND, at_ms(0.0));
    let members = |shadow| {
        [
            Request {
                key: b"second",
                cost: cost(1.0),
                policy: None,
                shadow: false,
                penalty: None,
            },
            Request {
                key: b"daily",
                cost: cost(1.0),
                policy: None,
                shadow,
                penalty: None,
            },
        ]
    };
    let trial = l.limit_all(&members(true), at_ms(0.0)).unwrap();
    assert!(trial.allowed && !trial.results[1].allowed);
    let enforced = l.limit_all(&members(false), at_ms(0.0)).unwrap();
    assert!(!enforced.allowed);
    assert_eq!(enforced.retry_after_ms, Some(10_000.0));
    assert_eq!(
        l.status(b"second", at_ms(0.0)).remaining,
        9.0,
        "only the trial's request took"
    );
}

#[test]
fn a_penalty_does_not_extend_a_block_and_unblock_ends_one() {
    let mut l = Limiter::new(1);
    assert!(l.penalize(b"k", 10 * SECOND, at_ms(0.0)));
    assert!(!l.penalize(b"k", 60 * SECOND, at_ms(5_000.0)));
    assert_eq!(l.blocked_until(b"k", at_ms(5_000.0)), Some(at_ms(10_000.0)));
    // An operator's block replaces it, shorter or longer.
    l.block(b"k", SECOND, at_ms(5_000.0));
    assert_eq!(l.blocked_until(b"k", at_ms(5_000.0)), Some(at_ms(6_000.0)));
    assert!(l.unblock(b"k", at_ms(5_500.0)));
    assert!(!l.unblock(b"k", at_ms(5_500.0)));
    assert!(l.consume(b"k", cost(1.0), at_ms(5_500.0)));
    // reset refills the bucket, and lifts no block.
    l.block(b"k", SECOND, at_ms(6_000.0));
    l.reset(b"k");
    assert!(!l.consume(b"k", cost(1.0), at_ms(6_000.0)));
}

#[test]
fn a_penalty_blocks_the_key_of_a_denial_and_the_denial_says_so() {
    let mut l = Limiter::new(1);
    let policy = Some(OptionsPatch {
        max_tokens: Some(2.0),
        refill_every_seconds: Some(1.0),
    });
    for _ in 0..2 {
        assert!(
            l.limit(b"login", cost(1.0), policy, at_ms(0.0))
                .unwrap()
                .allowed
        );
    }
    let mut denied = l.limit(b"login", cost(1.0), policy, at_ms(0.0)).unwrap();
    assert_eq!(denied.retry_after_ms, Some(1_000.0));
    l.apply_penalty(b"login", &mut denied, 900 * SECOND, at_ms(0.0));
    assert_eq!(denied.retry_after_ms, Some(900_000.0));
    // A denial during the block does not extend it.
    let mut again = l
        .limit(b"login", cost(1.0), policy, at_ms(100_000.0))
        .unwrap();
    l.apply_penalty(b"login", &mut again, 900 * SECOND, at_ms(100_000.0));
    assert_eq!(again.retry_after_ms, Some(800_000.0));
    // An allowed call is not penalized.
    let mut allowed = l.limit(b"other", cost(1.0), policy, at_ms(0.0)).unwrap();
    l.apply_penalty(b"other", &mut allowed, 900 * SECOND, at_ms(0.0));
    assert_eq!(l.blocked_until(b"other", at_ms(0.0)), None);
}

#[test]
fn in_limit_all_only_an_enforced_member_without_room_is_penalized() {
    let mut l = Limiter::new(1);
    let tight = Some(OptionsPatch {
        max_tokens: Some(1.0),
        refill_every_seconds: Some(60.0),
    });
    let member = |key, shadow| Request {
        key,
        cost: cost(1.0),
        policy: tight,
        shadow,
        penalty: Some(300 * SECOND),
    };
    let members = [member(b"a", false), member(b"b", false), member(b"c", true)];
    assert!(l.consume(b"unrelated", cost(1.0), at_ms(0.0)));
    assert!(
        l.limit_all(&[member(b"a", false)], at_ms(0.0))
            .unwrap()
            .allowed
    );
    assert!(
        l.limit_all(&[member(b"c", false)], at_ms(0.0))
            .unwrap()
            .allowed
    );
    let all = l.limit_all(&members, at_ms(0.0)).unwrap();
    assert!(!all.allowed);
    assert_eq!(all.retry_after_ms, Some(300_000.0));
    assert!(
        l.blocked_until(b"a", at_ms(0.0)).is_some(),
        "no room: penalized"
    );
    assert!(
        l.blocked_until(b"b", at_ms(0.0)).is_none(),
        "had room: not at fault"
    );
    assert!(
        l.blocked_until(b"c", at_ms(0.0)).is_none(),
        "on trial: never blocks"
    );
}

#[test]
fn blocks_in_force_are_listed_and_those_over_are_swept() {
    let mut l = Limiter::new(1);
    for i in 0..1_000u32 {
        l.block(&i.to_le_bytes(), SECOND, at_ms(0.0));
    }
    l.block(b"long", 100 * SECOND, at_ms(0.0));
    assert_eq!(l.blocks(at_ms(0.0)).len(), 1_001);
    assert_eq!(
        l.blocks(at_ms(2_000.0)),
        vec![(b"long".to_vec(), at_ms(100_000.0))]
    );
    for i in 0..400 {
        l.consume(b"long", cost(1.0), at_ms(2_000.0 + f64::from(i)));
    }
    assert_eq!(l.blocked_keys(), 1);
}

#[test]
fn block_lengths_are_validated_naming_the_field() {
    assert_eq!(block_nanos(1.5, "seconds").unwrap(), 1_500_000_000);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 31_536_001.0] {
        let error = block_nanos(bad, "seconds").unwrap_err().to_string();
        assert!(
            error.starts_with("seconds must be a finite number > 0 and at most 31536000"),
            "{error}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn blocked_keys_admit_nothing_and_then_answer_as_if_never_called(
        ops in proptest::collection::vec(prop_oneof![
            4 => (1u8..=3).prop_map(|c| (0u8, u64::from(c))),
            2 => (1u64..3_000).prop_map(|ms| (1u8, ms)),
            1 => (1u64..5_000).prop_map(|ms| (2u8, ms)),
            1 => Just((3u8, 0)),
        ], 1..120),
    ) {
        let policy = Some(OptionsPatch { max_tokens: Some(5.0), refill_every_seconds: Some(0.25) });
        let mut engine = Limiter::new(3);
        let mut twin = Limiter::new(4);
        let mut now = 0u64;
        let mut end: Option<u64> = None;
        for (op, n) in ops {
            let t = at_ms(now as f64);
            let blocked = end.is_some_and(|e| e > now);
            match op {
                0 => {
                    let d = engine.limit(b"k", cost(n as f64), policy, t).unwrap();
                    if blocked {
                        prop_assert!(!d.allowed);
                        prop_assert_eq!(d.retry_after_ms.map(|ms| ms >= (end.unwrap() - now) as f64), Some(true));
                    } else {
                        prop_assert_eq!(d, twin.limit(b"k", cost(n as f64), policy, t).unwrap());
                    }
                }
                1 => now += n,
                2 => {
                    engine.block(b"k", n * 1_000_000, t);
                    end = Some(now + n);
                }
                _ => {
                    prop_assert_eq!(engine.unblock(b"k", t), blocked);
                    end = None;
                }
            }
            let t = at_ms(now as f64);
            if end.is_none_or(|e| e <= now) {
                prop_assert_eq!(engine.status(b"k", t), twin.status(b"k", t));
            }
        }
    }
}
