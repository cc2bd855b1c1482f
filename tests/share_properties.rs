#![cfg(not(target_arch = "wasm32"))]
//! Property tests of shares: holders run sub-buckets of their own on a part of a bucket's
//! capacity and refill, renew them in the background while they keep deciding, top them up,
//! settle them or vanish, with clocks offset from the object's and answers that arrive late;
//! callers without shares consume at the object meanwhile, and the durable copy is evicted
//! and read back. The holders follow the rules of docs/SPEC.md 11.6 exactly. Whatever
//! happens, the tokens admitted in every window of length `T`, by everyone together, never
//! exceed `max_tokens + floor(T / interval)` plus what was refunded in that window.

use proptest::prelude::*;
use rate_limiter::engine::{
    share_period, Cost, Instant, Lease, LeaseAsk, LeaseDecision, Limiter, OptionsPatch, Settlement,
};

const NANOS_PER_MS: i64 = 1_000_000;
const BILLION: u64 = 1_000_000_000;
const START_MS: i64 = 1_800_000_000_000;
/// A holder stops spending a share this long before the earliest end of its term (LocalLimits'
/// default margin).
const MARGIN_NS: i64 = 100 * NANOS_PER_MS;
const KEY: &[u8] = b"api-key";

#[derive(Debug, Clone)]
enum Op {
    /// A request of `cost` whole tokens at `holder`; a call it makes is answered `slow_ms`
    /// later than usual.
    Request {
        holder: usize,
        cost: u8,
        slow_ms: i64,
        queue: bool,
    },
    /// The holder renews its share in the background.
    Renew { holder: usize, slow_ms: i64 },
    /// The holder settles its share, giving back what it has left.
    Settle { holder: usize },
    /// The holder disappears (an evicted isolate): its share is never settled.
    Vanish { holder: usize },
    /// A caller without a share consumes at the object.
    Direct { cost: u8 },
    /// An admitted request of the object itself is refunded.
    Refund,
    /// The durable class is evicted: a new limiter reads the snapshot back.
    Evict,
    /// Time passes, in milliseconds.
    Advance { ms: u64 },
    /// Time passes to `offset_ms` around the earliest end of `holder`'s current term (where
    /// answers cross the switch to the next term).
    ToTermEnd { holder: usize, offset_ms: i64 },
}

fn op(holders: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0..holders, 1u8..=2, prop_oneof![Just(0i64), 0i64..300], any::<bool>())
            .prop_map(|(holder, cost, slow_ms, queue)| Op::Request { holder, cost, slow_ms, queue }),
        3 => (0..holders, prop_oneof![Just(0i64), 0i64..300]).prop_map(|(holder, slow_ms)| Op::Renew { holder, slow_ms }),
        1 => (0..holders).prop_map(|holder| Op::Settle { holder }),
        1 => (0..holders).prop_map(|holder| Op::Vanish { holder }),
        2 => (1u8..=2).prop_map(|cost| Op::Direct { cost }),
        1 => Just(Op::Refund),
        1 => Just(Op::Evict),
        8 => prop_oneof![0u64..100, 0u64..1_500, Just(4_000), Just(9_999), Just(10_001)]
            .prop_map(|ms| Op::Advance { ms }),
        3 => (0..holders, -1_200i64..600).prop_map(|(holder, offset_ms)| Op::ToTermEnd { holder, offset_ms }),
    ]
}

/// A share's terms as the holder runs them: whole tokens of capacity, a period in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Terms {
    capacity: u64,
    period: Option<i64>,
}

impl Terms {
    /// The smaller of two terms: the least capacity, the longest period.
    fn min(self, other: Terms) -> Terms {
        let period = match (self.period, other.period) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        Terms {
            capacity: self.capacity.min(other.capacity),
            period,
        }
    }
}

/// A share as its holder sees it (times by the holder's clock, in ns).
#[derive(Debug, Clone)]
struct Share {
    id: u64,
    current: Terms,
    next: Option<Terms>,
    /// How long the next term lasts (as the answer that gave it said).
    next_ns: i64,
    /// The current term ends somewhere in `[ends_from, ends_by]`, and began by `starts_by`.
    ends_from: i64,
    ends_by: i64,
    starts_by: i64,
    /// Whole tokens in the sub-bucket, and the moment its refill counts from.
    tokens: u64,
    since: i64,
    /// The last moment the sub-bucket was brought to.
    seen: i64,
}

impl Share {
    /// The terms in force at `t` and when they next change (`None`: the share is over).
    fn terms_at(&self, t: i64) -> Option<(Terms, Option<i64>)> {
        let stop = self.ends_from - MARGIN_NS;
        match self.next {
            _ if t < stop => Some((self.current, Some(stop))),
            None => None,
            Some(next) if t < self.ends_by => Some((self.current.min(next), Some(self.ends_by))),
            Some(next) => Some((next, Some(self.ends_by + self.next_ns - MARGIN_NS))),
        }
    }

    /// Brings the sub-bucket to `t` through every change of terms; false when it is over.
    fn advance(&mut self, t: i64) -> bool {
        let t = t.max(self.seen);
        loop {
            let Some((terms, change)) = self.terms_at(self.seen) else {
                return false;
            };
            let until = change.map_or(t, |c| c.min(t));
            self.refill(terms, until);
            self.seen = until;
            if change.is_none_or(|c| c > t) {
                return true;
            }
            if self.next.is_some() && until >= self.ends_by {
                // The next term has begun for sure: it is the current one now.
                self.current = self.next.take().unwrap_or(self.current);
                self.starts_by = self.ends_by;
                self.ends_from += self.next_ns;
                self.ends_by += self.next_ns;
            }
            let Some((after, _)) = self.terms_at(until) else {
                return false;
            };
            self.rescale(terms.period, after.period, until);
            self.tokens = self.tokens.min(after.capacity);
        }
    }

    fn refill(&mut self, terms: Terms, t: i64) {
        if self.tokens >= terms.capacity {
            self.tokens = terms.capacity;
            self.since = t;
            return;
        }
        let Some(period) = terms.period else { return };
        let k = (t - self.since).max(0) / period;
        self.tokens += k as u64;
        self.since += k * period;
        if self.tokens >= terms.capacity {
            self.tokens = terms.capacity;
            self.since = t;
        }
    }

    fn rescale(&mut self, old: Option<i64>, new: Option<i64>, at: i64) {
        if old == new {
            return;
        }
        let elapsed = i128::from((at - self.since).max(0));
        let kept = match (old, new) {
            (Some(old), Some(new)) => (elapsed * i128::from(new) / i128::from(old)) as i64,
            _ => 0,
        };
        self.since = at - kept;
    }
}

/// An answer on its way to a holder.
#[derive(Debug)]
struct Pending {
    arrives: i64,
    sent: i64,
    /// The share the call renewed: an answer about a share given up meanwhile is ignored.
    renewed: Option<u64>,
    /// When the object decided (ns).
    decided_at: u64,
    answer: LeaseDecision,
}

#[derive(Debug, Default)]
struct Holder {
    skew_ns: i64,
    /// How long a call takes to reach the object, and its answer to come back.
    send_ns: i64,
    latency_ns: i64,
    rate: f64,
    share: Option<Share>,
    pending: Option<Pending>,
    /// The remaining tokens of the object's last answer.
    object_remaining: f64,
}

impl Holder {
    fn clock(&self, true_ns: i64) -> i64 {
        true_ns + self.skew_ns
    }

    /// Takes in an answer that has arrived by `true_ns`.
    fn receive(&mut self, true_ns: i64) {
        if self.pending.as_ref().is_none_or(|p| p.arrives > true_ns) {
            return;
        }
        let Some(Pending {
            arrives,
            sent,
            renewed,
            decided_at,
            answer,
        }) = self.pending.take()
        else {
            return;
        };
        let received = self.clock(arrives);
        self.object_remaining = answer.decision.status.remaining;
        let Some(lease) = answer.lease.filter(|l| l.is_share()) else {
            return;
        };
        let options = answer.options;
        let terms = |billionths: u64, parts: u32| Terms {
            capacity: billionths / BILLION,
            period: share_period(&options, parts).and_then(|p| i64::try_from(p).ok()),
        };
        let current = terms(lease.billionths, lease.parts);
        let next = lease.next.map(|n| terms(n.billionths, n.parts));
        let next_ns = lease.next.map_or(0, |n| n.nanos as i64);
        let object_at = Instant::from_nanos(decided_at);
        let ttl = lease.expires_at.saturating_since(object_at) as i64;
        let moved = answer.moved / BILLION;
        match &mut self.share {
            Some(share) if share.id == lease.id => {
                // The object decided during the current term only if the call went out after
                // it surely began (the holder may have moved on while the call was in flight:
                // then the answer speaks of the term before) and the answer came before it
                // can have ended (a later one may speak of the term after). Judged before the
                // share is brought to `received`, which may start its next term.
                let within = sent >= share.starts_by && received < share.ends_from;
                if share.advance(received) {
                    // A top-up raised the capacity and refill of that term; the faster refill
                    // counts from when the answer came.
                    if within {
                        share.current.capacity = share.current.capacity.max(current.capacity);
                        let faster = match (share.current.period, current.period) {
                            (Some(held), Some(new)) => Some(held.min(new)),
                            (held, new) => held.or(new),
                        };
                        share.rescale(share.current.period, faster, received);
                        share.current.period = faster;
                        if share.next.is_none() && next.is_some() {
                            share.next = next;
                            share.next_ns = next_ns;
                        }
                        share.ends_from = share.ends_from.max(sent + ttl);
                        share.ends_by = share.ends_by.min(received + ttl);
                    }
                    let capacity = share.terms_at(received).map_or(0, |(t, _)| t.capacity);
                    share.tokens = (share.tokens + moved).min(capacity);
                }
            }
            _ if renewed.is_some() => {}
            _ => {
                self.share = Some(Share {
                    id: lease.id,
                    current,
                    next,
                    next_ns,
                    ends_from: sent + ttl,
                    ends_by: received + ttl,
                    starts_by: received,
                    tokens: moved.min(current.capacity),
                    since: received,
                    seen: received,
                });
            }
        }
    }

    /// The share, if it is still running at `t` (holder clock).
    fn live_share(&mut self, t: i64) -> Option<&mut Share> {
        let live = self.share.as_mut().is_some_and(|s| s.advance(t));
        if !live {
            self.share = None;
        }
        self.share.as_mut()
    }
}

struct Run {
    limiter: Limiter,
    policy: OptionsPatch,
    holders: Vec<Holder>,
    now_ns: i64,
    admitted: Vec<(i64, u64)>,
    refunded: Vec<(i64, u64)>,
    direct: Vec<u64>,
    max_tokens: u64,
    interval_ns: u64,
    seed: u64,
}

impl Run {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.now_ns as u64)
    }

    fn call(&mut self, holder: usize, cost: u8, ask: LeaseAsk, slow_ms: i64) {
        let now = self.now();
        let cost = Cost::new(f64::from(cost)).unwrap();
        let answer = self
            .limiter
            .limit_shared(KEY, cost, Some(self.policy), None, ask, now)
            .unwrap();
        if answer.decision.allowed {
            self.admitted.push((self.now_ns, cost.billionths() as u64));
        }
        if std::env::var_os("SHARE_TRACE").is_some() {
            eprintln!("{} holder {holder} call {ask:?}: {answer:?}", self.now_ns);
        }
        let h = &mut self.holders[holder];
        h.pending = Some(Pending {
            arrives: self.now_ns + h.latency_ns + slow_ms * NANOS_PER_MS,
            // (Sent a while before the object decides: the holder decided nothing meanwhile.)
            sent: h.clock(self.now_ns - h.send_ns),
            renewed: ask.renew,
            decided_at: self.now_ns as u64,
            answer,
        });
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let now = self.now();
        for h in &mut self.holders {
            h.receive(self.now_ns);
        }
        match *op {
            Op::Request {
                holder,
                cost,
                slow_ms,
                queue,
            } => {
                let h = &mut self.holders[holder];
                let t = h.clock(self.now_ns);
                if let Some(share) = h.live_share(t) {
                    if std::env::var_os("SHARE_TRACE").is_some() {
                        eprintln!("{} holder {holder} local {share:?}", self.now_ns);
                    }
                    // The holder never runs terms the object does not count now.
                    let (held, _) = share.terms_at(share.seen).unwrap();
                    let counted = self
                        .limiter
                        .leases_of(KEY)
                        .iter()
                        .find(|l| l.id == share.id)
                        .and_then(|l| l.terms_at(now));
                    let options = rate_limiter::engine::Options::new(
                        self.max_tokens as f64,
                        self.interval_ns as f64 / 1e9,
                    )
                    .unwrap();
                    let counted = counted.map(|c| Terms {
                        capacity: c.billionths / BILLION,
                        period: share_period(&options, c.parts).and_then(|p| i64::try_from(p).ok()),
                    });
                    prop_assert!(
                        held.capacity == 0
                            || counted.is_some_and(|c| c.capacity >= held.capacity
                                && match (c.period, held.period) {
                                    (_, None) => true,
                                    (None, Some(_)) => false,
                                    (Some(c), Some(h)) => c <= h,
                                }),
                        "holder {holder} runs {held:?} at {}, the object counts {counted:?}",
                        self.now_ns
                    );
                    if share.tokens >= u64::from(cost) {
                        share.tokens -= u64::from(cost);
                        self.admitted.push((self.now_ns, u64::from(cost) * BILLION));
                        return Ok(());
                    }
                }
                // Empty: ask the object only when it had room and no call is in flight.
                let in_flight = h.pending.is_some();
                let room = h.object_remaining >= f64::from(cost);
                if in_flight || (h.share.is_some() && !room) {
                    return Ok(()); // denied here
                }
                let ask = LeaseAsk {
                    want: Cost::new(4.0).unwrap(),
                    rate: h.rate,
                    renew: h.share.as_ref().map(|s| s.id),
                    queue,
                    id: None,
                };
                self.call(holder, cost, ask, slow_ms);
            }
            Op::Renew { holder, slow_ms } => {
                let h = &mut self.holders[holder];
                let t = h.clock(self.now_ns);
                let (rate, in_flight) = (h.rate, h.pending.is_some());
                let Some(share) = h.live_share(t) else {
                    return Ok(());
                };
                if share.next.is_some() || in_flight {
                    return Ok(());
                }
                let ask = LeaseAsk {
                    want: Cost::ZERO,
                    rate,
                    renew: Some(share.id),
                    queue: false,
                    id: None,
                };
                self.call(holder, 0, ask, slow_ms);
            }
            Op::Settle { holder } => {
                let h = &mut self.holders[holder];
                let t = h.clock(self.now_ns);
                if let Some(share) = h.live_share(t) {
                    let settlement = Settlement {
                        id: share.id,
                        used: Cost::ZERO,
                        left: Some(Cost::new(share.tokens as f64).unwrap()),
                    };
                    h.share = None;
                    self.limiter.settle(KEY, settlement, now);
                }
            }
            Op::Vanish { holder } => {
                let h = &mut self.holders[holder];
                h.share = None;
                h.pending = None;
                h.object_remaining = 0.0;
            }
            Op::Direct { cost } => {
                let cost = Cost::new(f64::from(cost)).unwrap();
                let d = self
                    .limiter
                    .limit(KEY, cost, Some(self.policy), now)
                    .unwrap();
                if d.allowed {
                    self.admitted.push((self.now_ns, cost.billionths() as u64));
                    self.direct.push(cost.billionths() as u64);
                }
            }
            Op::Refund => {
                if let Some(billionths) = self.direct.pop() {
                    let tokens = Cost::new((billionths / BILLION) as f64).unwrap();
                    self.limiter.refund(KEY, tokens, now);
                    self.refunded.push((self.now_ns, billionths));
                }
            }
            Op::Evict => {
                self.seed += 1;
                let mut fresh = Limiter::new(self.seed);
                if let Some(snapshot) = self.limiter.snapshot(KEY) {
                    fresh
                        .restore(KEY, &snapshot.bytes, "snapshot", now)
                        .unwrap();
                }
                self.limiter = fresh;
            }
            Op::Advance { ms } => self.now_ns += ms as i64 * NANOS_PER_MS,
            Op::ToTermEnd { holder, offset_ms } => {
                let h = &self.holders[holder];
                if let Some(share) = &h.share {
                    let at = share.ends_from - h.skew_ns + offset_ms * NANOS_PER_MS;
                    self.now_ns = self.now_ns.max(at);
                }
            }
        }
        Ok(())
    }

    /// The bound over every window between two admissions.
    fn check_bound(&self) -> Result<(), TestCaseError> {
        let events = &self.admitted;
        for i in 0..events.len() {
            let mut sum = 0u128;
            for event in &events[i..] {
                sum += u128::from(event.1);
                let (from, to) = (events[i].0, event.0);
                let refunded: u128 = self
                    .refunded
                    .iter()
                    .filter(|(t, _)| (from..=to).contains(t))
                    .map(|&(_, b)| u128::from(b))
                    .sum();
                let refills = (to - from) as u128 / u128::from(self.interval_ns);
                let bound =
                    (u128::from(self.max_tokens) + refills) * u128::from(BILLION) + refunded;
                prop_assert!(
                    sum <= bound,
                    "{} tokens admitted in {} ns from {} (bound {})",
                    sum as f64 / 1e9,
                    to - from,
                    from,
                    bound as f64 / 1e9
                );
            }
        }
        Ok(())
    }
}

fn holder() -> impl Strategy<Value = Holder> {
    (
        -3_000i64..3_000,
        0i64..200,
        0i64..400,
        prop_oneof![Just(0.5), 1.0f64..40.0],
    )
        .prop_map(|(skew_ms, send_ms, latency_ms, rate)| Holder {
            skew_ns: skew_ms * NANOS_PER_MS,
            send_ns: send_ms * NANOS_PER_MS,
            latency_ns: latency_ms * NANOS_PER_MS,
            rate,
            object_remaining: f64::INFINITY,
            ..Holder::default()
        })
}

const HOLDERS: usize = 8;
const OPS: usize = 300;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    // PROPTEST_CASES=100000 for a long search.
    #![proptest_config(ProptestConfig { cases: cases(400), ..ProptestConfig::default() })]

    #[test]
    fn holders_with_shares_never_pass_the_bound(
        max_tokens in 1u8..=12,
        interval_ms in prop_oneof![Just(100u64), Just(250), 20u64..700],
        holders in prop::collection::vec(holder(), 1..=HOLDERS),
        ops in prop::collection::vec(op(HOLDERS), 1..OPS),
    ) {
        let count = holders.len();
        let mut run = Run {
            limiter: Limiter::new(7),
            policy: OptionsPatch {
                max_tokens: Some(f64::from(max_tokens)),
                refill_every_seconds: Some(interval_ms as f64 / 1000.0),
            },
            holders,
            now_ns: START_MS * NANOS_PER_MS,
            admitted: Vec::new(),
            refunded: Vec::new(),
            direct: Vec::new(),
            max_tokens: max_tokens.into(),
            interval_ns: interval_ms * NANOS_PER_MS as u64,
            seed: 7,
        };
        for op in &ops {
            let op = match *op {
                Op::Request { holder, cost, slow_ms, queue } => Op::Request { holder: holder % count, cost, slow_ms, queue },
                Op::Renew { holder, slow_ms } => Op::Renew { holder: holder % count, slow_ms },
                Op::Settle { holder } => Op::Settle { holder: holder % count },
                Op::Vanish { holder } => Op::Vanish { holder: holder % count },
                Op::ToTermEnd { holder, offset_ms } => Op::ToTermEnd { holder: holder % count, offset_ms },
                ref other => other.clone(),
            };
            run.apply(&op)?;
            run.check_bound()?;
        }
    }
}

/// `ms` milliseconds after the start of a rule test (a realistic epoch).
fn at(ms: f64) -> Instant {
    Instant::from_millis(1.8e12 + ms)
}

/// `tokens` as a cost.
fn cost(tokens: f64) -> Cost {
    Cost::new(tokens).unwrap()
}

/// A limiter whose instance options are `max_tokens`, one refilled every `seconds`.
fn limiter(max_tokens: f64, seconds: f64) -> Limiter {
    let mut l = Limiter::new(1);
    let options = OptionsPatch {
        max_tokens: Some(max_tokens),
        refill_every_seconds: Some(seconds),
    };
    l.set_options(options, at(0.0)).unwrap();
    l
}

/// A top-up the object decides in the last moment of a term, whose answer comes after the
/// holder has moved on to the next term, speaks of the term that ended: the holder must not
/// raise its next term with it. (Requests every 7 ms from 0.9 s empty the share, and the one
/// it cannot serve makes a top-up, answered 100 ms late, after the first term's end.)
#[test]
fn a_late_top_up_does_not_raise_the_next_term() {
    let holder = Holder {
        latency_ns: 50 * NANOS_PER_MS,
        rate: 3.0,
        object_remaining: f64::INFINITY,
        ..Holder::default()
    };
    let mut run = Run {
        limiter: Limiter::new(7),
        policy: OptionsPatch {
            max_tokens: Some(10.0),
            refill_every_seconds: Some(0.1),
        },
        holders: vec![holder],
        now_ns: START_MS * NANOS_PER_MS,
        admitted: Vec::new(),
        refunded: Vec::new(),
        direct: Vec::new(),
        max_tokens: 10,
        interval_ns: 100 * NANOS_PER_MS as u64,
        seed: 7,
    };
    let request = Op::Request {
        holder: 0,
        cost: 1,
        slow_ms: 100,
        queue: false,
    };
    let mut ops = vec![request.clone(), Op::Advance { ms: 500 }];
    ops.push(Op::Renew {
        holder: 0,
        slow_ms: 0,
    });
    // The first term ends 1 s after the grant (between 1,000 and 1,050 ms by the holder).
    ops.push(Op::Advance { ms: 400 });
    for _ in 0..40 {
        ops.push(Op::Advance { ms: 7 });
        ops.push(request.clone());
    }
    for op in &ops {
        run.apply(op).unwrap();
    }
    run.check_bound().unwrap();
}

/// Four plain leases of a token on `l` (10 tokens, 10/s), then a share asked for at 4 tokens
/// a second: the leases' holders count as asking as much as the share's, so the demand is
/// 20/s on a 10/s key, twice its refill.
fn share_beside_four_leases(l: &mut Limiter, now: Instant) -> (Lease, Vec<Lease>) {
    let one = Cost::new(1.0).unwrap();
    let leases = (0..4)
        .map(|_| {
            let leased = l.limit_leased(KEY, one, None, None, one, now).unwrap();
            leased.lease.expect("a plain lease")
        })
        .collect();
    let ask = LeaseAsk {
        want: Cost::ZERO,
        rate: 4.0,
        ..LeaseAsk::default()
    };
    let share = l.limit_shared(KEY, one, None, None, ask, now).unwrap();
    (share.lease.expect("a share"), leases)
}

/// A top-up of 2 tokens of the share `id`.
fn top_up_of(id: u64) -> LeaseAsk {
    LeaseAsk {
        want: Cost::new(2.0).unwrap(),
        rate: 0.0,
        renew: Some(id),
        queue: false,
        id: None,
    }
}

/// A top-up raises a share's refill only up to what its holder wants (one and a half times
/// the demand it reported): a holder whose share ran out at a peak of its demand does not
/// take half of the main bucket's refill, which it could not use.
#[test]
fn a_top_up_raises_the_refill_only_up_to_what_the_holder_wants() {
    let now = at(0.0);
    let one = Cost::new(1.0).unwrap();
    let mut l = limiter(10.0, 0.1);
    let (share, leases) = share_beside_four_leases(&mut l, now);
    let wanted = share.wanted;
    assert!(share.parts < wanted);
    assert!(wanted < rate_limiter::engine::RATE_PARTS);
    for lease in leases {
        let settlement = Settlement {
            id: lease.id,
            used: Cost::ZERO,
            left: None,
        };
        assert!(l.settle(KEY, settlement, now));
    }
    // A top-up moves tokens and raises the refill by half of what the main bucket has, up
    // to what the holder wants (six tenths of the refill): the second reaches it, the third
    // adds nothing.
    let top_up = top_up_of(share.id);
    let topped = l.limit_shared(KEY, one, None, None, top_up, now).unwrap();
    let topped = topped.lease.expect("the share, topped up");
    assert!(topped.parts > share.parts && topped.parts <= wanted);
    assert!(topped.billionths > share.billionths);
    for _ in 0..2 {
        let again = l.limit_shared(KEY, one, None, None, top_up, now).unwrap();
        assert_eq!(again.lease.expect("the share, topped up").parts, wanted);
    }
}

/// The holders of plain leases draw on the main bucket together: a share asked for beside
/// eight of them is sized as one holder beside one more, not as one of nine. Asked for at
/// the whole refill of 100 tokens a second, it gets what the overload cap leaves it (a third
/// of what it wants), where an equal ninth would hold a few tokens topped up at every call.
#[test]
fn a_share_beside_many_plain_leases_is_not_sized_as_one_of_them() {
    let now = at(0.0);
    let one = cost(1.0);
    let mut l = limiter(100.0, 0.01);
    for _ in 0..8 {
        let leased = l.limit_leased(KEY, one, None, None, one, now).unwrap();
        assert!(leased.lease.is_some(), "a plain lease");
    }
    let ask = LeaseAsk {
        rate: 100.0,
        ..LeaseAsk::default()
    };
    let share = l.limit_shared(KEY, one, None, None, ask, now).unwrap();
    let share = share.lease.expect("a share");
    assert_eq!(share.wanted, rate_limiter::engine::RATE_PARTS);
    assert_eq!(share.parts, share.wanted / 3);
    assert_eq!(share.billionths, 33 * BILLION);
}

/// On an overloaded key (demand beside others at least 1.5x the refill) a share holds at
/// most a third of what its holder wants, even after top-ups: its holder then drains it at
/// twice its refill, and the rest of the refill stays at the object for the others.
#[test]
fn an_overloaded_share_holds_a_third_of_what_its_holder_wants() {
    let now = at(0.0);
    let one = Cost::new(1.0).unwrap();
    let mut l = limiter(10.0, 0.1);
    let (share, _leases) = share_beside_four_leases(&mut l, now);
    assert!(share.parts > 0 && share.parts <= share.wanted / 3);
    let top_up = top_up_of(share.id);
    for _ in 0..3 {
        let topped = l.limit_shared(KEY, one, None, None, top_up, now).unwrap();
        let topped = topped.lease.expect("the share, topped up");
        assert!(topped.parts <= share.wanted / 3);
    }
}

/// A lone holder at overload decides on its own: after its share is granted, a thousand
/// requests over ten seconds make no call but its renewals, and it admits what the bucket
/// refills.
#[test]
fn a_share_keeps_the_object_out_of_an_overload() {
    let mut limiter = Limiter::new(1);
    let policy = OptionsPatch {
        max_tokens: Some(10.0),
        refill_every_seconds: Some(0.1),
    };
    let start = START_MS as u64 * NANOS_PER_MS as u64;
    let ask = LeaseAsk {
        want: Cost::new(10.0).unwrap(),
        rate: 100.0,
        ..LeaseAsk::default()
    };
    let one = Cost::new(1.0).unwrap();
    let first = limiter
        .limit_shared(
            KEY,
            one,
            Some(policy),
            None,
            ask,
            Instant::from_nanos(start),
        )
        .unwrap();
    let lease = first.lease.expect("a share");
    assert!(lease.is_share());
    // A demand of 100/s is more than the whole refill of 10/s: all of it, and all the
    // capacity; the nine tokens left move into the share.
    assert_eq!(lease.parts, rate_limiter::engine::RATE_PARTS);
    assert_eq!(lease.billionths, 10 * BILLION);
    assert_eq!(first.moved, 9 * BILLION);
    // The object itself has nothing left to give, and says when it will: a whole interval after
    // the share's first term ends (1.2 s: the time a sub-bucket of 10/s takes to gain 12 tokens).
    let later = Instant::from_nanos(start + 50 * NANOS_PER_MS as u64);
    let plain = limiter.limit(KEY, one, Some(policy), later).unwrap();
    assert!(!plain.allowed);
    assert_eq!(plain.retry_after_ms, Some(1_200.0 - 50.0 + 100.0));
}

/// A bucket that is full beside a live lease stays full when `setOptions` lengthens the
/// interval (2.4): its room beside the lease, as a bucket without leases stays full.
#[test]
fn a_bucket_full_beside_a_lease_stays_full_when_the_interval_lengthens() {
    let mut l = limiter(10.0, 0.1);
    // A plain lease of one token, live for 10 s; three tokens consumed: by 1 s the bucket is
    // full beside the lease (9 tokens), its last recorded refill at 0 s.
    let leased = l
        .limit_leased(b"k", cost(0.0), None, None, cost(1.0), at(0.0))
        .unwrap();
    assert_eq!(leased.moved, BILLION);
    l.consume(b"k", cost(3.0), at(0.0));
    assert_eq!(l.status(b"k", at(1_000.0)).remaining, 9.0);
    let slower = OptionsPatch {
        max_tokens: None,
        refill_every_seconds: Some(60.0),
    };
    l.set_options(slower, at(1_000.0)).unwrap();
    assert_eq!(l.status(b"k", at(1_000.0)).remaining, 9.0);
}

/// A share its holder's renewal does not continue (it reported almost no demand) leaves the
/// bucket full after its term; raising the capacity keeps it full. The main bucket counts
/// the share's terms from its last refill on, not the term that ended before it.
#[test]
fn a_bucket_full_after_a_share_that_ended_stays_full_when_the_capacity_grows() {
    let mut l = limiter(1.0, 1.0);
    let ask = |rate: f64, renew: Option<u64>| LeaseAsk {
        want: Cost::ZERO,
        rate,
        renew,
        queue: false,
        id: None,
    };
    let share = l
        .limit_shared(b"k", cost(0.0), None, None, ask(100.0, None), at(0.0))
        .unwrap()
        .lease
        .expect("a share of the whole bucket");
    let renewed = l
        .limit_shared(
            b"k",
            cost(0.0),
            None,
            None,
            ask(1e-9, Some(share.id)),
            at(500.0),
        )
        .unwrap()
        .lease
        .expect("the share, answered");
    assert_eq!(renewed.next, None);
    // After the share's term (the longest, 5 s: it refills a token a second) the bucket
    // refills to its one token.
    assert_eq!(l.status(b"k", at(7_000.0)).remaining, 1.0);
    let seven = OptionsPatch {
        max_tokens: Some(7.0),
        refill_every_seconds: Some(7.0),
    };
    l.set_options(seven, at(7_000.0)).unwrap();
    assert_eq!(l.status(b"k", at(7_000.0)).remaining, 7.0);
}

/// `setOptions` that drops a full bucket whose leases have all ended drops the leases too:
/// a clock that then reads earlier finds the key as a limiter rebuilt from its snapshots
/// does (no bucket, no lease), not a lease live again beside no bucket.
#[test]
fn set_options_forgets_the_ended_leases_of_a_bucket_it_drops() {
    let mut l = limiter(10.0, 1.0);
    let leased = l
        .limit_leased(b"k", cost(1.0), None, None, cost(2.0), at(100_000.0))
        .unwrap();
    assert_eq!(leased.moved, 2 * BILLION);
    // By 200 s the lease (10 s) has ended and the bucket is full: a larger capacity drops it.
    let twenty = OptionsPatch {
        max_tokens: Some(20.0),
        refill_every_seconds: None,
    };
    l.set_options(twenty, at(200_000.0)).unwrap();
    assert!(l.snapshot(b"k").is_none());
    // The clock reads 105 s: the key is full, as it is for a limiter that never saw it.
    assert_eq!(l.status(b"k", at(105_000.0)).remaining, 20.0);
}

/// A share asked for while plain leases hold all but a fraction of a token of the capacity
/// is not granted, whatever part of the refill is free: nothing is recorded for it.
#[test]
fn no_share_is_granted_when_leases_hold_the_capacity() {
    let now = at(0.0);
    let mut l = limiter(2.0, 1.0);
    // Leases of 1 and then 0.5 tokens: half a token of capacity is left free.
    for tokens in [1.0, 0.5] {
        let d = l
            .limit_leased(b"k", cost(0.0), None, None, cost(1.0), now)
            .unwrap();
        assert_eq!(d.moved, (tokens * 1e9) as u64);
    }
    let ask = LeaseAsk {
        want: Cost::ZERO,
        rate: 0.1,
        ..LeaseAsk::default()
    };
    let share = l
        .limit_shared(b"k", cost(0.0), None, None, ask, now)
        .unwrap();
    assert!(share.lease.is_none());
    assert_eq!(l.leases_of(b"k").len(), 2);
}

/// Two shares of an overloaded key of 7 tokens (a plain lease's holder counts as asking as
/// much as the first), each of the least capacity such a share holds, 3 tokens.
fn two_shares_of_seven(l: &mut Limiter) -> [Lease; 2] {
    let ask = LeaseAsk {
        want: Cost::ZERO,
        rate: 10.0,
        ..LeaseAsk::default()
    };
    let plain = l
        .limit_leased(KEY, cost(0.0), None, None, cost(1.0), at(0.0))
        .unwrap()
        .lease
        .expect("a plain lease");
    let first = l
        .limit_shared(KEY, cost(1.0), None, None, ask, at(0.0))
        .unwrap();
    let settlement = Settlement {
        id: plain.id,
        used: Cost::ZERO,
        left: None,
    };
    assert!(l.settle(KEY, settlement, at(0.0)));
    let second = l
        .limit_shared(KEY, cost(1.0), None, None, ask, at(0.0))
        .unwrap();
    let shares = [first, second].map(|d| d.lease.expect("a share"));
    for share in shares {
        assert_eq!(share.billionths, 3 * BILLION);
    }
    shares
}

/// On an overloaded key a share holds at least 3 whole tokens, where its fair part of the
/// capacity would be less: a sub-bucket of one token drained at twice its refill admits two
/// thirds of it, one of three tokens nearly all.
#[test]
fn an_overloaded_share_holds_at_least_three_tokens() {
    let mut l = limiter(7.0, 0.1);
    let [first, _] = two_shares_of_seven(&mut l);
    // Its fair part: a third of what it wants, at most a third of the refill: 2 of 7 tokens.
    assert!(first.parts <= rate_limiter::engine::RATE_PARTS / 3);
}

/// An ask for a share at an overloaded key whose shares leave no room for one more of the
/// least capacity gets no share: its demand is kept on record for a term (a lease that holds
/// nothing), which is the answer, and counts in the key's demand; an ask beyond 256 on record
/// gets nothing. A renewal naming a record renews nothing.
#[test]
fn a_crowded_key_records_asks_instead_of_granting_shares() {
    let mut l = limiter(7.0, 0.1);
    two_shares_of_seven(&mut l);
    let ask = LeaseAsk {
        want: cost(1.0),
        rate: 20.0,
        ..LeaseAsk::default()
    };
    let before = l.status(KEY, at(650.0)).remaining;
    let answer = l
        .limit_shared(KEY, cost(0.0), None, None, ask, at(650.0))
        .unwrap();
    let record = answer.lease.expect("the ask on record");
    assert!(record.is_record());
    assert_eq!((record.billionths, record.parts, record.next), (0, 0, None));
    assert_eq!(record.expires_at, at(1_650.0));
    assert_eq!(answer.moved, 0);
    assert_eq!(l.status(KEY, at(650.0)).remaining, before);
    // A renewal naming it renews nothing.
    let renewal = LeaseAsk {
        renew: Some(record.id),
        ..ask
    };
    let again = l
        .limit_shared(KEY, cost(0.0), None, None, renewal, at(700.0))
        .unwrap();
    assert!(again.lease.is_none_or(|l| !l.is_share()));
    for i in 0..300 {
        l.limit_shared(KEY, cost(0.0), None, None, ask, at(700.0 + f64::from(i)))
            .unwrap();
    }
    let records = l.leases_of(KEY).iter().filter(|l| l.is_record()).count();
    assert_eq!(records, 256);
}

/// A term lasts as long as its sub-bucket takes to gain 12 tokens, from 1 s to 5 s: a share of
/// the whole refill of a 100/s key has 1 s terms, of a 10/s key 1.2 s, of a 1/s key 5 s, and
/// its next term lasts as long from the end of the current one.
#[test]
fn a_term_lasts_until_its_share_gains_twelve_tokens_from_one_to_five_seconds() {
    for (max_tokens, seconds, term_ms) in [
        (100.0, 0.01, 1_000.0),
        (10.0, 0.1, 1_200.0),
        (10.0, 1.0, 5_000.0),
    ] {
        let mut l = limiter(max_tokens, seconds);
        let ask = LeaseAsk {
            rate: 1_000.0,
            ..LeaseAsk::default()
        };
        let granted = l
            .limit_shared(KEY, cost(0.0), None, None, ask, at(0.0))
            .unwrap();
        let share = granted.lease.expect("a share of the whole refill");
        assert_eq!(share.parts, rate_limiter::engine::RATE_PARTS);
        assert_eq!(share.expires_at, at(term_ms), "{seconds}");
        let renewal = LeaseAsk {
            renew: Some(share.id),
            ..ask
        };
        let renewed = l
            .limit_shared(KEY, cost(0.0), None, None, renewal, at(500.0))
            .unwrap();
        let renewed = renewed.lease.expect("the share, renewed");
        assert_eq!(renewed.next.map(|n| n.nanos), Some((term_ms * 1e6) as u64));
        assert_eq!(renewed.ends_at(), at(2.0 * term_ms));
    }
}
