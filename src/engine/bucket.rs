//! One lazy token bucket. A bucket that is full is not stored at all (`None`): a full
//! bucket banks no progress, so it is indistinguishable from one never used.

use super::options::{units_to_tokens, Cost, Options, UNITS_PER_TOKEN};
use super::time::{ceil_millis, Instant};

/// A bucket that is not full: fewer than `max_tokens` tokens, refilling since `last_refill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    units: u128,
    last_refill: Instant,
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
pub fn refill(stored: Option<Bucket>, options: &Options, now: Instant) -> Option<Bucket> {
    let bucket = stored?;
    let interval = options.interval_nanos();
    let k = now.saturating_since(bucket.last_refill) / interval;
    let units = bucket
        .units
        .saturating_add(k.saturating_mul(UNITS_PER_TOKEN));
    if units >= options.capacity_units() {
        return None;
    }
    Some(Bucket {
        units,
        // k * interval <= the elapsed time, so this cannot overflow.
        last_refill: bucket.last_refill.saturating_add(k * interval),
    })
}

/// Takes `cost` from a bucket already refilled to `now`. `Err` leaves the bucket as it was:
/// not enough tokens, or a cost above capacity (never satisfiable).
pub fn take(
    current: Option<Bucket>,
    cost: Cost,
    options: &Options,
    now: Instant,
) -> Result<Option<Bucket>, ()> {
    let capacity = options.capacity_units();
    let (units, last_refill) = match current {
        Some(b) => (b.units, b.last_refill),
        None => (capacity, now),
    };
    if cost.units() > units {
        return Err(());
    }
    let left = units - cost.units();
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
        Some(b) => {
            let next_token = b.last_refill.saturating_add(options.interval_nanos());
            Status {
                remaining: units_to_tokens(b.units),
                limit,
                reset_in_ms: ceil_millis(next_token.saturating_since(now)),
            }
        }
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
    if cost.units() > options.capacity_units() {
        return None;
    }
    let Some(bucket) = current.filter(|b| b.units < cost.units()) else {
        return Some(0);
    };
    let refills = (cost.units() - bucket.units).div_ceil(UNITS_PER_TOKEN);
    let ready = bucket
        .last_refill
        .saturating_add(refills.saturating_mul(options.interval_nanos()));
    Some(ready.saturating_since(now))
}

/// The moment a bucket already refilled to `now` is full again, if nothing consumes.
pub fn full_at(current: Option<Bucket>, options: &Options, now: Instant) -> Instant {
    let Some(bucket) = current else {
        return now;
    };
    let missing = options.capacity_units().saturating_sub(bucket.units);
    let refills = missing.div_ceil(UNITS_PER_TOKEN);
    bucket
        .last_refill
        .saturating_add(refills.saturating_mul(options.interval_nanos()))
}
