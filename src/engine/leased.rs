//! The calls of a holder that spends tokens locally: `limit_leased` and `limit_shared` decide
//! the call's own cost as `limit` does, then grant what the holder asks for (the grants
//! themselves are in [`leasing`](super::leasing)); and what such a holder asks
//! ([`LeaseAsk`]), reports back ([`Settlement`]) and gets ([`LeaseDecision`]).

use super::bucket::take;
use super::error::Error;
use super::lease::Lease;
use super::leasing::Grant;
use super::limiter::{after_block, Decision, Limiter};
use super::options::{Cost, Options, OptionsPatch, UNITS_PER_TOKEN};
use super::time::{ceil_millis, Instant};

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
    /// Whether the holder keeps appointments: on a starved key, a plain call's answer names
    /// the time before which it does not call again (docs/SPEC.md, 11.11).
    pub queue: bool,
    /// The id the holder chose for a new lease or share (below 2^53), so that it can settle
    /// one whose answer it never heard; one the key holds already is not taken.
    pub id: Option<u64>,
}

impl Default for LeaseAsk {
    fn default() -> Self {
        LeaseAsk {
            want: Cost::ZERO,
            rate: 0.0,
            renew: None,
            queue: false,
            id: None,
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
    /// Nanoseconds until the holder's appointment, when it asked for appointments and the
    /// key is starved.
    pub call_after: Option<u64>,
}

impl Limiter {
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
        let call_after = match blocked {
            None if ask.queue && !lease.is_some_and(|l| l.is_share()) => {
                self.appointment(key, &view, (state, moved), outcome.is_err(), now)
            }
            _ => None,
        };
        // A denied call without a policy changes nothing, like a denied `consume`; one that
        // granted or renewed a share, or moved the key's queue, records it.
        if outcome.is_ok() || given || lease.is_some() || call_after.is_some() {
            let at = self.store.cold_position(key);
            self.commit(key, at, state, view.policy, now);
        }
        let mut decision = self.decision(outcome.is_ok(), state, cost, &view, now);
        if let Some(end) = blocked {
            decision.retry_after_ms = after_block(decision.retry_after_ms, end, now);
        }
        if let Some(wait) = call_after.filter(|_| !decision.allowed) {
            // Denied until its appointment at least: later than the bucket's own wait.
            let ms = ceil_millis(u128::from(wait));
            decision.retry_after_ms = decision.retry_after_ms.map(|r| r.max(ms));
        }
        let moved = moved.saturating_mul(UNITS_PER_TOKEN / options.unit());
        Ok(LeaseDecision {
            decision,
            lease,
            moved,
            options,
            call_after,
        })
    }
}
