//! Snapshots: a bucket as bytes, for callers that keep buckets outside memory (the durable
//! class writes them to Durable Object storage and reads them back after an eviction), and
//! the limiter's side of it: the snapshot of a key, and a key's bucket put back from one.
//!
//! Layout, little-endian: version (1 byte), flags (1 byte: bit 0 = has a policy, bit 1 = has
//! leases), units (u64), last refill (u64 ns since the epoch), then with a policy its
//! `max_tokens` and `refill_every_seconds` as f64, then the leases. Version 1 (written by
//! earlier releases; read still): their count (1 byte) and each lease's id, billionths and
//! expiry (u64 ns since the epoch). Version 3 (written whenever a key has leases): their count
//! (u16) and each lease's id, billionths, expiry, parts (u32), wanted parts (u32), and its
//! next term: a flag byte (1 = present), billionths (u64), parts (u32) and length (u64 ns).
//! Version 2 (read still) is version 3 without the length: its terms lasted the shortest
//! ([`SHARE_TERM_NANOS`]). Units count in the
//! unit of the options the bucket had when it was saved; [`Options::new`] rebuilds a policy
//! exactly from its two numbers.

use super::bucket::{full_at, Bucket};
use super::error::Error;
use super::lease::{Lease, Term, LONGEST_TERM_NANOS, MAX_LEASES_PER_KEY, SHARE_TERM_NANOS};
use super::limiter::Limiter;
use super::options::Options;
use super::share::refill_through_leases;
use super::time::Instant;

const VERSION: u8 = 1;
const VERSION_WITH_SHARES: u8 = 2;
const VERSION_WITH_TERMS: u8 = 3;
const HAS_POLICY: u8 = 1;
const HAS_LEASES: u8 = 2;
const PLAIN_LEN: usize = 18;
const POLICY_LEN: usize = PLAIN_LEN + 16;
const LEASE_LEN: usize = 24;
const SHARE_LEN: usize = LEASE_LEN + 4 + 4 + 1 + 8 + 4;
const TERMS_LEN: usize = SHARE_LEN + 8;

/// A key's snapshot as a caller stores it (the durable class: one row per key).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSnapshot {
    /// The encoded [`Snapshot`]: what [`Limiter::restore`](super::Limiter::restore) reads.
    pub bytes: Vec<u8>,
    /// When the bucket is full if nothing consumes, in nanoseconds since the epoch: from
    /// then on the stored copy equals no copy and may be dropped.
    pub full_at_nanos: u128,
    /// Whether the key has a policy of its own (if not, an options change changes it).
    pub has_policy: bool,
}

/// A [`StoredSnapshot`] with its key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedSnapshot {
    pub key: Vec<u8>,
    pub snapshot: StoredSnapshot,
}

/// A bucket, the key's own policy and its leases: what a snapshot holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub bucket: Bucket,
    pub policy: Option<Options>,
    pub leases: Vec<Lease>,
}

impl Snapshot {
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(POLICY_LEN + 2 + SHARE_LEN * self.leases.len());
        let version = if self.leases.is_empty() {
            VERSION
        } else {
            VERSION_WITH_TERMS
        };
        bytes.push(version);
        let policy_flag = if self.policy.is_some() { HAS_POLICY } else { 0 };
        let lease_flag = if self.leases.is_empty() {
            0
        } else {
            HAS_LEASES
        };
        bytes.push(policy_flag | lease_flag);
        bytes.extend_from_slice(&self.bucket.units().to_le_bytes());
        bytes.extend_from_slice(&self.bucket.last_refill().as_nanos().to_le_bytes());
        if let Some(policy) = &self.policy {
            bytes.extend_from_slice(&(policy.max_tokens() as f64).to_le_bytes());
            bytes.extend_from_slice(&policy.refill_every_seconds().to_le_bytes());
        }
        if !self.leases.is_empty() {
            let count = self.leases.len().min(MAX_LEASES_PER_KEY) as u16;
            bytes.extend_from_slice(&count.to_le_bytes());
            for lease in self.leases.iter().take(count.into()) {
                bytes.extend_from_slice(&lease.id.to_le_bytes());
                bytes.extend_from_slice(&lease.billionths.to_le_bytes());
                bytes.extend_from_slice(&lease.expires_at.as_nanos().to_le_bytes());
                bytes.extend_from_slice(&lease.parts.to_le_bytes());
                bytes.extend_from_slice(&lease.wanted.to_le_bytes());
                let next = lease.next.unwrap_or_default();
                bytes.push(u8::from(lease.next.is_some()));
                bytes.extend_from_slice(&next.billionths.to_le_bytes());
                bytes.extend_from_slice(&next.parts.to_le_bytes());
                bytes.extend_from_slice(&next.nanos.to_le_bytes());
            }
        }
        bytes
    }

    /// Reads what [`Snapshot::encode`] wrote; anything else is an error, never a panic.
    /// `field` names the snapshot in the error (e.g. the key it was stored under).
    pub fn decode(bytes: &[u8], field: &str) -> Result<Snapshot, Error> {
        let unreadable = || Error::Unreadable {
            field: field.into(),
            length: bytes.len(),
        };
        let word = |at: usize| -> Option<[u8; 8]> { bytes.get(at..at + 8)?.try_into().ok() };
        let half = |at: usize| -> Option<[u8; 4]> { bytes.get(at..at + 4)?.try_into().ok() };
        let (Some(&version), Some(&flags)) = (bytes.first(), bytes.get(1)) else {
            return Err(unreadable());
        };
        // Version 2 wrote no term lengths: every term then lasted the shortest.
        let (count_len, lease_len) = match version {
            VERSION => (1, LEASE_LEN),
            VERSION_WITH_SHARES if flags & HAS_LEASES != 0 => (2, SHARE_LEN),
            VERSION_WITH_TERMS if flags & HAS_LEASES != 0 => (2, TERMS_LEN),
            _ => return Err(unreadable()),
        };
        let shares = version != VERSION;
        if flags & !(HAS_POLICY | HAS_LEASES) != 0 {
            return Err(unreadable());
        }
        let leases_at = if flags & HAS_POLICY != 0 {
            POLICY_LEN
        } else {
            PLAIN_LEN
        };
        let stored_count = match (shares, bytes.get(leases_at), bytes.get(leases_at + 1)) {
            (false, Some(&n), _) => Some(usize::from(n)),
            (true, Some(&low), Some(&high)) => Some(usize::from(u16::from_le_bytes([low, high]))),
            _ => None,
        };
        let count = match (flags & HAS_LEASES != 0, stored_count) {
            (false, _) => 0,
            (true, Some(n)) if n > 0 && n <= MAX_LEASES_PER_KEY => n,
            (true, _) => return Err(unreadable()),
        };
        let expected_len = if count == 0 {
            leases_at
        } else {
            leases_at + count_len + count * lease_len
        };
        if bytes.len() != expected_len {
            return Err(unreadable());
        }
        let (Some(units), Some(last_refill)) = (word(2), word(10)) else {
            return Err(unreadable());
        };
        let mut leases = Vec::with_capacity(count);
        for i in 0..count {
            let at = leases_at + count_len + i * lease_len;
            let (Some(id), Some(billionths), Some(expires)) =
                (word(at), word(at + 8), word(at + 16))
            else {
                return Err(unreadable());
            };
            let mut lease = Lease::plain(
                u64::from_le_bytes(id),
                u64::from_le_bytes(billionths),
                Instant::from_nanos(u64::from_le_bytes(expires)),
            );
            if shares {
                let at = at + LEASE_LEN;
                let (Some(parts), Some(wanted), Some(&has_next), Some(next), Some(next_parts)) = (
                    half(at),
                    half(at + 4),
                    bytes.get(at + 8),
                    word(at + 9),
                    half(at + 17),
                ) else {
                    return Err(unreadable());
                };
                lease.parts = u32::from_le_bytes(parts);
                lease.wanted = u32::from_le_bytes(wanted);
                lease.next = match has_next {
                    0 => None,
                    1 => Some(Term {
                        billionths: u64::from_le_bytes(next),
                        parts: u32::from_le_bytes(next_parts),
                        nanos: match word(at + 21) {
                            Some(nanos) if lease_len == TERMS_LEN => u64::from_le_bytes(nanos),
                            _ => SHARE_TERM_NANOS,
                        },
                    }),
                    _ => return Err(unreadable()),
                };
                if lease.parts > super::RATE_PARTS
                    || lease.next.is_some_and(|n| {
                        n.parts > super::RATE_PARTS
                            || !(SHARE_TERM_NANOS..=LONGEST_TERM_NANOS).contains(&n.nanos)
                    })
                {
                    return Err(unreadable());
                }
            }
            leases.push(lease);
        }
        let policy = match (flags & HAS_POLICY != 0, word(18), word(26)) {
            (true, Some(max), Some(every)) => Some(
                Options::new(f64::from_le_bytes(max), f64::from_le_bytes(every))
                    .map_err(|_| unreadable())?,
            ),
            _ => None,
        };
        Ok(Snapshot {
            leases,
            bucket: Bucket::from_parts(
                u64::from_le_bytes(units),
                Instant::from_nanos(u64::from_le_bytes(last_refill)),
            ),
            policy,
        })
    }
}

/// Snapshots of the limiter's buckets, and buckets put back from them.
impl Limiter {
    /// The snapshot of `key`'s bucket, or `None` when the key holds no bucket (it is full).
    pub fn snapshot(&self, key: &[u8]) -> Option<StoredSnapshot> {
        let (bucket, policy) = self.store.get(self.store.cold_position(key)?)?;
        Some(self.stored(key, bucket, policy))
    }

    /// The snapshots of every bucket without a policy of its own (those that follow the
    /// instance options, and so change when they do).
    pub fn snapshots_without_policy(&self) -> Vec<KeyedSnapshot> {
        self.store
            .entries()
            .filter(|(_, _, policy)| policy.is_none())
            .map(|(key, bucket, policy)| KeyedSnapshot {
                key: key.to_vec(),
                snapshot: self.stored(key, bucket, policy),
            })
            .collect()
    }

    fn stored(&self, key: &[u8], bucket: Bucket, policy: Option<Options>) -> StoredSnapshot {
        // (The end of the key's queue of appointments is not saved: a reloaded object starts
        // its queues afresh.)
        let mut leases = self.leases.of(key).to_vec();
        leases.retain(|l| !l.is_queue_end());
        // With leases out, its refill may wait for them, and what is left when they end is
        // at least nothing: full a whole refill after the last one ends, at the latest.
        let from = match leases.iter().map(Lease::ends_at).max() {
            Some(last) => Bucket::from_parts(0, last.max(bucket.last_refill())),
            None => bucket,
        };
        StoredSnapshot {
            full_at_nanos: full_at(from, &policy.unwrap_or(self.options)),
            bytes: Snapshot {
                bucket,
                policy,
                leases,
            }
            .encode(),
            has_policy: policy.is_some(),
        }
    }

    /// Puts back the bucket of a snapshot's bytes ([`StoredSnapshot::bytes`]), unless `key`
    /// holds one already. One that has refilled to full by `now` is not stored (a full
    /// bucket is no bucket). `field` names the snapshot in the error when it cannot be read.
    pub fn restore(
        &mut self,
        key: &[u8],
        bytes: &[u8],
        field: &str,
        now: Instant,
    ) -> Result<(), Error> {
        let Snapshot {
            bucket,
            policy,
            leases,
        } = Snapshot::decode(bytes, field)?;
        if self.holds(key) {
            return Ok(());
        }
        let options = policy.unwrap_or(self.options);
        // Stored as saved (reads do not refill stored buckets either), unless full by now.
        // (With leases out it is never full, whatever its units: they clamp at its room.)
        let live = leases.iter().any(|l| l.ends_at() > now);
        let alive = live
            || ((!leases.is_empty() || bucket.units() < options.capacity_units())
                && refill_through_leases(bucket, &leases, &options, now).is_some());
        if alive {
            let leased = !leases.is_empty();
            self.leases.restore(key, &leases);
            let options = self.options;
            self.store
                .insert(key, bucket, policy, leased, &options, now);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket() -> Bucket {
        Bucket::from_parts(
            2_500_000_000,
            Instant::from_nanos(1_800_000_000_000_000_123),
        )
    }

    #[test]
    fn round_trips_with_and_without_a_policy() {
        let plain = Snapshot {
            bucket: bucket(),
            policy: None,
            leases: Vec::new(),
        };
        assert_eq!(plain.encode().len(), PLAIN_LEN);
        assert_eq!(Snapshot::decode(&plain.encode(), "k"), Ok(plain));
        let with_policy = Snapshot {
            bucket: bucket(),
            policy: Some(Options::new(9_007_199_254_740_991.0, 0.1).unwrap()),
            leases: Vec::new(),
        };
        assert_eq!(with_policy.encode().len(), POLICY_LEN);
        assert_eq!(
            Snapshot::decode(&with_policy.encode(), "k"),
            Ok(with_policy)
        );
    }

    /// A share with a next term of its own length, as version 3 writes it.
    fn with_a_share(next_nanos: u64) -> Snapshot {
        let mut share = Lease::plain(7, 3_000_000_000, Instant::from_nanos(5_000_000_000));
        share.parts = 1_000;
        share.wanted = 3_000;
        share.next = Some(Term {
            billionths: 2_000_000_000,
            parts: 900,
            nanos: next_nanos,
        });
        Snapshot {
            bucket: bucket(),
            policy: None,
            leases: vec![share],
        }
    }

    #[test]
    fn round_trips_the_length_of_a_next_term() {
        let snapshot = with_a_share(3_250_000_000);
        let bytes = snapshot.encode();
        assert_eq!(bytes[0], VERSION_WITH_TERMS);
        assert_eq!(bytes.len(), PLAIN_LEN + 2 + TERMS_LEN);
        assert_eq!(Snapshot::decode(&bytes, "k"), Ok(snapshot));
    }

    #[test]
    fn reads_a_version_2_snapshot_with_terms_of_the_shortest_length() {
        // Version 2 is version 3 without each share's next term length.
        let mut bytes = with_a_share(SHARE_TERM_NANOS).encode();
        bytes[0] = VERSION_WITH_SHARES;
        bytes.truncate(bytes.len() - 8);
        assert_eq!(
            Snapshot::decode(&bytes, "k"),
            Ok(with_a_share(SHARE_TERM_NANOS))
        );
    }

    #[test]
    fn rejects_a_next_term_longer_than_the_longest() {
        for nanos in [0, SHARE_TERM_NANOS - 1, LONGEST_TERM_NANOS + 1, u64::MAX] {
            let bytes = with_a_share(nanos).encode();
            assert!(Snapshot::decode(&bytes, "k").is_err(), "{nanos}");
        }
    }

    #[test]
    fn rejects_every_malformed_snapshot() {
        let good = Snapshot {
            bucket: bucket(),
            policy: Some(Options::new(5.0, 1.0).unwrap()),
            leases: Vec::new(),
        }
        .encode();
        let mut bad_policy = good.clone();
        bad_policy[18..26].copy_from_slice(&0.5f64.to_le_bytes());
        let mut bad_version = good.clone();
        bad_version[0] = 4;
        let mut bad_flags = good.clone();
        bad_flags[1] = 3;
        let cases: [&[u8]; 7] = [
            &[],
            &[VERSION],
            &good[..PLAIN_LEN],
            &good[..good.len() - 1],
            &bad_policy,
            &bad_version,
            &bad_flags,
        ];
        for bytes in cases {
            let error = Snapshot::decode(bytes, "stored bucket of \"k\"").unwrap_err();
            assert!(
                error.to_string().starts_with("stored bucket of \"k\""),
                "{error}"
            );
        }
    }
}
