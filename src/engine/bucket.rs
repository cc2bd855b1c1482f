//! One lazy token bucket. A bucket that is full is not stored at all (`None`): a full
//! bucket banks no progress, so it is indistinguishable from one never used.

use super::options::{Cost, Options};
use super::time::{ceil_millis, Instant};

/// A bucket that is not full: fewer than `max_tokens` tokens, refilling since `last_refill`.
/// `units` count in the units of the bucket's options ([`Options::unit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    units: u64,
    last_refill: Instant,
}

impl Bucket {
    /// A bucket as a snapshot recorded it; [`refill`] and [`convert`] bring it up to date.
    #[inline(always)]
    pub fn from_parts(units: u64, last_refill: Instant) -> Bucket {
        Bucket { units, last_refill }
    }

    #[inline(always)]
    pub fn units(&self) -> u64 {
        self.units
    }

    #[inline(always)]
    pub fn last_refill(&self) -> Instant {
        self.last_refill
    }
}

/// What `getStatus` reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Status {
    /// Tokens available now.
    pub remaining: f64,
    /// `max_tokens`.
    pub limit: f64,
    /// 0 when full, else whole milliseconds (rounded up) until the next token.
    pub reset_in_ms: f64,
}

/// The bucket as it stands at `now`: `k` whole intervals since `last_refill` add `k` tokens
/// and move `last_refill` by exactly `k` intervals (sub-interval progress is kept); if that
/// reaches capacity the bucket is full (`None`). A clock that went back adds nothing.
#[inline(always)]
pub fn refill(stored: Option<Bucket>, options: &Options, now: Instant) -> Option<Bucket> {
    refill_by(stored, options.interval_nanos(), options, now)
}

/// [`refill`] with a token every `period` nanoseconds.
#[inline(always)]
fn refill_by(
    stored: Option<Bucket>,
    period: u128,
    options: &Options,
    now: Instant,
) -> Option<Bucket> {
    let bucket = stored?;
    let elapsed = now.saturating_since(bucket.last_refill);
    if u128::from(elapsed) < period {
        // The common case of a busy key: no division needed.
        return (bucket.units < options.capacity_units()).then_some(bucket);
    }
    // The period is at most the elapsed time here, so it fits 64 bits.
    let period = period as u64;
    let k = elapsed / period;
    let units = bucket
        .units
        .saturating_add(k.saturating_mul(options.unit()));
    if units >= options.capacity_units() {
        return None;
    }
    Some(Bucket {
        units,
        // k * period <= the elapsed time, so this cannot overflow.
        last_refill: bucket.last_refill.saturating_add(k * period),
    })
}

/// [`refill`] for a bucket of which `leased` units are out on leases, and that gains a token
/// every `period` nanoseconds (part of its refill is out on shares), or never (`None`).
/// Leased tokens count as still in the bucket: refill stops when the tokens in it and the
/// leased ones together reach capacity, and a bucket stopped there banks no progress (like a
/// full one), so its refill clock starts again at `now`. Such a bucket is never full (`None`)
/// while leases are out: its units are the ones not leased.
pub fn refill_every(
    stored: Option<Bucket>,
    leased: u64,
    period: Option<u128>,
    options: &Options,
    now: Instant,
) -> Option<Bucket> {
    let bucket = stored?;
    let refilled = match period {
        Some(period) => refill_by(Some(bucket), period, options, now),
        // No refill at all: progress stands still.
        None => (bucket.units < options.capacity_units()).then_some(bucket),
    };
    if leased == 0 {
        return refilled;
    }
    let room = options.capacity_units().saturating_sub(leased);
    Some(match refilled {
        Some(b) if b.units < room && bucket.units < room => b,
        // At capacity with the leased tokens, now or at the last change: no progress.
        _ => Bucket {
            units: bucket
                .units
                .max(refilled.map_or(room, |b| b.units))
                .min(room),
            last_refill: now,
        },
    })
}

/// A bucket counted under `from` seen under `to`: the same tokens (clamped to the new
/// capacity: possibly full) and the same last refill.
pub fn convert(stored: Option<Bucket>, from: &Options, to: &Options) -> Option<Bucket> {
    let bucket = stored?;
    let units = to.convert_units(bucket.units, from);
    (units < to.capacity_units()).then_some(Bucket { units, ..bucket })
}

/// Takes `cost` from a bucket already refilled to `now`. `Err` leaves the bucket as it was:
/// not enough tokens, or a cost above capacity (never satisfiable).
#[inline(always)]
pub fn take(
    current: Option<Bucket>,
    cost: Cost,
    options: &Options,
    now: Instant,
) -> Result<Option<Bucket>, ()> {
    let cost = cost.units(options).ok_or(())?;
    let capacity = options.capacity_units();
    let (units, last_refill) = match current {
        Some(b) => (b.units, b.last_refill),
        None => (capacity, now),
    };
    if cost > units {
        return Err(());
    }
    let left = units - cost;
    Ok((left < capacity).then_some(Bucket {
        units: left,
        last_refill,
    }))
}

/// The status of a bucket already refilled to `now`.
pub fn status(current: Option<Bucket>, options: &Options, now: Instant) -> Status {
    let limit = options.max_tokens() as f64;
    match current {
        None => Status {
            remaining: limit,
            limit,
            reset_in_ms: 0.0,
        },
        Some(b) => Status {
            remaining: options.tokens(b.units),
            limit,
            reset_in_ms: ceil_millis(wait_until(b, 1, options, now)),
        },
    }
}

/// Nanoseconds from `now` until a bucket already refilled to `now` holds `cost`, if nothing
/// else consumes: 0 when it holds it already, `None` when no wait can help (cost above
/// capacity). The `n`-th refill after `last_refill` comes exactly `n` intervals after it.
pub fn wait_for(
    current: Option<Bucket>,
    cost: Cost,
    options: &Options,
    now: Instant,
) -> Option<u128> {
    let cost = cost.units(options)?;
    Some(match current.filter(|b| b.units < cost) {
        None => 0,
        Some(bucket) => wait_until(bucket, cost - bucket.units, options, now),
    })
}

/// Nanoseconds from `now` until a bucket already refilled to `now` is full again, if
/// nothing consumes.
pub fn wait_for_full(current: Option<Bucket>, options: &Options, now: Instant) -> u128 {
    match current {
        None => 0,
        Some(b) => wait_until(
            b,
            options.capacity_units().saturating_sub(b.units),
            options,
            now,
        ),
    }
}

/// The moment (in nanoseconds since the epoch, beyond any `Instant` for a bucket that never
/// refills) at which `bucket` is full if nothing consumes.
pub fn full_at(bucket: Bucket, options: &Options) -> u128 {
    let missing = options.capacity_units().saturating_sub(bucket.units);
    let refills = u128::from(missing.div_ceil(options.unit()));
    u128::from(bucket.last_refill.as_nanos())
        .saturating_add(refills.saturating_mul(options.interval_nanos()))
}

/// Nanoseconds from `now` until refills alone add at least `units` (> 0) to `bucket`.
fn wait_until(bucket: Bucket, units: u64, options: &Options, now: Instant) -> u128 {
    // One refill (the next token, which every decision reports) needs no 128-bit
    // multiplication.
    let refills = units.div_ceil(options.unit());
    let wait = if refills == 1 {
        options.interval_nanos()
    } else {
        u128::from(refills).saturating_mul(options.interval_nanos())
    };
    let ready = u128::from(bucket.last_refill.as_nanos()).saturating_add(wait);
    ready.saturating_sub(now.as_nanos().into())
}
