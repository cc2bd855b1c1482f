//! Leases: tokens that a holder (a Worker isolate) takes from a bucket in one call and
//! spends locally on later requests. Until the holder settles a lease, or it expires, its
//! tokens count as still in the bucket for refill purposes ([`refill_leased`]), so a holder
//! and the bucket together never bank progress. An expired lease counts as fully used.
//!
//! [`refill_leased`]: super::bucket::refill_leased

use core::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use super::time::Instant;

/// How long a lease is valid, from the call that granted it.
pub const LEASE_TTL_NANOS: u64 = 10_000_000_000;

/// Leases a key may have at once; a call beyond it is served without a new lease, so memory
/// stays bounded whatever callers do.
pub const MAX_LEASES_PER_KEY: usize = 64;

/// One lease. `tokens` counts billionths of a token, whatever the bucket's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    pub billionths: u64,
    pub expires_at: Instant,
}

/// The leases of every key that has some.
#[derive(Clone)]
pub struct Leases {
    by_key: HashMap<Box<[u8]>, Vec<Lease>, FixedState>,
    next_id: u64,
}

/// Lease ids stay below 2^53, so JavaScript numbers hold them exactly.
const ID_MASK: u64 = (1 << 53) - 1;

impl Leases {
    pub fn new(seed: u64) -> Leases {
        Leases {
            by_key: HashMap::with_hasher(FixedState::with_seed(seed.rotate_left(17))),
            // Ids start at a random point, so an id from before an eviction is not reused.
            next_id: FixedState::with_seed(seed).hash_one(0u8) & ID_MASK,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// How many keys have leases.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The keys with a lease that has expired by `now`.
    pub fn keys_with_expired(&self, now: Instant) -> Vec<Box<[u8]>> {
        self.by_key
            .iter()
            .filter(|(_, leases)| leases.iter().any(|l| l.expires_at <= now))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// The leases of `key` (empty when it has none).
    pub fn of(&self, key: &[u8]) -> &[Lease] {
        self.by_key.get(key).map_or(&[], Vec::as_slice)
    }

    /// Removes the leases of `key` that have expired by `now` and returns them.
    pub fn take_expired(&mut self, key: &[u8], now: Instant) -> Vec<Lease> {
        let Some(leases) = self.by_key.get_mut(key) else {
            return Vec::new();
        };
        let (expired, live): (Vec<Lease>, Vec<Lease>) =
            leases.iter().partition(|l| l.expires_at <= now);
        *leases = live;
        if leases.is_empty() {
            self.by_key.remove(key);
        }
        expired
    }

    /// Removes and returns the lease `id` of `key`, if it is there.
    pub fn take(&mut self, key: &[u8], id: u64) -> Option<Lease> {
        let leases = self.by_key.get_mut(key)?;
        let at = leases.iter().position(|l| l.id == id)?;
        let lease = leases.swap_remove(at);
        if leases.is_empty() {
            self.by_key.remove(key);
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
        self.by_key.entry(key.into()).or_default().push(lease);
        lease
    }

    /// Puts back leases a snapshot recorded (the durable class, after an eviction).
    pub fn restore(&mut self, key: &[u8], leases: &[Lease]) {
        if !leases.is_empty() {
            self.by_key.insert(key.into(), leases.to_vec());
        }
    }

    /// Forgets every lease of `key` (its bucket was reset).
    pub fn forget(&mut self, key: &[u8]) {
        self.by_key.remove(key);
    }
}
