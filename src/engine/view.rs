//! A key's bucket as one call sees it: the stored bucket brought up to now beside its live
//! leases (a [`View`]), and what the call leaves committed back to the store.

use super::bucket::{convert, refill, refill_every, Bucket};
use super::lease::Lease;
use super::limiter::Limiter;
use super::options::Options;
use super::share::{main_period, out_at, refill_through_leases};
use super::time::Instant;

/// A key's bucket without leases as it stands at `now` under the options a call uses.
pub(super) struct PlainView {
    pub(super) at: Option<usize>,
    pub(super) current: Option<Bucket>,
    pub(super) options: Options,
    pub(super) policy: Option<Options>,
    pub(super) remembered: bool,
}

/// A key's bucket as it stands at `now` under the options a call uses.
pub(super) struct View {
    /// Where the key's bucket is stored, if it still is after refilling.
    pub(super) at: Option<usize>,
    pub(super) current: Option<Bucket>,
    pub(super) options: Options,
    /// The policy the key keeps after the call.
    pub(super) policy: Option<Options>,
    /// The call brought no policy but the key had one: once its bucket is full again, the
    /// key is forgotten and the same call meets the instance options.
    pub(super) remembered: bool,
    /// Units out on live leases (under `options`), and when the last of them expires.
    pub(super) leased: u64,
    pub(super) last_expiry: Option<Instant>,
    /// The live leases.
    pub(super) live: Vec<Lease>,
}

impl View {
    /// Whether a live lease is a share: then waits walk the terms of every lease.
    pub(super) fn shared(&self) -> bool {
        self.live.iter().any(Lease::is_share)
    }
}

impl Limiter {
    /// Brings the stored bucket of `key` up to `now` under the options it had (forgetting a
    /// bucket that became full, together with its policy),
    /// then sees it under `policy` if the call gives one: tokens clamp to the new capacity
    /// and progress since the last refill counts in the new interval.
    pub(super) fn view(&mut self, key: &[u8], policy: Option<Options>, now: Instant) -> View {
        // A key without leases (nearly every key, and every key while no lease is out
        // anywhere) pays nothing for them.
        match self.leases.position(key) {
            None => self.view_without_leases(key, policy, now),
            Some(leased) => self.view_with_leases(key, leased, policy, now),
        }
    }

    /// [`view`](Self::view) of a key with leases, at `leased` among them: its bucket brought
    /// through every change of what they hold.
    pub(super) fn view_with_leases(
        &mut self,
        key: &[u8],
        leased: usize,
        policy: Option<Options>,
        now: Instant,
    ) -> View {
        // (The end of the key's queue of appointments holds nothing and keeps nothing.)
        let mut leases = self.leases.at(leased).to_vec();
        leases.retain(|l| !l.is_queue_end());
        let mut remembered = None;
        let mut current = None;
        let mut stored_at = None;
        let stored = self.store.cold_position(key);
        if let Some((at, (bucket, own))) = stored.and_then(|at| Some((at, self.store.get(at)?))) {
            // The refill is not written back: reads change nothing (a later options change
            // meets the bucket as the last call that changed it left it), so a copy saved
            // at each change is the whole state.
            let options = own.as_ref().unwrap_or(&self.options);
            match refill_through_leases(bucket, &leases, options, now) {
                Some(refilled) => {
                    remembered = own;
                    current = Some(refilled);
                    stored_at = Some(at);
                }
                None if !leases.iter().any(|l| l.ends_at() > now) => {
                    // Full, and every lease it had has ended: nothing of it is left.
                    self.store.remove(at);
                    self.leases.forget(key);
                }
                None => {
                    // Full beside leases that hold none of it now (shares in an empty term):
                    // kept, so the leases are saved with it.
                    let held = out_at(&leases, options, now).units;
                    remembered = own;
                    current = Some(Bucket::from_parts(
                        options.capacity_units().saturating_sub(held),
                        now,
                    ));
                    stored_at = Some(at);
                }
            }
        }
        let before = remembered.unwrap_or(self.options);
        let options = policy.unwrap_or(before);
        let live: Vec<Lease> = leases
            .into_iter()
            .filter(|l| l.ends_at() > now)
            .map(|l| l.advanced(now))
            .collect();
        if policy.is_some() && options != before {
            let full =
                current.map(|b| Bucket::from_parts(options.capacity_units(), b.last_refill()));
            current = convert(current, &before, &options);
            if !live.is_empty() {
                // Never full with leases out: the refill below clamps it to its room.
                current = current.or(full);
            }
        }
        let out = out_at(&live, &options, now);
        let leased = out.units;
        let period = main_period(&options, out.parts);
        let mut current = refill_every(current, leased, period, &options, now);
        if leased > 0 && current.is_none() {
            // Full, while leases hold part of it: its room beside them, banking nothing.
            let room = options.capacity_units().saturating_sub(leased);
            current = Some(Bucket::from_parts(room, now));
        }
        View {
            at: stored_at,
            current,
            options,
            policy: policy.or(remembered),
            remembered: policy.is_none() && remembered.is_some(),
            leased,
            last_expiry: live.iter().map(Lease::ends_at).max(),
            live,
        }
    }

    /// Where the bucket of `key` is stored, the bucket as last written, and the key's own
    /// policy if it has one.
    #[inline(always)]
    fn stored_bucket(&self, key: &[u8]) -> Option<(usize, Bucket, Option<Options>)> {
        let at = self.store.position(key)?;
        let (bucket, own) = self.store.get(at)?;
        Some((at, bucket, own))
    }

    /// [`view`](Self::view) of a key without leases: its bucket refilled as one bucket.
    fn view_without_leases(&mut self, key: &[u8], policy: Option<Options>, now: Instant) -> View {
        let plain = self.plain_view(key, policy, now);
        View {
            at: plain.at,
            current: plain.current,
            options: plain.options,
            policy: plain.policy,
            remembered: plain.remembered,
            leased: 0,
            last_expiry: None,
            live: Vec::new(),
        }
    }

    /// The bucket of a key without leases as it stands at `now` (the fields of a [`View`]
    /// that such a key has): what `consume`, `check` and `limit` need on a key without a
    /// lease or a block.
    #[inline(always)]
    pub(super) fn plain_view(
        &mut self,
        key: &[u8],
        policy: Option<Options>,
        now: Instant,
    ) -> PlainView {
        let mut remembered = None;
        let mut current = None;
        let mut stored_at = None;
        if let Some((at, bucket, own)) = self.stored_bucket(key) {
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
        PlainView {
            at: stored_at,
            current: refill(current, &options, now),
            options,
            policy: policy.or(remembered),
            remembered: policy.is_none() && remembered.is_some(),
        }
    }

    /// Stores what a call left of a key without leases at its position `at`: a full bucket is
    /// not stored at all (nor its policy).
    #[inline(always)]
    pub(super) fn store_bucket(
        &mut self,
        key: &[u8],
        at: Option<usize>,
        next: Option<Bucket>,
        policy: Option<Options>,
        leased: bool,
        now: Instant,
    ) {
        match (at, next) {
            (Some(at), Some(bucket)) => self.store.set(at, bucket, policy, leased),
            (Some(at), None) => self.store.remove(at),
            (None, Some(bucket)) => {
                let options = self.options;
                self.store
                    .insert(key, bucket, policy, leased, &options, now);
            }
            (None, None) => {}
        }
    }

    /// Stores the state a call left at the key's position `at` (as its view found it): a full
    /// bucket is not stored at all (nor its policy).
    pub(super) fn commit(
        &mut self,
        key: &[u8],
        at: Option<usize>,
        next: Option<Bucket>,
        policy: Option<Options>,
        now: Instant,
    ) {
        // Leases that expired ended with this change (the view counted them as used).
        let leased = !self.leases.is_empty() && {
            self.leases.drop_expired(key, now);
            self.leases.holds_any(key)
        };
        // A key with leases keeps a bucket, so its leases are saved with it: full is its
        // room beside them.
        let next = match next {
            None if leased => {
                let options = policy.unwrap_or(self.options);
                let held = out_at(self.leases.of(key), &options, now).units;
                Some(Bucket::from_parts(
                    options.capacity_units().saturating_sub(held),
                    now,
                ))
            }
            other => other,
        };
        self.store_bucket(key, at, next, policy, leased, now);
    }

    /// When the keys with leases have doubled since the last pass, ends every expired lease
    /// (amortised O(1) per lease), so leases of keys nobody calls again do not pile up.
    pub(super) fn expire_leases_everywhere(&mut self, now: Instant) {
        if self.leases.len() < 2 * self.leased_keys_at_last_pass.max(16) {
            return;
        }
        for key in self.leases.keys_with_expired(now) {
            let view = self.view(&key, None, now);
            self.commit(&key, view.at, view.current, view.policy, now);
        }
        self.leased_keys_at_last_pass = self.leases.len();
    }
}
