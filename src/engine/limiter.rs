//! The keyed limiter: instance options plus one lazy bucket, and maybe a policy, per key.

use core::cell::Cell;

use super::block::{millis_until, Blocks};
use super::bucket::{self, convert, refill, take, wait_for, wait_for_full, Bucket, Status};
use super::error::Error;
use super::gate::Gates;
use super::in_force::OnKey;
use super::lease::{Lease, Leases};
use super::leasing::leased_wait;
use super::options::{Cost, Options, OptionsPatch, UNITS_PER_TOKEN};
use super::share::{out_at, refill_through_leases, wait_through_leases};
use super::store::Store;
use super::time::{ceil_millis, Instant};
use super::view::View;
use super::wide::{div_ceil_small, div_rem_small};

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
    /// The last policy resolved against the instance options, and what it resolved to: a
    /// caller (the middleware) passes the same policy at every call, and validating it anew
    /// takes a float-to-128-bit conversion and a 128-bit multiplication each time.
    last_policy: Cell<Option<(OptionsPatch, Options)>>,
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
            last_policy: Cell::new(None),
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
                            if !leases
                                .iter()
                                .any(|l| !l.is_queue_end() && l.ends_at() > now)
                            {
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
        self.last_policy.set(None);
        Ok(())
    }

    /// No lease and no block anywhere: every key is a plain bucket (the common case, which
    /// `consume`, `check` and `limit` keep as short as before either existed).
    #[inline(always)]
    fn nothing_in_force(&self) -> bool {
        self.leases.is_empty() && self.blocks.is_empty()
    }

    /// Whether `consume(key, cost, now)` would succeed; consumes nothing.
    pub fn check(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        if !self.nothing_in_force() {
            if let Some(taken) = self.take_in_force(key, cost, false, now) {
                return taken;
            }
        }
        let view = self.plain_view(key, None, now);
        take(view.current, cost, &view.options, now).is_ok()
    }

    /// Takes `cost` tokens from the bucket of `key` if it holds that many; else changes nothing.
    pub fn consume(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        if !self.nothing_in_force() {
            if let Some(taken) = self.take_in_force(key, cost, true, now) {
                return taken;
            }
        }
        let view = self.plain_view(key, None, now);
        let Ok(next) = take(view.current, cost, &view.options, now) else {
            return false;
        };
        self.store_bucket(key, view.at, next, view.policy, false, now);
        true
    }

    pub fn status(&mut self, key: &[u8], now: Instant) -> Status {
        let view = self.view(key, None, now);
        status_of(view.current, &view, now)
    }

    /// Forgets the bucket of `key`, its policy and its leases: it is full at its next access.
    pub fn reset(&mut self, key: &[u8]) {
        if let Some(at) = self.store.cold_position(key) {
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
        if !self.nothing_in_force() {
            let on_key = self.in_force_on(key, now);
            if !matches!(on_key, OnKey::Nothing) {
                return Ok(self.limit_in_force(key, cost, given, policy, on_key, now));
            }
        }
        let view = self.plain_view(key, policy, now);
        let outcome = take(view.current, cost, &view.options, now);
        let state = outcome.unwrap_or(view.current);
        // A denied call without a policy changes nothing, like a denied `consume`.
        if outcome.is_ok() || given {
            self.store_bucket(key, view.at, state, view.policy, false, now);
        }
        let (options, remembered) = (view.options, view.remembered);
        Ok(self.plain_decision(outcome.is_ok(), state, cost, &options, remembered, now))
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
        self.leases.holds_any(key)
    }

    /// Whether `key` has a bucket in memory.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.store.cold_position(key).is_some()
    }

    pub(super) fn resolve(&self, policy: Option<OptionsPatch>) -> Result<Option<Options>, Error> {
        let Some(patch) = policy else {
            return Ok(None);
        };
        match self.last_policy.get() {
            Some((last, options)) if last == patch => Ok(Some(options)),
            _ => {
                let options = self.options.patched(patch)?;
                self.last_policy.set(Some((patch, options)));
                Ok(Some(options))
            }
        }
    }

    /// The report of a call that left `state`. When denied, the wait is exact for the same
    /// call: under its options, unless the key only remembered its policy and refills to
    /// full first; then the key is forgotten at that moment and the instance options decide.
    pub(super) fn decision(
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
            window_ms: options.window_ms(),
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
            window_ms: options.window_ms(),
        }
    }
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
    let back = u64::try_from(div_rem_small(billionths, UNITS_PER_TOKEN / options.unit()).0)
        .unwrap_or(u64::MAX);
    let room = options.capacity_units().saturating_sub(leased);
    let units = bucket.units().saturating_add(back).min(room);
    (leased > 0 || units < options.capacity_units())
        .then(|| Bucket::from_parts(units, bucket.last_refill()))
}

/// `nanos` rounded up to whole milliseconds, still in nanoseconds.
fn whole_millis(nanos: u128) -> u128 {
    // In 64 bits when it fits, as `ceil_millis`.
    match u64::try_from(nanos) {
        Ok(nanos) => u128::from(nanos.div_ceil(1_000_000)) * 1_000_000,
        Err(_) => div_ceil_small(nanos, 1_000_000).saturating_mul(1_000_000),
    }
}

/// A wait that also waits out a block ending at `end`: the later of the two (never stays never).
pub(super) fn after_block(wait: Option<f64>, end: Instant, now: Instant) -> Option<f64> {
    wait.map(|ms| ms.max(millis_until(end, now)))
}
