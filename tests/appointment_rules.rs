//! Appointments on a starved key (docs/SPEC.md, 11.11): the turns the object hands out, when
//! it hands none, and that they grant nothing.

use rate_limiter::engine::{Cost, Instant, LeaseAsk, LeaseDecision, Limiter, OptionsPatch};

const KEY: &[u8] = b"api-key";

/// `ms` milliseconds after the start of a rule test (a realistic epoch).
fn at(ms: f64) -> Instant {
    Instant::from_millis(1.8e12 + ms)
}

fn cost(tokens: f64) -> Cost {
    Cost::new(tokens).unwrap()
}

/// A limiter of `max_tokens`, one refilled every 100 ms.
fn limiter(max_tokens: f64) -> Limiter {
    let mut l = Limiter::new(1);
    let options = OptionsPatch {
        max_tokens: Some(max_tokens),
        refill_every_seconds: Some(0.1),
    };
    l.set_options(options, at(0.0)).unwrap();
    l
}

/// A plain lease call of cost 1 wanting `want` more, asking for appointments when `queue`.
fn call(l: &mut Limiter, ms: f64, want: f64, queue: bool) -> LeaseDecision {
    let ask = LeaseAsk {
        want: cost(want),
        queue,
        ..LeaseAsk::default()
    };
    l.limit_shared(KEY, cost(1.0), None, None, ask, at(ms))
        .unwrap()
}

/// The appointment of `d` in whole milliseconds.
fn turn_ms(d: &LeaseDecision) -> Option<u64> {
    d.call_after.map(|nanos| nanos.div_ceil(1_000_000))
}

/// Empties the bucket of `l` at `ms`.
fn drain(l: &mut Limiter, ms: f64, tokens: f64) {
    assert!(l.consume(KEY, cost(tokens), at(ms)));
}

#[test]
fn callers_of_a_starved_key_get_turns_one_token_apart() {
    let mut l = limiter(4.0);
    drain(&mut l, 0.0, 4.0);
    let turns: Vec<_> = (0..3).map(|_| call(&mut l, 0.0, 1.0, true)).collect();
    assert_eq!(
        turns.iter().map(turn_ms).collect::<Vec<_>>(),
        [Some(100), Some(200), Some(300)]
    );
    // Denied until its turn at least, later than the bucket's own next token.
    let retry: Vec<_> = turns.iter().map(|d| d.decision.retry_after_ms).collect();
    assert_eq!(retry, [Some(100.0), Some(200.0), Some(300.0)]);
    // The first comes back at its turn: the token that came in is its own, and it gets the
    // next turn at the end of the queue.
    let back = call(&mut l, 100.0, 1.0, true);
    assert!(back.decision.allowed);
    assert_eq!(turn_ms(&back), Some(300));
}

#[test]
fn a_caller_that_asks_for_no_appointments_gets_none_and_moves_no_queue() {
    let mut l = limiter(4.0);
    drain(&mut l, 0.0, 4.0);
    let plain = call(&mut l, 0.0, 1.0, false);
    assert_eq!(plain.call_after, None);
    assert_eq!(plain.decision.retry_after_ms, Some(100.0));
    // The queue starts with the first caller that asks.
    assert_eq!(turn_ms(&call(&mut l, 0.0, 1.0, true)), Some(100));
}

#[test]
fn a_bucket_with_room_hands_out_no_appointments() {
    let mut l = limiter(100.0);
    for ms in [0.0, 10.0, 20.0] {
        let d = call(&mut l, ms, 1.0, true);
        assert!(d.decision.allowed);
        assert_eq!(d.call_after, None);
    }
}

#[test]
fn the_queue_ends_when_its_callers_leave_tokens_over() {
    let mut l = limiter(8.0);
    drain(&mut l, 0.0, 8.0);
    let last = (0..5).map(|_| call(&mut l, 0.0, 1.0, true)).last().unwrap();
    assert_eq!(turn_ms(&last), Some(500));
    // Nobody came for the tokens of the turns: at 400 ms four are there, half the room.
    let over = call(&mut l, 400.0, 0.0, true);
    assert!(over.decision.allowed);
    assert_eq!(over.call_after, None);
    assert!(l
        .leases_of(KEY)
        .iter()
        .all(|lease| lease.ends_at() <= at(400.0)));
    // The queue starts afresh once the bucket is starved again.
    drain(&mut l, 400.0, 3.0);
    assert_eq!(turn_ms(&call(&mut l, 400.0, 1.0, true)), Some(100));
}

#[test]
fn an_empty_bucket_whose_tokens_sit_in_plain_leases_is_not_starved() {
    let mut l = limiter(8.0);
    // Leases of half of what is left each time: 4 + 2 + 1 of the 8 tokens, less the costs.
    let mut leased = 0.0;
    for _ in 0..4 {
        let d = call(&mut l, 0.0, 8.0, false);
        leased += d.moved as f64 / 1e9;
    }
    assert!(leased >= 4.0, "leased {leased}");
    let d = call(&mut l, 0.0, 1.0, true);
    assert!(!d.decision.allowed);
    assert_eq!(d.call_after, None);
}

#[test]
fn a_blocked_key_hands_out_no_appointments() {
    let mut l = limiter(4.0);
    drain(&mut l, 0.0, 4.0);
    l.block(KEY, 5_000_000_000, at(0.0));
    let d = call(&mut l, 0.0, 1.0, true);
    assert!(!d.decision.allowed);
    assert_eq!(d.call_after, None);
    assert!(d.decision.retry_after_ms.unwrap() >= 5_000.0);
}

#[test]
fn appointments_change_no_decision_the_object_makes() {
    // The same calls, with and without appointments: the same admissions at every moment,
    // the same tokens leased; only the retry times of denials may be later.
    let (mut with, mut without) = (limiter(5.0), limiter(5.0));
    let (mut ms, mut turns) = (0.0, 0);
    for step in 0..400u32 {
        ms += f64::from(step % 7) * 9.0;
        let want = f64::from(step % 4);
        let (a, b) = (
            call(&mut with, ms, want, true),
            call(&mut without, ms, want, false),
        );
        assert_eq!(a.decision.allowed, b.decision.allowed, "at {ms} ms");
        assert_eq!(a.decision.status, b.decision.status, "at {ms} ms");
        assert_eq!(a.moved, b.moved, "at {ms} ms");
        turns += usize::from(a.call_after.is_some());
        match (a.decision.retry_after_ms, b.decision.retry_after_ms) {
            (Some(late), Some(early)) => assert!(late >= early, "at {ms} ms"),
            (late, early) => assert_eq!(late, early, "at {ms} ms"),
        }
    }
    assert!(turns > 50, "{turns} appointments");
}

#[test]
fn a_snapshot_keeps_the_bucket_but_not_the_queue() {
    let mut l = limiter(4.0);
    drain(&mut l, 0.0, 4.0);
    call(&mut l, 0.0, 1.0, true);
    call(&mut l, 0.0, 1.0, true);
    let snapshot = l.snapshot(KEY).expect("a bucket that is not full");
    let mut restored = limiter(4.0);
    restored
        .restore(KEY, &snapshot.bytes, "snapshot", at(0.0))
        .unwrap();
    assert_eq!(restored.status(KEY, at(0.0)), l.status(KEY, at(0.0)));
    assert!(!restored.has_leases(KEY));
    // The reloaded object starts its queue afresh.
    assert_eq!(turn_ms(&call(&mut restored, 0.0, 1.0, true)), Some(100));
    assert_eq!(turn_ms(&call(&mut l, 0.0, 1.0, true)), Some(300));
}

#[test]
fn a_queue_keeps_no_full_bucket_nor_its_policy() {
    // A key with a policy of its own, starved, then full again while its queue has not
    // ended: a full bucket goes with its policy, as without a queue, and the key follows the
    // instance options from then on.
    let mut l = limiter(4.0);
    let policy = OptionsPatch {
        max_tokens: Some(1.0),
        refill_every_seconds: Some(10.0),
    };
    let ask = LeaseAsk {
        want: cost(1.0),
        queue: true,
        ..LeaseAsk::default()
    };
    let d = l
        .limit_shared(KEY, cost(1.0), Some(policy), None, ask, at(0.0))
        .unwrap();
    assert_eq!(turn_ms(&d), Some(10_000));
    let second = l
        .limit_shared(KEY, cost(1.0), Some(policy), None, ask, at(0.0))
        .unwrap();
    assert_eq!(turn_ms(&second), Some(20_000));
    assert!(!l.has_leases(KEY));
    // Full again at 10 s, with its queue until 20 s: the bucket goes with its policy.
    let before = l.status(KEY, at(9_999.0));
    assert_eq!((before.remaining, before.limit), (0.0, 1.0));
    let after = l.status(KEY, at(10_000.0));
    assert_eq!((after.remaining, after.limit), (4.0, 4.0));
    assert!(!l.holds(KEY), "a full bucket is not kept");
}
