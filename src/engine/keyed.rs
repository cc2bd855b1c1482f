//! Lists of records by key, for the keys that have some: a dense list of keys indexed by a
//! hash table of positions (the bucket store's table type and growth callback, so the
//! binary carries its code once). Leases, permits and blocks each live in one.

use core::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use super::store::{reindex, unindex, Rehash};

#[derive(Clone)]
pub struct Keyed<T> {
    keys: Keys,
    /// The records of each key, at the key's position.
    records: Vec<Vec<T>>,
}

/// The keys of a [`Keyed`] without their records: not generic, so the binary carries this
/// code once for every record type.
#[derive(Clone)]
struct Keys {
    keys: Vec<Box<[u8]>>,
    index: HashTable<u32>,
    hasher: FixedState,
}

impl Keys {
    fn position(&self, key: &[u8]) -> Option<usize> {
        let keys = &self.keys;
        self.index
            .find(self.hasher.hash_one(key), |&i| {
                keys.get(i as usize).is_some_and(|k| &**k == key)
            })
            .map(|&i| i as usize)
    }

    /// Adds `key`, which has no position yet, at the end.
    fn push(&mut self, key: &[u8]) {
        let (keys, hasher) = (&self.keys, &self.hasher);
        let hash = hasher.hash_one(key);
        let rehash: Rehash = &|&i| rehash(keys, hasher, i);
        self.index.insert_unique(hash, keys.len() as u32, rehash);
        self.keys.push(key.into());
    }

    /// Removes the key at `at`, if there is one; the last key moves into its place.
    fn swap_remove(&mut self, at: usize) {
        let Some(removed) = self.keys.get(at).map(|k| self.hasher.hash_one(&**k)) else {
            return;
        };
        unindex(&mut self.index, removed, at as u32);
        let last = self.keys.len() - 1;
        if at != last {
            if let Some(moved) = self.keys.get(last).map(|k| self.hasher.hash_one(&**k)) {
                reindex(&mut self.index, moved, last as u32, at as u32);
            }
        }
        self.keys.swap_remove(at);
    }
}

impl<T: Copy> Keyed<T> {
    pub fn new(hasher: FixedState) -> Keyed<T> {
        Keyed {
            keys: Keys {
                keys: Vec::new(),
                index: HashTable::new(),
                hasher,
            },
            records: Vec::new(),
        }
    }

    /// How many keys have records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn position(&self, key: &[u8]) -> Option<usize> {
        self.keys.position(key)
    }

    /// The records of `key` (empty when it has none).
    pub fn of(&self, key: &[u8]) -> &[T] {
        self.position(key).map_or(&[], |at| self.at(at))
    }

    /// The records of the key at `at` (empty past the last key).
    pub fn at(&self, at: usize) -> &[T] {
        self.records.get(at).map_or(&[], |records| records)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[T])> {
        self.keys
            .keys
            .iter()
            .zip(&self.records)
            .map(|(k, v)| (&**k, v.as_slice()))
    }

    /// Keeps the records of the key at `at` for which `keep` holds, changed by it in place;
    /// a key left with none is removed (the last key moves to `at`). Returns whether it was.
    pub fn retain_at(&mut self, at: usize, keep: impl FnMut(&mut T) -> bool) -> bool {
        let Some(records) = self.records.get_mut(at) else {
            return false;
        };
        records.retain_mut(keep);
        if records.is_empty() {
            self.remove(at);
            return true;
        }
        false
    }

    /// `retain_at` for `key`, if it has records.
    pub fn retain(&mut self, key: &[u8], keep: impl FnMut(&mut T) -> bool) {
        if let Some(at) = self.position(key) {
            self.retain_at(at, keep);
        }
    }

    /// Removes and returns the first record of `key` that `which` picks.
    pub fn take(&mut self, key: &[u8], which: impl Fn(&T) -> bool) -> Option<T> {
        let at = self.position(key)?;
        let records = self.records.get_mut(at)?;
        let record = records.swap_remove(records.iter().position(which)?);
        if records.is_empty() {
            self.remove(at);
        }
        Some(record)
    }

    /// The first record of `key` that `which` picks, to change in place.
    pub fn find_mut(&mut self, key: &[u8], which: impl Fn(&T) -> bool) -> Option<&mut T> {
        let at = self.position(key)?;
        self.records.get_mut(at)?.iter_mut().find(|r| which(r))
    }

    /// Forgets every record of `key`.
    pub fn forget(&mut self, key: &[u8]) {
        if let Some(at) = self.position(key) {
            self.remove(at);
        }
    }

    pub fn add(&mut self, key: &[u8], records: &[T]) {
        if records.is_empty() {
            return;
        }
        if let Some(own) = self.position(key).and_then(|at| self.records.get_mut(at)) {
            own.extend_from_slice(records);
            return;
        }
        self.keys.push(key);
        self.records.push(records.to_vec());
    }

    /// Removes the key at `at`; the last key moves into its place. (Inlined, it would grow
    /// every caller more than the call costs.)
    #[inline(never)]
    fn remove(&mut self, at: usize) {
        if at < self.records.len() {
            self.records.swap_remove(at);
            self.keys.swap_remove(at);
        }
    }
}

fn rehash(keys: &[Box<[u8]>], hasher: &FixedState, i: u32) -> u64 {
    keys.get(i as usize)
        .map_or(0, |key| hasher.hash_one(&**key))
}
