//! Leases: tokens that a holder (a Worker isolate) takes from a bucket in one call and
//! spends locally on later requests. Until the holder settles a lease, or it expires, its
//! tokens count as still in the bucket for refill purposes ([`refill_leased`]), so a holder
//! and the bucket together never bank progress. An expired lease counts as fully used.
//!
//! [`refill_leased`]: super::bucket::refill_leased

use core::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use super::time::Instant;

/// How long a lease is valid, from the call that granted it.
pub const LEASE_TTL_NANOS: u64 = 10_000_000_000;

/// Leases a key may have at once; a call beyond it is served without a new lease, so memory
/// stays bounded whatever callers do.
pub const MAX_LEASES_PER_KEY: usize = 64;

/// One lease, in billionths of a token whatever the bucket's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    pub billionths: u64,
    pub expires_at: Instant,
}

/// The leases of every key that has some: a dense list indexed by a hash table of positions
/// (the same table type as the bucket store's, so the binary carries its code once).
#[derive(Clone)]
pub struct Leases {
    keys: Vec<(Box<[u8]>, Vec<Lease>)>,
    index: HashTable<u32>,
    hasher: FixedState,
    next_id: u64,
}

/// Lease ids stay below 2^53, so JavaScript numbers hold them exactly.
const ID_MASK: u64 = (1 << 53) - 1;

impl Leases {
    pub fn new(seed: u64) -> Leases {
        let hasher = FixedState::with_seed(seed.rotate_left(17));
        Leases {
            keys: Vec::new(),
            index: HashTable::new(),
            // Ids start at a random point, so an id from before an eviction is not reused.
            next_id: hasher.hash_one(seed) & ID_MASK,
            hasher,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys have leases.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        let keys = &self.keys;
        self.index
            .find(self.hasher.hash_one(key), |&i| {
                keys.get(i as usize).is_some_and(|(k, _)| &**k == key)
            })
            .map(|&i| i as usize)
    }

    /// The leases of `key` (empty when it has none).
    pub fn of(&self, key: &[u8]) -> &[Lease] {
        self.position(key).map_or(&[], |at| &self.keys[at].1)
    }

    /// The keys with a lease that has expired by `now`.
    pub fn keys_with_expired(&self, now: Instant) -> Vec<Box<[u8]>> {
        self.keys
            .iter()
            .filter(|(_, leases)| leases.iter().any(|l| l.expires_at <= now))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Drops the leases of `key` that have expired by `now`.
    pub fn drop_expired(&mut self, key: &[u8], now: Instant) {
        if let Some(at) = self.position(key) {
            self.keys[at].1.retain(|l| l.expires_at > now);
            if self.keys[at].1.is_empty() {
                self.remove(at);
            }
        }
    }

    /// Removes and returns the lease `id` of `key`, if it is there.
    pub fn take(&mut self, key: &[u8], id: u64) -> Option<Lease> {
        let at = self.position(key)?;
        let leases = &mut self.keys[at].1;
        let lease = leases.swap_remove(leases.iter().position(|l| l.id == id)?);
        if leases.is_empty() {
            self.remove(at);
        }
        Some(lease)
    }

    /// Whether `key` may take one more lease.
    pub fn has_room(&self, key: &[u8]) -> bool {
        self.of(key).len() < MAX_LEASES_PER_KEY
    }

    /// Records a new lease of `billionths` on `key` and returns it.
    pub fn grant(&mut self, key: &[u8], billionths: u64, now: Instant) -> Lease {
        let lease = Lease {
            id: self.next_id,
            billionths,
            expires_at: now.saturating_add(LEASE_TTL_NANOS),
        };
        self.next_id = (self.next_id + 1) & ID_MASK;
        self.add(key, &[lease]);
        lease
    }

    /// Puts back leases a snapshot recorded (the durable class, after an eviction).
    pub fn restore(&mut self, key: &[u8], leases: &[Lease]) {
        self.forget(key);
        self.add(key, leases);
    }

    /// Forgets every lease of `key` (its bucket was reset).
    pub fn forget(&mut self, key: &[u8]) {
        if let Some(at) = self.position(key) {
            self.remove(at);
        }
    }

    fn add(&mut self, key: &[u8], leases: &[Lease]) {
        if leases.is_empty() {
            return;
        }
        if let Some(at) = self.position(key) {
            self.keys[at].1.extend_from_slice(leases);
            return;
        }
        let (keys, hasher) = (&self.keys, &self.hasher);
        let hash = hasher.hash_one(key);
        self.index
            .insert_unique(hash, keys.len() as u32, |&i| rehash(keys, hasher, i));
        self.keys.push((key.into(), leases.to_vec()));
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

fn rehash(keys: &[(Box<[u8]>, Vec<Lease>)], hasher: &FixedState, i: u32) -> u64 {
    keys.get(i as usize)
        .map_or(0, |(key, _)| hasher.hash_one(&**key))
}
