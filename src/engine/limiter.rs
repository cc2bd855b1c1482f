//! The keyed limiter: instance options plus one lazy bucket, and maybe a policy, per key.

use super::bucket::{self, refill, take, wait_for, Bucket, Status};
use super::error::Error;
use super::options::{Cost, Options, OptionsPatch};
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

/// A key's bucket as it stands at `now` under the options a call uses. Only a successful
/// call stores it; a denied one leaves the bucket as its own options see it.
struct View {
    current: Option<Bucket>,
    options: Options,
    /// The policy the key keeps if the call succeeds.
    policy: Option<Options>,
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
    /// keeps the sweep invisible.) Costs O(stored buckets) only for such changes.
    pub fn set_options(&mut self, patch: OptionsPatch, now: Instant) -> Result<(), Error> {
        let old = self.options;
        let new = old.patched(patch)?;
        if new.max_tokens() > old.max_tokens() || new.interval_nanos() > old.interval_nanos() {
            self.store.drop_full(&old, now);
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
                self.commit(key, next, view.policy, now);
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

    /// Consumes like `consume` and reports the outcome. `policy` (missing fields taken from
    /// the instance options) becomes the key's own options when the call succeeds; a denied
    /// call changes nothing.
    pub fn limit(
        &mut self,
        key: &[u8],
        cost: Cost,
        policy: Option<OptionsPatch>,
        now: Instant,
    ) -> Result<Decision, Error> {
        let policy = self.resolve(policy)?;
        let view = self.view(key, policy, now);
        Ok(match take(view.current, cost, &view.options, now) {
            Ok(next) => {
                self.commit(key, next, view.policy, now);
                decision(true, next, cost, &view.options, now)
            }
            Err(()) => decision(false, view.current, cost, &view.options, now),
        })
    }

    /// `limit` over several keys at once, all or nothing: every bucket consumes, or none
    /// does. Keys must be distinct; every request is validated before anything changes.
    pub fn limit_all(
        &mut self,
        requests: &[Request<'_>],
        now: Instant,
    ) -> Result<AllDecision, Error> {
        let mut views = Vec::with_capacity(requests.len());
        for (i, request) in requests.iter().enumerate() {
            if let Some(first) = requests[..i].iter().position(|r| r.key == request.key) {
                return Err(Error::DuplicateKey {
                    field: format!("requests[{i}].key"),
                    first: format!("requests[{first}].key"),
                });
            }
            let policy = self
                .resolve(request.policy)
                .map_err(|e| e.within(&format!("requests[{i}].policy")))?;
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
            results.push(match outcome {
                Ok(next) if allowed => {
                    self.commit(request.key, next, view.policy, now);
                    decision(true, next, request.cost, &view.options, now)
                }
                _ => decision(
                    outcome.is_ok(),
                    view.current,
                    request.cost,
                    &view.options,
                    now,
                ),
            });
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

    fn resolve(&self, policy: Option<OptionsPatch>) -> Result<Option<Options>, Error> {
        policy.map(|p| self.options.patched(p)).transpose()
    }

    /// Brings the stored bucket of `key` up to `now` under the options it had (writing the
    /// refill back, and forgetting a bucket that became full together with its policy),
    /// then sees it under `policy` if the call gives one: tokens clamp to the new capacity
    /// and progress since the last refill counts in the new interval.
    fn view(&mut self, key: &[u8], policy: Option<Options>, now: Instant) -> View {
        let mut remembered = None;
        let mut current = None;
        if let Some(at) = self.store.position(key) {
            let (bucket, own) = self.store.get(at);
            match refill(Some(bucket), own.as_ref().unwrap_or(&self.options), now) {
                Some(refilled) => {
                    self.store.set(at, refilled, own);
                    remembered = own;
                    current = Some(refilled);
                }
                None => self.store.remove(at),
            }
        }
        let options = policy.or(remembered).unwrap_or(self.options);
        View {
            current: refill(current, &options, now),
            options,
            policy: policy.or(remembered),
        }
    }

    /// Stores the state a successful call left: a full bucket is not stored at all.
    fn commit(&mut self, key: &[u8], next: Option<Bucket>, policy: Option<Options>, now: Instant) {
        match (self.store.position(key), next) {
            (Some(at), Some(bucket)) => self.store.set(at, bucket, policy),
            (Some(at), None) => self.store.remove(at),
            (None, Some(bucket)) => self.store.insert(key, bucket, policy, &self.options, now),
            (None, None) => {}
        }
    }
}

fn decision(
    allowed: bool,
    state: Option<Bucket>,
    cost: Cost,
    options: &Options,
    now: Instant,
) -> Decision {
    let retry_after_ms = if allowed {
        Some(0.0)
    } else {
        wait_for(state, cost, options, now).map(ceil_millis)
    };
    let window = u128::from(options.max_tokens()).saturating_mul(options.interval_nanos());
    Decision {
        allowed,
        status: bucket::status(state, options, now),
        retry_after_ms,
        window_ms: ceil_millis(window),
    }
}
