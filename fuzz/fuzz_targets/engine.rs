//! Fuzzes `rate_limiter::engine::Limiter` with sequences of operations decoded from the input
//! bytes (format: fuzz/README.md), and asserts the engine's invariants after every step:
//!
//! - no panic (overflow checks are on in fuzz builds, so arithmetic overflow panics too);
//! - every status: `0 <= remaining <= limit`, `limit` the max_tokens of the options the key
//!   follows, `reset_in_ms == 0` only for a full bucket;
//! - invalid costs and options are `Err` exactly when docs/SPEC.md says so, and an `Err` or
//!   a failed consume changes no status (nor the options);
//! - `check` answers what `consume` does right after, at the same time, and changes nothing;
//! - `reset` leaves a full bucket under the instance options;
//! - the token-bucket bound per key: over any window in which the clock only went forward,
//!   the key's options did not change and the costs were whole numbers, the tokens consumed
//!   are at most `max_tokens + floor(T / interval)`;
//! - `limit_all` is all or nothing: it agrees member by member with separate `limit` calls
//!   on a copy of the limiter, and when denied no member's tokens went down (except by a new
//!   policy's smaller capacity, which the copy reproduces);
//! - a denied `limit` is allowed again exactly `retry_after_ms` later (not 1 ms earlier) if
//!   nothing else happens, and a `None` wait means never;
//! - `stored_buckets()` never exceeds the number of distinct keys used;
//! - saving and restoring (the durable class): a fresh limiter with the same options, given
//!   the snapshot of every bucket, reports every key exactly as the original does, and
//!   `restore` of arbitrary bytes returns `Ok` or `Err` without touching other keys;
//! - leases: simulated holders take leases (`limit_leased`), spend them locally until a
//!   margin before their expiry, settle them or vanish; every token a holder spends counts
//!   in the key's token-bucket bound above, and settling twice returns nothing. A refund ends
//!   the key's window (it gives tokens back). Retry times of a key with leases out are
//!   estimates, so their exactness is checked only for keys without.
//! - shares: simulated holders ask for shares (`limit_shared` with a rate), renew and top
//!   them up, and settle them with nothing left or leave them to end; a share's terms stay
//!   within the bucket (capacity at most `max_tokens`, parts at most `RATE_PARTS`), a share is
//!   settled once, and what the object admits beside them counts in the bound above (their
//!   holders spend nothing, as holders that vanished).
//! - gates (concurrency limits): an acquire with an invalid cost or policy is `Err` exactly
//!   as docs/SPEC.md says and changes nothing; a granted permit leaves the key's live
//!   permits costing at most `max_in_flight`, and `in_flight` is what they cost; a release
//!   ends only a permit that was granted on that key and not released, once.
//! - blocks, on a copy of the limiter: a blocked key is denied every call (`consume`,
//!   `check`, `limit`), takes nothing and waits at least the time left; `unblock` brings back
//!   exactly the answers of the limiter that was never blocked.
#![no_main]

use std::collections::{HashMap, HashSet};

use libfuzzer_sys::fuzz_target;
use rate_limiter::engine::{
    permit_cost, Cost, Decision, GatePolicy, Instant, Lease, LeaseAsk, Limiter, Options,
    OptionsPatch, Request, Settlement, Status, MAX_PERMITS_PER_KEY, MAX_SAFE_INTEGER, RATE_PARTS,
};

/// Billionths per token (the engine's unit for capacities up to ~1.8e10 tokens).
const UNITS: u128 = 1_000_000_000;
const NANOS_PER_MS: u64 = 1_000_000;
/// Operations run per input, at most.
const MAX_OPS: usize = 512;
/// Keys whose status is compared around `set_options`, at most.
const MAX_KEYS: usize = 48;
/// Copies of the limiter made per input by the checks that need them, at most.
const MAX_COPIES: u32 = 12;
/// Consumption events kept per key for the window bound (older ones are dropped).
const MAX_EVENTS: usize = 256;
/// A holder stops spending a lease this long before its expiry.
const LEASE_MARGIN_NANOS: u64 = 1_000 * NANOS_PER_MS;

/// Keys from a small alphabet, so that operations meet the same buckets again. The last is
/// longer than the engine's inline key storage.
const ALPHABET: [&[u8]; 8] = [
    b"",
    b"a",
    b"b",
    b"user:1",
    b"\0",
    b"\xff\xfe",
    b"A",
    b"a-key-longer-than-twenty-two-bytes",
];

/// Numbers chosen by a tag byte 192..=223: edge cases for costs, capacities and intervals.
const SPECIAL: [f64; 32] = [
    f64::NAN,
    -f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    -1.0,
    -1e-9,
    1e-9,
    1e-12,
    0.1,
    1.0 / 3.0,
    0.001,
    MAX_SAFE_INTEGER,
    MAX_SAFE_INTEGER + 1.0,
    18_446_744_073.0,
    18_446_744_074.0,
    18_446_744_073.5,
    1e300,
    -1e300,
    f64::MAX,
    f64::MIN_POSITIVE,
    5e-324,
    1e21,
    18_446_744_073.709_553,
    9_223_372_036.854_776,
    1e-300,
    1e10,
    0.999_999_999_9,
    1.000_000_000_1,
    9.223_372_036_854_776e18,
    4_503_599_627_370_496.5,
    1e-6,
];

/// The input, read front to back; past its end every read gives zeros.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head.to_vec()
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// A key: a tag below 0xE0 picks from the alphabet, else a length byte (0..=47) and that
    /// many arbitrary bytes follow.
    fn key(&mut self) -> Vec<u8> {
        let tag = self.u8();
        if tag < 0xE0 {
            ALPHABET[usize::from(tag) % ALPHABET.len()].to_vec()
        } else {
            let len = usize::from(self.u8() % 48);
            self.take(len)
        }
    }

    /// A number: tag 0..=127 a whole number 0..=15, 128..=191 a multiple of 1/8 below 8,
    /// 192..=223 an edge case from `SPECIAL`, 224..=255 any bit pattern (8 more bytes).
    fn number(&mut self) -> f64 {
        match self.u8() {
            t @ 0..=127 => f64::from(t % 16),
            t @ 128..=191 => f64::from(t - 128) / 8.0,
            t @ 192..=223 => SPECIAL[usize::from(t - 192)],
            _ => f64::from_bits(self.u64()),
        }
    }

    /// A patch: bit 0 of the flags gives `max_tokens`, bit 1 `refill_every_seconds`.
    fn patch(&mut self) -> OptionsPatch {
        let flags = self.u8();
        let max_tokens = (flags & 1 != 0).then(|| self.number());
        let refill_every_seconds = (flags & 2 != 0).then(|| self.number());
        OptionsPatch {
            max_tokens,
            refill_every_seconds,
        }
    }

    /// No policy when the selector byte is a multiple of 3, else a patch.
    fn policy(&mut self) -> Option<OptionsPatch> {
        (self.u8() % 3 != 0).then(|| self.patch())
    }
}

/// What the harness knows about one key.
#[derive(Default)]
struct Track {
    /// The key's own options (a policy it keeps), `None` when it follows the instance options.
    policy: Option<Options>,
    /// The options the current window of `events` was consumed under; `None`: no window.
    window: Option<Options>,
    /// Successful whole-number consumptions of the window: (nanoseconds, billionths).
    events: Vec<(u64, u128)>,
}

impl Track {
    fn end_window(&mut self) {
        self.window = None;
        self.events.clear();
    }
}

struct Harness {
    limiter: Limiter,
    now: Instant,
    /// Keys whose statuses are compared around `set_options`.
    keys: Vec<Vec<u8>>,
    tracks: HashMap<Vec<u8>, Track>,
    /// Every key a call could have stored a bucket for.
    stored_keys: HashSet<Vec<u8>>,
    /// Copies of the limiter the checks may still make for this input (copying the store
    /// is what costs most per operation, so long inputs check the first ones only).
    copies_left: u32,
    /// The lease each simulated holder (key, holder number) spends, the billionths spent,
    /// and the options it was granted under (a later options change does not recall it).
    holders: HashMap<(Vec<u8>, u8), (Lease, u64, Options)>,
    /// The share id each simulated share holder (key, holder number) holds.
    shares: HashMap<(Vec<u8>, u8), u64>,
    /// The latest time the clock has shown (a lease that expired then stays ended).
    latest: Instant,
    /// Every permit id granted per key, and whether it was released.
    permits: HashMap<Vec<u8>, HashMap<u64, bool>>,
}

fn whole(x: f64) -> bool {
    x.fract() == 0.0
}

/// The contract's rule for a cost (docs/SPEC.md, rule 2.2), independently of the engine.
fn cost_is_valid(cost: f64) -> bool {
    cost.is_finite() && cost >= 0.0
}

/// The contract's rule for options `base` patched by `patch`, independently of the engine.
fn patch_is_valid(base: &Options, patch: &OptionsPatch) -> bool {
    let max = patch.max_tokens.unwrap_or(base.max_tokens() as f64);
    let refill = patch
        .refill_every_seconds
        .unwrap_or(base.refill_every_seconds());
    whole(max) && (1.0..=MAX_SAFE_INTEGER).contains(&max) && refill.is_finite() && refill > 0.0
}

/// Invariants of any status, whatever the bucket's history.
fn check_status(s: &Status) {
    assert!(
        s.limit >= 1.0 && s.limit <= MAX_SAFE_INTEGER && whole(s.limit),
        "{s:?}"
    );
    assert!(
        s.remaining >= 0.0 && s.remaining <= s.limit,
        "remaining out of [0, limit]: {s:?}"
    );
    assert!(
        s.reset_in_ms >= 0.0 && s.reset_in_ms.is_finite() && whole(s.reset_in_ms),
        "{s:?}"
    );
    if s.reset_in_ms == 0.0 {
        assert_eq!(s.remaining, s.limit, "reset_in_ms 0 but not full: {s:?}");
    }
}

/// Billionths of a token of a status's `remaining` (exact while the capacity counts
/// billionths and stays below 2^53 of them).
fn exact_units(s: &Status) -> Option<u128> {
    (s.limit <= 1e6).then(|| (s.remaining * 1e9).round() as u128)
}

fn check_decision(d: &Decision) {
    check_status(&d.status);
    if d.allowed {
        assert_eq!(d.retry_after_ms, Some(0.0), "allowed with a wait: {d:?}");
    } else if let Some(ms) = d.retry_after_ms {
        assert!(
            ms >= 1.0 && whole(ms),
            "denied with a wait under 1 ms: {d:?}"
        );
    }
}

impl Harness {
    fn new(seed: u64) -> Harness {
        Harness {
            limiter: Limiter::new(seed),
            now: Instant::from_nanos(0),
            keys: Vec::new(),
            tracks: HashMap::new(),
            stored_keys: HashSet::new(),
            copies_left: MAX_COPIES,
            holders: HashMap::new(),
            shares: HashMap::new(),
            latest: Instant::from_nanos(0),
            permits: HashMap::new(),
        }
    }

    /// What a key's live permits cost now.
    fn in_flight(&self, key: &[u8]) -> u64 {
        let live = self.limiter.permits_of(key, self.now);
        assert!(
            live.len() <= MAX_PERMITS_PER_KEY,
            "{} live permits",
            live.len()
        );
        live.iter().map(|p| p.cost).sum()
    }

    fn op_acquire(&mut self, key: &[u8], cost: f64, max: f64, ttl: Option<f64>) {
        let before = self.limiter.permits_of(key, self.now);
        let valid_cost = whole(cost) && (1.0..=MAX_SAFE_INTEGER).contains(&cost);
        let valid_max = whole(max) && (1.0..=MAX_SAFE_INTEGER).contains(&max);
        let valid_ttl = ttl.is_none_or(|t| t > 0.0 && t <= 86_400.0);
        let (cost, policy) = match (permit_cost(cost), GatePolicy::new(max, ttl)) {
            (Ok(cost), Ok(policy)) => (cost, policy),
            (c, p) => {
                assert!(!(valid_cost && valid_max && valid_ttl), "{c:?} {p:?}");
                assert_eq!(self.limiter.permits_of(key, self.now), before);
                return;
            }
        };
        assert!(valid_cost && valid_max && valid_ttl);
        let d = self.limiter.acquire(key, cost, policy, self.now);
        // (At the end of representable time a permit expires as it is granted.)
        if self.now.saturating_add(policy.ttl_nanos()) > self.now {
            assert_eq!(d.in_flight, self.in_flight(key), "{d:?}");
        }
        if let Some(id) = d.id {
            assert!(d.allowed && d.in_flight <= d.limit, "{d:?}");
            let granted = self.permits.entry(key.to_vec()).or_default();
            // Unique among the key's live permits.
            assert!(before.iter().all(|p| p.id != id), "{d:?}");
            granted.insert(id, false);
        } else {
            assert!(!d.allowed);
            assert_eq!(d.retry_after_ms.is_none(), cost > d.limit, "{d:?}");
        }
    }

    /// Blocks `key` on a copy for `ms`: everything is denied there and nothing changes; then
    /// unblocked, the copy answers as the original.
    fn op_block(&mut self, key: &[u8], ms: u16, cost: f64) {
        if !self.copies(2) {
            return;
        }
        let Ok(cost) = Cost::new(cost) else { return };
        let nanos = u64::from(ms.max(1)) * NANOS_PER_MS;
        if self.now.saturating_add(nanos).saturating_since(self.now) != nanos {
            return; // (at the end of representable time a block would be cut short)
        }
        let mut blocked = self.limiter.clone();
        let before = blocked.status(key, self.now);
        blocked.block(key, nanos, self.now);
        assert!(!blocked.check(key, cost, self.now));
        assert!(!blocked.consume(key, cost, self.now));
        let d = blocked.limit(key, cost, None, self.now).unwrap();
        assert!(!d.allowed, "{d:?}");
        if let Some(wait) = d.retry_after_ms {
            assert!(wait >= f64::from(ms.max(1)), "{d:?} for a block of {ms} ms");
        }
        assert_eq!(blocked.status(key, self.now), before, "a blocked call changed the bucket");
        assert!(blocked.unblock(key, self.now));
        let mut original = self.limiter.clone();
        assert_eq!(blocked.consume(key, cost, self.now), original.consume(key, cost, self.now));
        assert_eq!(blocked.status(key, self.now), original.status(key, self.now));
    }

    fn op_release(&mut self, key: &[u8], pick: u64) {
        let granted = self.permits.entry(key.to_vec()).or_default();
        let mut ids: Vec<u64> = granted.keys().copied().collect();
        ids.sort_unstable();
        // A granted id most of the time, else a made-up one.
        let id = if ids.is_empty() || pick % 4 == 0 {
            pick & ((1 << 53) - 1)
        } else {
            ids[(pick as usize / 4) % ids.len()]
        };
        let was_live = self
            .limiter
            .permits_of(key, self.now)
            .iter()
            .any(|p| p.id == id);
        let r = self.limiter.release(key, id, self.now);
        assert_eq!(r.released, was_live, "release of {id}");
        if r.released {
            let released = self.permits.get_mut(key).and_then(|g| g.get_mut(&id));
            let released = released.expect("released a permit never granted on this key");
            assert!(!*released, "released twice");
            *released = true;
        }
        assert_eq!(r.in_flight, self.in_flight(key));
    }

    /// Whether the checks may make `n` more copies of the limiter (and counts them).
    fn copies(&mut self, n: u32) -> bool {
        let ok = self.copies_left >= n;
        if ok {
            self.copies_left -= n;
        }
        ok
    }

    fn track(&mut self, key: &[u8]) -> &mut Track {
        if !self.tracks.contains_key(key) {
            if self.keys.len() < MAX_KEYS {
                self.keys.push(key.to_vec());
            }
            self.tracks.insert(key.to_vec(), Track::default());
        }
        self.tracks.get_mut(key).expect("inserted above")
    }

    /// The options the key follows now (as far as the last status of it tells).
    fn options_of(&mut self, key: &[u8]) -> Options {
        let instance = self.limiter.options();
        self.track(key).policy.unwrap_or(instance)
    }

    /// The status of `key`, checked. A full bucket is not stored, and neither is its policy:
    /// from then on the key follows the instance options. (A key with live leases keeps its
    /// bucket, full or not, so that they are saved with it: a share that holds none of the
    /// bucket leaves it full.)
    fn status(&mut self, key: &[u8]) -> Status {
        let s = self.limiter.status(key, self.now);
        check_status(&s);
        if s.reset_in_ms == 0.0 && !self.limiter.has_leases(key) {
            self.track(key).policy = None;
        }
        let options = self.options_of(key);
        assert_eq!(
            s.limit,
            options.max_tokens() as f64,
            "status limit is not the max_tokens of the key's options {options:?}"
        );
        s
    }

    /// A call that carried a policy resolving to `options` applied it (allowed or not): a
    /// different one ends the key's window, since converting a bucket can refill it.
    fn applied_policy(&mut self, key: &[u8], options: Options, after: &Status) {
        let track = self.track(key);
        if track.window != Some(options) {
            track.end_window();
        }
        let kept = after.reset_in_ms != 0.0 || self.limiter.has_leases(key);
        let track = self.track(key);
        track.policy = kept.then_some(options);
    }

    /// Records a consumption of `cost` (given as `raw`) under `options` now, and checks the
    /// token-bucket bound over every window of whole costs that ends with it.
    fn consumed(&mut self, key: &[u8], options: Options, raw: f64, cost: Cost) {
        self.stored_keys.insert(key.to_vec());
        let now = self.now.as_nanos();
        let track = self.track(key);
        if cost.billionths() == 0 {
            return;
        }
        if !whole(raw) {
            // A fractional cost: windows that start after it are still checked.
            track.end_window();
            return;
        }
        if track.window != Some(options) {
            track.end_window();
            track.window = Some(options);
        }
        if track.events.len() == MAX_EVENTS {
            track.events.remove(0);
        }
        track.events.push((now, cost.billionths()));
        let max = u128::from(options.max_tokens());
        let interval = options.interval_nanos();
        let mut sum = 0u128;
        for &(at, billionths) in track.events.iter().rev() {
            sum += billionths;
            let span = now - at;
            let bound = (max + u128::from(span) / interval) * UNITS;
            assert!(
                sum <= bound,
                "token-bucket bound broken: {} tokens consumed in {span} ns, bound {} \
                 (max_tokens {max}, interval {interval} ns); events {:?}",
                sum as f64 / 1e9,
                bound / UNITS,
                track.events
            );
        }
    }

    /// A request of `cost` whole tokens at holder `holder` of `key`: spent from its lease
    /// when that covers it and is not within the margin of its expiry, else one
    /// `limit_leased` call that settles the lease and may grant a new one of `want`.
    fn op_lease_request(&mut self, key: &[u8], holder: u8, cost: u8, want: u8) {
        let cost_units = u64::from(cost) * UNITS as u64;
        // (The status first: a full bucket has forgotten its policy.)
        self.status(key);
        let now = self.now;
        let id = (key.to_vec(), holder);
        if let Some((lease, used, granted_under)) = self.holders.get_mut(&id) {
            // By the latest time the clock showed: a clock that goes back is not a skew the
            // design tolerates (the object may have ended the lease at that later time).
            let usable = self.latest.saturating_add(LEASE_MARGIN_NANOS) < lease.expires_at;
            if usable && *used + cost_units <= lease.billionths {
                *used += cost_units;
                let (raw, under) = (f64::from(cost), *granted_under);
                self.consumed(key, under, raw, Cost::new(raw).expect("whole"));
                return;
            }
        }
        // The call settles the lease first: settled alone here (as the call would), so that a
        // bucket it fills, which forgets its policy, is seen before the options are read.
        if let Some((lease, used, _)) = self.holders.remove(&id) {
            let used = Cost::new(used as f64 / 1e9).expect("valid");
            let settlement = Settlement {
                id: lease.id,
                used,
                left: None,
            };
            self.limiter.settle(key, settlement, now);
            self.status(key);
        }
        let options = self.options_of(key);
        let raw = f64::from(cost);
        let cost = Cost::new(raw).expect("whole");
        let want = Cost::new(f64::from(want)).expect("whole");
        let d = self
            .limiter
            .limit_leased(key, cost, None, None, want, now)
            .expect("no policy: always valid");
        check_decision(&d.decision);
        if d.decision.allowed {
            self.consumed(key, options, raw, cost);
        } else {
            self.stored_keys.insert(key.to_vec());
        }
        if let Some(lease) = d.lease {
            assert!(d.decision.allowed, "a lease with a denial: {d:?}");
            assert!(lease.expires_at > now);
            self.holders.insert(id, (lease, 0, options));
        }
        self.status(key);
    }

    /// Holder `holder` of `key` settles its lease; settling it again returns nothing.
    fn op_settle(&mut self, key: &[u8], holder: u8) {
        let Some((lease, used, _)) = self.holders.remove(&(key.to_vec(), holder)) else {
            return;
        };
        let before = self.status(key);
        let settlement = Settlement {
            id: lease.id,
            used: Cost::new(used as f64 / 1e9).expect("valid"),
            left: None,
        };
        // (If the clock went back, a lease may have ended at a later time already.)
        let live = lease.expires_at > self.latest;
        let settled = self.limiter.settle(key, settlement, self.now);
        assert!(settled || !live, "a live lease was not settled");
        let after = self.status(key);
        assert!(
            after.reset_in_ms == 0.0 || after.remaining >= before.remaining,
            "{before:?} -> {after:?}"
        );
        let again = self.limiter.settle(key, settlement, self.now);
        assert!(!again, "a lease settled twice");
        assert_eq!(
            self.status(key),
            after,
            "a second settle changed the status"
        );
    }

    /// A call of `cost` whole tokens by share holder `holder` of `key`: it asks for a share
    /// (`rate` > 0), or renews (with a rate) or tops up (without) the share it holds, wanting
    /// `want` more tokens. The holder spends nothing of it.
    fn op_share(&mut self, key: &[u8], holder: u8, cost: u8, rate: f64, want: u8) {
        self.status(key);
        let options = self.options_of(key);
        let id = (key.to_vec(), holder);
        let raw = f64::from(cost);
        let cost = Cost::new(raw).expect("whole");
        let ask = LeaseAsk {
            want: Cost::new(f64::from(want)).expect("whole"),
            rate,
            renew: self.shares.get(&id).copied(),
            // (Appointments for every other holder: they move no tokens, only the key's queue.)
            queue: holder % 2 == 1,
            // (Ids chosen by the holder for every third `want`: small ones, held often.)
            id: (want % 3 == 0).then_some(u64::from(holder)),
        };
        let d = self
            .limiter
            .limit_shared(key, cost, None, None, ask, self.now)
            .expect("no policy: always valid");
        check_decision(&d.decision);
        if d.decision.allowed {
            self.consumed(key, options, raw, cost);
        }
        self.stored_keys.insert(key.to_vec());
        if let Some(lease) = d.lease {
            assert!(
                lease.expires_at > self.now,
                "a lease that ended as granted: {lease:?}"
            );
            let terms = [(lease.billionths, lease.parts)]
                .into_iter()
                .chain(lease.next.map(|t| (t.billionths, t.parts)));
            for (billionths, parts) in terms {
                assert!(parts <= RATE_PARTS, "a term above the refill: {lease:?}");
                // (A renewed share keeps the terms it was granted under earlier options.)
                if ask.renew.is_none() {
                    let most = u128::from(d.options.max_tokens()) * UNITS;
                    let held = u128::from(billionths);
                    assert!(held <= most, "a term above the capacity: {lease:?}");
                }
            }
            if lease.is_share() {
                self.shares.insert(id, lease.id);
            }
        }
        self.status(key);
    }

    /// Share holder `holder` of `key` settles its share with nothing left; again, nothing.
    fn op_share_settle(&mut self, key: &[u8], holder: u8) {
        let Some(share) = self.shares.remove(&(key.to_vec(), holder)) else {
            return;
        };
        let settlement = Settlement {
            id: share,
            used: Cost::ZERO,
            left: Some(Cost::ZERO),
        };
        self.limiter.settle(key, settlement, self.now);
        self.status(key);
        assert!(
            !self.limiter.settle(key, settlement, self.now),
            "a share settled twice"
        );
    }

    /// A holder of `key` vanishes: its lease is never settled.
    fn op_vanish(&mut self, key: &[u8], holder: u8) {
        self.holders.remove(&(key.to_vec(), holder));
    }

    /// Gives `raw` tokens back to `key`, up to its capacity.
    fn op_refund(&mut self, key: &[u8], raw: f64) {
        let before = self.status(key);
        let Some(tokens) = self.cost(raw) else {
            return;
        };
        self.limiter.refund(key, tokens, self.now);
        let after = self.status(key);
        // (A bucket that refills to full forgets its policy: then it reads the instance's.)
        assert!(
            after.reset_in_ms == 0.0 || after.remaining >= before.remaining,
            "{before:?} -> {after:?}"
        );
        self.track(key).end_window();
    }

    fn set_now(&mut self, to: Instant) {
        self.latest = self.latest.max(to);
        if to < self.now {
            // The clock went back: windows end (the bound assumes a clock that goes forward).
            for track in self.tracks.values_mut() {
                track.end_window();
            }
        }
        self.now = to;
    }

    fn op_consume(&mut self, key: &[u8], raw: f64) {
        let before = self.status(key);
        let Some(cost) = self.cost(raw) else {
            assert_eq!(self.status(key), before);
            return;
        };
        let options = self.options_of(key);
        let would = self.limiter.check(key, cost, self.now);
        assert_eq!(self.status(key), before, "check changed the status");
        let did = self.limiter.consume(key, cost, self.now);
        assert_eq!(
            would, did,
            "check said {would}, consume right after did {did}"
        );
        let after = self.status(key);
        if !did {
            assert_eq!(after, before, "a failed consume changed the status");
            return;
        }
        assert!(
            after.remaining <= before.remaining,
            "{before:?} -> {after:?}"
        );
        if let (Some(b), Some(a)) = (exact_units(&before), exact_units(&after)) {
            assert_eq!(b - a, cost.billionths(), "{before:?} -> {after:?}");
        }
        self.consumed(key, options, raw, cost);
    }

    fn op_check(&mut self, key: &[u8], raw: f64) {
        let before = self.status(key);
        if let Some(cost) = self.cost(raw) {
            self.limiter.check(key, cost, self.now);
        }
        assert_eq!(self.status(key), before, "check changed the status");
    }

    fn op_reset(&mut self, key: &[u8]) {
        self.limiter.reset(key);
        // A reset forgets the key's leases: what holders still spend of them is on top of the
        // full bucket (a reset overrides the limit), so the bound starts over without them.
        self.holders.retain(|(k, _), _| k.as_slice() != key);
        self.shares.retain(|(k, _), _| k.as_slice() != key);
        let track = self.track(key);
        track.policy = None;
        track.end_window();
        let s = self.status(key);
        assert!(
            s.remaining == s.limit && s.reset_in_ms == 0.0,
            "reset left {s:?}"
        );
    }

    fn op_set_options(&mut self, patch: OptionsPatch) {
        let old = self.limiter.options();
        let keys = self.keys.clone();
        let before: Vec<Status> = keys.iter().map(|k| self.status(k)).collect();
        let result = self.limiter.set_options(patch, self.now);
        assert_eq!(
            result.is_ok(),
            patch_is_valid(&old, &patch),
            "set_options({patch:?}) on {old:?}: {result:?}"
        );
        if result.is_err() {
            assert_eq!(
                self.limiter.options(),
                old,
                "a failed set_options changed them"
            );
            for (key, b) in keys.iter().zip(&before) {
                assert_eq!(
                    self.status(key),
                    *b,
                    "a failed set_options changed a status"
                );
            }
            return;
        }
        assert_eq!(Ok(self.limiter.options()), old.patched(patch));
        for track in self.tracks.values_mut() {
            if track.policy.is_none() {
                track.end_window();
            }
        }
        for (key, b) in keys.iter().zip(&before) {
            let kept_policy = self.track(key).policy.is_some();
            let a = self.status(key);
            if kept_policy {
                assert_eq!(a, *b, "set_options changed a key with a policy");
            } else if b.reset_in_ms == 0.0 {
                assert_eq!(
                    a.reset_in_ms, 0.0,
                    "set_options emptied a full bucket: {a:?}"
                );
            }
        }
    }

    /// The cost, checked against the contract's rule.
    fn cost(&self, raw: f64) -> Option<Cost> {
        let cost = Cost::new(raw);
        assert_eq!(
            cost.is_ok(),
            cost_is_valid(raw),
            "Cost::new({raw:?}) = {cost:?}"
        );
        cost.ok()
    }

    /// The options a `limit` call with `policy` uses for `key`, or `None` if it must fail.
    fn call_options(&mut self, key: &[u8], policy: Option<OptionsPatch>) -> Option<Options> {
        let instance = self.limiter.options();
        match policy {
            None => Some(self.options_of(key)),
            Some(patch) => {
                let resolved = instance.patched(patch);
                assert_eq!(
                    resolved.is_ok(),
                    patch_is_valid(&instance, &patch),
                    "{patch:?} on {instance:?}: {resolved:?}"
                );
                resolved.ok()
            }
        }
    }

    fn op_limit(&mut self, key: &[u8], raw: f64, policy: Option<OptionsPatch>) {
        let before = self.status(key);
        let Some(cost) = self.cost(raw) else {
            return;
        };
        let previous = self.options_of(key);
        let options = self.call_options(key, policy);
        let result = self.limiter.limit(key, cost, policy, self.now);
        let (Some(options), Ok(d)) = (options, result.as_ref()) else {
            assert!(
                options.is_none() && result.is_err(),
                "limit({policy:?}): expected valid {}, got {result:?}",
                options.is_some()
            );
            assert_eq!(
                self.status(key),
                before,
                "a failed limit changed the status"
            );
            return;
        };
        let d = *d;
        check_decision(&d);
        assert_eq!(
            d.status.limit,
            options.max_tokens() as f64,
            "{d:?} under {options:?}"
        );
        if policy.is_some() {
            self.applied_policy(key, options, &d.status);
        } else if d.status.reset_in_ms == 0.0 {
            self.track(key).policy = None;
        }
        let after = self.status(key);
        if d.status.reset_in_ms != 0.0 {
            assert_eq!(
                after, d.status,
                "the decision's status is not the key's status"
            );
        }
        if options == previous {
            if d.allowed {
                assert!(
                    after.remaining <= before.remaining,
                    "{before:?} -> {after:?}"
                );
                if let (Some(b), Some(a)) = (exact_units(&before), exact_units(&after)) {
                    assert_eq!(b - a, cost.billionths(), "{before:?} -> {after:?}");
                }
            } else {
                assert_eq!(after, before, "a denied limit changed the status");
            }
        }
        if d.allowed {
            self.consumed(key, options, raw, cost);
        } else {
            self.stored_keys.insert(key.to_vec());
            self.check_retry(key, cost, policy, &d);
        }
    }

    /// A denied call succeeds exactly `retry_after_ms` later, if nothing else happens, and
    /// not a millisecond earlier; `None` means it never does.
    fn check_retry(&mut self, key: &[u8], cost: Cost, policy: Option<OptionsPatch>, d: &Decision) {
        if self.limiter.has_leases(key) || !self.copies(1) {
            return;
        }
        let now = self.now.as_nanos();
        // One copy for both calls: a denied call changes nothing that a later one would see
        // differently (refills compose, and the policy is the one already applied).
        let mut copy = self.limiter.clone();
        let mut again = |at: u64| {
            let d = copy.limit(key, cost, policy, Instant::from_nanos(at));
            d.expect("the same call failed later").allowed
        };
        match d.retry_after_ms {
            None => assert!(
                !again(u64::MAX),
                "'never' but allowed at the end of time: {d:?}"
            ),
            Some(ms) if ms < 2f64.powi(53) => {
                let wait = ms as u64;
                let Some(at) = wait
                    .checked_mul(NANOS_PER_MS)
                    .and_then(|w| now.checked_add(w))
                else {
                    return;
                };
                assert!(
                    !again(at - NANOS_PER_MS),
                    "allowed a millisecond before retry_after_ms: {d:?}"
                );
                assert!(again(at), "still denied after retry_after_ms: {d:?}");
            }
            Some(_) => {}
        }
    }

    fn op_limit_all(&mut self, members: Vec<(Vec<u8>, f64, Option<OptionsPatch>)>) {
        let mut requests = Vec::new();
        let mut raws = Vec::new();
        for (key, raw, policy) in &members {
            if let Some(cost) = self.cost(*raw) {
                requests.push(Request {
                    key,
                    cost,
                    policy: *policy,
                    shadow: false,
                    penalty: None,
                });
                raws.push(*raw);
            }
        }
        let before: Vec<Status> = requests.iter().map(|r| self.status(r.key)).collect();
        let previous: Vec<Options> = requests.iter().map(|r| self.options_of(r.key)).collect();
        let options: Vec<Option<Options>> = requests
            .iter()
            .map(|r| self.call_options(r.key, r.policy))
            .collect();
        let duplicate = requests
            .iter()
            .enumerate()
            .any(|(i, r)| requests[..i].iter().any(|q| q.key == r.key));
        let valid = !duplicate && options.iter().all(Option::is_some);
        // Separate `limit` calls on copies: consuming ones, and ones that only apply policies.
        let mut copies = self
            .copies(2)
            .then(|| (self.limiter.clone(), self.limiter.clone()));
        let result = self.limiter.limit_all(&requests, self.now);
        assert_eq!(result.is_ok(), valid, "limit_all: {result:?}");
        let Ok(all) = result else {
            for (r, b) in requests.iter().zip(&before) {
                assert_eq!(
                    self.status(r.key),
                    *b,
                    "a failed limit_all changed a status"
                );
            }
            return;
        };
        assert_eq!(all.results.len(), requests.len());
        assert_eq!(
            all.allowed,
            all.results.iter().all(|d| d.allowed),
            "all or nothing: {all:?}"
        );
        if all.allowed {
            assert_eq!(all.retry_after_ms, Some(0.0), "{all:?}");
        } else {
            assert_ne!(all.retry_after_ms, Some(0.0), "{all:?}");
        }
        let separate: Option<Vec<Decision>> = copies.as_mut().map(|(alone, _)| {
            requests
                .iter()
                .map(|r| alone.limit(r.key, r.cost, r.policy, self.now).unwrap())
                .collect()
        });
        for (i, r) in requests.iter().enumerate() {
            let d = all.results[i];
            check_decision(&d);
            let options = options[i].unwrap();
            assert_eq!(d.status.limit, options.max_tokens() as f64, "{d:?}");
            if let Some(separate) = &separate {
                assert_eq!(d.allowed, separate[i].allowed, "{all:?} vs {separate:?}");
                if all.allowed || !d.allowed {
                    assert_eq!(d, separate[i], "member {i}: {all:?} vs {separate:?}");
                }
            }
            if r.policy.is_some() {
                self.applied_policy(r.key, options, &d.status);
            } else if d.status.reset_in_ms == 0.0 {
                self.track(r.key).policy = None;
            }
            let after = self.status(r.key);
            let unchanged = options == previous[i];
            if all.allowed {
                if let Some((alone, _)) = copies.as_mut() {
                    assert_eq!(after, alone.status(r.key, self.now), "member {i}");
                }
                if unchanged {
                    let b = &before[i];
                    assert!(
                        after.remaining <= b.remaining,
                        "member {i}: {b:?} -> {after:?}"
                    );
                    if let (Some(b), Some(a)) = (exact_units(b), exact_units(&after)) {
                        assert_eq!(b - a, r.cost.billionths(), "member {i}");
                    }
                }
                self.consumed(r.key, options, raws[i], r.cost);
            } else {
                if let Some((_, applied)) = copies.as_mut() {
                    applied
                        .limit(r.key, Cost::ZERO, r.policy, self.now)
                        .unwrap();
                    assert_eq!(after, applied.status(r.key, self.now), "member {i}");
                }
                if unchanged {
                    assert_eq!(after, before[i], "a denied limit_all changed member {i}");
                }
                self.stored_keys.insert(r.key.to_vec());
            }
        }
    }

    /// An eviction: a fresh limiter rebuilt from the instance options and the snapshots
    /// reads every key as the original does.
    fn op_evict_compare(&mut self) {
        if !self.copies(2) {
            return;
        }
        let options = self.limiter.options();
        let mut fresh = Limiter::new(0x5eed);
        let patch = OptionsPatch {
            max_tokens: Some(options.max_tokens() as f64),
            refill_every_seconds: Some(options.refill_every_seconds()),
        };
        fresh
            .set_options(patch, self.now)
            .expect("the options it had are valid");
        let keys: Vec<Vec<u8>> = self.tracks.keys().cloned().collect();
        for key in &keys {
            if let Some(snapshot) = self.limiter.snapshot(key) {
                fresh
                    .restore(key, &snapshot.bytes, "snapshot", self.now)
                    .expect("a snapshot restores");
            }
        }
        let mut original = self.limiter.clone();
        for key in &keys {
            assert_eq!(
                fresh.status(key, self.now),
                original.status(key, self.now),
                "restored {key:?} differs"
            );
        }
        // Gates, through their own snapshots: the same live permits.
        for key in self.permits.keys() {
            let live = self.limiter.permits_of(key, self.now);
            let bytes = rate_limiter::engine::gate_snapshot(&live);
            fresh
                .restore_gate(key, &bytes, self.now)
                .expect("a gate snapshot restores");
            assert_eq!(
                fresh.permits_of(key, self.now),
                live,
                "restored gate {key:?} differs"
            );
        }
    }

    /// `restore` of arbitrary bytes: no panic, and no other key changes.
    fn op_restore_bytes(&mut self, key: &[u8], bytes: &[u8]) {
        if !self.copies(1) {
            return;
        }
        let mut copy = self.limiter.clone();
        let _ = copy.restore(key, bytes, "snapshot", self.now);
        let keys: Vec<Vec<u8>> = self.tracks.keys().cloned().collect();
        let mut original = self.limiter.clone();
        for other in keys.iter().filter(|k| k.as_slice() != key) {
            assert_eq!(
                copy.status(other, self.now),
                original.status(other, self.now)
            );
        }
    }

    fn op_clock(&mut self, bytes: &mut Bytes) {
        let now = self.now.as_nanos();
        let to = match bytes.u8() % 10 {
            0 => now.saturating_add(u64::from(bytes.u16()) * NANOS_PER_MS),
            1 => now.saturating_add(u64::from(bytes.u32())),
            2 => now.saturating_add(bytes.u64()),
            3 => now.saturating_sub(u64::from(bytes.u16()) * NANOS_PER_MS),
            4 => now.saturating_sub(bytes.u64()),
            5 => 0,
            6 => u64::MAX,
            7 => Instant::from_millis(bytes.number()).as_nanos(),
            8 => bytes.u64(),
            _ => now.saturating_add(u64::from(bytes.u8()) * 1_000 * NANOS_PER_MS),
        };
        self.set_now(Instant::from_nanos(to));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = Bytes(data);
    let mut h = Harness::new(bytes.u64());
    // Start at a realistic epoch time; clock operations move it anywhere.
    h.set_now(Instant::from_millis(1.8e12));
    for _ in 0..MAX_OPS {
        if bytes.is_empty() {
            break;
        }
        match bytes.u8() % 16 {
            0..=3 => {
                let key = bytes.key();
                let cost = bytes.number();
                h.op_consume(&key, cost);
            }
            4 => {
                let key = bytes.key();
                let cost = bytes.number();
                h.op_check(&key, cost);
            }
            5 => {
                let key = bytes.key();
                h.status(&key);
            }
            6 => {
                let key = bytes.key();
                h.op_reset(&key);
            }
            7 => {
                let patch = bytes.patch();
                h.op_set_options(patch);
            }
            8 | 9 => {
                let key = bytes.key();
                let cost = bytes.number();
                let policy = bytes.policy();
                h.op_limit(&key, cost, policy);
            }
            10 => {
                let n = usize::from(bytes.u8() % 5);
                let members = (0..n)
                    .map(|_| (bytes.key(), bytes.number(), bytes.policy()))
                    .collect();
                h.op_limit_all(members);
            }
            11..=13 => {
                // Small steps forward, on the scale of the intervals the numbers give.
                let ms = u64::from(bytes.u16());
                let to = h.now.saturating_add(ms * NANOS_PER_MS);
                h.set_now(to);
            }
            14 => h.op_clock(&mut bytes),
            _ => match bytes.u8() % 8 {
                0 => h.op_evict_compare(),
                7 => {
                    let key = bytes.key();
                    let which = bytes.u8() % 4;
                    if which == 3 {
                        let (ms, cost) = (bytes.u16(), bytes.number());
                        h.op_block(&key, ms, cost);
                    } else if which == 0 {
                        h.op_release(&key, bytes.u64());
                    } else {
                        let (cost, max) = (bytes.number(), bytes.number());
                        let ttl = match bytes.u8() % 4 {
                            0 => None,
                            1 => Some(bytes.number()),
                            _ => Some(f64::from(bytes.u16()) / 100.0),
                        };
                        h.op_acquire(&key, cost, max, ttl);
                    }
                }
                3 | 4 => {
                    let key = bytes.key();
                    let (holder, cost, want) = (bytes.u8() % 3, bytes.u8() % 4, bytes.u8() % 24);
                    h.op_lease_request(&key, holder, cost, want);
                }
                5 => {
                    let key = bytes.key();
                    match bytes.u8() % 5 {
                        0 => h.op_vanish(&key, bytes.u8() % 3),
                        1 | 2 => h.op_settle(&key, bytes.u8() % 3),
                        3 => {
                            // (A rate of 0 renews nothing: a top-up, or a plain lease.)
                            let (holder, cost) = (bytes.u8() % 3, bytes.u8() % 4);
                            let rate = f64::from(bytes.u16()) / 16.0;
                            h.op_share(&key, holder, cost, rate, bytes.u8() % 24);
                        }
                        _ => h.op_share_settle(&key, bytes.u8() % 3),
                    }
                }
                6 => {
                    let key = bytes.key();
                    let tokens = bytes.number();
                    h.op_refund(&key, tokens);
                }
                1 => {
                    let key = bytes.key();
                    let len = usize::from(bytes.u8() % 40);
                    let saved = bytes.take(len);
                    h.op_restore_bytes(&key, &saved);
                }
                _ => h.op_clock(&mut bytes),
            },
        }
        assert!(
            h.limiter.stored_buckets() <= h.stored_keys.len(),
            "{} buckets stored for {} keys ever used",
            h.limiter.stored_buckets(),
            h.stored_keys.len()
        );
    }
});
