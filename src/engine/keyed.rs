//! Lists of records by key, for the keys that have some: a dense list of keys indexed by a
//! hash table of positions (the bucket store's table type, so the binary carries its code
//! once). Leases and permits both live in one.

use core::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

#[derive(Clone)]
pub struct Keyed<T> {
    keys: Vec<(Box<[u8]>, Vec<T>)>,
    index: HashTable<u32>,
    hasher: FixedState,
}

impl<T: Copy> Keyed<T> {
    pub fn new(hasher: FixedState) -> Keyed<T> {
        Keyed {
            keys: Vec::new(),
            index: HashTable::new(),
            hasher,
        }
    }

    /// How many keys have records.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn position(&self, key: &[u8]) -> Option<usize> {
        let keys = &self.keys;
        self.index
            .find(self.hasher.hash_one(key), |&i| {
                keys.get(i as usize).is_some_and(|(k, _)| &**k == key)
            })
            .map(|&i| i as usize)
    }

    /// The records of `key` (empty when it has none).
    pub fn of(&self, key: &[u8]) -> &[T] {
        self.position(key).map_or(&[], |at| &self.keys[at].1)
    }

    /// The records of the key at `at` (empty past the last key).
    pub fn at(&self, at: usize) -> &[T] {
        self.keys.get(at).map_or(&[], |(_, records)| records)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[T])> {
        self.keys.iter().map(|(k, v)| (&**k, v.as_slice()))
    }

    /// Keeps the records of the key at `at` for which `keep` holds, changed by it in place;
    /// a key left with none is removed (the last key moves to `at`). Returns whether it was.
    pub fn retain_at(&mut self, at: usize, keep: impl FnMut(&mut T) -> bool) -> bool {
        let Some((_, records)) = self.keys.get_mut(at) else {
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
        let records = &mut self.keys[at].1;
        let record = records.swap_remove(records.iter().position(which)?);
        if records.is_empty() {
            self.remove(at);
        }
        Some(record)
    }

    /// The first record of `key` that `which` picks, to change in place.
    pub fn find_mut(&mut self, key: &[u8], which: impl Fn(&T) -> bool) -> Option<&mut T> {
        let at = self.position(key)?;
        self.keys[at].1.iter_mut().find(|r| which(r))
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
        if let Some(at) = self.position(key) {
            self.keys[at].1.extend_from_slice(records);
            return;
        }
        let (keys, hasher) = (&self.keys, &self.hasher);
        let hash = hasher.hash_one(key);
        self.index
            .insert_unique(hash, keys.len() as u32, |&i| rehash(keys, hasher, i));
        self.keys.push((key.into(), records.to_vec()));
    }

    /// Removes the key at `at`; the last key moves into its place.
    fn remove(&mut self, at: usize) {
        let hash = self.hasher.hash_one(&*self.keys[at].0);
        if let Ok(entry) = self.index.find_entry(hash, |&i| i as usize == at) {
            entry.remove();
        }
        let last = self.keys.len() - 1;
        if at != last {
            let moved = self.hasher.hash_one(&*self.keys[last].0);
            if let Some(slot) = self.index.find_mut(moved, |&i| i as usize == last) {
                *slot = at as u32;
            }
        }
        self.keys.swap_remove(at);
    }
}

fn rehash<T>(keys: &[(Box<[u8]>, Vec<T>)], hasher: &FixedState, i: u32) -> u64 {
    keys.get(i as usize)
        .map_or(0, |(key, _)| hasher.hash_one(&**key))
}
