//! Leases and shares: a holder (a Worker isolate) takes a part of a bucket's capacity, and of
//! its refill for a share, and spends it locally on later requests. Until the holder settles
//! it, or it expires, that capacity counts as taken from the bucket (its tokens as still in
//! it), so a holder and the bucket together never bank progress. An expired lease counts as
//! fully used. The accounting of shares over time is in [`share`](super::share).

use core::hash::BuildHasher;

use foldhash::fast::FixedState;

use super::keyed::Keyed;
use super::time::Instant;

/// How long a plain lease is valid, from the call that granted it.
pub const LEASE_TTL_NANOS: u64 = 10_000_000_000;

/// How long a share's term lasts at least (and a record's term): the share of an isolate that
/// vanished idles for at most about two terms, and a new share is sized again on its holder's
/// demand a term later; the price is a renewal per holder a term. A share whose refill is
/// slow has longer terms, up to [`LONGEST_TERM_NANOS`] (see [`term_nanos`](super::share::term_nanos)).
pub const SHARE_TERM_NANOS: u64 = 1_000_000_000;

/// How long a share's term lasts at most.
pub const LONGEST_TERM_NANOS: u64 = 5_000_000_000;

/// Leases a key may have at once; a call beyond it is served without a new lease, so memory
/// stays bounded whatever callers do.
pub const MAX_LEASES_PER_KEY: usize = 1_024;

/// Asks for a share that got none kept on record per key at once (each for a term): enough to
/// tell that a key has more isolates asking than shares it could grant.
pub const MAX_ASKS_ON_RECORD: usize = 256;

/// One lease or share. Amounts are billionths of a token whatever the bucket's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    /// The capacity of the current term (of a plain lease: the tokens it was granted).
    pub billionths: u64,
    /// The parts of the refill of the current term, of [`RATE_PARTS`](super::RATE_PARTS).
    pub parts: u32,
    /// The end of the current term.
    pub expires_at: Instant,
    /// The term that follows the current one, for its own length.
    pub next: Option<Term>,
    /// The parts the holder asked for at its last grant or renewal (0: a plain lease).
    pub wanted: u32,
}

/// A share's terms for one stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Term {
    pub billionths: u64,
    pub parts: u32,
    /// Its length, for a next term (0 for the current one, which ends at the lease's
    /// `expires_at`).
    pub nanos: u64,
}

impl Lease {
    /// A plain lease of `billionths` tokens (no refill, no next term).
    pub fn plain(id: u64, billionths: u64, expires_at: Instant) -> Lease {
        Lease {
            id,
            billionths,
            parts: 0,
            expires_at,
            next: None,
            wanted: 0,
        }
    }

    /// Whether it is a share (asked for a part of the refill), not a plain lease.
    pub fn is_share(&self) -> bool {
        self.wanted > 0 || self.parts > 0 || self.next.is_some()
    }

    /// Whether it holds nothing (no capacity, no refill, no next term) and only records what
    /// its holder wants: an ask for a share that got none, on record for a term, or a share in
    /// a last term that holds nothing. Only its demand counts.
    pub fn is_record(&self) -> bool {
        self.wanted > 0 && self.billionths == 0 && self.parts == 0 && self.next.is_none()
    }

    /// Whether it is the end of its key's queue of appointments (docs/SPEC.md, 11.11): a
    /// record that holds nothing and keeps nothing, so every view, commit and snapshot of
    /// the key's bucket leaves it out.
    pub fn is_queue_end(&self) -> bool {
        self.id == QUEUE_ID
    }

    /// When its last term ends: from then on it counts as fully used.
    pub fn ends_at(&self) -> Instant {
        match self.next {
            Some(next) => self.expires_at.saturating_add(next.nanos),
            None => self.expires_at,
        }
    }

    /// The terms in force at `at` (a term covers its start, not its end), if any.
    pub fn terms_at(&self, at: Instant) -> Option<Term> {
        if at < self.expires_at {
            return Some(Term {
                billionths: self.billionths,
                parts: self.parts,
                nanos: 0,
            });
        }
        self.next.filter(|_| at < self.ends_at())
    }

    /// The lease as it stands at `now`: a next term that has begun becomes the current one.
    pub fn advanced(mut self, now: Instant) -> Lease {
        if let Some(next) = self.next.filter(|_| now >= self.expires_at) {
            self.billionths = next.billionths;
            self.parts = next.parts;
            self.expires_at = self.ends_at();
            self.next = None;
        }
        self
    }
}

/// The leases of every key that has some.
#[derive(Clone)]
pub struct Leases {
    keys: Keyed<Lease>,
    next_id: u64,
}

/// Lease ids stay below 2^53, so JavaScript numbers hold them exactly.
pub const ID_MASK: u64 = (1 << 53) - 1;

/// The id of the lease that holds nothing and marks the end of a key's queue of appointments.
const QUEUE_ID: u64 = u64::MAX;

impl Leases {
    pub fn new(seed: u64) -> Leases {
        let hasher = FixedState::with_seed(seed.rotate_left(17));
        Leases {
            // Ids start at a random point, so an id from before an eviction is not reused.
            next_id: hasher.hash_one(seed) & ID_MASK,
            keys: Keyed::new(hasher),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys have leases.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The leases of `key` (empty when it has none).
    pub fn of(&self, key: &[u8]) -> &[Lease] {
        self.keys.of(key)
    }

    /// Where the leases of `key` are, if it has some: [`at`](Self::at) reads them without
    /// a second lookup until leases change.
    pub fn position(&self, key: &[u8]) -> Option<usize> {
        if self.keys.is_empty() {
            return None;
        }
        self.keys.position(key)
    }

    /// The leases at `position`.
    pub fn at(&self, position: usize) -> &[Lease] {
        self.keys.at(position)
    }

    /// Whether any lease (or a share's next term) is still in force at `now`.
    pub fn any_in_force(&self, now: Instant) -> bool {
        self.keys
            .iter()
            .any(|(_, leases)| leases.iter().any(|l| l.ends_at() > now))
    }

    /// The keys with a lease that has expired by `now`.
    pub fn keys_with_expired(&self, now: Instant) -> Vec<Box<[u8]>> {
        self.keys
            .iter()
            .filter(|(_, leases)| leases.iter().any(|l| l.ends_at() <= now))
            .map(|(key, _)| key.into())
            .collect()
    }

    /// Drops the leases of `key` that have expired by `now`, and starts the next terms that
    /// have begun.
    pub fn drop_expired(&mut self, key: &[u8], now: Instant) {
        self.keys.retain(key, |lease| {
            *lease = lease.advanced(now);
            lease.ends_at() > now
        });
    }

    /// Replaces the lease of `key` with the id of `lease` (a renewal).
    pub fn replace(&mut self, key: &[u8], lease: Lease) {
        if let Some(slot) = self.keys.find_mut(key, |l| l.id == lease.id) {
            *slot = lease;
        }
    }

    /// Removes and returns the lease `id` of `key`, if it is there.
    pub fn take(&mut self, key: &[u8], id: u64) -> Option<Lease> {
        self.keys.take(key, |l| l.id == id)
    }

    /// Whether `key` may take one more lease.
    pub fn has_room(&self, key: &[u8]) -> bool {
        self.of(key).len() < MAX_LEASES_PER_KEY
    }

    /// Records a new lease on `key` with the terms `term` from `now` for `ttl` ns, asked for
    /// with `wanted` parts, and returns it. Its id is `asked` if that is below 2^53 and held
    /// by no lease of the key, else the next one counted up that none holds.
    pub fn grant(
        &mut self,
        key: &[u8],
        term: Term,
        wanted: u32,
        now: Instant,
        ttl: u64,
        asked: Option<u64>,
    ) -> Lease {
        let held = |leases: &[Lease], id: u64| leases.iter().any(|l| l.id == id);
        let id = match asked {
            Some(id) if id <= ID_MASK && !held(self.of(key), id) => id,
            _ => {
                while held(self.of(key), self.next_id) {
                    self.next_id = (self.next_id + 1) & ID_MASK;
                }
                let id = self.next_id;
                self.next_id = (self.next_id + 1) & ID_MASK;
                id
            }
        };
        let lease = Lease {
            id,
            billionths: term.billionths,
            parts: term.parts,
            expires_at: now.saturating_add(ttl),
            next: None,
            wanted,
        };
        self.keys.add(key, &[lease]);
        lease
    }

    /// Puts back leases a snapshot recorded (the durable class, after an eviction).
    pub fn restore(&mut self, key: &[u8], leases: &[Lease]) {
        self.keys.forget(key);
        self.keys.add(key, leases);
    }

    /// Whether `key` has a lease or share recorded (live or expired but not yet dropped): the
    /// end of its queue of appointments is not one, and keeps no bucket stored.
    pub fn holds_any(&self, key: &[u8]) -> bool {
        self.of(key).iter().any(|l| !l.is_queue_end())
    }

    /// When the queue of appointments on `key` ends, if it has one.
    pub fn queue_end(&self, key: &[u8]) -> Option<Instant> {
        self.of(key)
            .iter()
            .find(|l| l.is_queue_end())
            .map(|l| l.expires_at)
    }

    /// Moves the end of the queue of appointments on `key` to `end`.
    pub fn set_queue(&mut self, key: &[u8], end: Instant) {
        if let Some(slot) = self.keys.find_mut(key, Lease::is_queue_end) {
            slot.expires_at = end;
        } else {
            self.keys.add(key, &[Lease::plain(QUEUE_ID, 0, end)]);
        }
    }

    /// Forgets every lease of `key` (its bucket was reset).
    pub fn forget(&mut self, key: &[u8]) {
        self.keys.forget(key);
    }
}
