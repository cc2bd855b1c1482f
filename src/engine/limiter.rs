//! The keyed limiter: options plus one lazy bucket per key.

use super::bucket::{self, refill, take, Status};
use super::error::Error;
use super::options::{Cost, Options, OptionsPatch};
use super::store::Store;
use super::time::Instant;

/// A token-bucket rate limiter over byte-string keys. Time is an argument of every call.
pub struct Limiter {
    options: Options,
    store: Store,
}

impl Limiter {
    /// `seed` keys the hash of the bucket table; pass a fresh random value per instance.
    pub fn new(seed: u64) -> Limiter {
        Limiter {
            options: Options::default(),
            store: Store::new(seed),
        }
    }

    pub fn options(&self) -> Options {
        self.options
    }

    /// Applies a partial update to the options of every bucket; all or nothing. The new
    /// options apply to each bucket at its next access, except that a bucket already full
    /// at `now` stays full: a raised capacity or a longer interval does not empty it again.
    /// (Such buckets may already have been swept away, so this keeps the sweep invisible.)
    /// Costs O(stored buckets) only when the change raises capacity or lengthens the interval.
    pub fn set_options(&mut self, patch: OptionsPatch, now: Instant) -> Result<(), Error> {
        let old = self.options;
        let new = old.patched(patch)?;
        if new.max_tokens() > old.max_tokens() || new.interval_nanos() > old.interval_nanos() {
            self.store.drop_full(&old, now);
        }
        self.options = new;
        Ok(())
    }

    /// Whether `consume(key, cost, now)` would succeed; consumes nothing.
    pub fn check(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        let current = self.refill_stored(key, now).map(|(_, b)| b);
        take(current, cost, &self.options, now).is_ok()
    }

    /// Takes `cost` tokens from the bucket of `key` if it holds that many; else changes nothing.
    pub fn consume(&mut self, key: &[u8], cost: Cost, now: Instant) -> bool {
        let stored = self.refill_stored(key, now);
        let Ok(next) = take(stored.map(|(_, b)| b), cost, &self.options, now) else {
            return false;
        };
        match (stored, next) {
            (Some((at, _)), Some(bucket)) => self.store.set_bucket(at, bucket),
            (Some((at, _)), None) => self.store.remove(at),
            (None, Some(bucket)) => self.store.insert(key, bucket, &self.options, now),
            (None, None) => {}
        }
        true
    }

    pub fn status(&mut self, key: &[u8], now: Instant) -> Status {
        let current = self.refill_stored(key, now).map(|(_, b)| b);
        bucket::status(current, &self.options, now)
    }

    /// Forgets the bucket of `key`: it is full at its next access.
    pub fn reset(&mut self, key: &[u8]) {
        if let Some(at) = self.store.position(key) {
            self.store.remove(at);
        }
    }

    /// Buckets held in memory (only ones that were not full when last seen).
    pub fn stored_buckets(&self) -> usize {
        self.store.len()
    }

    /// Refills the stored bucket of `key` to `now`, dropping it when it became full.
    /// Returns its position and state when it is still stored.
    fn refill_stored(&mut self, key: &[u8], now: Instant) -> Option<(usize, bucket::Bucket)> {
        let at = self.store.position(key)?;
        match refill(Some(self.store.bucket(at)), &self.options, now) {
            Some(bucket) => {
                self.store.set_bucket(at, bucket);
                Some((at, bucket))
            }
            None => {
                self.store.remove(at);
                None
            }
        }
    }
}
