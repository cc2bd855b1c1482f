//! `limit` and `limit_all` (docs/SPEC.md, rules 2.7 to 2.9): one call that decides and
//! reports, per-key policies, all-or-nothing multi-limits, exact retry times.

use rate_limiter::engine::{Cost, Instant, Limiter, OptionsPatch, Request};

const T0: f64 = 1_800_000_000_000.0;

fn at_ms(ms: f64) -> Instant {
    Instant::from_millis(T0 + ms)
}

fn cost(c: f64) -> Cost {
    Cost::new(c).unwrap()
}

fn policy(max_tokens: f64, refill_every_seconds: f64) -> Option<OptionsPatch> {
    Some(OptionsPatch {
        max_tokens: Some(max_tokens),
        refill_every_seconds: Some(refill_every_seconds),
    })
}

#[test]
fn limit_reports_the_bucket_after_the_call() {
    let mut l = Limiter::new(1);
    let d = l.limit(b"k", cost(3.0), None, at_ms(0.0)).unwrap();
    assert!(d.allowed);
    assert_eq!(
        (d.status.remaining, d.status.limit, d.status.reset_in_ms),
        (7.0, 10.0, 10_000.0)
    );
    assert_eq!(d.retry_after_ms, Some(0.0));
    assert_eq!(d.window_ms, 100_000.0);
    assert_eq!(l.status(b"k", at_ms(0.0)), d.status);
}

#[test]
fn waiting_exactly_the_retry_time_succeeds_and_one_ms_less_does_not() {
    for every in [10.0, 0.25, 1.0 / 3.0, 0.0015] {
        for c in [1.0, 3.0, 7.0] {
            let mut l = Limiter::new(1);
            let p = policy(10.0, every);
            assert!(l.limit(b"k", cost(8.5), p, at_ms(0.0)).unwrap().allowed);
            let denied = l.limit(b"k", cost(c), p, at_ms(1.0)).unwrap();
            if denied.allowed {
                continue; // 1.5 tokens left and the cost fits: nothing to wait for
            }
            let wait = denied.retry_after_ms.unwrap();
            assert!(wait >= 1.0);
            let mut probe = l.clone();
            assert!(
                !probe.check(b"k", cost(c), at_ms(1.0 + wait - 1.0)),
                "every {every} cost {c}: early at {wait} - 1 ms"
            );
            assert!(
                l.limit(b"k", cost(c), p, at_ms(1.0 + wait))
                    .unwrap()
                    .allowed,
                "every {every} cost {c}: still denied after {wait} ms"
            );
        }
    }
}

#[test]
fn a_cost_above_capacity_has_no_retry_time() {
    let mut l = Limiter::new(1);
    let d = l.limit(b"k", cost(11.0), None, at_ms(0.0)).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, None);
    assert_eq!(d.status.remaining, 10.0);
}

#[test]
fn a_policy_is_remembered_by_its_key_until_reset() {
    let mut l = Limiter::new(1);
    assert!(
        l.limit(b"k", cost(1.0), policy(3.0, 1.0), at_ms(0.0))
            .unwrap()
            .allowed
    );
    assert_eq!(l.status(b"k", at_ms(0.0)).limit, 3.0);
    assert_eq!(l.status(b"other", at_ms(0.0)).limit, 10.0);
    assert!(l.consume(b"k", cost(2.0), at_ms(0.0)));
    assert!(!l.check(b"k", cost(1.0), at_ms(999.0)));
    assert!(l.check(b"k", cost(1.0), at_ms(1000.0)));
    l.reset(b"k");
    assert_eq!(l.status(b"k", at_ms(1000.0)).limit, 10.0);
}

#[test]
fn a_denied_limit_consumes_nothing_but_applies_its_policy() {
    let mut l = Limiter::new(1);
    assert!(l.limit(b"k", cost(8.0), None, at_ms(0.0)).unwrap().allowed);
    let d = l
        .limit(b"k", cost(5.0), policy(4.0, 1.0), at_ms(0.0))
        .unwrap();
    assert!(!d.allowed);
    assert_eq!((d.status.remaining, d.status.limit), (2.0, 4.0));
    assert_eq!(l.status(b"k", at_ms(0.0)), d.status);
}

#[test]
fn the_wait_after_a_policy_change_is_exact() {
    // Drained under 10 tokens per 10 s, then asked for 5 under one token every 3 s.
    let mut l = Limiter::new(1);
    assert!(l.limit(b"k", cost(10.0), None, at_ms(0.0)).unwrap().allowed);
    let faster = policy(10.0, 3.0);
    let d = l.limit(b"k", cost(5.0), faster, at_ms(9000.0)).unwrap();
    assert!(!d.allowed);
    let wait = d.retry_after_ms.unwrap();
    assert!(!l.clone().check(b"k", cost(5.0), at_ms(9000.0 + wait - 1.0)));
    assert!(
        l.limit(b"k", cost(5.0), faster, at_ms(9000.0 + wait))
            .unwrap()
            .allowed
    );
}

#[test]
fn a_full_bucket_is_forgotten_with_its_policy() {
    let mut l = Limiter::new(1);
    assert!(
        l.limit(b"k", cost(1.0), policy(3.0, 1.0), at_ms(0.0))
            .unwrap()
            .allowed
    );
    assert_eq!(l.status(b"k", at_ms(999.0)).limit, 3.0);
    // Full again after one second: the key is forgotten, the instance options apply.
    let s = l.status(b"k", at_ms(1000.0));
    assert_eq!((s.remaining, s.limit), (10.0, 10.0));
    assert_eq!(l.stored_buckets(), 0);
}

#[test]
fn a_new_policy_keeps_the_tokens_and_clamps_them() {
    let mut l = Limiter::new(1);
    assert!(l.limit(b"k", cost(4.0), None, at_ms(0.0)).unwrap().allowed);
    let d = l
        .limit(b"k", cost(0.0), policy(20.0, 10.0), at_ms(0.0))
        .unwrap();
    assert_eq!((d.status.remaining, d.status.limit), (6.0, 20.0));
    let d = l
        .limit(b"k", cost(0.0), policy(5.0, 10.0), at_ms(0.0))
        .unwrap();
    assert_eq!(
        (d.status.remaining, d.status.limit, d.status.reset_in_ms),
        (5.0, 5.0, 0.0)
    );
}

#[test]
fn missing_policy_fields_come_from_the_instance_options() {
    let mut l = Limiter::new(1);
    l.set_options(
        OptionsPatch {
            refill_every_seconds: Some(2.0),
            ..Default::default()
        },
        at_ms(0.0),
    )
    .unwrap();
    let p = Some(OptionsPatch {
        max_tokens: Some(4.0),
        ..Default::default()
    });
    let d = l.limit(b"k", cost(4.0), p, at_ms(0.0)).unwrap();
    assert_eq!(
        (d.status.limit, d.status.reset_in_ms, d.window_ms),
        (4.0, 2000.0, 8000.0)
    );
}

#[test]
fn an_invalid_policy_is_rejected_before_anything_changes() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(2.0), at_ms(0.0)));
    let err = l
        .limit(b"k", cost(1.0), policy(0.0, 1.0), at_ms(0.0))
        .unwrap_err();
    assert!(err.to_string().starts_with("max_tokens must be"));
    assert_eq!(l.status(b"k", at_ms(0.0)).remaining, 8.0);
}

fn request<'a>(key: &'a [u8], c: f64, p: Option<OptionsPatch>) -> Request<'a> {
    Request {
        key,
        cost: cost(c),
        policy: p,
        shadow: false,
        penalty: None,
    }
}

fn shadow<'a>(key: &'a [u8], c: f64, p: Option<OptionsPatch>) -> Request<'a> {
    Request {
        shadow: true,
        ..request(key, c, p)
    }
}

#[test]
fn limit_all_consumes_from_every_bucket_when_all_have_room() {
    let mut l = Limiter::new(1);
    let all = l
        .limit_all(
            &[
                request(b"second", 1.0, policy(10.0, 0.1)),
                request(b"hour", 1.0, policy(1000.0, 3.6)),
            ],
            at_ms(0.0),
        )
        .unwrap();
    assert!(all.allowed);
    assert_eq!(all.retry_after_ms, Some(0.0));
    assert_eq!(all.results[0].status.remaining, 9.0);
    assert_eq!(all.results[1].status.remaining, 999.0);
    assert_eq!(l.status(b"hour", at_ms(0.0)).remaining, 999.0);
}

#[test]
fn a_denied_member_leaves_every_other_bucket_untouched() {
    let mut l = Limiter::new(1);
    let members = [
        request(b"second", 1.0, policy(10.0, 0.1)),
        request(b"hour", 1.0, policy(1000.0, 3.6)),
    ];
    for _ in 0..10 {
        assert!(l.limit_all(&members, at_ms(0.0)).unwrap().allowed);
    }
    let hour_before = l.status(b"hour", at_ms(50.0));
    let second_before = l.status(b"second", at_ms(50.0));
    let all = l.limit_all(&members, at_ms(50.0)).unwrap();
    // The same policies as before: nothing about these buckets changes.
    assert!(!all.allowed);
    assert!(!all.results[0].allowed && all.results[1].allowed);
    assert_eq!(all.results[1].retry_after_ms, Some(0.0));
    assert_eq!(all.retry_after_ms, Some(50.0));
    assert_eq!(l.status(b"hour", at_ms(50.0)), hour_before);
    assert_eq!(l.status(b"second", at_ms(50.0)), second_before);
    assert!(!l.limit_all(&members, at_ms(99.0)).unwrap().allowed);
    assert!(l.limit_all(&members, at_ms(100.0)).unwrap().allowed);
}

#[test]
fn limit_all_retry_is_null_when_a_member_can_never_pass() {
    let mut l = Limiter::new(1);
    let all = l
        .limit_all(
            &[request(b"a", 11.0, None), request(b"b", 1.0, None)],
            at_ms(0.0),
        )
        .unwrap();
    assert!(!all.allowed);
    assert_eq!(all.retry_after_ms, None);
    assert_eq!(l.status(b"b", at_ms(0.0)).remaining, 10.0);
}

#[test]
fn limit_all_rejects_duplicate_keys_and_bad_policies_before_anything_changes() {
    let mut l = Limiter::new(1);
    let err = l
        .limit_all(
            &[
                request(b"a", 1.0, None),
                request(b"b", 1.0, None),
                request(b"a", 1.0, None),
            ],
            at_ms(0.0),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "requests[2].key repeats the key of requests[0].key: give each key once, with the costs added up"
    );
    let err = l
        .limit_all(
            &[
                request(b"a", 1.0, None),
                request(b"b", 1.0, policy(1.5, 1.0)),
            ],
            at_ms(0.0),
        )
        .unwrap_err();
    assert!(err
        .to_string()
        .starts_with("requests[1].policy.max_tokens must be"));
    assert_eq!(l.stored_buckets(), 0);
}

#[test]
fn a_shadow_member_without_room_never_denies_and_takes_nothing() {
    let mut l = Limiter::new(1);
    let members = [
        request(b"second", 1.0, policy(10.0, 0.1)),
        shadow(b"daily", 1.0, policy(2.0, 3600.0)),
    ];
    for remaining in [1.0, 0.0] {
        let all = l.limit_all(&members, at_ms(0.0)).unwrap();
        assert!(all.allowed && all.results[1].allowed);
        assert_eq!(all.results[1].status.remaining, remaining);
    }
    let all = l.limit_all(&members, at_ms(0.0)).unwrap();
    assert!(
        all.allowed,
        "the trial limit is empty, the enforced one is not"
    );
    assert_eq!(all.retry_after_ms, Some(0.0), "only enforced members wait");
    assert!(!all.results[1].allowed);
    assert_eq!(all.results[1].retry_after_ms, Some(3_600_000.0));
    assert_eq!(all.results[0].status.remaining, 7.0);
    assert_eq!(l.status(b"daily", at_ms(0.0)).remaining, 0.0);
}

#[test]
fn a_shadow_member_takes_nothing_from_a_request_the_enforced_members_deny() {
    let mut l = Limiter::new(1);
    let members = [
        request(b"second", 1.0, policy(1.0, 1.0)),
        shadow(b"daily", 1.0, policy(100.0, 3600.0)),
    ];
    assert!(l.limit_all(&members, at_ms(0.0)).unwrap().allowed);
    let all = l.limit_all(&members, at_ms(10.0)).unwrap();
    assert!(!all.allowed);
    assert_eq!(all.retry_after_ms, Some(990.0));
    assert!(all.results[1].allowed, "the trial limit had room");
    assert_eq!(l.status(b"daily", at_ms(10.0)).remaining, 99.0);
}

#[test]
fn shadow_members_alone_are_allowed_and_each_decides_on_its_own() {
    let mut l = Limiter::new(1);
    let members = [
        shadow(b"a", 2.0, policy(3.0, 1.0)),
        shadow(b"b", 1.0, policy(3.0, 1.0)),
    ];
    assert!(l.limit_all(&members, at_ms(0.0)).unwrap().allowed);
    let all = l.limit_all(&members, at_ms(0.0)).unwrap();
    assert!(all.allowed);
    assert_eq!(all.retry_after_ms, Some(0.0));
    assert!(!all.results[0].allowed && all.results[1].allowed);
    assert_eq!(l.status(b"a", at_ms(0.0)).remaining, 1.0);
    assert_eq!(l.status(b"b", at_ms(0.0)).remaining, 1.0);
}

#[test]
fn limit_all_of_nothing_is_allowed() {
    let mut l = Limiter::new(1);
    let all = l.limit_all(&[], at_ms(0.0)).unwrap();
    assert!(all.allowed && all.results.is_empty());
    assert_eq!(all.retry_after_ms, Some(0.0));
}

#[test]
fn keys_share_policies_and_free_them_with_the_last_key() {
    let mut l = Limiter::new(1);
    for round in 0..3 {
        for i in 0..100u32 {
            let p = policy(f64::from(5 + i % 7), 1.0);
            assert!(
                l.limit(&i.to_le_bytes(), cost(1.0), p, at_ms(0.0))
                    .unwrap()
                    .allowed
            );
        }
        for i in 0..100u32 {
            let s = l.status(&i.to_le_bytes(), at_ms(0.0));
            assert_eq!(s.limit, f64::from(5 + i % 7), "round {round}");
            l.reset(&i.to_le_bytes());
        }
        assert_eq!(l.stored_buckets(), 0);
    }
}

#[test]
fn a_retry_is_exact_when_the_policy_lapses_within_the_same_millisecond() {
    // Found by the fuzzer: instance 7 tokens every 1 ns; the key remembers 14 tokens. A call
    // without a policy needs 9 tokens: the policy bucket holds them from +4 ns to +8 ns, and
    // from +9 ns the key is full, forgotten, and the instance capacity (7) can never pay 9.
    // No whole millisecond falls inside that window, so no wait helps.
    let mut l = limiter_with(7.0, 1e-9);
    assert!(
        l.limit(b"a", cost(9.0), policy(14.0, 1e-9), at_ms(0.0))
            .unwrap()
            .allowed
    );
    let d = l.limit(b"a", cost(9.0), None, at_ms(0.0)).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, None);
}

fn limiter_with(max_tokens: f64, refill_every_seconds: f64) -> Limiter {
    let mut l = Limiter::new(1);
    l.set_options(
        OptionsPatch {
            max_tokens: Some(max_tokens),
            refill_every_seconds: Some(refill_every_seconds),
        },
        at_ms(0.0),
    )
    .unwrap();
    l
}

#[test]
fn a_policy_given_again_after_the_options_changed_takes_the_new_options_for_its_missing_fields() {
    // The limiter keeps the last policy it resolved; a change of the instance options must
    // not leave it resolved against the old ones.
    let mut l = Limiter::new(1);
    let capacity_only = Some(OptionsPatch {
        max_tokens: Some(2.0),
        refill_every_seconds: None,
    });
    let d = l.limit(b"a", cost(1.0), capacity_only, at_ms(0.0)).unwrap();
    assert_eq!((d.status.limit, d.window_ms), (2.0, 20_000.0));
    let faster = OptionsPatch {
        max_tokens: None,
        refill_every_seconds: Some(1.0),
    };
    l.set_options(faster, at_ms(0.0)).unwrap();
    let d = l.limit(b"b", cost(1.0), capacity_only, at_ms(0.0)).unwrap();
    assert_eq!((d.status.limit, d.window_ms), (2.0, 2_000.0));
    assert_eq!(d.status.reset_in_ms, 1_000.0);
    // Another policy, then the first again: each resolves to its own options.
    let d = l
        .limit(b"c", cost(1.0), policy(5.0, 0.5), at_ms(0.0))
        .unwrap();
    assert_eq!((d.status.limit, d.window_ms), (5.0, 2_500.0));
    let d = l.limit(b"d", cost(1.0), capacity_only, at_ms(0.0)).unwrap();
    assert_eq!((d.status.limit, d.window_ms), (2.0, 2_000.0));
}
