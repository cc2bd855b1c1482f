//! Calls over several keys at once: `limit_all`, all or nothing over its members, and
//! `limit_all_with_permit`, which also grants a permit (a concurrency limit, see
//! [`gate`](super::gate)) all or nothing with them.

use super::bucket::take;
use super::error::{decimal, join, Error};
use super::gate::{PermitAsk, PermitDecision};
use super::limiter::{after_block, Decision, Limiter};
use super::options::{Cost, OptionsPatch};
use super::time::Instant;

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
            let at = self.store.cold_position(request.key);
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
}
