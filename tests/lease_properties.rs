#![cfg(not(target_arch = "wasm32"))]
//! Property tests of leases: many holders take tokens from one bucket in batches and spend
//! them on their own, in random interleavings, with random lease sizes, holders that vanish
//! without settling, clocks that differ from the bucket's within the tolerated skew, refunds
//! and options changes. Whatever happens, the tokens admitted in any window of length `T`
//! never exceed `max_tokens + floor(T / interval)` (whole costs), plus what was refunded in
//! that window; and with every lease settled, nothing is lost either.

use proptest::prelude::*;
use rate_limiter::engine::{
    Cost, Instant, Lease, LeaseAsk, Limiter, OptionsPatch, Settlement, LEASE_TTL_NANOS,
};

const NANOS_PER_MS: u64 = 1_000_000;
const UNITS_PER_TOKEN: u128 = 1_000_000_000;
const START_MS: u64 = 1_800_000_000_000;
/// A holder stops spending a lease this long before its expiry, by its own clock (LocalLimits'
/// default margin).
const MARGIN_MS: u64 = 100;
const KEY: &[u8] = b"api-key";

#[derive(Debug, Clone)]
enum Op {
    /// A request of `cost` whole tokens at holder `holder`, which asks for `want` more.
    Request { holder: usize, cost: u8, want: u8 },
    /// The holder settles its lease.
    Settle { holder: usize },
    /// The holder disappears (an evicted isolate): its lease is never settled.
    Vanish { holder: usize },
    /// A caller without leases consumes at the bucket itself.
    Direct { cost: u8 },
    /// An admitted request of the bucket itself is refunded.
    Refund,
    /// Time passes, in milliseconds.
    Advance { ms: u64 },
    /// The instance options change (the bucket follows them when the case has no policy).
    SetOptions { max_tokens: u8, interval_ms: u16 },
}

fn op(holders: usize, options_change: bool) -> impl Strategy<Value = Op> {
    let set_options = if options_change { 1 } else { 0 };
    prop_oneof![
        8 => (0..holders, 1u8..=3, 0u8..=12).prop_map(|(holder, cost, want)| Op::Request { holder, cost, want }),
        2 => (0..holders).prop_map(|holder| Op::Settle { holder }),
        1 => (0..holders).prop_map(|holder| Op::Vanish { holder }),
        2 => (1u8..=2).prop_map(|cost| Op::Direct { cost }),
        1 => Just(Op::Refund),
        6 => prop_oneof![0u64..300, 0u64..4_000, Just(10_000), Just(11_000)].prop_map(|ms| Op::Advance { ms }),
        set_options => (1u8..=12, prop_oneof![Just(250u16), Just(1_000), 100u16..3_000])
            .prop_map(|(max_tokens, interval_ms)| Op::SetOptions { max_tokens, interval_ms }),
    ]
}

/// One holder: its clock's offset from the bucket's, and the lease it holds.
#[derive(Default)]
struct Holder {
    skew_ms: i64,
    lease: Option<(Lease, u64)>, // the lease and the billionths spent from it
}

impl Holder {
    /// Whether the holder may still spend its lease at bucket time `now_ms`: by its own clock,
    /// at least `MARGIN_MS` before the expiry.
    fn usable(&self, now_ms: u64) -> bool {
        let Some((lease, _)) = &self.lease else {
            return false;
        };
        let own_clock = now_ms as i64 + self.skew_ms;
        let stop_at = (lease.expires_at.as_nanos() / NANOS_PER_MS) as i64 - MARGIN_MS as i64;
        own_clock < stop_at
    }

    fn settlement(&mut self) -> Option<Settlement> {
        self.lease.take().map(|(lease, used)| Settlement {
            id: lease.id,
            used: Cost::new(used as f64 / UNITS_PER_TOKEN as f64).unwrap(),
            left: None,
        })
    }
}

struct Run {
    limiter: Limiter,
    policy: Option<OptionsPatch>,
    holders: Vec<Holder>,
    now_ms: u64,
    /// (time in ns, billionths admitted) and (time in ns, billionths refunded).
    admitted: Vec<(u64, u128)>,
    refunded: Vec<(u64, u128)>,
    /// Admitted at the bucket itself and not refunded yet, for refunds.
    direct: Vec<u128>,
    /// The largest capacity so far, the interval in force and the first admission after the
    /// options last changed: progress since a bucket's last refill counts in a new interval,
    /// so only windows from the last change on meet one interval (an admission in the same
    /// millisecond but before the change belongs to the old one).
    max_tokens: u64,
    interval_ns: u64,
    changed_at: usize,
}

impl Run {
    fn now(&self) -> Instant {
        Instant::from_millis(self.now_ms as f64)
    }

    fn admit(&mut self, billionths: u128) {
        self.admitted.push((self.now_ms * NANOS_PER_MS, billionths));
    }

    fn apply(&mut self, op: &Op) {
        let now = self.now();
        match *op {
            Op::Request { holder, cost, want } => {
                let units = u64::from(cost) * UNITS_PER_TOKEN as u64;
                let usable = self.holders[holder].usable(self.now_ms);
                if let (true, Some((lease, used))) = (usable, &mut self.holders[holder].lease) {
                    if *used + units <= lease.billionths {
                        *used += units;
                        self.admit(units.into());
                        return;
                    }
                }
                let settle = self.holders[holder].settlement();
                let want = Cost::new(f64::from(want)).unwrap();
                let cost = Cost::new(f64::from(cost)).unwrap();
                let d = self
                    .limiter
                    .limit_leased(KEY, cost, self.policy, settle, want, now)
                    .unwrap();
                if d.decision.allowed {
                    self.admit(cost.billionths());
                }
                self.holders[holder].lease = d.lease.map(|l| (l, 0));
            }
            Op::Settle { holder } => {
                if let Some(settlement) = self.holders[holder].settlement() {
                    self.limiter.settle(KEY, settlement, now);
                }
            }
            Op::Vanish { holder } => self.holders[holder].lease = None,
            Op::Direct { cost } => {
                let cost = Cost::new(f64::from(cost)).unwrap();
                let allowed = match self.policy {
                    Some(_) => {
                        self.limiter
                            .limit(KEY, cost, self.policy, now)
                            .unwrap()
                            .allowed
                    }
                    None => self.limiter.consume(KEY, cost, now),
                };
                if allowed {
                    self.admit(cost.billionths());
                    self.direct.push(cost.billionths());
                }
            }
            Op::Refund => {
                if let Some(billionths) = self.direct.pop() {
                    let tokens = Cost::new(billionths as f64 / UNITS_PER_TOKEN as f64).unwrap();
                    self.limiter.refund(KEY, tokens, now);
                    self.refunded.push((self.now_ms * NANOS_PER_MS, billionths));
                }
            }
            Op::Advance { ms } => self.now_ms += ms,
            Op::SetOptions {
                max_tokens,
                interval_ms,
            } => {
                let patch = OptionsPatch {
                    max_tokens: Some(f64::from(max_tokens)),
                    refill_every_seconds: Some(f64::from(interval_ms) / 1000.0),
                };
                self.limiter.set_options(patch, now).unwrap();
                if self.policy.is_none() {
                    self.max_tokens = self.max_tokens.max(u64::from(max_tokens));
                    self.interval_ns = u64::from(interval_ms) * NANOS_PER_MS;
                    self.changed_at = self.admitted.len();
                }
            }
        }
    }

    /// The bound over every window between two admissions (from the last options change on).
    fn check_bound(&self) -> Result<(), TestCaseError> {
        let events = &self.admitted;
        for i in self.changed_at..events.len() {
            let mut sum = 0;
            for j in i..events.len() {
                sum += events[j].1;
                let (from, to) = (events[i].0, events[j].0);
                let window = u128::from(to - from);
                let refunded: u128 = self
                    .refunded
                    .iter()
                    .filter(|(t, _)| (from..=to).contains(t))
                    .map(|(_, b)| b)
                    .sum();
                let refills = window / u128::from(self.interval_ns);
                let bound = (u128::from(self.max_tokens) + refills) * UNITS_PER_TOKEN + refunded;
                prop_assert!(
                    sum <= bound,
                    "{} tokens admitted in {} ms, bound {} (refunded {})",
                    sum as f64 / 1e9,
                    window / 1_000_000,
                    bound as f64 / 1e9,
                    refunded as f64 / 1e9
                );
            }
        }
        Ok(())
    }
}

fn run(
    max_tokens: u8,
    interval_ms: u16,
    with_policy: bool,
    skews: &[i64],
    ops: &[Op],
) -> Result<Run, TestCaseError> {
    let mut limiter = Limiter::new(11);
    let options = OptionsPatch {
        max_tokens: Some(f64::from(max_tokens)),
        refill_every_seconds: Some(f64::from(interval_ms) / 1000.0),
    };
    let policy = if with_policy {
        Some(options)
    } else {
        limiter
            .set_options(options, Instant::from_millis(START_MS as f64))
            .unwrap();
        None
    };
    let mut run = Run {
        limiter,
        policy,
        holders: skews
            .iter()
            .map(|&skew_ms| Holder {
                skew_ms,
                lease: None,
            })
            .collect(),
        now_ms: START_MS,
        admitted: Vec::new(),
        refunded: Vec::new(),
        direct: Vec::new(),
        max_tokens: max_tokens.into(),
        interval_ns: u64::from(interval_ms) * NANOS_PER_MS,
        changed_at: 0,
    };
    for op in ops {
        run.apply(op);
    }
    run.check_bound()?;
    Ok(run)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The bound holds for every window, whatever the holders do.
    #[test]
    fn leases_keep_the_token_bucket_bound(
        max_tokens in 1u8..=20,
        interval_ms in prop_oneof![Just(250u16), Just(1_000), 50u16..5_000],
        with_policy in any::<bool>(),
        skews in proptest::collection::vec(-(MARGIN_MS as i64) + 1..(MARGIN_MS as i64), 1..=5),
        ops in proptest::collection::vec(op(5, false), 1..300),
    ) {
        let holders = skews.len();
        let ops: Vec<Op> = ops.into_iter().map(|op| clamp_holder(op, holders)).collect();
        run(max_tokens, interval_ms, with_policy, &skews, &ops)?;
    }

    /// The same with the instance options changing under the holders: from the last change
    /// on, the bound of the largest capacity so far and the interval in force holds.
    #[test]
    fn leases_keep_the_bound_when_options_change(
        max_tokens in 1u8..=12,
        interval_ms in prop_oneof![Just(250u16), Just(1_000), 100u16..3_000],
        skews in proptest::collection::vec(-(MARGIN_MS as i64) + 1..(MARGIN_MS as i64), 1..=4),
        ops in proptest::collection::vec(op(4, true), 1..300),
    ) {
        let holders = skews.len();
        let ops: Vec<Op> = ops.into_iter().map(|op| clamp_holder(op, holders)).collect();
        run(max_tokens, interval_ms, false, &skews, &ops)?;
    }

    /// Tokens come back: once every holder settled (unused parts returned) and time has
    /// passed, the bucket is full again, and a lease that was never settled has stopped
    /// counting after its expiry.
    #[test]
    fn settled_and_expired_leases_give_the_bucket_back(
        max_tokens in 1u8..=20,
        skews in proptest::collection::vec(-(MARGIN_MS as i64) + 1..(MARGIN_MS as i64), 1..=5),
        ops in proptest::collection::vec(op(5, false), 1..200),
    ) {
        let holders = skews.len();
        let ops: Vec<Op> = ops.into_iter().map(|op| clamp_holder(op, holders)).collect();
        let mut run = run(max_tokens, 1_000, false, &skews, &ops)?;
        for holder in 0..holders {
            run.apply(&Op::Settle { holder });
        }
        let later = LEASE_TTL_NANOS / NANOS_PER_MS + u64::from(max_tokens) * 1_000;
        run.apply(&Op::Advance { ms: later });
        let now = run.now();
        let status = run.limiter.status(KEY, now);
        prop_assert_eq!(status.remaining, f64::from(max_tokens));
        prop_assert!(!run.limiter.holds(KEY) || status.remaining == f64::from(max_tokens));
    }
}

fn clamp_holder(op: Op, holders: usize) -> Op {
    match op {
        Op::Request { holder, cost, want } => Op::Request {
            holder: holder % holders,
            cost,
            want,
        },
        Op::Settle { holder } => Op::Settle {
            holder: holder % holders,
        },
        Op::Vanish { holder } => Op::Vanish {
            holder: holder % holders,
        },
        other => other,
    }
}

/// The moment `ms` milliseconds after the start.
fn at(ms: u64) -> Instant {
    Instant::from_millis((START_MS + ms) as f64)
}

/// A limiter of `max_tokens`, one token back per second, from the start.
fn one_per_second(max_tokens: f64) -> Limiter {
    let mut limiter = Limiter::new(1);
    let options = OptionsPatch {
        max_tokens: Some(max_tokens),
        refill_every_seconds: Some(1.0),
    };
    limiter.set_options(options, at(0)).unwrap();
    limiter
}

/// The counterexample that makes leased tokens count as still in the bucket: half of a full
/// bucket of 10 is leased at 0 s, the holder spends it and the bucket itself admits the
/// other half at 0.9 s. Nothing has refilled at 1.0 s, because the bucket was full (with the
/// leased tokens) until 0.9 s: 10 tokens in 0.1 s, not 11.
#[test]
fn a_lease_banks_no_refill_while_it_is_out() {
    let mut limiter = one_per_second(10.0);
    let want = Cost::new(100.0).unwrap();
    let d = limiter
        .limit_leased(KEY, Cost::ZERO, None, None, want, at(0))
        .unwrap();
    let lease = d.lease.expect("a lease");
    assert_eq!(lease.billionths, 5_000_000_000, "half of the 10 tokens");
    assert_eq!(d.decision.status.remaining, 5.0);
    let one = Cost::ONE;
    for _ in 0..5 {
        assert!(limiter.consume(KEY, one, at(900)));
    }
    assert!(!limiter.consume(KEY, one, at(900)));
    assert!(
        !limiter.consume(KEY, one, at(1_000)),
        "no refill banked while full"
    );
    // The holder spent all 5 at 0.9 s and says so at 1.0 s: nothing comes back.
    let used = Cost::new(5.0).unwrap();
    assert!(limiter.settle(
        KEY,
        Settlement {
            id: lease.id,
            used,
            left: None
        },
        at(1_000)
    ));
    assert!(!limiter.consume(KEY, one, at(1_899)));
    assert!(limiter.consume(KEY, one, at(1_900)));
}

/// An expired lease counts as fully used, from its expiry on.
#[test]
fn an_expired_lease_counts_as_fully_used() {
    let mut limiter = one_per_second(4.0);
    let want = Cost::new(2.0).unwrap();
    let d = limiter
        .limit_leased(KEY, Cost::ZERO, None, None, want, at(0))
        .unwrap();
    let lease = d.lease.expect("a lease of 2");
    assert_eq!(lease.billionths, 2_000_000_000);
    assert_eq!(limiter.status(KEY, at(5_000)).remaining, 2.0);
    let ttl_ms = LEASE_TTL_NANOS / NANOS_PER_MS;
    // Expired at 10 s: the 2 tokens are gone, and refill runs from the expiry.
    assert_eq!(limiter.status(KEY, at(ttl_ms)).remaining, 2.0);
    assert_eq!(limiter.status(KEY, at(ttl_ms + 1_000)).remaining, 3.0);
    let used = Cost::ZERO;
    let late = Settlement {
        id: lease.id,
        used,
        left: None,
    };
    assert!(!limiter.settle(KEY, late, at(ttl_ms + 1_500)), "too late");
    assert_eq!(limiter.status(KEY, at(ttl_ms + 2_000)).remaining, 4.0);
}

/// A holder may choose its lease's id, so that it can settle a lease whose answer it never
/// heard: the id is taken unless a lease of the key holds it (or it is not below 2^53), and
/// the ids the limiter counts skip those its keys hold.
#[test]
fn a_lease_takes_the_id_its_holder_chose_unless_it_is_held() {
    let mut limiter = one_per_second(10.0);
    let lease = |limiter: &mut Limiter, key: &[u8], id: Option<u64>| {
        let ask = LeaseAsk {
            want: Cost::new(1.0).unwrap(),
            id,
            ..LeaseAsk::default()
        };
        limiter
            .limit_shared(key, Cost::ZERO, None, None, ask, at(0))
            .unwrap()
            .lease
            .expect("a lease")
            .id
    };
    let counted = lease(&mut limiter, KEY, None);
    let next = (counted + 1) & ((1 << 53) - 1);
    assert_eq!(lease(&mut limiter, KEY, Some(next)), next);
    // `next` is held now: asked for again it is not taken, and the count skips it.
    let after = (next + 1) & ((1 << 53) - 1);
    assert_eq!(lease(&mut limiter, KEY, Some(next)), after);
    assert_ne!(lease(&mut limiter, KEY, None), next);
    assert_ne!(lease(&mut limiter, KEY, Some(1 << 53)), 1 << 53);
    // Another key holds no lease `next`.
    assert_eq!(lease(&mut limiter, b"other", Some(next)), next);
    // Settled by the id its holder chose, unused: the token is back.
    let before = limiter.status(b"other", at(0)).remaining;
    let settlement = Settlement {
        id: next,
        used: Cost::ZERO,
        left: None,
    };
    assert!(limiter.settle(b"other", settlement, at(0)));
    assert_eq!(limiter.status(b"other", at(0)).remaining, before + 1.0);
}
