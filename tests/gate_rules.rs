//! The rules of concurrency limits (docs/SPEC.md, section 12), one by one, on the engine.

use rate_limiter::engine::{
    gate_snapshot, permit_cost, permit_id, GatePolicy, Instant, Limiter, Permit,
    MAX_PERMITS_PER_KEY,
};

fn at_ms(ms: f64) -> Instant {
    Instant::from_millis(1_800_000_000_000.0 + ms)
}

fn gate(max_in_flight: f64, ttl_seconds: f64) -> GatePolicy {
    GatePolicy::new(max_in_flight, Some(ttl_seconds)).unwrap()
}

#[test]
fn admits_up_to_max_in_flight_and_a_release_frees_the_slot_once() {
    let mut l = Limiter::new(1);
    let policy = gate(2.0, 30.0);
    let a = l.acquire(b"k", 1, policy, at_ms(0.0));
    let b = l.acquire(b"k", 1, policy, at_ms(0.0));
    assert!(a.allowed && b.allowed);
    assert_eq!(b.in_flight, 2);
    assert_eq!(a.ttl_ms, 30_000.0);
    let denied = l.acquire(b"k", 1, policy, at_ms(10.0));
    assert!(!denied.allowed);
    assert_eq!(
        denied.retry_after_ms,
        Some(29_990.0),
        "the first expiry frees a slot"
    );
    let first = a.id.unwrap();
    assert!(l.release(b"k", first, at_ms(20.0)).released);
    let again = l.release(b"k", first, at_ms(20.0));
    assert!(!again.released, "a second release frees nothing");
    assert_eq!(again.in_flight, 1);
    assert!(l.acquire(b"k", 1, policy, at_ms(30.0)).allowed);
    assert!(!l.acquire(b"k", 1, policy, at_ms(30.0)).allowed);
}

#[test]
fn a_permit_never_released_frees_its_slot_at_its_expiry() {
    let mut l = Limiter::new(1);
    let policy = gate(1.0, 5.0);
    assert!(l.acquire(b"k", 1, policy, at_ms(0.0)).allowed);
    assert!(!l.acquire(b"k", 1, policy, at_ms(4_999.0)).allowed);
    let later = l.acquire(b"k", 1, policy, at_ms(5_000.0));
    assert!(later.allowed);
    assert_eq!(later.in_flight, 1);
}

#[test]
fn weighted_permits_and_a_cost_above_the_limit() {
    let mut l = Limiter::new(1);
    let policy = gate(5.0, 10.0);
    assert!(l.acquire(b"k", 3, policy, at_ms(0.0)).allowed);
    let two = l.acquire(b"k", 2, policy, at_ms(1_000.0));
    assert!(two.allowed);
    let denied = l.acquire(b"k", 4, policy, at_ms(2_000.0));
    assert!(!denied.allowed);
    // 4 does not fit beside the 2 once the 3 has expired (at 10 s): only when both have (11 s).
    assert_eq!(denied.retry_after_ms, Some(9_000.0));
    let never = l.acquire(b"k", 6, policy, at_ms(2_000.0));
    assert_eq!((never.allowed, never.retry_after_ms), (false, None));
    assert_eq!(never.in_flight, 5);
}

#[test]
fn forged_and_other_keys_ids_release_nothing() {
    let mut l = Limiter::new(1);
    let policy = gate(1.0, 10.0);
    let id = l.acquire(b"a", 1, policy, at_ms(0.0)).id.unwrap();
    assert!(!l.release(b"b", id, at_ms(1.0)).released);
    assert!(!l.release(b"a", id ^ 1, at_ms(1.0)).released);
    assert!(!l.acquire(b"a", 1, policy, at_ms(1.0)).allowed);
    assert!(l.release(b"a", id, at_ms(1.0)).released);
}

#[test]
fn a_smaller_limit_admits_nothing_until_the_permits_fit_under_it() {
    let mut l = Limiter::new(1);
    for _ in 0..4 {
        assert!(l.acquire(b"k", 1, gate(4.0, 10.0), at_ms(0.0)).allowed);
    }
    let tight = gate(2.0, 10.0);
    let denied = l.acquire(b"k", 1, tight, at_ms(0.0));
    assert_eq!(
        (denied.allowed, denied.in_flight, denied.limit),
        (false, 4, 2)
    );
    assert_eq!(denied.retry_after_ms, Some(10_000.0));
}

#[test]
fn permits_and_buckets_of_one_key_never_touch() {
    let mut l = Limiter::new(1);
    assert!(l.acquire(b"k", 1, gate(1.0, 10.0), at_ms(0.0)).allowed);
    assert_eq!(l.status(b"k", at_ms(0.0)).remaining, 10.0);
    l.reset(b"k");
    assert!(
        !l.acquire(b"k", 1, gate(1.0, 10.0), at_ms(0.0)).allowed,
        "reset empties no gate"
    );
}

#[test]
fn expired_permits_that_no_call_touches_again_are_swept() {
    let mut l = Limiter::new(1);
    for i in 0..1_000u32 {
        assert!(
            l.acquire(&i.to_le_bytes(), 1, gate(1.0, 1.0), at_ms(0.0))
                .allowed
        );
    }
    assert_eq!(l.gated_keys(), 1_000);
    // Each call inspects 3 gates: 400 calls, long after the expiries, visit them all.
    for i in 0..400u32 {
        let id = l
            .acquire(b"busy", 1, gate(1.0, 1.0), at_ms(2_000.0 + f64::from(i)))
            .id;
        l.release(b"busy", id.unwrap(), at_ms(2_000.0 + f64::from(i)));
    }
    assert!(l.gated_keys() <= 1, "{} gates left", l.gated_keys());
}

#[test]
fn a_key_holds_at_most_4096_live_permits_whatever_the_limit() {
    let mut l = Limiter::new(1);
    let policy = gate(1e15, 60.0);
    for i in 0..MAX_PERMITS_PER_KEY {
        assert!(
            l.acquire(b"k", 1, policy, at_ms(i as f64 / 1_000.0))
                .allowed
        );
    }
    let denied = l.acquire(b"k", 1, policy, at_ms(100.0));
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after_ms, Some(59_900.0));
}

#[test]
fn inputs_out_of_range_are_rejected_naming_the_field() {
    let message = |e: rate_limiter::engine::Error| e.to_string();
    assert_eq!(
        message(GatePolicy::new(0.0, None).unwrap_err()),
        "max_in_flight must be a whole number from 1 to 9007199254740991, got 0"
    );
    assert_eq!(
        message(GatePolicy::new(1.5, None).unwrap_err()),
        "max_in_flight must be a whole number from 1 to 9007199254740991, got 1.5"
    );
    for ttl in [0.0, -1.0, f64::NAN, f64::INFINITY, 86_400.5] {
        let error = GatePolicy::new(1.0, Some(ttl)).unwrap_err();
        assert!(
            message(error).starts_with("ttl_seconds must be a finite number > 0 and at most 86400"),
            "{ttl}"
        );
    }
    assert_eq!(
        GatePolicy::new(3.0, None).unwrap().ttl_nanos(),
        60_000_000_000
    );
    for cost in [0.0, -1.0, 0.5, f64::NAN, 9_007_199_254_740_992.0] {
        assert!(permit_cost(cost).is_err(), "{cost}");
    }
    assert_eq!(
        message(permit_id(-1.0).unwrap_err()),
        "id must be a whole number from 0 to 9007199254740991, got -1"
    );
    assert_eq!(permit_id(0.0).unwrap(), 0);
}

#[test]
fn gate_snapshots_round_trip_and_unreadable_ones_change_nothing() {
    let mut l = Limiter::new(1);
    let policy = gate(3.0, 10.0);
    let id = l.acquire(b"k", 2, policy, at_ms(0.0)).id.unwrap();
    let permits = l.permits_of(b"k", at_ms(0.0));
    let bytes = gate_snapshot(&permits);
    let mut other = Limiter::new(2);
    other.restore_gate(b"k", &bytes, at_ms(1.0)).unwrap();
    assert_eq!(other.permits_of(b"k", at_ms(1.0)), permits);
    assert!(!other.acquire(b"k", 2, policy, at_ms(1.0)).allowed);
    assert!(other.release(b"k", id, at_ms(1.0)).released);
    // Restored after its expiry, a permit is gone.
    let mut late = Limiter::new(3);
    late.restore_gate(b"k", &bytes, at_ms(10_000.0)).unwrap();
    assert!(late.permits_of(b"k", at_ms(10_000.0)).is_empty());
    let free = Permit {
        id: 7,
        cost: 0,
        expires_at: at_ms(5.0),
    };
    for bad in [
        vec![],
        vec![2],
        bytes[..bytes.len() - 1].to_vec(),
        gate_snapshot(&[free]),
        gate_snapshot(&[Permit {
            id: 1 << 53,
            cost: 1,
            ..free
        }]),
    ] {
        let mut kept = l.clone();
        assert!(
            kept.restore_gate(b"k", &bad, at_ms(1.0)).is_err(),
            "{bad:?}"
        );
        assert_eq!(kept.permits_of(b"k", at_ms(1.0)), permits);
    }
}

#[test]
fn with_rate_limits_a_permit_is_all_or_nothing_in_one_call() {
    use rate_limiter::engine::{Cost, OptionsPatch, PermitAsk, Request};
    let mut l = Limiter::new(1);
    let rate = |key| Request {
        key,
        cost: Cost::new(1.0).unwrap(),
        policy: Some(OptionsPatch {
            max_tokens: Some(2.0),
            refill_every_seconds: Some(60.0),
        }),
        shadow: false,
        penalty: None,
    };
    let permit = PermitAsk {
        key: b"gen",
        cost: 1,
        policy: gate(1.0, 30.0),
    };
    // Both have room: the bucket consumes and the permit is granted.
    let (all, granted) = l
        .limit_all_with_permit(&[rate(b"api")], Some(permit), at_ms(0.0))
        .unwrap();
    let granted = granted.unwrap();
    assert!(all.allowed && granted.allowed && granted.id.is_some());
    assert_eq!(all.results[0].status.remaining, 1.0);
    // The gate is full: nothing is taken from the bucket, which had room.
    let (all, denied) = l
        .limit_all_with_permit(&[rate(b"api")], Some(permit), at_ms(1_000.0))
        .unwrap();
    let denied = denied.unwrap();
    assert!(!all.allowed && all.results[0].allowed && !denied.allowed);
    assert_eq!(all.retry_after_ms, Some(29_000.0));
    assert_eq!(l.status(b"api", at_ms(1_000.0)).remaining, 1.0);
    assert!(
        l.release(b"gen", granted.id.unwrap(), at_ms(1_000.0))
            .released
    );
    // The bucket is empty after one more: the gate had room, and grants nothing.
    assert!(
        l.limit_all_with_permit(&[rate(b"api")], Some(permit), at_ms(1_000.0))
            .unwrap()
            .0
            .allowed
    );
    l.release(
        b"gen",
        l.permits_of(b"gen", at_ms(1_000.0))[0].id,
        at_ms(1_000.0),
    );
    let (all, room) = l
        .limit_all_with_permit(&[rate(b"api")], Some(permit), at_ms(2_000.0))
        .unwrap();
    let room = room.unwrap();
    assert!(!all.allowed && room.allowed && room.id.is_none());
    assert_eq!(l.permits_of(b"gen", at_ms(2_000.0)), vec![]);
}
