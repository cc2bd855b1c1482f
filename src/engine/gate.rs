//! Concurrency limits (docs/SPEC.md, section 12): a key's gate is its set of live permits.
//! A permit is live from its grant until it is released or its time to live has passed, so
//! one that is never released (its isolate died) frees its slot at its expiry, and at no
//! instant do a key's live permits cost more than the `max_in_flight` that admitted the last.

use core::hash::BuildHasher;

use foldhash::fast::FixedState;

use super::error::Error;
use super::keyed::Keyed;
use super::lease::ID_MASK;
use super::options::MAX_SAFE_INTEGER;
use super::time::{ceil_millis, Instant};

/// Live permits a key may hold at once, whatever `max_in_flight` says: memory stays bounded.
pub const MAX_PERMITS_PER_KEY: usize = 4_096;
/// A permit's time to live when the policy gives none.
pub const DEFAULT_PERMIT_TTL_SECONDS: f64 = 60.0;
/// The longest time to live a policy may give (a day).
pub const MAX_PERMIT_TTL_SECONDS: f64 = 86_400.0;
/// Gates inspected, round-robin, by each call that makes or touches one.
const SWEEP_GATES: usize = 3;

const NANOS_PER_SECOND: f64 = 1_000_000_000.0;

/// A gate's policy, validated: at most `max_in_flight` in flight, each permit live for at
/// most `ttl_nanos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatePolicy {
    max_in_flight: u64,
    ttl_nanos: u64,
}

impl GatePolicy {
    /// `max_in_flight`: a whole number from 1 to 2^53 - 1. `ttl_seconds`: finite, > 0, at
    /// most a day; `None` is the default, 60 s.
    pub fn new(max_in_flight: f64, ttl_seconds: Option<f64>) -> Result<GatePolicy, Error> {
        let max_in_flight = whole(max_in_flight, 1.0, "max_in_flight")?;
        let ttl = ttl_seconds.unwrap_or(DEFAULT_PERMIT_TTL_SECONDS);
        if !(ttl > 0.0 && ttl <= MAX_PERMIT_TTL_SECONDS) {
            return Err(Error::OutOfRange {
                field: "ttl_seconds".into(),
                expected: "a finite number > 0 and at most 86400",
                got: ttl,
            });
        }
        Ok(GatePolicy {
            max_in_flight,
            // To the nearest nanosecond: 2.019 s is 2,019 ms exactly, not a nanosecond more.
            ttl_nanos: ((ttl * NANOS_PER_SECOND).round() as u64).max(1),
        })
    }

    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight
    }

    pub fn ttl_nanos(&self) -> u64 {
        self.ttl_nanos
    }
}

/// A permit's cost, validated: a whole number from 1 to 2^53 - 1.
pub fn permit_cost(cost: f64) -> Result<u64, Error> {
    whole(cost, 1.0, "cost")
}

/// A permit id, validated: a whole number from 0 to 2^53 - 1.
pub fn permit_id(id: f64) -> Result<u64, Error> {
    whole(id, 0.0, "id")
}

fn whole(value: f64, least: f64, field: &str) -> Result<u64, Error> {
    if value.fract() == 0.0 && (least..=MAX_SAFE_INTEGER).contains(&value) {
        return Ok(value as u64);
    }
    Err(Error::OutOfRange {
        field: field.into(),
        expected: if least == 0.0 {
            "a whole number from 0 to 9007199254740991"
        } else {
            "a whole number from 1 to 9007199254740991"
        },
        got: value,
    })
}

/// One live permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit {
    pub id: u64,
    pub cost: u64,
    pub expires_at: Instant,
}

impl Permit {
    fn live(&self, now: Instant) -> bool {
        self.expires_at > now
    }
}

/// A permit asked for beside the buckets of a `limit_all_with_permit` call.
#[derive(Debug, Clone, Copy)]
pub struct PermitAsk<'a> {
    pub key: &'a [u8],
    pub cost: u64,
    pub policy: GatePolicy,
}

/// What `acquire` reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PermitDecision {
    pub allowed: bool,
    /// The permit's id when allowed.
    pub id: Option<u64>,
    /// The cost of the key's live permits after the call.
    pub in_flight: u64,
    pub limit: u64,
    /// The permit's time to live in whole ms, rounded up; 0 when denied.
    pub ttl_ms: f64,
    /// 0 when allowed; when denied, whole ms (rounded up) until expiries alone make room;
    /// `None` when the cost is above the limit.
    pub retry_after_ms: Option<f64>,
}

/// What `release` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Whether a live permit with that id ended.
    pub released: bool,
    /// The cost of the key's live permits after the call.
    pub in_flight: u64,
}

/// Every key's live permits.
#[derive(Clone)]
pub struct Gates {
    keys: Keyed<Permit>,
    next_id: u64,
    /// Where the round-robin sweep goes on.
    sweep_at: usize,
}

impl Gates {
    pub fn new(seed: u64) -> Gates {
        let hasher = FixedState::with_seed(seed.rotate_left(29));
        Gates {
            // Ids start at a random point: after an eviction they do not retrace the old ones.
            next_id: hasher.hash_one(seed ^ 0x6761_7465) & ID_MASK,
            keys: Keyed::new(hasher),
            sweep_at: 0,
        }
    }

    /// How many keys have live (or not yet swept) permits.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// A permit of `cost` on `key` if its live permits leave room under `policy`.
    pub fn acquire(
        &mut self,
        key: &[u8],
        cost: u64,
        policy: GatePolicy,
        now: Instant,
    ) -> PermitDecision {
        let room = self.would_admit(key, cost, policy, now);
        if !room.allowed {
            return room;
        }
        let live = self.keys.of(key);
        // Unique among the key's live permits (ids restored after an eviction included).
        while live.iter().any(|p| p.id == self.next_id) {
            self.next_id = (self.next_id + 1) & ID_MASK;
        }
        let permit = Permit {
            id: self.next_id,
            cost,
            expires_at: now.saturating_add(policy.ttl_nanos),
        };
        self.next_id = (self.next_id + 1) & ID_MASK;
        self.keys.add(key, &[permit]);
        PermitDecision {
            id: Some(permit.id),
            in_flight: room.in_flight + cost,
            ttl_ms: ceil_millis(policy.ttl_nanos as u128),
            ..room
        }
    }

    /// What `acquire` would answer about room, granting nothing: `allowed` says whether
    /// the gate has room, and there is no id. (Expired permits are dropped on the way.)
    pub fn would_admit(
        &mut self,
        key: &[u8],
        cost: u64,
        policy: GatePolicy,
        now: Instant,
    ) -> PermitDecision {
        self.drop_expired(key, now);
        let live = self.keys.of(key);
        let in_flight = cost_of(live);
        let limit = policy.max_in_flight;
        let fits = in_flight.saturating_add(cost) <= limit && live.len() < MAX_PERMITS_PER_KEY;
        let retry_after_ms = if fits {
            Some(0.0)
        } else {
            (cost <= limit).then(|| wait_for_room(live, cost, limit, now))
        };
        PermitDecision {
            allowed: fits,
            id: None,
            in_flight,
            limit,
            ttl_ms: 0.0,
            retry_after_ms,
        }
    }

    /// Ends the live permit `id` of `key`; anything else (released already, expired, never
    /// granted) changes nothing and says so.
    pub fn release(&mut self, key: &[u8], id: u64, now: Instant) -> Released {
        self.drop_expired(key, now);
        let released = self.keys.take(key, |p| p.id == id).is_some();
        Released {
            released,
            in_flight: cost_of(self.keys.of(key)),
        }
    }

    /// Whether any key has a live permit at `now`.
    pub fn any_live(&self, now: Instant) -> bool {
        self.keys
            .iter()
            .any(|(_, permits)| permits.iter().any(|p| p.live(now)))
    }

    /// The live permits of `key` at `now` (expired ones are left for the calls and the sweep).
    pub fn live(&self, key: &[u8], now: Instant) -> impl Iterator<Item = &Permit> {
        self.keys.of(key).iter().filter(move |p| p.live(now))
    }

    /// Puts back the permits a snapshot recorded (the durable class, after an eviction):
    /// the live ones replace whatever the key had.
    pub fn restore(&mut self, key: &[u8], permits: &[Permit], now: Instant) {
        self.keys.forget(key);
        let live: Vec<Permit> = permits.iter().copied().filter(|p| p.live(now)).collect();
        self.keys.add(key, &live);
    }

    /// Sweeps, then drops the expired permits of `key`: one copy for `would_admit` and
    /// `release`, not one inlined into each.
    #[inline(never)]
    fn drop_expired(&mut self, key: &[u8], now: Instant) {
        self.sweep(now);
        self.keys.retain(key, live_at(now));
    }

    /// Drops the expired permits of the next few gates, round-robin.
    fn sweep(&mut self, now: Instant) {
        for _ in 0..SWEEP_GATES {
            if self.keys.is_empty() {
                return;
            }
            let at = self.sweep_at % self.keys.len();
            // A gate left empty is removed and the last one moves to `at`: look there again.
            if !self.keys.retain_at(at, live_at(now)) {
                self.sweep_at = at + 1;
            }
        }
    }
}

/// Whether a permit is live at `now`: one closure type for every retain, so the binary
/// carries one copy of it.
fn live_at(now: Instant) -> impl FnMut(&mut Permit) -> bool {
    move |p| p.live(now)
}

fn cost_of(permits: &[Permit]) -> u64 {
    permits.iter().fold(0, |sum, p| sum.saturating_add(p.cost))
}

/// Whole ms until expiries alone leave room for `cost` under `limit` (and a free place
/// among the permits a key may hold): the earliest expiries are taken one time at a time,
/// as few as needed (a denial rarely needs more than one).
fn wait_for_room(live: &[Permit], cost: u64, limit: u64, now: Instant) -> f64 {
    let (mut in_flight, mut count) = (cost_of(live), live.len());
    let mut after = now;
    while in_flight.saturating_add(cost) > limit || count >= MAX_PERMITS_PER_KEY {
        let Some(next) = live
            .iter()
            .map(|p| p.expires_at)
            .filter(|&t| t > after)
            .min()
        else {
            break;
        };
        for p in live.iter().filter(|p| p.expires_at == next) {
            in_flight -= p.cost;
            count -= 1;
        }
        after = next;
    }
    ceil_millis(after.saturating_since(now) as u128)
}

/// A gate as the durable class stores it: a version byte, then each live permit's id, cost
/// and expiry (ns), as little-endian u64s.
pub fn gate_snapshot(permits: &[Permit]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + permits.len() * 24);
    bytes.push(GATE_SNAPSHOT_VERSION);
    for p in permits {
        for n in [p.id, p.cost, p.expires_at.as_nanos()] {
            bytes.extend_from_slice(&n.to_le_bytes());
        }
    }
    bytes
}

const GATE_SNAPSHOT_VERSION: u8 = 1;

/// The permits of `gate_snapshot`'s bytes; anything else is `Error::Unreadable`.
pub fn read_gate_snapshot(bytes: &[u8]) -> Result<Vec<Permit>, Error> {
    let unreadable = || Error::Unreadable {
        field: "gate snapshot".into(),
        length: bytes.len(),
    };
    let (&version, body) = bytes.split_first().ok_or_else(unreadable)?;
    if version != GATE_SNAPSHOT_VERSION
        || body.len() % 24 != 0
        || body.len() / 24 > MAX_PERMITS_PER_KEY
    {
        return Err(unreadable());
    }
    let number = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    let permits: Vec<Permit> = body
        .chunks_exact(24)
        .map(|p| Permit {
            id: number(&p[..8]),
            cost: number(&p[8..16]),
            expires_at: Instant::from_nanos(number(&p[16..])),
        })
        .collect();
    // (Ids are not checked for repeats: the class writes its own, and a repeated id would
    // only end one of the two permits at a time, never admit more.)
    let valid = permits
        .iter()
        .all(|p| p.id <= ID_MASK && p.cost >= 1 && p.cost <= ID_MASK);
    if !valid {
        return Err(unreadable());
    }
    Ok(permits)
}

impl super::limiter::Limiter {
    /// A permit of `cost` on `key`'s gate under `policy` (section 12 of docs/SPEC.md).
    pub fn acquire(
        &mut self,
        key: &[u8],
        cost: u64,
        policy: GatePolicy,
        now: Instant,
    ) -> PermitDecision {
        self.gates.acquire(key, cost, policy, now)
    }

    /// Ends the live permit `id` of `key`, if there is one.
    pub fn release(&mut self, key: &[u8], id: u64, now: Instant) -> Released {
        self.gates.release(key, id, now)
    }

    /// The live permits of `key` at `now`, without changing anything.
    pub fn permits_of(&self, key: &[u8], now: Instant) -> Vec<Permit> {
        self.gates.live(key, now).copied().collect()
    }

    /// Keys with permits in memory (live, or expired and not yet swept).
    pub fn gated_keys(&self) -> usize {
        self.gates.len()
    }

    /// Restores `key`'s gate from `gate_snapshot` bytes (the durable class, after an eviction).
    pub fn restore_gate(&mut self, key: &[u8], bytes: &[u8], now: Instant) -> Result<(), Error> {
        let permits = read_gate_snapshot(bytes)?;
        self.gates.restore(key, &permits, now);
        Ok(())
    }
}
