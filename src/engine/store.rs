//! Keyed storage of the buckets that are not full, with an incremental sweep.
//!
//! Buckets live in a dense `Vec` and a hash table maps each key to its position, so a sweep
//! cursor can walk the buckets in order. Every insertion also inspects the next
//! [`SWEEP_STEPS`] buckets and drops those that have refilled to full: a full bucket equals an
//! absent one, so dropping it loses nothing, and no call ever does more than constant extra
//! work. With three inspections per insertion, stale buckets go at least as fast as new ones
//! arrive once they are a third of the store, so it holds about 1.5 times the buckets that
//! are not yet full (the property tests check at most 2 times).

use core::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use super::bucket::{refill, Bucket};
use super::options::Options;
use super::time::Instant;

/// Buckets inspected by the sweep per insertion.
pub const SWEEP_STEPS: usize = 3;

#[derive(Clone)]
struct Slot {
    key: Box<[u8]>,
    bucket: Bucket,
    /// The key's own options (a `limit()` policy); `None` follows the instance options.
    policy: Option<Options>,
}

#[derive(Clone)]
pub struct Store {
    slots: Vec<Slot>,
    /// Positions in `slots`, hashed by their key.
    index: HashTable<usize>,
    /// Seeded per instance: keys are chosen by callers, so the hash must not be predictable.
    hasher: FixedState,
    cursor: usize,
}

impl Store {
    pub fn new(seed: u64) -> Store {
        Store {
            slots: Vec::new(),
            index: HashTable::new(),
            hasher: FixedState::with_seed(seed),
            cursor: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn position(&self, key: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(self.hasher.hash_one(key), |&i| &*slots[i].key == key)
            .copied()
    }

    pub fn get(&self, position: usize) -> (Bucket, Option<Options>) {
        let slot = &self.slots[position];
        (slot.bucket, slot.policy)
    }

    pub fn set(&mut self, position: usize, bucket: Bucket, policy: Option<Options>) {
        let slot = &mut self.slots[position];
        slot.bucket = bucket;
        slot.policy = policy;
    }

    /// Stores a bucket for a key that has none, then sweeps a little. `options` are the
    /// instance options, for the buckets that have no policy of their own.
    pub fn insert(
        &mut self,
        key: &[u8],
        bucket: Bucket,
        policy: Option<Options>,
        options: &Options,
        now: Instant,
    ) {
        let position = self.slots.len();
        let hash = self.hasher.hash_one(key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index
            .insert_unique(hash, position, |&i| hasher.hash_one(&*slots[i].key));
        self.slots.push(Slot {
            key: key.into(),
            bucket,
            policy,
        });
        self.sweep(options, now);
    }

    /// Forgets the bucket at `position`; the last bucket moves into its place.
    pub fn remove(&mut self, position: usize) {
        let hash = self.hasher.hash_one(&*self.slots[position].key);
        if let Ok(entry) = self.index.find_entry(hash, |&i| i == position) {
            entry.remove();
        }
        let last = self.slots.len() - 1;
        if position != last {
            let moved = self.hasher.hash_one(&*self.slots[last].key);
            if let Some(i) = self.index.find_mut(moved, |&i| i == last) {
                *i = position;
            }
        }
        self.slots.swap_remove(position);
    }

    /// Drops every bucket without a policy of its own that is full at `now` under `options`;
    /// O(stored buckets).
    pub fn drop_full(&mut self, options: &Options, now: Instant) {
        let before = self.slots.len();
        self.slots.retain(|slot| {
            slot.policy.is_some() || refill(Some(slot.bucket), options, now).is_some()
        });
        if self.slots.len() == before {
            return;
        }
        self.index.clear();
        let (slots, hasher) = (&self.slots, &self.hasher);
        for position in 0..slots.len() {
            let hash = hasher.hash_one(&*slots[position].key);
            self.index
                .insert_unique(hash, position, |&i| hasher.hash_one(&*slots[i].key));
        }
        self.cursor = 0;
    }

    fn sweep(&mut self, options: &Options, now: Instant) {
        for _ in 0..SWEEP_STEPS {
            if self.cursor >= self.slots.len() {
                self.cursor = 0;
            }
            let Some(slot) = self.slots.get(self.cursor) else {
                return;
            };
            let own = slot.policy.as_ref().unwrap_or(options);
            if refill(Some(slot.bucket), own, now).is_none() {
                // The last bucket moves here; the cursor stays to inspect it next.
                self.remove(self.cursor);
            } else {
                self.cursor += 1;
            }
        }
    }
}
