//! The keyed limiter: instance options plus one lazy bucket, and maybe a policy, per key.

use super::bucket::{
    self, convert, full_at, refill, take, wait_for, wait_for_full, Bucket, Status,
};
use super::error::{decimal, join, Error};
use super::options::{Cost, Options, OptionsPatch};
use super::snapshot::{KeyedSnapshot, Snapshot, StoredSnapshot};
use super::store::Store;
use super::time::{ceil_millis, Instant};

/// A token-bucket rate limiter over byte-string keys. Time is an argument of every call.
#[derive(Clone)]
pub struct Limiter {
    options: Options,
    store: Store,
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
}

/// What `limit_all` reports: all members consumed, or none did.
#[derive(Debug, Clone, PartialEq)]
pub struct AllDecision {
    pub allowed: bool,
    /// 0 when allowed; else the largest member wait, `None` if some member can never pass.
    pub retry_after_ms: Option<f64>,
    /// One per request, in order. When denied, each says whether that limit had room.
    pub results: Vec<Decision>,
}

/// A key's bucket as it stands at `now` under the options a call uses.
struct View {
    /// Where the key's bucket is stored, if it still is after refilling.
    at: Option<usize>,
    current: Option<Bucket>,
    options: Options,
    /// The policy the key keeps after the call.
    policy: Option<Options>,
    /// The call brought no policy but the key had one: once its bucket is full again, the
    /// key is forgotten and the same call meets the instance options.
    remembered: bool,
}

impl Limiter {
    /// `seed` keys the hash of the bucket table; pass a fresh random value per instance.
    pub fn new(seed: u64) -> Limiter {
        Limiter {
            options: Options::default(),
            store: Store::new(seed),
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
            self.store.change_buckets_without_policy(|bucket| {
                if unfills && refill(Some(bucket), &old, now).is_none() {
                    return None;
                }
                convert(Some(bucket), &old, &new)
            });
        }
        self.options = new;
        Ok(())
    }

    /// Whether `consume(key, cost, now)` would succeed; consumes nothing.
    pub fn check(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        let view = self.view(key, None, now);
        take(view.current, cost, &view.options, now).is_ok()
    }

    /// Takes `cost` tokens from the bucket of `key` if it holds that many; else changes nothing.
    pub fn consume(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
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
        bucket::status(view.current, &view.options, now)
    }

    /// Forgets the bucket of `key`, and its policy: it is full at its next access.
    pub fn reset(&mut self, key: &[u8]) {
        if let Some(at) = self.store.position(key) {
            self.store.remove(at);
        }
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
        let given = policy.is_some();
        let policy = self.resolve(policy)?;
        let view = self.view(key, policy, now);
        let outcome = take(view.current, cost, &view.options, now);
        let state = outcome.unwrap_or(view.current);
        // A denied call without a policy changes nothing, like a denied `consume`.
        if outcome.is_ok() || given {
            self.commit(key, view.at, state, view.policy, now);
        }
        Ok(self.decision(outcome.is_ok(), state, cost, &view, now))
    }

    /// `limit` over several keys at once, all or nothing: every bucket consumes, or none
    /// does (each still takes its policy). Keys must be distinct; every request is
    /// validated before anything changes.
    pub fn limit_all(
        &mut self,
        requests: &[Request<'_>],
        now: Instant,
    ) -> Result<AllDecision, Error> {
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
        let outcomes: Vec<_> = views
            .iter()
            .zip(requests)
            .map(|(view, r)| take(view.current, r.cost, &view.options, now))
            .collect();
        let allowed = outcomes.iter().all(Result::is_ok);
        let mut results = Vec::with_capacity(requests.len());
        for ((view, request), outcome) in views.iter().zip(requests).zip(outcomes) {
            let state = match outcome {
                Ok(next) if allowed => next,
                _ => view.current,
            };
            // Earlier members may have moved buckets: find this one again.
            let at = self.store.position(request.key);
            self.commit(request.key, at, state, view.policy, now);
            let room = outcome.is_ok();
            results.push(self.decision(room, state, request.cost, view, now));
        }
        let retry_after_ms = results
            .iter()
            .try_fold(0.0, |most: f64, d| d.retry_after_ms.map(|ms| most.max(ms)));
        Ok(AllDecision {
            allowed,
            retry_after_ms,
            results,
        })
    }

    /// Buckets held in memory (only ones that were not full when last seen).
    pub fn stored_buckets(&self) -> usize {
        self.store.len()
    }

    /// Whether `key` has a bucket in memory.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.store.position(key).is_some()
    }

    /// The snapshot of `key`'s bucket, or `None` when the key holds no bucket (it is full).
    pub fn snapshot(&self, key: &[u8]) -> Option<StoredSnapshot> {
        let (bucket, policy) = self.store.get(self.store.position(key)?)?;
        Some(self.stored(bucket, policy))
    }

    /// The snapshots of every bucket without a policy of its own (those that follow the
    /// instance options, and so change when they do).
    pub fn snapshots_without_policy(&self) -> Vec<KeyedSnapshot> {
        self.store
            .entries()
            .filter(|(_, _, policy)| policy.is_none())
            .map(|(key, bucket, policy)| KeyedSnapshot {
                key: key.to_vec(),
                snapshot: self.stored(bucket, policy),
            })
            .collect()
    }

    fn stored(&self, bucket: Bucket, policy: Option<Options>) -> StoredSnapshot {
        StoredSnapshot {
            bytes: Snapshot { bucket, policy }.encode(),
            full_at_nanos: full_at(bucket, &policy.unwrap_or(self.options)),
            has_policy: policy.is_some(),
        }
    }

    /// Puts back the bucket of a snapshot's bytes ([`StoredSnapshot::bytes`]), unless `key`
    /// holds one already. One that has refilled to full by `now` is not stored (a full
    /// bucket is no bucket). `field` names the snapshot in the error when it cannot be read.
    pub fn restore(
        &mut self,
        key: &[u8],
        bytes: &[u8],
        field: &str,
        now: Instant,
    ) -> Result<(), Error> {
        let Snapshot { bucket, policy } = Snapshot::decode(bytes, field)?;
        if self.holds(key) {
            return Ok(());
        }
        let options = policy.unwrap_or(self.options);
        // Stored as saved (reads do not refill stored buckets either), unless full by now.
        if bucket.units() < options.capacity_units()
            && refill(Some(bucket), &options, now).is_some()
        {
            self.store.insert(key, bucket, policy, &self.options, now);
        }
        Ok(())
    }

    fn resolve(&self, policy: Option<OptionsPatch>) -> Result<Option<Options>, Error> {
        policy.map(|p| self.options.patched(p)).transpose()
    }

    /// Brings the stored bucket of `key` up to `now` under the options it had (forgetting a
    /// bucket that became full, together with its policy),
    /// then sees it under `policy` if the call gives one: tokens clamp to the new capacity
    /// and progress since the last refill counts in the new interval.
    fn view(&mut self, key: &[u8], policy: Option<Options>, now: Instant) -> View {
        let mut remembered = None;
        let mut current = None;
        let mut stored_at = None;
        if let Some((at, (bucket, own))) = self
            .store
            .position(key)
            .and_then(|at| Some((at, self.store.get(at)?)))
        {
            // The refill is not written back: reads change nothing (a later options change
            // meets the bucket as the last call that changed it left it), so a copy saved
            // at each change is the whole state.
            match refill(Some(bucket), own.as_ref().unwrap_or(&self.options), now) {
                Some(refilled) => {
                    remembered = own;
                    current = Some(refilled);
                    stored_at = Some(at);
                }
                None => self.store.remove(at),
            }
        }
        let before = remembered.unwrap_or(self.options);
        let options = policy.unwrap_or(before);
        if policy.is_some() && options != before {
            current = convert(current, &before, &options);
        }
        View {
            at: stored_at,
            current: refill(current, &options, now),
            options,
            policy: policy.or(remembered),
            remembered: policy.is_none() && remembered.is_some(),
        }
    }

    /// Stores the state a call left at the key's position `at` (as its view found it): a full
    /// bucket is not stored at all (nor its policy).
    fn commit(
        &mut self,
        key: &[u8],
        at: Option<usize>,
        next: Option<Bucket>,
        policy: Option<Options>,
        now: Instant,
    ) {
        match (at, next) {
            (Some(at), Some(bucket)) => self.store.set(at, bucket, policy),
            (Some(at), None) => self.store.remove(at),
            (None, Some(bucket)) => self.store.insert(key, bucket, policy, &self.options, now),
            (None, None) => {}
        }
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
        let options = &view.options;
        let wait = if allowed {
            Some(0)
        } else {
            // Waits are reported in whole milliseconds, so compare the moment the caller
            // will come back, not the nanosecond the tokens are there.
            let ready = wait_for(state, cost, options, now).map(whole_millis);
            let full = wait_for_full(state, options, now);
            match ready {
                Some(wait) if !view.remembered || wait < full => Some(wait),
                _ if view.remembered => cost.units(&self.options).map(|_| whole_millis(full)),
                other => other,
            }
        };
        let window = u128::from(options.max_tokens()).saturating_mul(options.interval_nanos());
        Decision {
            allowed,
            status: bucket::status(state, options, now),
            retry_after_ms: wait.map(ceil_millis),
            window_ms: ceil_millis(window),
        }
    }
}

/// `nanos` rounded up to whole milliseconds, still in nanoseconds.
fn whole_millis(nanos: u128) -> u128 {
    nanos.div_ceil(1_000_000).saturating_mul(1_000_000)
}
