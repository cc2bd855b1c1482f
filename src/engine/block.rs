//! Blocks (docs/SPEC.md, section 13): a key blocked until an instant is denied every call
//! until then, whatever its bucket holds. Blocks live apart from buckets and are dropped once
//! over; with none in force, a call pays one branch for them.

use foldhash::fast::FixedState;

use super::error::Error;
use super::keyed::Keyed;
use super::limiter::{after_block, Decision, Limiter};
use super::time::{ceil_millis, Instant};

/// The longest block: a year.
pub const MAX_BLOCK_SECONDS: f64 = 31_536_000.0;
/// Blocks inspected, round-robin, by each call that meets one.
const SWEEP_BLOCKS: usize = 3;

/// A block's length, validated: finite, > 0, at most a year; in nanoseconds, to the nearest.
pub fn block_nanos(seconds: f64, field: &str) -> Result<u64, Error> {
    if seconds > 0.0 && seconds <= MAX_BLOCK_SECONDS {
        return Ok(((seconds * 1e9).round() as u64).max(1));
    }
    Err(Error::OutOfRange {
        field: field.into(),
        expected: "a finite number > 0 and at most 31536000",
        got: seconds,
    })
}

/// The end of each key's block.
#[derive(Clone)]
pub struct Blocks {
    keys: Keyed<Instant>,
    sweep_at: usize,
}

impl Blocks {
    pub fn new(seed: u64) -> Blocks {
        Blocks {
            keys: Keyed::new(FixedState::with_seed(seed.rotate_left(41))),
            sweep_at: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys have blocks in memory (in force, or over and not yet swept).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// When the block of `key` in force at `now` ends, if there is one. Out of line: most
    /// calls meet no block at all, and only the emptiness test belongs in their code.
    #[cold]
    #[inline(never)]
    fn until(&mut self, key: &[u8], now: Instant) -> Option<Instant> {
        self.sweep(now);
        // One lookup: a key not blocked, or blocked until later, changes nothing.
        let at = self.keys.position(key)?;
        if self.keys.at(at).iter().any(|end| *end <= now) && self.keys.retain_at(at, in_force(now))
        {
            return None;
        }
        self.keys.at(at).first().copied()
    }

    /// Every block in force at `now`: its key and its end.
    pub fn live(&self, now: Instant) -> impl Iterator<Item = (&[u8], Instant)> {
        self.keys.iter().filter_map(move |(key, ends)| {
            ends.first()
                .filter(|end| **end > now)
                .map(|end| (key, *end))
        })
    }

    /// Drops the blocks that are over of the next few keys, round-robin.
    fn sweep(&mut self, now: Instant) {
        for _ in 0..SWEEP_BLOCKS {
            if self.keys.is_empty() {
                return;
            }
            let at = self.sweep_at % self.keys.len();
            if !self.keys.retain_at(at, in_force(now)) {
                self.sweep_at = at + 1;
            }
        }
    }
}

/// Whether a block ending at `end` is in force at `now`: one closure type for every
/// retain, so the binary carries one copy of it.
fn in_force(now: Instant) -> impl FnMut(&mut Instant) -> bool {
    move |end| *end > now
}

impl Limiter {
    /// When the block of `key` in force at `now` ends, if there is one.
    #[inline(always)]
    pub fn blocked_until(&mut self, key: &[u8], now: Instant) -> Option<Instant> {
        if self.blocks.is_empty() {
            return None;
        }
        self.blocks.until(key, now)
    }

    /// Blocks `key` for `nanos` from `now`, replacing a block in force.
    pub fn block(&mut self, key: &[u8], nanos: u64, now: Instant) {
        self.blocks.keys.forget(key);
        let end = now.saturating_add(nanos);
        if end > now {
            self.blocks.keys.add(key, &[end]);
        }
        self.blocks.sweep(now);
    }

    /// Ends the block of `key`; whether one was in force.
    pub fn unblock(&mut self, key: &[u8], now: Instant) -> bool {
        let was = self.blocked_until(key, now).is_some();
        self.blocks.keys.forget(key);
        was
    }

    /// A penalty: blocks `key` for `nanos` unless a block is in force (a denial during a block
    /// does not extend it). Whether a block began.
    pub fn penalize(&mut self, key: &[u8], nanos: u64, now: Instant) -> bool {
        if self.blocked_until(key, now).is_some() {
            return false;
        }
        self.block(key, nanos, now);
        self.blocked_until(key, now).is_some()
    }

    /// A penalty on a denial: a `decision` that was denied blocks `key` for `nanos` (unless a
    /// block is in force), and then waits for the block's end.
    pub fn apply_penalty(&mut self, key: &[u8], decision: &mut Decision, nanos: u64, now: Instant) {
        if decision.allowed {
            return;
        }
        self.penalize(key, nanos, now);
        if let Some(end) = self.blocked_until(key, now) {
            decision.retry_after_ms = after_block(decision.retry_after_ms, end, now);
        }
    }

    /// Every block in force at `now`: its key and its end.
    pub fn blocks(&self, now: Instant) -> Vec<(Vec<u8>, Instant)> {
        self.blocks
            .live(now)
            .map(|(key, end)| (key.to_vec(), end))
            .collect()
    }

    /// Keys with blocks in memory (in force, or over and not yet swept).
    pub fn blocked_keys(&self) -> usize {
        self.blocks.len()
    }
}

/// Whole ms, rounded up, from `now` until `end`.
pub(super) fn millis_until(end: Instant, now: Instant) -> f64 {
    ceil_millis(end.saturating_since(now) as u128)
}
