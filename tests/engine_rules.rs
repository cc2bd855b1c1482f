//! Each rule of the token bucket (docs/SPEC.md, sections 2 and 3), as a named test on an
//! injected clock.

use rate_limiter::engine::{Cost, Instant, Limiter, OptionsPatch};

const SECOND: f64 = 1000.0;
const T0: f64 = 1_800_000_000_000.0;

fn at(seconds: f64) -> Instant {
    Instant::from_millis(T0 + seconds * SECOND)
}

fn cost(c: f64) -> Cost {
    Cost::new(c).unwrap()
}

fn limiter(max_tokens: f64, refill_every_seconds: f64) -> Limiter {
    let mut l = Limiter::new(7);
    l.set_options(
        OptionsPatch {
            max_tokens: Some(max_tokens),
            refill_every_seconds: Some(refill_every_seconds),
        },
        at(0.0),
    )
    .unwrap();
    l
}

fn drain(l: &mut Limiter, key: &[u8], now: Instant) {
    while l.consume(key, Cost::ONE, now) {}
}

#[test]
fn a_new_key_is_full_with_the_default_ten_tokens() {
    let mut l = Limiter::new(1);
    let s = l.status(b"k", at(0.0));
    assert_eq!((s.remaining, s.limit, s.reset_in_ms), (10.0, 10.0, 0.0));
    for _ in 0..10 {
        assert!(l.consume(b"k", Cost::ONE, at(0.0)));
    }
    assert!(!l.consume(b"k", Cost::ONE, at(0.0)));
}

#[test]
fn one_interval_refills_exactly_one_token() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(0.0));
    assert!(!l.consume(b"k", Cost::ONE, at(9.999)));
    assert!(l.consume(b"k", Cost::ONE, at(10.0)));
    assert!(!l.consume(b"k", Cost::ONE, at(10.0)));
}

#[test]
fn sub_interval_progress_is_kept() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(0.0));
    assert_eq!(l.status(b"k", at(15.0)).remaining, 1.0);
    assert_eq!(l.status(b"k", at(15.0)).reset_in_ms, 5000.0);
    assert_eq!(l.status(b"k", at(20.0)).remaining, 2.0);
}

#[test]
fn rapid_calls_do_not_reset_the_refill_timer() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(0.0));
    for s in 1..10 {
        assert!(!l.consume(b"k", Cost::ONE, at(s as f64)));
    }
    assert!(l.consume(b"k", Cost::ONE, at(10.0)));
}

#[test]
fn a_full_bucket_banks_no_progress() {
    let mut l = limiter(2.0, 10.0);
    assert!(l.consume(b"k", Cost::ONE, at(0.0)));
    // Full again at 10 s; the 9 s it then sits full earn nothing.
    assert_eq!(l.status(b"k", at(19.0)).remaining, 2.0);
    assert!(l.consume(b"k", Cost::ONE, at(19.0)));
    assert_eq!(l.status(b"k", at(28.999)).remaining, 1.0);
    assert_eq!(l.status(b"k", at(29.0)).remaining, 2.0);
}

#[test]
fn a_long_idle_caps_at_capacity() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(0.0));
    let s = l.status(b"k", at(86_400.0 * 365.0));
    assert_eq!((s.remaining, s.reset_in_ms), (10.0, 0.0));
}

#[test]
fn a_clock_that_goes_back_never_refills() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(100.0));
    assert!(!l.consume(b"k", Cost::ONE, at(50.0)));
    assert!(!l.consume(b"k", Cost::ONE, Instant::from_millis(0.0)));
    // The wait is measured from the bucket's own refill moment, so it is never early.
    assert_eq!(l.status(b"k", at(95.0)).reset_in_ms, 15_000.0);
    assert!(l.consume(b"k", Cost::ONE, at(110.0)));
}

#[test]
fn a_failed_consume_changes_nothing() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(7.0), at(0.0)));
    let before = l.status(b"k", at(1.0));
    assert!(!l.consume(b"k", cost(4.0), at(1.0)));
    assert_eq!(l.status(b"k", at(1.0)), before);
}

#[test]
fn check_answers_like_consume_and_consumes_nothing() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(8.0), at(0.0)));
    assert!(l.check(b"k", cost(2.0), at(0.0)));
    assert!(!l.check(b"k", cost(3.0), at(0.0)));
    assert_eq!(l.status(b"k", at(0.0)).remaining, 2.0);
}

#[test]
fn cost_zero_succeeds_and_changes_nothing() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(0.0));
    assert!(l.consume(b"k", Cost::ZERO, at(0.0)));
    assert!(l.check(b"k", Cost::ZERO, at(0.0)));
    assert_eq!(l.status(b"k", at(0.0)).remaining, 0.0);
    assert!(l.consume(b"fresh", Cost::ZERO, at(0.0)));
    assert_eq!(l.stored_buckets(), 1);
}

#[test]
fn a_cost_above_capacity_is_never_satisfiable() {
    let mut l = Limiter::new(1);
    assert!(!l.check(b"k", cost(10.5), at(0.0)));
    assert!(!l.consume(b"k", cost(11.0), at(0.0)));
    assert_eq!(l.status(b"k", at(0.0)).remaining, 10.0);
    assert!(l.consume(b"k", cost(10.0), at(0.0)));
}

#[test]
fn fractional_costs_are_exact() {
    let mut l = Limiter::new(1);
    for _ in 0..10 {
        assert!(l.consume(b"k", cost(0.1), at(0.0)));
    }
    assert_eq!(l.status(b"k", at(0.0)).remaining, 9.0);
    for _ in 0..90 {
        assert!(l.consume(b"k", cost(0.1), at(0.0)));
    }
    assert_eq!(l.status(b"k", at(0.0)).remaining, 0.0);
    assert!(!l.consume(b"k", cost(0.1), at(0.0)));
}

#[test]
fn fractional_intervals_refill_exactly_over_many_observations() {
    // 1/3 s rounds up to 333_333_334 ns; a million observations later nothing has drifted.
    let mut l = limiter(1.0, 1.0 / 3.0);
    assert!(l.consume(b"k", Cost::ONE, Instant::from_nanos(0)));
    let mut now = 0u64;
    for _ in 0..1000 {
        now += 333_333_334;
        assert!(!l.consume(b"k", cost(2.0), Instant::from_nanos(now - 1)));
        assert!(l.consume(b"k", Cost::ONE, Instant::from_nanos(now)));
    }
}

#[test]
fn waits_are_rounded_up_to_whole_milliseconds() {
    let mut l = limiter(1.0, 0.0015);
    assert!(l.consume(b"k", Cost::ONE, at(0.0)));
    assert_eq!(l.status(b"k", at(0.0)).reset_in_ms, 2.0);
    assert_eq!(l.status(b"k", at(0.001)).reset_in_ms, 1.0);
    assert_eq!(
        l.status(b"k", Instant::from_millis(T0 + 1.5)).reset_in_ms,
        0.0
    );
}

#[test]
fn get_status_mid_refill() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(5.0), at(0.0)));
    let s = l.status(b"k", at(3.0));
    assert_eq!((s.remaining, s.limit, s.reset_in_ms), (5.0, 10.0, 7000.0));
}

#[test]
fn options_apply_to_every_key_at_its_next_access() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(4.0), at(0.0)));
    l.set_options(
        OptionsPatch {
            refill_every_seconds: Some(1.0),
            ..Default::default()
        },
        at(0.0),
    )
    .unwrap();
    assert_eq!(l.status(b"k", at(2.0)).remaining, 8.0);
    assert_eq!(l.status(b"other", at(2.0)).limit, 10.0);
}

#[test]
fn a_lowered_capacity_clamps_fuller_buckets() {
    let mut l = Limiter::new(1);
    assert!(l.consume(b"k", cost(2.0), at(0.0)));
    l.set_options(
        OptionsPatch {
            max_tokens: Some(5.0),
            ..Default::default()
        },
        at(0.0),
    )
    .unwrap();
    let s = l.status(b"k", at(0.0));
    assert_eq!((s.remaining, s.limit, s.reset_in_ms), (5.0, 5.0, 0.0));
    assert!(!l.consume(b"k", cost(6.0), at(0.0)));
}

#[test]
fn invalid_options_change_nothing() {
    let mut l = limiter(3.0, 2.0);
    let bad = OptionsPatch {
        max_tokens: Some(5.0),
        refill_every_seconds: Some(f64::NAN),
    };
    assert!(l.set_options(bad, at(0.0)).is_err());
    assert_eq!(l.options().max_tokens(), 3);
    assert_eq!(l.options().refill_every_seconds(), 2.0);
}

#[test]
fn reset_restores_capacity_and_ignores_unknown_keys() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"k", at(0.0));
    l.reset(b"k");
    l.reset(b"never-seen");
    assert_eq!(l.status(b"k", at(0.0)).remaining, 10.0);
    assert_eq!(l.stored_buckets(), 0);
}

#[test]
fn keys_are_independent() {
    let mut l = Limiter::new(1);
    drain(&mut l, b"a", at(0.0));
    assert!(l.consume(b"b", Cost::ONE, at(0.0)));
    assert!(l.consume(b"", Cost::ONE, at(0.0)));
    assert_eq!(l.status(b"b", at(0.0)).remaining, 9.0);
    assert_eq!(l.status(b"a", at(0.0)).remaining, 0.0);
}

#[test]
fn the_largest_capacity_is_exact() {
    let max = 9_007_199_254_740_991.0;
    let mut l = limiter(max, 1.0);
    assert!(l.consume(b"k", cost(max), at(0.0)));
    assert_eq!(l.status(b"k", at(0.0)).remaining, 0.0);
    assert_eq!(l.status(b"k", at(1.0)).remaining, 1.0);
}

#[test]
fn absurd_intervals_and_clocks_do_not_overflow() {
    let mut l = limiter(1.0, 1e300);
    assert!(l.consume(b"k", Cost::ONE, Instant::from_millis(f64::INFINITY)));
    assert!(!l.consume(b"k", Cost::ONE, Instant::from_millis(f64::INFINITY)));
    // Clock readings saturate in the year 2554, intervals at u128::MAX nanoseconds (1e22 years).
    assert!(l.status(b"k", Instant::from_millis(0.0)).reset_in_ms > 3e32);
}

#[test]
fn full_buckets_are_not_kept() {
    let mut l = limiter(1.0, 1.0);
    for i in 0..10_000u32 {
        // Each key is used once and is full again one second later.
        assert!(l.consume(&i.to_le_bytes(), Cost::ONE, at(i as f64 * 0.01)));
    }
    // About 100 keys are not yet full at any moment; the sweep keeps the store near that.
    assert!(l.stored_buckets() <= 250, "{}", l.stored_buckets());
}

#[test]
fn capacities_beyond_eighteen_billion_count_whole_tokens() {
    // Billionths of 2^53 tokens do not fit 64 bits: such buckets count whole tokens, and
    // a fractional cost rounds up to a whole one.
    let max = 9_007_199_254_740_991.0;
    let mut l = limiter(max, 1.0);
    assert!(l.consume(b"k", cost(0.5), at(0.0)));
    assert_eq!(l.status(b"k", at(0.0)).remaining, max - 1.0);
    // Back to a small capacity: the bucket keeps its tokens, clamped (here: full).
    assert!(l.consume(b"k", cost(2.0), at(0.0)));
    l.set_options(
        OptionsPatch {
            max_tokens: Some(10.0),
            ..Default::default()
        },
        at(0.0),
    )
    .unwrap();
    assert_eq!(l.status(b"k", at(0.0)).remaining, 10.0);
    // And a partly used small bucket moved to a huge capacity keeps its whole tokens.
    assert!(l.consume(b"k", cost(2.5), at(0.0)));
    l.set_options(
        OptionsPatch {
            max_tokens: Some(max),
            ..Default::default()
        },
        at(0.0),
    )
    .unwrap();
    assert_eq!(l.status(b"k", at(0.0)).remaining, 7.0);
}

#[test]
fn many_keys_across_chunks_and_index_tables_stay_exact() {
    // Enough keys to fill several 4096-slot chunks and grow every index table, with long
    // (heap) and short (inline) keys, then removals from everywhere.
    let mut l = limiter(100.0, 3600.0);
    let key = |i: u32| {
        if i.is_multiple_of(3) {
            format!("a-long-key-that-does-not-fit-inline-{i}").into_bytes()
        } else {
            format!("k{i}").into_bytes()
        }
    };
    let n = 20_000u32;
    for i in 0..n {
        assert!(l.consume(&key(i), cost(f64::from(1 + i % 50)), at(0.0)));
    }
    assert_eq!(l.stored_buckets(), n as usize);
    for i in (0..n).filter(|i| i.is_multiple_of(7) || i.is_multiple_of(11)) {
        l.reset(&key(i));
    }
    for i in 0..n {
        let expected = if i.is_multiple_of(7) || i.is_multiple_of(11) {
            100.0
        } else {
            f64::from(99 - i % 50)
        };
        assert_eq!(l.status(&key(i), at(0.0)).remaining, expected, "key {i}");
    }
}

#[test]
fn two_million_distinct_keys_keep_the_store_bounded() {
    // Each key is used once and is full again 1 s later; with 1,000 new keys per second of
    // (injected) time about 1,000 are live at any moment: the store stays near that, never
    // near the 2,000,000 keys seen.
    let mut l = limiter(1.0, 1.0);
    let mut peak = 0;
    for i in 0..2_000_000u32 {
        assert!(l.consume(&i.to_le_bytes(), Cost::ONE, at(f64::from(i) * 0.001)));
        peak = peak.max(l.stored_buckets());
    }
    assert!(
        peak <= 2 * 1_001,
        "peak {peak} stored buckets for about 1,000 live"
    );
}

#[test]
fn reads_change_nothing_even_for_a_later_options_change() {
    // Two limiters with the same history, except that one is read in between: after an
    // options change they still agree (a read stores no refill the change could tell).
    let mut read = limiter(10.0, 1.0);
    let mut unread = limiter(10.0, 1.0);
    for l in [&mut read, &mut unread] {
        assert!(l.consume(b"k", cost(5.0), at(0.0)));
    }
    assert_eq!(read.status(b"k", at(1.5)).remaining, 6.0);
    assert!(!read.check(b"k", cost(9.0), at(1.5)));
    assert!(read
        .limit(b"k", cost(9.0), None, at(1.5))
        .is_ok_and(|d| !d.allowed));
    let faster = OptionsPatch {
        max_tokens: None,
        refill_every_seconds: Some(0.25),
    };
    for l in [&mut read, &mut unread] {
        l.set_options(faster, at(1.5)).unwrap();
    }
    // 1.5 s since the last change, measured in the new 0.25 s interval: six tokens back.
    assert_eq!(read.status(b"k", at(1.5)), unread.status(b"k", at(1.5)));
    assert_eq!(unread.status(b"k", at(1.5)).remaining, 10.0);
}

#[test]
fn a_store_that_outgrows_one_index_table_still_finds_every_key() {
    // 10,000 live buckets: the first chunk doubles up to its size, the index splits into
    // many tables at 4,096 buckets, and buckets removed from the middle move the last one.
    let mut l = limiter(3.0, 3600.0);
    let key = |i: u32| format!("client-{i}").into_bytes();
    for i in 0..10_000 {
        assert!(l.consume(&key(i), cost(f64::from(1 + i % 3)), at(0.0)));
    }
    assert_eq!(l.stored_buckets(), 10_000);
    for i in (0..10_000).step_by(7) {
        l.reset(&key(i));
    }
    for i in 0..10_000 {
        let want = if i % 7 == 0 {
            3.0
        } else {
            f64::from(2 - i % 3)
        };
        assert_eq!(l.status(&key(i), at(1.0)).remaining, want, "key {i}");
    }
}
