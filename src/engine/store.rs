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

/// 32 bytes on wasm32: the key's heap bytes and the index entry come on top.
#[derive(Clone)]
struct Slot {
    key: Box<[u8]>,
    bucket: Bucket,
    /// The key's own options (a `limit()` policy) in [`Policies`]; `NO_POLICY` follows the
    /// instance options.
    policy: u32,
}

const NO_POLICY: u32 = 0;

#[derive(Clone)]
pub struct Store {
    slots: Vec<Slot>,
    /// Positions in `slots`, hashed by their key.
    index: HashTable<u32>,
    /// Seeded per instance: keys are chosen by callers, so the hash must not be predictable.
    hasher: FixedState,
    cursor: usize,
    policies: Policies,
}

impl Store {
    pub fn new(seed: u64) -> Store {
        Store {
            slots: Vec::new(),
            index: HashTable::new(),
            hasher: FixedState::with_seed(seed),
            cursor: 0,
            policies: Policies::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn position(&self, key: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(self.hasher.hash_one(key), |&i| {
                &*slots[i as usize].key == key
            })
            .map(|&i| i as usize)
    }

    /// The bucket at `position` and the key's own policy, if it has one.
    pub fn get(&self, position: usize) -> (Bucket, Option<Options>) {
        let slot = &self.slots[position];
        (slot.bucket, self.policies.get(slot.policy))
    }

    pub fn set_bucket(&mut self, position: usize, bucket: Bucket) {
        self.slots[position].bucket = bucket;
    }

    pub fn set(&mut self, position: usize, bucket: Bucket, policy: Option<Options>) {
        let old = self.slots[position].policy;
        let new = if self.policies.get(old) == policy {
            old
        } else {
            self.policies.release(old, &self.hasher);
            self.policies.intern(policy, &self.hasher)
        };
        let slot = &mut self.slots[position];
        slot.bucket = bucket;
        slot.policy = new;
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
        let position = self.slots.len() as u32;
        let hash = self.hasher.hash_one(key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index.insert_unique(hash, position, |&i| {
            hasher.hash_one(&*slots[i as usize].key)
        });
        let policy = self.policies.intern(policy, &self.hasher);
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
        if let Ok(entry) = self.index.find_entry(hash, |&i| i as usize == position) {
            entry.remove();
        }
        let last = self.slots.len() - 1;
        if position != last {
            let moved = self.hasher.hash_one(&*self.slots[last].key);
            if let Some(i) = self.index.find_mut(moved, |&i| i as usize == last) {
                *i = position as u32;
            }
        }
        let slot = self.slots.swap_remove(position);
        self.policies.release(slot.policy, &self.hasher);
    }

    /// Replaces every bucket without a policy of its own by `change(bucket)`, dropping those
    /// that come back `None` (full); O(stored buckets).
    pub fn change_defaults(&mut self, mut change: impl FnMut(Bucket) -> Option<Bucket>) {
        let before = self.slots.len();
        self.slots.retain_mut(|slot| {
            if slot.policy != NO_POLICY {
                return true;
            }
            change(slot.bucket).map(|b| slot.bucket = b).is_some()
        });
        if self.slots.len() == before {
            return;
        }
        self.index.clear();
        let (slots, hasher) = (&self.slots, &self.hasher);
        for position in 0..slots.len() {
            let hash = hasher.hash_one(&*slots[position].key);
            self.index.insert_unique(hash, position as u32, |&i| {
                hasher.hash_one(&*slots[i as usize].key)
            });
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
            let own = self.policies.get(slot.policy);
            if refill(Some(slot.bucket), own.as_ref().unwrap_or(options), now).is_none() {
                // The last bucket moves here; the cursor stays to inspect it next.
                self.remove(self.cursor);
            } else {
                self.cursor += 1;
            }
        }
    }
}

/// The policies keys use, each stored once however many keys share it, and freed with the
/// last key that uses it. Ids start at 1 (0 is "no policy").
#[derive(Clone, Default)]
struct Policies {
    /// Index `id - 1`: the options and how many keys use them (0: a free entry).
    entries: Vec<(Options, u32)>,
    free: Vec<u32>,
    /// Ids, hashed by their options.
    lookup: HashTable<u32>,
}

impl Policies {
    fn get(&self, id: u32) -> Option<Options> {
        let index = id.checked_sub(1)?;
        self.entries
            .get(index as usize)
            .map(|&(options, _)| options)
    }

    /// The id of `policy`, counting one more key that uses it.
    fn intern(&mut self, policy: Option<Options>, hasher: &FixedState) -> u32 {
        let Some(options) = policy else {
            return NO_POLICY;
        };
        let hash = policy_hash(&options, hasher);
        let entries = &self.entries;
        let found = self
            .lookup
            .find(hash, |&id| entries[id as usize - 1].0 == options);
        if let Some(&id) = found {
            self.entries[id as usize - 1].1 += 1;
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize - 1] = (options, 1);
                id
            }
            None => {
                self.entries.push((options, 1));
                self.entries.len() as u32
            }
        };
        let entries = &self.entries;
        self.lookup.insert_unique(hash, id, |&id| {
            policy_hash(&entries[id as usize - 1].0, hasher)
        });
        id
    }

    /// One key fewer uses `id`; the last one frees it.
    fn release(&mut self, id: u32, hasher: &FixedState) {
        let Some(entry) = id
            .checked_sub(1)
            .and_then(|i| self.entries.get_mut(i as usize))
        else {
            return;
        };
        entry.1 = entry.1.saturating_sub(1);
        if entry.1 > 0 {
            return;
        }
        let hash = policy_hash(&entry.0, hasher);
        if let Ok(found) = self.lookup.find_entry(hash, |&other| other == id) {
            found.remove();
        }
        self.free.push(id);
    }
}

fn policy_hash(options: &Options, hasher: &FixedState) -> u64 {
    hasher.hash_one((
        options.max_tokens(),
        options.refill_every_seconds().to_bits(),
    ))
}
