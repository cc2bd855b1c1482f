//! The object's side of leases and shares: what a holder gets after its call is decided (a
//! plain lease, a new share, or its share renewed and topped up), what settling gives back,
//! and the waits a bucket with plain leases out reports. Each grant moves capacity (and, for
//! shares, refill) out of the main bucket without creating any (docs/SPEC.md, 10 and 11.3).

use super::bucket::{wait_for, Bucket};
use super::lease::{Lease, Term, LEASE_TTL_NANOS, MAX_ASKS_ON_RECORD, SHARE_TERM_NANOS};
use super::leased::{LeaseAsk, Settlement};
use super::limiter::{give_back, Limiter};
use super::options::{Cost, Options, UNITS_PER_TOKEN};
use super::share::{
    allocate_term, billionths_of, demand, demand_of_parts, free_parts, free_units, main_period,
    main_period_beside, others, out_at, overloaded, parts_cap, refills, rescale, share_due,
    term_units, wanted_parts, Demand, GRANT_FROM, RATE_PARTS, RENEW_FROM,
};
use super::time::Instant;
use super::view::View;

/// What a grant leaves: the main bucket, the lease granted or renewed, and the units of the
/// options moved into it.
pub(super) struct Grant {
    pub state: Option<Bucket>,
    pub lease: Option<Lease>,
    pub moved: u64,
}

/// What a holder asks of its share: `rate`, its demand (tokens per second; above 0 asks for
/// a share or renews one), and `top_up`, the units it wants now when its call was allowed.
#[derive(Clone, Copy)]
struct ShareAsk {
    rate: f64,
    top_up: Option<u64>,
    id: Option<u64>,
}

impl Limiter {
    /// Grants what `ask` asks for beside a call that left the main bucket at `state`
    /// (`allowed`: whether the call's own cost was). `view` follows the leases granted.
    pub(super) fn grant(
        &mut self,
        key: &[u8],
        view: &mut View,
        ask: LeaseAsk,
        allowed: bool,
        state: Option<Bucket>,
        now: Instant,
    ) -> Grant {
        let nothing = Grant {
            state,
            lease: None,
            moved: 0,
        };
        // (At the end of time a lease would expire as it is granted: none then.)
        if now.saturating_add(LEASE_TTL_NANOS) <= now {
            return nothing;
        }
        let options = view.options;
        let want = ask.want.units(&options).unwrap_or(options.capacity_units());
        let renewed = ask
            .renew
            .and_then(|id| {
                view.live
                    .iter()
                    .find(|l| l.id == id && l.is_share() && !l.is_record())
            })
            .copied();
        let share_ask = ShareAsk {
            rate: ask.rate,
            top_up: allowed.then_some(want),
            id: ask.id,
        };
        if let Some(share) = renewed {
            return self.renew_share(key, view, share, share_ask, state, now);
        }
        if !self.leases.has_room(key) {
            return nothing;
        }
        // A share only where the demand is well above the refill, or one holder's alone
        // reaches it (11.7); else a plain lease. At an overloaded key with more isolates
        // asking than could each hold a share, none is granted, and the ask's demand stays on
        // record for a term: the key's demand then counts every isolate that asks, not only
        // those that hold something.
        if ask.rate > 0.0 && ask.renew.is_none() {
            let demand = demand(&view.live, refills(ask.rate, &options), now);
            if share_due(demand, GRANT_FROM) {
                if !(overloaded(demand) && crowded(&view.live, &options)) {
                    return self.new_share(key, view, share_ask, demand, state, now);
                }
                // The record is the answer: its holder asks again when it ends.
                let record = self.record_ask(key, view, ask.rate, ask.id, now);
                return Grant {
                    state,
                    lease: record,
                    moved: 0,
                };
            }
        }
        if allowed && want > 0 {
            return self.plain_lease(key, view, want, ask.id, state, now);
        }
        nothing
    }

    /// Records the demand `rate` of an ask that got no share, for one term (a lease that holds
    /// nothing), unless MAX_ASKS_ON_RECORD are on record already.
    fn record_ask(
        &mut self,
        key: &[u8],
        view: &mut View,
        rate: f64,
        id: Option<u64>,
        now: Instant,
    ) -> Option<Lease> {
        if view.live.iter().filter(|l| l.is_record()).count() >= MAX_ASKS_ON_RECORD {
            return None;
        }
        let wanted = wanted_parts(rate, &view.options);
        let record = self
            .leases
            .grant(key, Term::default(), wanted, now, SHARE_TERM_NANOS, id);
        view.live.push(record);
        Some(record)
    }

    /// A renewal (with a rate: the holder's demand, for its next term) and top-up of the live
    /// share `share`.
    fn renew_share(
        &mut self,
        key: &[u8],
        view: &mut View,
        share: Lease,
        ShareAsk { rate, top_up, .. }: ShareAsk,
        state: Option<Bucket>,
        now: Instant,
    ) -> Grant {
        let options = view.options;
        let mut share = share.advanced(now);
        // A renewal reports the holder's demand and gets the next term; a top-up alone
        // (no rate) leaves both as they are.
        let renewing = rate > 0.0;
        if renewing {
            share.wanted = wanted_parts(rate, &options);
        }
        let others = others(&view.live, share.id);
        let own = if renewing {
            refills(rate, &options)
        } else {
            demand_of_parts(share.wanted)
        };
        let demand = demand(&others, own, now);
        // Once neither the demand on the key nor its holder's own is due a share, the share
        // ends with its term: plain leases serve there.
        if renewing && share.next.is_none() && share_due(demand, RENEW_FROM) {
            share.next = Some(allocate_term(
                &others,
                (
                    share.wanted,
                    parts_cap(share.wanted, demand),
                    least_tokens(demand),
                ),
                &options,
                share.expires_at,
            ));
        }
        // (A key with leases out always has a bucket: full is its room beside them.)
        let room = options.capacity_units().saturating_sub(view.leased);
        let units = state.map_or(room, |b| b.units());
        let since = state.map_or(now, |b| b.last_refill());
        let mut state_now = Some(Bucket::from_parts(units, since));
        let mut moved = 0;
        if let Some(want) = top_up.filter(|&want| want > 0) {
            // A top-up raises the share's capacity for its current term by the tokens it
            // moves, and its refill by half the parts the main bucket has, up to the parts
            // the holder wants, as far as the others leave them free until then (their
            // later terms count).
            let held = term_units(share.billionths, &options);
            let free = free_units(&others, &options, now, share.expires_at).saturating_sub(held);
            moved = whole_tokens(want.min(units / 2).min(free), &options);
            share.billionths = share
                .billionths
                .saturating_add(billionths_of(moved, &options));
            let main_parts = RATE_PARTS.saturating_sub(out_at(&view.live, &options, now).parts);
            let free_parts =
                free_parts(&others, &options, now, share.expires_at).saturating_sub(share.parts);
            let cap = parts_cap(share.wanted, demand);
            let extra = (main_parts.min(free_parts) / 2).min(cap.saturating_sub(share.parts));
            if extra > 0 {
                let before = main_period(&options, RATE_PARTS - main_parts);
                let after = main_period(&options, RATE_PARTS - main_parts + extra);
                state_now = rescale(state_now, before, after, now);
                share.parts += extra;
            }
        }
        let since = state_now.map_or(now, |b| b.last_refill());
        self.leases.replace(key, share);
        if let Some(slot) = view.live.iter_mut().find(|l| l.id == share.id) {
            *slot = share;
        }
        view.leased = view.leased.saturating_add(moved);
        view.last_expiry = view.last_expiry.max(Some(share.ends_at()));
        Grant {
            state: Some(Bucket::from_parts(units - moved, since)),
            lease: Some(share),
            moved,
        }
    }

    /// A new share for a holder that expects to need `rate` tokens per second, with its
    /// first term from now (and its top-up when the call was allowed).
    fn new_share(
        &mut self,
        key: &[u8],
        view: &mut View,
        ShareAsk { rate, top_up, id }: ShareAsk,
        demand: Demand,
        state: Option<Bucket>,
        now: Instant,
    ) -> Grant {
        let options = view.options;
        let wanted = wanted_parts(rate, &options);
        let cap = parts_cap(wanted, demand);
        let least = least_tokens(demand);
        let mut term = allocate_term(&view.live, (wanted, cap, least), &options, now);
        let until = now.saturating_add(term.nanos);
        // (An overloaded key's share without its least tokens is none, whatever a top-up moves.)
        if least > 1 && term.parts == 0 {
            return Grant {
                state,
                lease: None,
                moved: 0,
            };
        }
        // The share's capacity leaves the main bucket's: what no longer fits there moves
        // into the share. A top-up (when the call was allowed) may raise its capacity, as
        // far as the others leave it free. The share gets whole tokens (its holder's bucket
        // holds whole tokens only, or its level could pass its capacity).
        let units = state.map_or(options.capacity_units(), |b| b.units());
        let allocated = term_units(term.billionths, &options);
        let room = options
            .capacity_units()
            .saturating_sub(view.leased.saturating_add(allocated));
        let free = free_units(&view.live, &options, now, until);
        let top_up = top_up.map_or(0, |want| {
            whole_tokens(want.min(units / 2).min(free), &options)
        });
        let taken = units.saturating_sub(room).max(top_up);
        let capacity = allocated.max(top_up);
        // Without a whole token the holder could only deny: no share is granted, and none
        // is recorded (its demand would take parts from holders that use them, 11.7).
        if capacity == 0 {
            return Grant {
                state,
                lease: None,
                moved: 0,
            };
        }
        term.billionths = billionths_of(capacity, &options);
        let since = state.map_or(now, |b| b.last_refill());
        let before = main_period_beside(&view.live, &options, now);
        let granted = self.leases.grant(key, term, wanted, now, term.nanos, id);
        view.live.push(granted);
        let after = main_period_beside(&view.live, &options, now);
        let state = rescale(
            Some(Bucket::from_parts(units - taken, since)),
            before,
            after,
            now,
        );
        view.leased = view.leased.saturating_add(capacity);
        view.last_expiry = view.last_expiry.max(Some(granted.ends_at()));
        self.expire_leases_everywhere(now);
        Grant {
            state,
            lease: Some(granted),
            moved: whole_tokens(taken, &options),
        }
    }

    /// A plain lease of up to `want` units (with the id `id` if free): at most half of what
    /// the bucket has left, and as much as is free until it expires, whatever terms of shares
    /// begin meanwhile.
    fn plain_lease(
        &mut self,
        key: &[u8],
        view: &mut View,
        want: u64,
        id: Option<u64>,
        state: Option<Bucket>,
        now: Instant,
    ) -> Grant {
        let options = view.options;
        let units = state.map_or(options.capacity_units(), |b| b.units());
        let until = now.saturating_add(LEASE_TTL_NANOS);
        let granted = want
            .min(units / 2)
            .min(free_units(&view.live, &options, now, until));
        if granted == 0 {
            return Grant {
                state,
                lease: None,
                moved: 0,
            };
        }
        let since = state.map_or(now, |b| b.last_refill());
        let term = Term {
            billionths: granted.saturating_mul(UNITS_PER_TOKEN / options.unit()),
            parts: 0,
            nanos: 0,
        };
        let lease = self.leases.grant(key, term, 0, now, LEASE_TTL_NANOS, id);
        view.leased = view.leased.saturating_add(lease_units(&lease, &options));
        view.last_expiry = view.last_expiry.max(Some(lease.expires_at));
        view.live.push(lease);
        self.expire_leases_everywhere(now);
        Grant {
            state: Some(Bucket::from_parts(units - granted, since)),
            lease: Some(lease),
            moved: granted,
        }
    }

    /// Ends the lease `settlement.id` of `key`: the unused part goes back into the bucket.
    /// Returns false for a lease that is unknown or has expired (it counted as fully used).
    /// `used` above the lease counts as the whole lease.
    pub fn settle(&mut self, key: &[u8], settlement: Settlement, now: Instant) -> bool {
        let view = self.view(key, None, now);
        if !view.live.iter().any(|l| l.id == settlement.id) {
            return false;
        }
        let Some(lease) = self.leases.take(key, settlement.id) else {
            return false;
        };
        let lease = lease.advanced(now);
        let options = &view.options;
        let unused = match (lease.is_share(), settlement.left) {
            (false, _) => lease
                .billionths
                .saturating_sub(u64::try_from(settlement.used.billionths()).unwrap_or(u64::MAX)),
            (true, Some(left)) => u64::try_from(left.billionths())
                .unwrap_or(u64::MAX)
                .min(lease.billionths),
            (true, None) => 0,
        };
        let leased = view.leased.saturating_sub(lease_units(&lease, options));
        let next = give_back(view.current, u128::from(unused), leased, options);
        // Its parts come back to the main bucket from now.
        let before = main_period_beside(&view.live, options, now);
        let after = main_period_beside(&others(&view.live, lease.id), options, now);
        let next = rescale(next, before, after, now);
        self.commit(key, view.at, next, view.policy, now);
        true
    }
}

/// The fewest whole tokens a share of an overloaded key holds: a sub-bucket of 3 tokens
/// drained at twice its refill admits 0.987 of it, one of 1 token 0.667 (docs/SPEC.md, 11.8).
const LEAST_OVERLOADED_TOKENS: u64 = 3;

/// The fewest whole tokens a new share or next term holds at that demand.
fn least_tokens(demand: Demand) -> u64 {
    if overloaded(demand) {
        LEAST_OVERLOADED_TOKENS
    } else {
        1
    }
}

/// Whether the shares of `live` and one more could not each hold the least tokens of an
/// overloaded key: more isolates ask than such shares fit in its capacity.
fn crowded(live: &[Lease], options: &Options) -> bool {
    let shares = live.iter().filter(|l| l.is_share() && !l.is_record());
    (shares.count() as u64 + 1).saturating_mul(LEAST_OVERLOADED_TOKENS) > options.max_tokens()
}

/// The capacity a lease holds, in the units of `options`.
pub(super) fn lease_units(lease: &Lease, options: &Options) -> u64 {
    term_units(lease.billionths, options)
}

/// `units` rounded down to whole tokens.
fn whole_tokens(units: u64, options: &Options) -> u64 {
    units / options.unit() * options.unit()
}

/// Nanoseconds until the bucket holds `cost` while leases are out, assuming the worst: every
/// lease is spent in full and ends only at its expiry. Never early; `None` when no wait can
/// help.
pub(super) fn leased_wait(
    state: Option<Bucket>,
    cost: Cost,
    view: &View,
    now: Instant,
) -> Option<u128> {
    let options = &view.options;
    let needed = cost.units(options)?;
    let units = state.map_or(options.capacity_units(), |b| b.units());
    if units >= needed {
        return Some(0);
    }
    let room = options.capacity_units().saturating_sub(view.leased);
    if needed <= room {
        // Refill reaches it before it stops for the leased tokens.
        return wait_for(state, cost, options, now);
    }
    let ends = view
        .last_expiry
        .map_or(0, |e| e.as_nanos())
        .max(now.as_nanos());
    let refills = u128::from((needed - units).div_ceil(options.unit()));
    let wait = u128::from(ends - now.as_nanos())
        .saturating_add(refills.saturating_mul(options.interval_nanos()));
    Some(wait)
}
