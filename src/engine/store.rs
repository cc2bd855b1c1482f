//! Keyed storage of the buckets that are not full, with an incremental sweep.
//!
//! Buckets live in a dense array and a hash index maps each key to its position, so a sweep
//! cursor can walk the buckets in order. Every insertion also inspects the next
//! [`SWEEP_STEPS`] buckets and drops those that have refilled to full: a full bucket equals an
//! absent one, so dropping it loses nothing, and no call ever does more than constant extra
//! work. With three inspections per insertion, stale buckets go at least as fast as new ones
//! arrive once they are a third of the store, so it holds about 1.5 times the buckets that
//! are not yet full (the property tests check at most 2 times).
//!
//! No call may stall on growth either: the array grows in fixed chunks (nothing is copied
//! past the first chunk), and from [`SPLIT_AT`] buckets on the index is split into [`SHARDS`]
//! tables by hash, so a table that grows rehashes a thousandth of the keys, not all of them.
//!
//! A small limiter stays small: a Durable Object per client typically holds one or two keys,
//! and many such objects share one isolate's wasm memory. So the first chunk grows by
//! doubling, and the index is a single table until the store reaches [`SPLIT_AT`] buckets.

use core::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use super::bucket::{refill, Bucket};
use super::options::Options;
use super::time::Instant;

/// Buckets inspected by the sweep per insertion.
pub const SWEEP_STEPS: usize = 3;

/// Index tables; a key's table is picked by hash bits that hashbrown itself does not use
/// for the position or the tag within a table.
const SHARDS: usize = 1024;

/// Buckets at which the single index table is split into [`SHARDS`] tables (one rehash of
/// this many keys, well under a millisecond).
const SPLIT_AT: usize = CHUNK;

/// Slots per chunk of the array (about 192 KiB).
const CHUNK: usize = 4096;

/// Keys up to this many bytes are stored in the slot itself (IPs, `user:123:login`…).
const INLINE: usize = 22;

#[derive(Clone)]
enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(key: &[u8]) -> Key {
        if key.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..key.len()].copy_from_slice(key);
            Key::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            Key::Heap(key.into())
        }
    }

    #[inline(always)]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..*len as usize],
            Key::Heap(bytes) => bytes,
        }
    }
}

/// 48 bytes, key included when it is short.
#[derive(Clone)]
struct Slot {
    key: Key,
    bucket: Bucket,
    /// The key's own options (a `limit()` policy) in [`Policies`]; `NO_POLICY` follows the
    /// instance options.
    policy: u32,
    /// The key has leases out: the sweep must keep its bucket, which only looks full.
    leased: bool,
}

const NO_POLICY: u32 = 0;

/// The slots, in chunks that are allocated once and never moved.
#[derive(Clone, Default)]
struct Slots {
    chunks: Vec<Vec<Slot>>,
    len: usize,
}

impl Slots {
    #[inline(always)]
    fn get(&self, position: usize) -> Option<&Slot> {
        if position >= self.len {
            return None;
        }
        self.chunks.get(position / CHUNK)?.get(position % CHUNK)
    }

    #[inline(always)]
    fn get_mut(&mut self, position: usize) -> Option<&mut Slot> {
        if position >= self.len {
            return None;
        }
        self.chunks
            .get_mut(position / CHUNK)?
            .get_mut(position % CHUNK)
    }

    fn push(&mut self, slot: Slot) {
        let chunk = self.len / CHUNK;
        if chunk == self.chunks.len() {
            // The first chunk doubles from a few slots up to CHUNK (a power of two, so it
            // ends exactly full); later ones are allocated whole and never move.
            let capacity = if chunk == 0 { 0 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(capacity));
        }
        self.chunks[chunk].push(slot);
        self.len += 1;
    }

    /// Removes the slot at `position`, moving the last slot into its place.
    fn swap_remove(&mut self, position: usize) -> Option<Slot> {
        if position >= self.len {
            return None;
        }
        let last_chunk = (self.len - 1) / CHUNK;
        let last = self.chunks[last_chunk].pop()?;
        self.len -= 1;
        // Keep one empty chunk at the end, so a store that hovers at a chunk boundary does
        // not allocate and free a chunk on every call.
        if self.chunks.len() > last_chunk + 2 {
            self.chunks.pop();
        }
        if position == self.len {
            return Some(last);
        }
        let hole = &mut self.chunks[position / CHUNK][position % CHUNK];
        Some(core::mem::replace(hole, last))
    }

    fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.chunks.iter().flatten()
    }
}

#[derive(Clone)]
pub struct Store {
    slots: Slots,
    /// Positions in `slots`, hashed by their key: one table, or [`SHARDS`] tables from
    /// [`SPLIT_AT`] buckets on.
    index: Vec<HashTable<u32>>,
    /// Seeded per instance: keys are chosen by callers, so the hash must not be predictable.
    hasher: FixedState,
    cursor: usize,
    policies: Policies,
}

/// The table of `hash` among `tables` (1 or [`SHARDS`]): bits that hashbrown itself does not
/// use for the position or the tag within a table.
#[inline(always)]
fn shard(hash: u64, tables: usize) -> usize {
    (hash >> 32) as usize % tables
}

impl Store {
    pub fn new(seed: u64) -> Store {
        Store {
            slots: Slots::default(),
            index: vec![HashTable::new()],
            hasher: FixedState::with_seed(seed),
            cursor: 0,
            policies: Policies::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len
    }

    #[inline(always)]
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    #[inline(always)]
    pub fn position(&self, key: &[u8]) -> Option<usize> {
        let hash = self.hash(key);
        let slots = &self.slots;
        self.index[shard(hash, self.index.len())]
            .find(hash, |&i| {
                slots
                    .get(i as usize)
                    .is_some_and(|s| s.key.as_bytes() == key)
            })
            .map(|&i| i as usize)
    }

    /// [`position`](Self::position) off the hot path: one copy of the lookup shared by
    /// every such caller instead of one inlined into each.
    #[inline(never)]
    pub fn cold_position(&self, key: &[u8]) -> Option<usize> {
        self.position(key)
    }

    /// Every stored key with its bucket and its own policy, if it has one.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], Bucket, Option<Options>)> {
        self.slots
            .iter()
            .map(|s| (s.key.as_bytes(), s.bucket, self.policies.get(s.policy)))
    }

    /// The key at `position`, its bucket, its own policy if it has one, and whether it has
    /// leases out.
    pub fn slot(&self, position: usize) -> Option<(&[u8], Bucket, Option<Options>, bool)> {
        let slot = self.slots.get(position)?;
        let policy = self.policies.get(slot.policy);
        Some((slot.key.as_bytes(), slot.bucket, policy, slot.leased))
    }

    /// The bucket at `position` and the key's own policy, if it has one.
    #[inline(always)]
    pub fn get(&self, position: usize) -> Option<(Bucket, Option<Options>)> {
        let slot = self.slots.get(position)?;
        Some((slot.bucket, self.policies.get(slot.policy)))
    }

    pub fn set(&mut self, position: usize, bucket: Bucket, policy: Option<Options>, leased: bool) {
        let Some(old) = self.slots.get(position).map(|s| s.policy) else {
            return;
        };
        let new = if self.policies.get(old) == policy {
            old
        } else {
            self.policies.release(old, &self.hasher);
            self.policies.intern(policy, &self.hasher)
        };
        if let Some(slot) = self.slots.get_mut(position) {
            slot.bucket = bucket;
            slot.policy = new;
            slot.leased = leased;
        }
    }

    /// Stores a bucket for a key that has none, then sweeps a little. `options` are the
    /// instance options, for the buckets that have no policy of their own; `leased`: the
    /// key has leases out (the sweep must keep its bucket, which only looks full).
    pub fn insert(
        &mut self,
        key: &[u8],
        bucket: Bucket,
        policy: Option<Options>,
        leased: bool,
        options: &Options,
        now: Instant,
    ) {
        let position = self.slots.len as u32;
        let hash = self.hash(key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        let table = shard(hash, self.index.len());
        let rehash: Rehash = &|i| rehash(slots, hasher, i);
        self.index[table].insert_unique(hash, position, rehash);
        let policy = self.policies.intern(policy, &self.hasher);
        self.slots.push(Slot {
            key: Key::new(key),
            bucket,
            policy,
            leased,
        });
        if self.index.len() == 1 && self.slots.len >= SPLIT_AT {
            self.rebuild_index();
        }
        self.sweep(options, now);
    }

    /// Forgets the bucket at `position`; the last bucket moves into its place.
    pub fn remove(&mut self, position: usize) {
        let Some(removed) = self
            .slots
            .get(position)
            .map(|s| self.hash(s.key.as_bytes()))
        else {
            return;
        };
        let table = shard(removed, self.index.len());
        unindex(&mut self.index[table], removed, position as u32);
        let last = self.slots.len - 1;
        if position != last {
            if let Some(moved) = self.slots.get(last).map(|s| self.hash(s.key.as_bytes())) {
                let table = shard(moved, self.index.len());
                reindex(&mut self.index[table], moved, last as u32, position as u32);
            }
        }
        if let Some(slot) = self.slots.swap_remove(position) {
            self.policies.release(slot.policy, &self.hasher);
        }
    }

    /// Replaces every bucket without a policy of its own by `change(key, bucket, leased)`,
    /// dropping those that come back `None` (full); O(stored buckets), and it rebuilds the
    /// index.
    pub fn change_buckets_without_policy(
        &mut self,
        mut change: impl FnMut(&[u8], Bucket, bool) -> Option<Bucket>,
    ) {
        let mut kept = Slots::default();
        for slot in core::mem::take(&mut self.slots)
            .chunks
            .into_iter()
            .flatten()
        {
            let bucket = if slot.policy == NO_POLICY {
                match change(slot.key.as_bytes(), slot.bucket, slot.leased) {
                    Some(bucket) => bucket,
                    None => continue,
                }
            } else {
                slot.bucket
            };
            kept.push(Slot { bucket, ..slot });
        }
        self.slots = kept;
        self.rebuild_index();
        self.cursor = 0;
    }

    /// Indexes every slot again, in one table below [`SPLIT_AT`] buckets, else in [`SHARDS`].
    fn rebuild_index(&mut self) {
        let tables = if self.slots.len < SPLIT_AT { 1 } else { SHARDS };
        self.index = (0..tables).map(|_| HashTable::new()).collect();
        let (slots, hasher) = (&self.slots, &self.hasher);
        for (position, slot) in slots.iter().enumerate() {
            let hash = hasher.hash_one(slot.key.as_bytes());
            let rehash: Rehash = &|i| rehash(slots, hasher, i);
            self.index[shard(hash, tables)].insert_unique(hash, position as u32, rehash);
        }
    }

    fn sweep(&mut self, options: &Options, now: Instant) {
        for _ in 0..SWEEP_STEPS {
            if self.cursor >= self.slots.len {
                self.cursor = 0;
            }
            let Some(slot) = self.slots.get(self.cursor) else {
                return;
            };
            let own = self.policies.get(slot.policy);
            let options = own.as_ref().unwrap_or(options);
            if !slot.leased && refill(Some(slot.bucket), options, now).is_none() {
                // The last bucket moves here; the cursor stays to inspect it next.
                self.remove(self.cursor);
            } else {
                self.cursor += 1;
            }
        }
    }
}

/// How every index table (here and in [`Keyed`](super::keyed::Keyed)) finds the hash of an
/// entry when it grows: one type, so the binary carries hashbrown's growth code once.
pub type Rehash<'a> = &'a dyn Fn(&u32) -> u64;

/// Removes `value`, stored under `hash`, from an index table. Shared by every table (not
/// inlined), like [`reindex`].
#[inline(never)]
pub fn unindex(table: &mut HashTable<u32>, hash: u64, value: u32) {
    if let Ok(entry) = table.find_entry(hash, |&v| v == value) {
        entry.remove();
    }
}

/// Changes `from`, stored under `hash`, into `to` in an index table.
#[inline(never)]
pub fn reindex(table: &mut HashTable<u32>, hash: u64, from: u32, to: u32) {
    if let Some(v) = table.find_mut(hash, |&v| v == from) {
        *v = to;
    }
}

/// The hash of the key at `position`, for an index table that grows.
fn rehash(slots: &Slots, hasher: &FixedState, position: &u32) -> u64 {
    slots
        .get(*position as usize)
        .map_or(0, |s| hasher.hash_one(s.key.as_bytes()))
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
    #[inline(always)]
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
        let rehash: Rehash = &|&id| policy_hash(&entries[id as usize - 1].0, hasher);
        self.lookup.insert_unique(hash, id, rehash);
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
        unindex(&mut self.lookup, hash, id);
        self.free.push(id);
    }
}

fn policy_hash(options: &Options, hasher: &FixedState) -> u64 {
    hasher.hash_one((
        options.max_tokens(),
        options.refill_every_seconds().to_bits(),
    ))
}
