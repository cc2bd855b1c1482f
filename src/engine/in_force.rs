//! Calls on a key while a block or a lease is in force somewhere: what is in force on the
//! key itself, and the paths of `check`, `consume` and `limit` for a key blocked or with
//! leases. Out of line, so that calls pay one branch for all of it while nothing is.

use super::bucket::take;
use super::limiter::{after_block, Decision, Limiter};
use super::options::{Cost, Options};
use super::time::Instant;

/// What is in force on one key while something is somewhere (blocks before leases).
pub(super) enum OnKey {
    /// Neither: the key is a plain bucket.
    Nothing,
    /// Blocked until then.
    Blocked(Instant),
    /// Leases recorded (live, or ended and not yet dropped), at this position among them.
    Leases(usize),
}

impl Limiter {
    /// What is in force on `key` while something is somewhere. Out of line, so that a call
    /// pays one branch for it while nothing is.
    #[inline(never)]
    pub(super) fn in_force_on(&mut self, key: &[u8], now: Instant) -> OnKey {
        if let Some(end) = self.blocked_until(key, now) {
            return OnKey::Blocked(end);
        }
        if let Some(leased) = self.leases.position(key) {
            return OnKey::Leases(leased);
        }
        OnKey::Nothing
    }

    /// [`check`](Self::check) (`commit` false) or [`consume`](Self::consume) (true) on a key
    /// with a block (never taken) or leases; None when neither is in force on it.
    #[inline(never)]
    pub(super) fn take_in_force(
        &mut self,
        key: &[u8],
        cost: Cost,
        commit: bool,
        now: Instant,
    ) -> Option<bool> {
        match self.in_force_on(key, now) {
            OnKey::Nothing => None,
            OnKey::Blocked(_) => Some(false),
            OnKey::Leases(at) => Some(self.take_leased(key, at, cost, commit, now)),
        }
    }

    /// [`take_in_force`](Self::take_in_force) on a key with leases (at `leased`) and no block.
    fn take_leased(
        &mut self,
        key: &[u8],
        leased: usize,
        cost: Cost,
        commit: bool,
        now: Instant,
    ) -> bool {
        let view = self.view_with_leases(key, leased, None, now);
        let Ok(next) = take(view.current, cost, &view.options, now) else {
            return false;
        };
        if commit {
            self.commit(key, view.at, next, view.policy, now);
        }
        true
    }

    /// [`limit`](Self::limit) on a key blocked or with leases, as `on_key` says.
    #[inline(never)]
    pub(super) fn limit_in_force(
        &mut self,
        key: &[u8],
        cost: Cost,
        given: bool,
        policy: Option<Options>,
        on_key: OnKey,
        now: Instant,
    ) -> Decision {
        let (view, blocked) = match on_key {
            OnKey::Leases(leased) => (self.view_with_leases(key, leased, policy, now), None),
            OnKey::Blocked(end) => (self.view(key, policy, now), Some(end)),
            OnKey::Nothing => (self.view(key, policy, now), None),
        };
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
        decision
    }
}
