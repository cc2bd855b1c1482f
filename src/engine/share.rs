//! Shares over time: how much of a key's capacity and refill its leases hold at each moment,
//! the main bucket brought up to date through every change of that, the waits it reports,
//! and where a new share's terms come from.
//!
//! The invariant (docs/SPEC.md, section 11): the capacities of the main bucket and of every
//! sub-bucket add up to at most `max_tokens`, their refill rates to at most one token per
//! interval, and no change moves a token or progress from nowhere. So all holders and the
//! object together admit at most what one bucket admits.

use super::bucket::{refill_every, Bucket};
use super::lease::{Lease, Term, LONGEST_TERM_NANOS, SHARE_TERM_NANOS};
use super::options::{Options, MAX_TOKENS_IN_BILLIONTHS, UNITS_PER_TOKEN};
use super::time::Instant;
use super::wide::{div, div_ceil_small, div_rem_small};

/// A bucket's refill is divided into this many parts; a share holds some of them.
pub const RATE_PARTS: u32 = 1 << 20;

/// What a key's leases hold at one moment: capacity (in the units of the options) and parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Out {
    pub units: u64,
    pub parts: u32,
}

/// A term's capacity in the units of `options`, rounded up.
pub fn term_units(billionths: u64, options: &Options) -> u64 {
    billionths.div_ceil(UNITS_PER_TOKEN / options.unit())
}

/// `units` of `options` as billionths (saturating; capacities past
/// [`MAX_TOKENS_IN_BILLIONTHS`] never reach here as whole shares, see [`allocate`]).
pub fn billionths_of(units: u64, options: &Options) -> u64 {
    units.saturating_mul(UNITS_PER_TOKEN / options.unit())
}

/// What `leases` hold at `at` (a term covers its start, not its end).
pub fn out_at(leases: &[Lease], options: &Options, at: Instant) -> Out {
    leases
        .iter()
        .filter_map(|l| l.terms_at(at))
        .fold(Out::default(), |out, term| add(out, term, options))
}

fn add(out: Out, term: Term, options: &Options) -> Out {
    Out {
        units: out
            .units
            .saturating_add(term_units(term.billionths, options)),
        parts: out.parts.saturating_add(term.parts).min(RATE_PARTS),
    }
}

/// The period of the main bucket while `parts` of its refill are out: `None` when all are.
pub fn main_period(options: &Options, parts: u32) -> Option<u128> {
    if parts == 0 {
        // The common case, without leases: no 128-bit division on every call.
        return Some(options.interval_nanos());
    }
    let left = RATE_PARTS.checked_sub(parts).filter(|&left| left > 0)?;
    Some(period_of(options, left))
}

/// The period of the main bucket at `at` beside `leases`.
pub fn main_period_beside(leases: &[Lease], options: &Options, at: Instant) -> Option<u128> {
    main_period(options, out_at(leases, options, at).parts)
}

/// `leases` but the one with `id`.
pub fn others(leases: &[Lease], id: u64) -> Vec<Lease> {
    leases.iter().filter(|l| l.id != id).copied().collect()
}

/// The period of a share's sub-bucket: one token every so many nanoseconds, `None` without
/// parts. Rounded up, so the periods of all parts together never refill faster than the
/// bucket.
pub fn share_period(options: &Options, parts: u32) -> Option<u128> {
    (parts > 0).then(|| period_of(options, parts))
}

fn period_of(options: &Options, parts: u32) -> u128 {
    div_ceil_small(
        options.interval_nanos().saturating_mul(RATE_PARTS.into()),
        parts.into(),
    )
}

/// Tokens a share's sub-bucket gains per term at least, as far as [`LONGEST_TERM_NANOS`]
/// allows: where its refill is slow, its holder renews less often, and an evicted holder's
/// share idles at most about two terms' worth of them.
const TOKENS_PER_TERM: u128 = 12;

/// How long a term of `parts` lasts: the time its sub-bucket takes to gain
/// [`TOKENS_PER_TERM`] tokens, from [`SHARE_TERM_NANOS`] to [`LONGEST_TERM_NANOS`].
pub fn term_nanos(options: &Options, parts: u32) -> u64 {
    let Some(period) = share_period(options, parts) else {
        return SHARE_TERM_NANOS;
    };
    let nanos = period.saturating_mul(TOKENS_PER_TERM);
    nanos.clamp(SHARE_TERM_NANOS.into(), LONGEST_TERM_NANOS.into()) as u64
}

/// The parts asked for by a holder that expects to need `rate` tokens per second: half as
/// much again (headroom for bursts), at least one part when `rate > 0`, at most all of them.
pub fn wanted_parts(rate: f64, options: &Options) -> u32 {
    if rate.is_nan() || rate <= 0.0 {
        return 0;
    }
    let interval_seconds = options.interval_nanos() as f64 / 1e9;
    let parts = (1.5 * rate * interval_seconds * f64::from(RATE_PARTS)).ceil();
    parts.clamp(1.0, f64::from(RATE_PARTS)) as u32
}

/// The parts wanted at `at` by every holder of `others` and one that wants `wanted`. The
/// holders of plain leases draw on the main bucket together: they count as one more holder
/// that wants as much as this one, so the first share takes at most half of the refill, and
/// a busy holder among many plain ones is not sized as one of them.
fn all_wanted(others: &[Lease], wanted: u32, at: Instant) -> u64 {
    let live = || others.iter().filter(|l| l.ends_at() > at);
    let shares: u64 = live()
        .filter(|l| l.is_share())
        .map(|l| u64::from(l.wanted))
        .sum();
    let plain = if live().any(|l| !l.is_share()) {
        u64::from(wanted)
    } else {
        0
    };
    u64::from(wanted) + shares + plain
}

/// The demand, over a key's refill, from which a share is granted or renewed (docs/SPEC.md,
/// 11.7): the demand of all its holders (`all`), or of the one asking alone (`own`). Below
/// both, plain leases pool the variance of every holder's demand at the object, where
/// sub-buckets at about their holders' demand lose what runs over while they are full; a
/// holder whose demand alone reaches the refill is served by one sub-bucket with most of it.
#[derive(Debug, Clone, Copy)]
pub struct ShareFrom {
    pub all: f64,
    pub own: f64,
}

/// For a new share.
pub const GRANT_FROM: ShareFrom = ShareFrom { all: 1.5, own: 1.0 };

/// For a share's next term: lower, so that a demand measured around the threshold does not
/// end and grant shares by turns.
pub const RENEW_FROM: ShareFrom = ShareFrom { all: 1.2, own: 0.5 };

/// The demand on a key over its refill: of the holder asking (`own`), and of all its holders
/// (`all`: a share's holder counts as its parts want, a plain lease's as the one asking).
#[derive(Debug, Clone, Copy)]
pub struct Demand {
    pub own: f64,
    pub all: f64,
}

/// The demand beside `others` at `at` of a holder whose own demand is `own` refills.
pub fn demand(others: &[Lease], own: f64, at: Instant) -> Demand {
    let all = others
        .iter()
        .filter(|l| l.ends_at() > at)
        .fold(own, |sum, l| {
            sum + if l.is_share() {
                demand_of_parts(l.wanted)
            } else {
                own
            }
        });
    Demand { own, all }
}

/// `rate` tokens per second in refills of the key.
pub fn refills(rate: f64, options: &Options) -> f64 {
    rate * options.interval_nanos() as f64 / 1e9
}

/// The demand (in refills) a share's holder reported, from the parts it wants.
pub fn demand_of_parts(wanted: u32) -> f64 {
    f64::from(wanted) / (1.5 * f64::from(RATE_PARTS))
}

/// Whether that demand is due a share by `from`.
pub fn share_due(demand: Demand, from: ShareFrom) -> bool {
    demand.own >= from.own || demand.all >= from.all
}

/// Where the demand on a key is at least this many times its refill, it is overloaded: a
/// share then holds at most a third of the parts its holder wants (half its demand), so that
/// its holder drains its sub-bucket at twice its refill and it never fills unused, and the
/// rest of the refill serves the others at the object, where their variance pools.
pub const OVERLOADED: f64 = 1.5;

/// What an overloaded key's share holds of the parts its holder wants: a third.
const OVERLOADED_DIVISOR: u32 = 3;

/// The most parts a share may hold of the `wanted` its holder asks for, by the demand (a
/// holder alone on its key gets what it wants: there is no other demand to pool).
pub fn parts_cap(wanted: u32, demand: Demand) -> u32 {
    if overloaded(demand) {
        wanted / OVERLOADED_DIVISOR
    } else {
        wanted
    }
}

/// Whether the demand on a key overloads it, and not by the asking holder's demand alone.
pub fn overloaded(demand: Demand) -> bool {
    demand.all >= OVERLOADED && demand.all > demand.own
}

/// A term from `from` as [`allocate`] sizes it, for as long as [`term_nanos`] gives its
/// parts: sized first over a shortest term, then again over its own length, so that it fits
/// beside every other term until it ends. (A term sized again has no more parts than at
/// first, so the length it keeps is at most what its parts give.)
pub fn allocate_term(
    others: &[Lease],
    (wanted, cap, least): (u32, u32, u64),
    options: &Options,
    from: Instant,
) -> Term {
    let shortest = from.saturating_add(SHARE_TERM_NANOS);
    let first = allocate(others, wanted, cap, least, options, from, shortest);
    let nanos = term_nanos(options, first.parts);
    let term = if nanos == SHARE_TERM_NANOS {
        first
    } else {
        allocate(
            others,
            wanted,
            cap,
            least,
            options,
            from,
            from.saturating_add(nanos),
        )
    };
    Term { nanos, ..term }
}

/// The terms of a share asked for with `wanted` parts, for a term from `from`, beside
/// `others` (the key's other leases): its fair part of the refill by what every share wants,
/// at most what the others leave free at every moment of the term; a capacity in proportion
/// (at least `least` whole tokens, at most what is free throughout, and one token left to the
/// main bucket while it keeps parts), with the parts of that capacity if it was rounded up.
/// Without `least` whole tokens, nothing (the empty term: no share is granted).
/// (docs/SPEC.md, 11.7)
pub fn allocate(
    others: &[Lease],
    wanted: u32,
    cap: u32,
    least: u64,
    options: &Options,
    from: Instant,
    until: Instant,
) -> Term {
    let taken = most_held(others, options, from, until);
    let free_parts = RATE_PARTS.saturating_sub(taken.parts);
    let all_wanted = all_wanted(others, wanted, from);
    let fair = u64::from(RATE_PARTS) * u64::from(wanted) / all_wanted.max(1);
    let parts = fair.min(cap.into()).min(free_parts.into()) as u32;
    let unit = options.unit();
    let free_tokens = options.capacity_units().saturating_sub(taken.units) / unit;
    let fair_tokens = div_rem_small(
        u128::from(options.max_tokens()) * u128::from(parts),
        RATE_PARTS.into(),
    )
    .0;
    let mut tokens = (fair_tokens.max(least.max(1).into()) as u64)
        .min(free_tokens)
        .min(MAX_TOKENS_IN_BILLIONTHS);
    // Parts in proportion to the capacity: a share rounded up to a whole token gets that
    // token's refill, as far as it wants it and it is free.
    let of_tokens = div(
        u128::from(tokens) * u128::from(RATE_PARTS),
        u128::from(options.max_tokens()).max(1),
    );
    let of_tokens = of_tokens.min(RATE_PARTS.into()) as u32;
    let parts = if parts == 0 {
        0
    } else {
        parts.max(of_tokens.min(cap).min(free_parts))
    };
    // The main bucket keeps a whole token while it keeps parts of the refill: without one,
    // its refill would be lost.
    if free_parts > parts && free_tokens == tokens {
        tokens = tokens.saturating_sub(1);
    }
    if parts == 0 || tokens == 0 || tokens < least {
        return Term::default();
    }
    Term {
        billionths: billionths_of(tokens.saturating_mul(unit), options),
        parts,
        nanos: 0,
    }
}

/// The capacity (units) that `leases` leave free at every moment of `[from, until)`: what a
/// lease or a share's capacity held over that time may take.
pub fn free_units(leases: &[Lease], options: &Options, from: Instant, until: Instant) -> u64 {
    let held = most_held(leases, options, from, until).units;
    options.capacity_units().saturating_sub(held)
}

/// The parts of the refill that `leases` leave free at every moment of `[from, until)`.
pub fn free_parts(leases: &[Lease], options: &Options, from: Instant, until: Instant) -> u32 {
    RATE_PARTS.saturating_sub(most_held(leases, options, from, until).parts)
}

/// The most that `leases` hold at any moment of `[from, until)`, capacity and parts each
/// (terms granted later for later moments count too: a new term must fit beside all of them).
/// One pass through their changes in time order: what they hold changes only at one.
fn most_held(leases: &[Lease], options: &Options, from: Instant, until: Instant) -> Out {
    let mut out = out_at(leases, options, from);
    let mut most = out;
    let changes = changes(leases, options, from, until);
    let mut next = 0;
    while let Some(at) = next_moment(&changes, &mut next, &mut out) {
        if at >= until {
            break;
        }
        most = Out {
            units: most.units.max(out.units),
            parts: most.parts.max(out.parts),
        };
    }
    most
}

/// One change of what the leases hold, at `at`.
struct Change {
    at: Instant,
    units: i128,
    parts: i64,
}

/// Every change of what `leases` hold after `after` and up to `until`, in time order.
fn changes(leases: &[Lease], options: &Options, after: Instant, until: Instant) -> Vec<Change> {
    let mut changes = Vec::new();
    let units = |billionths| i128::from(term_units(billionths, options));
    for lease in leases {
        let next = lease.next.unwrap_or_default();
        changes.push(Change {
            at: lease.expires_at,
            units: units(next.billionths) - units(lease.billionths),
            parts: i64::from(next.parts) - i64::from(lease.parts),
        });
        if lease.next.is_some() {
            changes.push(Change {
                at: lease.ends_at(),
                units: -units(next.billionths),
                parts: -i64::from(next.parts),
            });
        }
    }
    changes.retain(|c| c.at > after && c.at <= until);
    // Insertion sort, as the standard sort does up to 20 elements: a few changes, mostly in
    // order already, and no quicksort in the .wasm.
    for i in 1..changes.len() {
        let mut j = i;
        while j > 0 && changes[j].at < changes[j - 1].at {
            changes.swap(j, j - 1);
            j -= 1;
        }
    }
    changes
}

fn apply(out: Out, change: &Change) -> Out {
    let units = (i128::from(out.units) + change.units).clamp(0, u64::MAX.into());
    let parts = (i64::from(out.parts) + change.parts).clamp(0, RATE_PARTS.into());
    Out {
        units: units as u64,
        parts: parts as u32,
    }
}

/// Applies to `out` every change of `changes` at the moment of `changes[*next]`, moving `next`
/// past them, and returns that moment; `None` once every change is applied.
fn next_moment(changes: &[Change], next: &mut usize, out: &mut Out) -> Option<Instant> {
    let at = changes.get(*next)?.at;
    while let Some(change) = changes.get(*next).filter(|c| c.at == at) {
        *out = apply(*out, change);
        *next += 1;
    }
    Some(at)
}

/// The main bucket between two moments of `changes`: refilled to `at` under what the leases
/// held before it, then its progress counted in the period that follows.
fn step(
    bucket: Option<Bucket>,
    before: Out,
    after: Out,
    options: &Options,
    at: Instant,
) -> Option<Bucket> {
    let old = main_period(options, before.parts);
    let refilled = refill_every(bucket, before.units, old, options, at);
    let rescaled = rescale(refilled, old, main_period(options, after.parts), at);
    if after.units > 0 {
        // A full bucket whose capacity a term takes from now: what no longer fits is gone.
        let room = options.capacity_units().saturating_sub(after.units);
        return Some(rescaled.unwrap_or(Bucket::from_parts(room, at)));
    }
    rescaled
}

/// A bucket (refilled to `at`) whose period changes from `old` to `new` at `at`: the progress
/// towards its next token is scaled down to the new period, so it never gains; it restarts
/// when there was or will be no refill.
pub fn rescale(
    bucket: Option<Bucket>,
    old: Option<u128>,
    new: Option<u128>,
    at: Instant,
) -> Option<Bucket> {
    if old == new {
        return bucket;
    }
    let bucket = bucket?;
    let elapsed = u128::from(at.saturating_since(bucket.last_refill()));
    let kept = match (old, new) {
        (Some(old), Some(new)) => elapsed.checked_mul(new).map_or(0, |x| div(x, old)),
        _ => 0,
    };
    let kept = u64::try_from(kept).unwrap_or(u64::MAX);
    let since = Instant::from_nanos(at.as_nanos().saturating_sub(kept));
    Some(Bucket::from_parts(bucket.units(), since))
}

/// Brings the main bucket to `now` while part of it is out on `leases`, through every change
/// of their terms from its last refill up to then (changes before it are already in it: a
/// bucket made full at a call counts only the terms held from then). A lease that ended by
/// `now` ended at its last term's end, counted as fully used.
pub fn refill_through_leases(
    bucket: Bucket,
    leases: &[Lease],
    options: &Options,
    now: Instant,
) -> Option<Bucket> {
    let from = bucket.last_refill();
    let mut out = out_at(leases, options, from);
    let mut current = Some(bucket);
    let changes = changes(leases, options, from, now);
    let mut next = 0;
    let mut before = out;
    while let Some(at) = next_moment(&changes, &mut next, &mut out) {
        current = step(current, before, out, options, at);
        before = out;
    }
    refill_every(
        current,
        out.units,
        main_period(options, out.parts),
        options,
        now,
    )
}

/// Nanoseconds from `now` until the main bucket (already refilled to `now`) holds `needed`
/// units, if nothing consumes and every lease is spent in full and ends only at its last
/// term's end: never early. `None` when no wait can help.
pub fn wait_through_leases(
    current: Option<Bucket>,
    needed: u64,
    leases: &[Lease],
    options: &Options,
    now: Instant,
) -> Option<u128> {
    let capacity = options.capacity_units();
    if needed > capacity {
        return None;
    }
    let Some(mut bucket) = current.filter(|b| b.units() < needed) else {
        return Some(0);
    };
    let mut out = out_at(leases, options, now);
    let changes = changes(leases, options, now, Instant::from_nanos(u64::MAX));
    let mut next = 0;
    loop {
        let moment = changes.get(next).map(|c| c.at);
        if needed <= capacity.saturating_sub(out.units) {
            if let Some(period) = main_period(options, out.parts) {
                let refills = u128::from((needed - bucket.units()).div_ceil(options.unit()));
                let ready = u128::from(bucket.last_refill().as_nanos())
                    .saturating_add(refills.saturating_mul(period));
                if moment.is_none_or(|m| ready <= u128::from(m.as_nanos())) {
                    return Some(ready.saturating_sub(now.as_nanos().into()));
                }
            }
        }
        let before = out;
        let moment = next_moment(&changes, &mut next, &mut out)?;
        let waited = u128::from(moment.saturating_since(now));
        match step(Some(bucket), before, out, options, moment) {
            Some(b) if b.units() < needed => bucket = b,
            _ => return Some(waited),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lease::Term;

    /// `most_held` as its definition reads: what the leases hold at `from` and at every
    /// moment one of them changes before `until`, the most of each.
    fn most_held_at_every_moment(
        leases: &[Lease],
        options: &Options,
        from: Instant,
        until: Instant,
    ) -> Out {
        let moments = leases
            .iter()
            .flat_map(|l| [l.expires_at, l.ends_at()])
            .filter(|&m| m > from && m < until);
        core::iter::once(from)
            .chain(moments)
            .map(|m| out_at(leases, options, m))
            .fold(Out::default(), |most, out| Out {
                units: most.units.max(out.units),
                parts: most.parts.max(out.parts),
            })
    }

    #[test]
    fn most_held_is_the_most_at_any_moment_of_the_window() {
        let options = Options::new(1_000.0, 0.001).unwrap();
        let mut seed = 12_345_u64;
        let mut random = |below: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % below
        };
        let ms = |ms: u64| Instant::from_nanos(1_000_000_000_000 + ms * 1_000_000);
        for _ in 0..500 {
            let mut leases = Vec::new();
            for id in 0..random(40) {
                // Terms that end at the same few moments too, so that changes coincide.
                let mut lease = Lease::plain(id, random(30) * 1_000_000_000, ms(random(20) * 250));
                lease.parts = random(RATE_PARTS as u64 / 40) as u32;
                if random(2) == 0 {
                    lease.next = Some(Term {
                        billionths: random(30) * 1_000_000_000,
                        parts: random(RATE_PARTS as u64 / 40) as u32,
                        nanos: random(8) * 250_000_000,
                    });
                }
                leases.push(lease);
            }
            // Windows that start and end at such moments, or between them.
            let from = ms(random(20) * 250 + random(2) * random(250));
            let until = ms(random(40) * 250 + random(2) * random(250));
            assert_eq!(
                most_held(&leases, &options, from, until),
                most_held_at_every_moment(&leases, &options, from, until),
                "{leases:?} from {from:?} until {until:?}"
            );
        }
    }
}
