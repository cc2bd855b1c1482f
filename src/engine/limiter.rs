//! The keyed limiter: instance options plus one lazy bucket, and maybe a policy, per key.

use super::block::{millis_until, Blocks};
use super::bucket::{self, convert, refill, take, wait_for, wait_for_full, Bucket, Status};
use super::error::{decimal, join, Error};
use super::gate::{Gates, PermitAsk, PermitDecision};
use super::lease::{Lease, Leases};
use super::leasing::{leased_wait, Grant};
use super::options::{Cost, Options, OptionsPatch, UNITS_PER_TOKEN};
use super::share::{out_at, refill_through_leases, wait_through_leases};
use super::store::Store;
use super::time::{ceil_millis, Instant};
use super::view::View;

/// A token-bucket rate limiter over byte-string keys. Time is an argument of every call.
#[derive(Clone)]
pub struct Limiter {
    pub(super) options: Options,
    pub(super) store: Store,
    pub(super) leases: Leases,
    /// Keys with leases after the last pass that dropped expired ones everywhere.
    pub(super) leased_keys_at_last_pass: usize,
    /// Concurrency limits: each key's live permits, apart from its bucket.
    pub(super) gates: Gates,
    /// Keys blocked until an instant: every call on them is denied until then.
    pub(super) blocks: Blocks,
}

/// A holder's report on a lease it took: how much of it it spent. For a share, what its
/// sub-bucket has `left` goes back (without it, nothing: the share counts as fully used).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settlement {
    pub id: u64,
    pub used: Cost,
    pub left: Option<Cost>,
}

/// What a holder asks of `limit_shared` besides the call's own cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseAsk {
    /// Tokens wanted now: a plain lease's size, or a share's top-up.
    pub want: Cost,
    /// Tokens per second the holder expects to need; above 0 asks for a share of the refill.
    pub rate: f64,
    /// The holder's share to renew (and top up), instead of a new one.
    pub renew: Option<u64>,
}

impl Default for LeaseAsk {
    fn default() -> Self {
        LeaseAsk {
            want: Cost::ZERO,
            rate: 0.0,
            renew: None,
        }
    }
}

/// What `limit_leased` reports: the decision for the call's own cost, and the lease granted
/// (or the share renewed) for later requests, if any.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseDecision {
    pub decision: Decision,
    pub lease: Option<Lease>,
    /// Billionths of a token moved into the lease by this call (a plain lease: all of it).
    pub moved: u64,
    /// The options the call used (a share's periods follow from them).
    pub options: Options,
}

/// What `limit` reports about one key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    /// The bucket after the call, under the options the call used.
    pub status: Status,
    /// 0 when allowed; when denied, whole milliseconds (rounded up) after which the same
    /// call succeeds if nothing else consumes; `None` when no wait can help.
    pub retry_after_ms: Option<f64>,
    /// Milliseconds an empty bucket takes to refill completely, rounded up.
    pub window_ms: f64,
}

/// One member of a `limit_all` call.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub cost: Cost,
    pub policy: Option<OptionsPatch>,
    /// A limit on trial: it never changes the answer, and takes its cost (when it has
    /// room) only if the other members allowed.
    pub shadow: bool,
    /// A penalty: when the call is denied and this (enforced) member had no room, its key
    /// is blocked for these nanoseconds, unless a block is in force.
    pub penalty: Option<u64>,
}

/// What `limit_all` reports: all enforced members consumed, or none did.
#[derive(Debug, Clone, PartialEq)]
pub struct AllDecision {
    pub allowed: bool,
    /// 0 when allowed; else the largest member wait, `None` if some member can never pass.
    pub retry_after_ms: Option<f64>,
    /// One per request, in order. When denied, each says whether that limit had room.
    pub results: Vec<Decision>,
}

impl Limiter {
    /// `seed` keys the hash of the bucket table; pass a fresh random value per instance.
    pub fn new(seed: u64) -> Limiter {
        Limiter {
            options: Options::default(),
            store: Store::new(seed),
            leases: Leases::new(seed),
            leased_keys_at_last_pass: 0,
            gates: Gates::new(seed),
            blocks: Blocks::new(seed),
        }
    }

    pub fn options(&self) -> Options {
        self.options
    }

    /// Applies a partial update to the instance options; all or nothing. The new options
    /// apply to each key without a policy of its own at its next access, except that a
    /// bucket already full at `now` stays full: a raised capacity or a longer interval
    /// does not empty it again. (Full buckets may already have been swept away, so this
    /// keeps the sweep invisible.) Costs O(stored buckets) only for such changes, and when
    /// the capacity crosses `MAX_TOKENS_IN_BILLIONTHS` (the buckets change units).
    pub fn set_options(&mut self, patch: OptionsPatch, now: Instant) -> Result<(), Error> {
        let old = self.options;
        let new = old.patched(patch)?;
        let unfills =
            new.max_tokens() > old.max_tokens() || new.interval_nanos() > old.interval_nanos();
        if unfills || new.unit() != old.unit() {
            let leases = &self.leases;
            // Keys whose leases have all ended and whose bucket goes: their leases go too
            // (a clock that later reads earlier must not find them live without a bucket).
            let mut ended = Vec::new();
            self.store
                .change_buckets_without_policy(|key, bucket, leased| {
                    if leased {
                        // Full by now beside its leases (all its room): full under the new
                        // options too; forgotten once its leases have ended, else kept full
                        // beside them (the refill clamps it to its room). Otherwise it is
                        // kept as it is.
                        let leases = leases.of(key);
                        let room = old
                            .capacity_units()
                            .saturating_sub(out_at(leases, &old, now).units);
                        let full = refill_through_leases(bucket, leases, &old, now)
                            .is_none_or(|b| b.units() >= room);
                        if unfills && full {
                            if !leases.iter().any(|l| l.ends_at() > now) {
                                ended.push(key.to_vec());
                                return None;
                            }
                            return Some(Bucket::from_parts(new.capacity_units(), now));
                        }
                        let full = Bucket::from_parts(new.capacity_units(), bucket.last_refill());
                        return Some(convert(Some(bucket), &old, &new).unwrap_or(full));
                    }
                    if unfills && refill(Some(bucket), &old, now).is_none() {
                        return None;
                    }
                    convert(Some(bucket), &old, &new)
                });
            for key in ended {
                self.leases.forget(&key);
            }
        }
        self.options = new;
        Ok(())
    }

    /// No lease and no block anywhere: every key is a plain bucket (the common case, which
    /// `consume` and `check` keep as short as before either existed).
    #[inline]
    fn nothing_in_force(&self) -> bool {
        self.leases.is_empty() && self.blocks.is_empty()
    }

    /// Whether `consume(key, cost, now)` would succeed; consumes nothing.
    pub fn check(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        if self.nothing_in_force() {
            let view = self.plain_view(key, None, now);
            return take(view.current, cost, &view.options, now).is_ok();
        }
        if self.blocked_until(key, now).is_some() {
            return false;
        }
        let view = self.view(key, None, now);
        take(view.current, cost, &view.options, now).is_ok()
    }

    /// Takes `cost` tokens from the bucket of `key` if it holds that many; else changes nothing.
    pub fn consume(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        if self.nothing_in_force() {
            let view = self.plain_view(key, None, now);
            let Ok(next) = take(view.current, cost, &view.options, now) else {
                return false;
            };
            self.store_bucket(key, view.at, next, view.policy, false, now);
            return true;
        }
        if self.blocked_until(key, now).is_some() {
            return false;
        }
        let view = self.view(key, None, now);
        match take(view.current, cost, &view.options, now) {
            Ok(next) => {
                self.commit(key, view.at, next, view.policy, now);
                true
            }
            Err(()) => false,
        }
    }

    pub fn status(&mut self, key: &[u8], now: Instant) -> Status {
        let view = self.view(key, None, now);
        status_of(view.current, &view, now)
    }

    /// Forgets the bucket of `key`, its policy and its leases: it is full at its next access.
    pub fn reset(&mut self, key: &[u8]) {
        if let Some(at) = self.store.position(key) {
            self.store.remove(at);
        }
        self.leases.forget(key);
    }

    /// Applies `policy` to the key, consumes like `consume` and reports the outcome. The
    /// policy (missing fields taken from the instance options) becomes the key's own options
    /// whether or not the call consumes, so its reported wait is exact.
    pub fn limit(
        &mut self,
        key: &[u8],
        cost: Cost,
        policy: Option<OptionsPatch>,
        now: Instant,
    ) -> Result<Decision, Error> {
        // `limit_shared` without a settle or an ask, which grants nothing: the path of every
        // request that reaches the object without local decisions, kept short.
        let given = policy.is_some();
        let policy = self.resolve(policy)?;
        if self.nothing_in_force() {
            let view = self.plain_view(key, policy, now);
            let outcome = take(view.current, cost, &view.options, now);
            let state = outcome.unwrap_or(view.current);
            // A denied call without a policy changes nothing, like a denied `consume`.
            if outcome.is_ok() || given {
                self.store_bucket(key, view.at, state, view.policy, false, now);
            }
            let (options, remembered) = (view.options, view.remembered);
            return Ok(self.plain_decision(
                outcome.is_ok(),
                state,
                cost,
                &options,
                remembered,
                now,
            ));
        }
        let blocked = self.blocked_until(key, now);
        let view = self.view(key, policy, now);
        let outcome = match blocked {
            Some(_) => Err(()),
            None => take(view.current, cost, &view.options, now),
        };
        let state = outcome.unwrap_or(view.current);
        if outcome.is_ok() || given {
            self.commit(key, view.at, state, view.policy, now);
        }
        let mut decision = self.decision(outcome.is_ok(), state, cost, &view, now);
        if let Some(end) = blocked {
            decision.retry_after_ms = after_block(decision.retry_after_ms, end, now);
        }
        Ok(decision)
    }

    /// `limit` for a holder that spends tokens locally: first settles the holder's previous
    /// lease on `key` (if `settle`), then decides `cost` as `limit` does, and when that is
    /// allowed grants a lease of up to `want` more tokens, at most half of what the bucket
    /// has left, so other holders are not starved and a nearly empty bucket leases nothing.
    pub fn limit_leased(
        &mut self,
        key: &[u8],
        cost: Cost,
        policy: Option<OptionsPatch>,
        settle: Option<Settlement>,
        want: Cost,
        now: Instant,
    ) -> Result<LeaseDecision, Error> {
        let ask = LeaseAsk {
            want,
            ..LeaseAsk::default()
        };
        self.limit_shared(key, cost, policy, settle, ask, now)
    }

    /// [`limit_leased`](Self::limit_leased) that may also grant or renew a share: a part of
    /// the bucket's capacity and refill that the holder runs as a bucket of its own (see
    /// [`share`](super::share)). A share is granted (or renewed) whether or not the call's own
    /// cost is allowed: it is how a holder decides on its own at any demand.
    pub fn limit_shared(
        &mut self,
        key: &[u8],
        cost: Cost,
        policy: Option<OptionsPatch>,
        settle: Option<Settlement>,
        ask: LeaseAsk,
        now: Instant,
    ) -> Result<LeaseDecision, Error> {
        let given = policy.is_some();
        let policy = self.resolve(policy)?;
        if let Some(settlement) = settle {
            self.settle(key, settlement, now);
        }
        let blocked = self.blocked_until(key, now);
        let mut view = self.view(key, policy, now);
        let outcome = match blocked {
            Some(_) => Err(()),
            None => take(view.current, cost, &view.options, now),
        };
        let state = outcome.unwrap_or(view.current);
        let options = view.options;
        // A blocked key is granted and renewed nothing: its holders learn of the block.
        let granted = match blocked {
            Some(_) => Grant {
                state,
                lease: None,
                moved: 0,
            },
            None => self.grant(key, &mut view, ask, outcome.is_ok(), state, now),
        };
        let (state, lease, moved) = (granted.state, granted.lease, granted.moved);
        // A denied call without a policy changes nothing, like a denied `consume`; one that
        // granted or renewed a share records it.
        if outcome.is_ok() || given || lease.is_some() {
            let at = self.store.position(key);
            self.commit(key, at, state, view.policy, now);
        }
        let mut decision = self.decision(outcome.is_ok(), state, cost, &view, now);
        if let Some(end) = blocked {
            decision.retry_after_ms = after_block(decision.retry_after_ms, end, now);
        }
        let moved = moved.saturating_mul(UNITS_PER_TOKEN / options.unit());
        Ok(LeaseDecision {
            decision,
            lease,
            moved,
            options,
        })
    }

    /// Gives `tokens` back to the bucket of `key` (a request that should not count), up to
    /// its capacity.
    pub fn refund(&mut self, key: &[u8], tokens: Cost, now: Instant) {
        let view = self.view(key, None, now);
        if view.current.is_none() {
            return; // full already
        }
        let next = give_back(
            view.current,
            tokens.billionths(),
            view.leased,
            &view.options,
        );
        self.commit(key, view.at, next, view.policy, now);
    }

    /// `limit` over several keys at once, all or nothing: every enforced bucket consumes,
    /// or none does (each still takes its policy). Shadow members follow: when the
    /// enforced ones allowed, each takes its cost if it has room, on its own; else none
    /// takes anything. Keys must be distinct; every request is validated before anything
    /// changes.
    pub fn limit_all(
        &mut self,
        requests: &[Request<'_>],
        now: Instant,
    ) -> Result<AllDecision, Error> {
        self.limit_all_with_permit(requests, None, now)
            .map(|(decision, _)| decision)
    }

    /// `limit_all` that also asks for a permit (a concurrency limit, section 12 of
    /// docs/SPEC.md), all or nothing with the enforced members: the permit is granted and
    /// they consume, or neither happens. Denied, the permit's `allowed` says whether its
    /// gate had room (and it has no id).
    pub fn limit_all_with_permit(
        &mut self,
        requests: &[Request<'_>],
        permit: Option<PermitAsk<'_>>,
        now: Instant,
    ) -> Result<(AllDecision, Option<PermitDecision>), Error> {
        let mut views = Vec::with_capacity(requests.len());
        for (i, request) in requests.iter().enumerate() {
            if let Some(first) = requests[..i].iter().position(|r| r.key == request.key) {
                return Err(Error::DuplicateKey {
                    field: join(&["requests[", &decimal(i), "].key"]),
                    first: join(&["requests[", &decimal(first), "].key"]),
                });
            }
            let policy = self
                .resolve(request.policy)
                .map_err(|e| e.within(&join(&["requests[", &decimal(i), "].policy"])))?;
            views.push(self.view(request.key, policy, now));
        }
        // Each member's block; with no block in force (the common case), none is looked up
        // and nothing is allocated.
        let blocked: Vec<Option<Instant>> = if self.blocks.is_empty() {
            Vec::new()
        } else {
            requests
                .iter()
                .map(|r| self.blocked_until(r.key, now))
                .collect()
        };
        let block_of = |i: usize| blocked.get(i).copied().flatten();
        let outcomes: Vec<_> = views
            .iter()
            .zip(requests)
            .enumerate()
            .map(|(i, (view, r))| match block_of(i) {
                Some(_) => Err(()),
                None => take(view.current, r.cost, &view.options, now),
            })
            .collect();
        let buckets_allow = outcomes
            .iter()
            .zip(requests)
            .all(|(outcome, r)| r.shadow || outcome.is_ok());
        let permit = permit.map(|p| {
            if buckets_allow {
                self.gates.acquire(p.key, p.cost, p.policy, now)
            } else {
                self.gates.would_admit(p.key, p.cost, p.policy, now)
            }
        });
        let allowed = buckets_allow && permit.is_none_or(|p| p.allowed);
        let mut results = Vec::with_capacity(requests.len());
        for (i, ((view, request), outcome)) in views.iter().zip(requests).zip(outcomes).enumerate()
        {
            // A shadow member with room takes its cost on its own, once the others allowed.
            let state = match outcome {
                Ok(next) if allowed => next,
                _ => view.current,
            };
            // Earlier members may have moved buckets: find this one again.
            let at = self.store.position(request.key);
            self.commit(request.key, at, state, view.policy, now);
            let room = outcome.is_ok();
            let mut decision = self.decision(room, state, request.cost, view, now);
            if let Some(end) = block_of(i) {
                decision.retry_after_ms = after_block(decision.retry_after_ms, end, now);
            }
            if let (Some(nanos), false, false) = (request.penalty, request.shadow, allowed) {
                self.apply_penalty(request.key, &mut decision, nanos, now);
            }
            results.push(decision);
        }
        let retry_after_ms = results
            .iter()
            .zip(requests)
            .filter(|(_, r)| !r.shadow)
            .map(|(d, _)| d.retry_after_ms)
            .chain(permit.map(|p| p.retry_after_ms))
            .try_fold(0.0, |most: f64, wait| wait.map(|ms| most.max(ms)));
        let decision = AllDecision {
            allowed,
            retry_after_ms,
            results,
        };
        Ok((decision, permit))
    }

    /// Buckets held in memory (only ones that were not full when last seen).
    pub fn stored_buckets(&self) -> usize {
        self.store.len()
    }

    /// Whether the limiter holds nothing at `now` that a new one would not: every bucket is
    /// full, and no block, permit or lease is in force. Such a limiter can be dropped and
    /// made anew (with its options) without a caller seeing a difference. Cold: it scans
    /// what is kept and stops at the first thing in force; full buckets without leases that
    /// it passes are dropped, as the sweep would, so a later check does not walk them again.
    pub fn holds_nothing(&mut self, now: Instant) -> bool {
        if self.blocks.live(now).next().is_some()
            || self.gates.any_live(now)
            || self.leases.any_in_force(now)
        {
            return false;
        }
        let mut at = 0;
        while let Some((key, bucket, policy, leased)) = self.store.slot(at) {
            let options = policy.as_ref().unwrap_or(&self.options);
            if refill_through_leases(bucket, self.leases.of(key), options, now).is_some() {
                return false;
            }
            if leased {
                at += 1;
            } else {
                // The last bucket moves here: inspect it next.
                self.store.remove(at);
            }
        }
        true
    }

    /// The leases recorded for `key` (live, or ended but not yet dropped by a change).
    pub fn leases_of(&self, key: &[u8]) -> &[Lease] {
        self.leases.of(key)
    }

    /// Whether `key` has leases recorded (live or expired but not yet ended by a change).
    pub fn has_leases(&self, key: &[u8]) -> bool {
        !self.leases.of(key).is_empty()
    }

    /// Whether `key` has a bucket in memory.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.store.position(key).is_some()
    }

    fn resolve(&self, policy: Option<OptionsPatch>) -> Result<Option<Options>, Error> {
        policy.map(|p| self.options.patched(p)).transpose()
    }

    /// The report of a call that left `state`. When denied, the wait is exact for the same
    /// call: under its options, unless the key only remembered its policy and refills to
    /// full first; then the key is forgotten at that moment and the instance options decide.
    fn decision(
        &self,
        allowed: bool,
        state: Option<Bucket>,
        cost: Cost,
        view: &View,
        now: Instant,
    ) -> Decision {
        if view.live.is_empty() {
            return self.plain_decision(allowed, state, cost, &view.options, view.remembered, now);
        }
        let options = &view.options;
        let wait = if allowed {
            Some(0)
        } else if view.shared() {
            let needed = cost.units(options);
            needed
                .and_then(|needed| wait_through_leases(state, needed, &view.live, options, now))
                .map(whole_millis)
        } else if view.leased > 0 {
            leased_wait(state, cost, view, now).map(whole_millis)
        } else {
            return Decision {
                status: status_of(state, view, now),
                ..self.plain_decision(allowed, state, cost, options, view.remembered, now)
            };
        };
        Decision {
            allowed,
            status: status_of(state, view, now),
            retry_after_ms: wait.map(ceil_millis),
            window_ms: window_ms(options),
        }
    }

    /// [`decision`](Self::decision) for a key without leases (`remembered`: see
    /// [`View::remembered`]).
    #[inline(never)]
    fn plain_decision(
        &self,
        allowed: bool,
        state: Option<Bucket>,
        cost: Cost,
        options: &Options,
        remembered: bool,
        now: Instant,
    ) -> Decision {
        let wait = if allowed {
            Some(0)
        } else {
            // Waits are reported in whole milliseconds, so compare the moment the caller
            // will come back, not the nanosecond the tokens are there.
            let ready = wait_for(state, cost, options, now).map(whole_millis);
            let full = wait_for_full(state, options, now);
            match ready {
                Some(wait) if !remembered || wait < full => Some(wait),
                _ if remembered => cost.units(&self.options).map(|_| whole_millis(full)),
                other => other,
            }
        };
        Decision {
            allowed,
            status: bucket::status(state, options, now),
            retry_after_ms: wait.map(ceil_millis),
            window_ms: window_ms(options),
        }
    }
}

/// The bucket's window: the time it takes to refill from empty, in milliseconds.
fn window_ms(options: &Options) -> f64 {
    ceil_millis(u128::from(options.max_tokens()).saturating_mul(options.interval_nanos()))
}

/// The status of a call that left `state`. While the tokens in the bucket and the leased
/// ones fill it, refill waits for the leases: the next token comes an interval after the
/// last one ends, at the latest.
fn status_of(state: Option<Bucket>, view: &View, now: Instant) -> Status {
    let options = &view.options;
    let mut status = bucket::status(state, options, now);
    let units = state.map_or(options.capacity_units(), |b| b.units());
    if view.shared() {
        if let Some(bucket) = state {
            let next = bucket
                .units()
                .saturating_add(1)
                .min(options.capacity_units());
            // (`next` is within capacity, so some wait always helps.)
            let wait = wait_through_leases(state, next, &view.live, options, now);
            status.reset_in_ms = ceil_millis(wait.unwrap_or_default());
        }
        return status;
    }
    if view.leased > 0 && units.saturating_add(view.leased) >= options.capacity_units() {
        let ends = view.last_expiry.map_or(0, |e| e.as_nanos());
        let wait = u128::from(ends.saturating_sub(now.as_nanos()))
            .saturating_add(options.interval_nanos());
        status.reset_in_ms = ceil_millis(wait);
    }
    status
}

/// `bucket` given `billionths` back (a settled lease's unused part, a refund): whole units
/// only, so it never gains more than was given, and up to its room beside `leased` units;
/// full (`None`) when that fills it and no lease is out.
pub(super) fn give_back(
    bucket: Option<Bucket>,
    billionths: u128,
    leased: u64,
    options: &Options,
) -> Option<Bucket> {
    let bucket = bucket?;
    let back = u64::try_from(billionths / u128::from(UNITS_PER_TOKEN / options.unit()))
        .unwrap_or(u64::MAX);
    let room = options.capacity_units().saturating_sub(leased);
    let units = bucket.units().saturating_add(back).min(room);
    (leased > 0 || units < options.capacity_units())
        .then(|| Bucket::from_parts(units, bucket.last_refill()))
}

/// `nanos` rounded up to whole milliseconds, still in nanoseconds.
fn whole_millis(nanos: u128) -> u128 {
    nanos.div_ceil(1_000_000).saturating_mul(1_000_000)
}

/// A wait that also waits out a block ending at `end`: the later of the two (never stays never).
pub(super) fn after_block(wait: Option<f64>, end: Instant, now: Instant) -> Option<f64> {
    wait.map(|ms| ms.max(millis_until(end, now)))
}
