#![cfg(not(target_arch = "wasm32"))]
//! Property tests of saving and restoring buckets (the durable class): a limiter whose
//! memory is thrown away at random moments, and rebuilt lazily from what it saved, answers
//! every call exactly as a limiter that was never evicted. The glue here follows the
//! protocol of js/durable.js (DurableRateLimiterServer): load a key's snapshot when memory
//! does not hold it, save a key after every call that changes it, drop snapshots that
//! are full, and around an options change restore everything and save it all again; read a
//! key's gate before every call on it and save it after every change; and read every block
//! at the first call after an eviction, saving each block and unblock.

use std::collections::HashMap;

mod shared;

use proptest::prelude::*;
use rate_limiter::engine::{
    gate_snapshot, Cost, GatePolicy, Instant, KeyedSnapshot, Lease, Limiter, OptionsPatch,
    StoredSnapshot,
};
use shared::{cost, keys_of, patch, requests, Granted};

#[derive(Debug, Clone)]
enum Op {
    Consume {
        key: u8,
        cost: f64,
    },
    Check {
        key: u8,
        cost: f64,
    },
    Status {
        key: u8,
    },
    Reset {
        key: u8,
    },
    Limit {
        key: u8,
        cost: f64,
        policy: Option<OptionsPatch>,
    },
    LimitAll {
        keys: Vec<(u8, f64)>,
    },
    SetOptions(OptionsPatch),
    Advance {
        ms: u32,
    },
    /// The Durable Object is evicted: memory is gone, storage stays.
    Evict,
    /// The storage drops the snapshots of buckets that are full by now.
    DropFull,
    /// A holder's `limit_leased`: settles its last lease on the key having spent `used` of
    /// it (if `used` is given), then asks for `want` more.
    Lease {
        key: u8,
        cost: f64,
        want: u8,
        used: Option<u8>,
    },
    Refund {
        key: u8,
        tokens: f64,
    },
    /// A permit on the key's gate.
    Acquire {
        key: u8,
        cost: u8,
        max: u8,
    },
    /// Releases the `nth` permit granted on the key (released, expired or live).
    Release {
        key: u8,
        nth: u8,
    },
    Block {
        key: u8,
        ms: u32,
    },
    Unblock {
        key: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..5;
    prop_oneof![
        6 => (key.clone(), cost()).prop_map(|(key, cost)| Op::Consume { key, cost }),
        2 => (key.clone(), cost()).prop_map(|(key, cost)| Op::Check { key, cost }),
        2 => key.clone().prop_map(|key| Op::Status { key }),
        1 => key.clone().prop_map(|key| Op::Reset { key }),
        3 => (key.clone(), cost(), proptest::option::of(patch()))
            .prop_map(|(key, cost, policy)| Op::Limit { key, cost, policy }),
        1 => proptest::collection::vec((key.clone(), cost()), 1..3).prop_map(|keys| Op::LimitAll { keys }),
        1 => patch().prop_map(Op::SetOptions),
        4 => prop_oneof![0u32..3_000, 0u32..40_000].prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Evict),
        1 => Just(Op::DropFull),
        3 => (key.clone(), cost(), 0u8..8, proptest::option::of(0u8..5))
            .prop_map(|(key, cost, want, used)| Op::Lease { key, cost, want, used }),
        1 => (key.clone(), cost()).prop_map(|(key, tokens)| Op::Refund { key, tokens }),
        3 => (key.clone(), 1u8..=2, 1u8..=3).prop_map(|(key, cost, max)| Op::Acquire { key, cost, max }),
        2 => (key.clone(), 0u8..6).prop_map(|(key, nth)| Op::Release { key, nth }),
        1 => (key.clone(), 1u32..20_000).prop_map(|(key, ms)| Op::Block { key, ms }),
        1 => key.prop_map(|key| Op::Unblock { key }),
    ]
}

/// A row of the storage: the key's snapshot.
type Row = StoredSnapshot;

/// The storage of one Durable Object and the limiter in its memory.
struct Durable {
    limiter: Limiter,
    rows: HashMap<Vec<u8>, Row>,
    saved_options: Option<OptionsPatch>,
    /// Every snapshot is in memory (after an options change restored them all).
    complete: bool,
    seed: u64,
    /// Each gate's row: its snapshot bytes.
    gates: HashMap<Vec<u8>, Vec<u8>>,
    /// Each block's row: when it ends.
    blocks: HashMap<Vec<u8>, Instant>,
    /// The blocks have been read into this incarnation's memory.
    blocks_loaded: bool,
}

impl Durable {
    fn new() -> Durable {
        Durable {
            limiter: Limiter::new(1),
            rows: HashMap::new(),
            saved_options: None,
            complete: false,
            seed: 1,
            gates: HashMap::new(),
            blocks: HashMap::new(),
            blocks_loaded: false,
        }
    }

    /// Reads every block in force into memory, at the first call of an incarnation.
    fn load_blocks(&mut self, now: Instant) {
        if self.blocks_loaded {
            return;
        }
        self.blocks_loaded = true;
        for (key, end) in &self.blocks {
            if *end > now {
                self.limiter.block(key, end.saturating_since(now), now);
            }
        }
    }

    /// Replaces memory's gate of `key` by its row.
    fn load_gate(&mut self, key: &[u8], now: Instant) {
        let bytes = self
            .gates
            .get(key)
            .cloned()
            .unwrap_or_else(|| gate_snapshot(&[]));
        self.limiter.restore_gate(key, &bytes, now).unwrap();
    }

    fn save_gate(&mut self, key: &[u8], now: Instant) {
        let live = self.limiter.permits_of(key, now);
        if live.is_empty() {
            self.gates.remove(key);
        } else {
            self.gates.insert(key.to_vec(), gate_snapshot(&live));
        }
    }

    /// A new instance after an eviction: the saved options, nothing in memory.
    fn evict(&mut self, now: Instant) {
        self.seed += 1;
        self.limiter = Limiter::new(self.seed);
        self.complete = false;
        self.blocks_loaded = false;
        if let Some(options) = self.saved_options {
            self.limiter.set_options(options, now).unwrap();
        }
    }

    fn load(&mut self, key: &[u8], now: Instant) {
        if self.complete || self.limiter.holds(key) {
            return;
        }
        if let Some(row) = self.rows.get(key) {
            self.limiter
                .restore(key, &row.bytes, "snapshot", now)
                .unwrap();
        }
    }

    fn save(&mut self, key: &[u8]) {
        match self.limiter.snapshot(key) {
            Some(row) => self.rows.insert(key.to_vec(), row),
            None => self.rows.remove(key),
        };
    }

    fn set_options(&mut self, patch: OptionsPatch, now: Instant) {
        let rewrites = self.limiter.options().patched(patch).unwrap() != self.limiter.options();
        if rewrites && !self.complete {
            for (key, row) in &self.rows {
                self.limiter
                    .restore(key, &row.bytes, "snapshot", now)
                    .unwrap();
            }
            self.complete = true;
        }
        self.limiter.set_options(patch, now).unwrap();
        let options = self.limiter.options();
        self.saved_options = Some(OptionsPatch {
            max_tokens: Some(options.max_tokens() as f64),
            refill_every_seconds: Some(options.refill_every_seconds()),
        });
        if rewrites {
            self.rows.retain(|_, row| row.has_policy);
            for KeyedSnapshot { key, snapshot } in self.limiter.snapshots_without_policy() {
                self.rows.insert(key, snapshot);
            }
        }
    }
}

fn key_bytes(key: u8) -> Vec<u8> {
    vec![b'k', key]
}

const START_MS: f64 = 1_800_000_000_000.0;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every answer of the evicted-and-restored limiter equals the never-evicted one's, and
    /// every bucket memory holds is saved.
    #[test]
    fn eviction_changes_no_answer(ops in proptest::collection::vec(op(), 1..150)) {
        let mut memory = Limiter::new(99);
        let mut durable = Durable::new();
        let mut now_ms = START_MS;
        let mut granted = Granted::default();
        for op in ops {
            let now = Instant::from_millis(now_ms);
            durable.load_blocks(now);
            match op {
                Op::Consume { key, cost } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    durable.load(&k, now);
                    let allowed = durable.limiter.consume(&k, c, now);
                    if allowed {
                        durable.save(&k);
                    }
                    prop_assert_eq!(allowed, memory.consume(&k, c, now));
                }
                Op::Check { key, cost } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    durable.load(&k, now);
                    prop_assert_eq!(durable.limiter.check(&k, c, now), memory.check(&k, c, now));
                }
                Op::Status { key } => {
                    let k = key_bytes(key);
                    durable.load(&k, now);
                    prop_assert_eq!(durable.limiter.status(&k, now), memory.status(&k, now));
                }
                Op::Reset { key } => {
                    let k = key_bytes(key);
                    durable.limiter.reset(&k);
                    durable.save(&k);
                    memory.reset(&k);
                }
                Op::Limit { key, cost, policy } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    durable.load(&k, now);
                    let d = durable.limiter.limit(&k, c, policy, now).unwrap();
                    if d.allowed || policy.is_some() {
                        durable.save(&k);
                    }
                    prop_assert_eq!(d, memory.limit(&k, c, policy, now).unwrap());
                }
                Op::LimitAll { keys } => {
                    let owned = keys_of(&keys, key_bytes);
                    let requests = requests(&owned);
                    for (k, _) in &owned {
                        durable.load(k, now);
                    }
                    let d = durable.limiter.limit_all(&requests, now).unwrap();
                    for (k, _) in &owned {
                        durable.save(k);
                    }
                    prop_assert_eq!(d, memory.limit_all(&requests, now).unwrap());
                }
                Op::SetOptions(patch) => {
                    durable.set_options(patch, now);
                    memory.set_options(patch, now).unwrap();
                }
                Op::Lease { key, cost, want, used } => {
                    let (k, c) = (key_bytes(key), Cost::new(cost).unwrap());
                    let want = Cost::new(f64::from(want)).unwrap();
                    let (settle_d, settle_m) = (granted.settlement(0, key, used), granted.settlement(1, key, used));
                    durable.load(&k, now);
                    let d = durable.limiter.limit_leased(&k, c, None, settle_d, want, now).unwrap();
                    durable.save(&k);
                    let m = memory.limit_leased(&k, c, None, settle_m, want, now).unwrap();
                    prop_assert_eq!(d.decision, m.decision);
                    let terms = |l: Option<Lease>| l.map(|l| (l.billionths, l.expires_at));
                    prop_assert_eq!(terms(d.lease), terms(m.lease));
                    granted.leased(key, [d.lease, m.lease]);
                }
                Op::Refund { key, tokens } => {
                    let (k, t) = (key_bytes(key), Cost::new(tokens).unwrap());
                    durable.load(&k, now);
                    durable.limiter.refund(&k, t, now);
                    durable.save(&k);
                    memory.refund(&k, t, now);
                }
                Op::Acquire { key, cost, max } => {
                    let k = key_bytes(key);
                    let policy = GatePolicy::new(f64::from(max), Some(5.0)).unwrap();
                    durable.load_gate(&k, now);
                    let d = durable.limiter.acquire(&k, cost.into(), policy, now);
                    if d.allowed {
                        durable.save_gate(&k, now);
                    }
                    let m = memory.acquire(&k, cost.into(), policy, now);
                    prop_assert_eq!((d.allowed, d.in_flight, d.ttl_ms, d.retry_after_ms), (m.allowed, m.in_flight, m.ttl_ms, m.retry_after_ms));
                    granted.permitted(key, [d.id, m.id]);
                }
                Op::Release { key, nth } => {
                    let k = key_bytes(key);
                    let Some((d_id, m_id)) = granted.permit(key, nth) else {
                        continue;
                    };
                    durable.load_gate(&k, now);
                    let d = durable.limiter.release(&k, d_id, now);
                    if d.released {
                        durable.save_gate(&k, now);
                    }
                    prop_assert_eq!(d, memory.release(&k, m_id, now));
                }
                Op::Block { key, ms } => {
                    let k = key_bytes(key);
                    let nanos = u64::from(ms) * 1_000_000;
                    durable.limiter.block(&k, nanos, now);
                    durable.blocks.insert(k.clone(), now.saturating_add(nanos));
                    memory.block(&k, nanos, now);
                }
                Op::Unblock { key } => {
                    let k = key_bytes(key);
                    let d = durable.limiter.unblock(&k, now);
                    durable.blocks.remove(&k);
                    prop_assert_eq!(d, memory.unblock(&k, now));
                }
                Op::Advance { ms } => now_ms += f64::from(ms),
                Op::Evict => durable.evict(now),
                Op::DropFull => {
                    let now_ns = u128::from(now.as_nanos());
                    durable.rows.retain(|_, row| row.full_at_nanos > now_ns);
                }
            }
            // Whatever memory holds that is not full is saved: restored alone, it reads the same.
            for key in 0..5 {
                let k = key_bytes(key);
                // A clone: reads refill the bucket they read, which an options change can tell.
                let mut held = durable.limiter.clone();
                if held.holds(&k) && held.status(&k, now).reset_in_ms > 0.0 {
                    let row = durable.rows.get(&k);
                    prop_assert!(row.is_some(), "key {} is held but not saved", key);
                    let mut alone = Limiter::new(7);
                    if let Some(options) = durable.saved_options {
                        alone.set_options(options, now).unwrap();
                    }
                    alone.restore(&k, &row.unwrap().bytes, "snapshot", now).unwrap();
                    prop_assert_eq!(alone.status(&k, now), held.status(&k, now));
                }
            }
        }
    }
}

/// A limiter with 2 tokens, one back per second.
fn two_per_second(seed: u64, now: Instant) -> Limiter {
    let mut limiter = Limiter::new(seed);
    let options = OptionsPatch {
        max_tokens: Some(2.0),
        refill_every_seconds: Some(1.0),
    };
    limiter.set_options(options, now).unwrap();
    limiter
}

#[test]
fn a_restored_bucket_that_refilled_meanwhile_is_not_stored() {
    let at = |ms: f64| Instant::from_millis(START_MS + ms);
    let mut limiter = two_per_second(1, at(0.0));
    assert!(limiter.consume(b"k", Cost::ONE, at(0.0)));
    let snapshot = limiter.snapshot(b"k").unwrap();
    assert!(!snapshot.has_policy);
    assert_eq!(snapshot.full_at_nanos, u128::from(at(1_000.0).as_nanos()));
    let state = snapshot.bytes;

    let mut fresh = two_per_second(2, at(0.0));
    fresh.restore(b"k", &state, "snapshot", at(999.0)).unwrap();
    assert!(fresh.holds(b"k"));
    let mut later = two_per_second(3, at(0.0));
    later
        .restore(b"k", &state, "snapshot", at(1_000.0))
        .unwrap();
    assert!(!later.holds(b"k"), "full at 1 s: nothing to hold");
}

#[test]
fn unreadable_saved_bytes_are_an_error_not_a_panic() {
    let mut limiter = Limiter::new(1);
    let now = Instant::from_millis(START_MS);
    for bytes in [&b""[..], b"\x01", b"\x02\x00", &[1u8; 40]] {
        let error = limiter
            .restore(b"k", bytes, "the stored bucket of key \"k\"", now)
            .unwrap_err();
        assert!(error
            .to_string()
            .starts_with("the stored bucket of key \"k\" is not a bucket"));
        assert!(error.is_storage_error());
    }
    assert!(!limiter.holds(b"k"));
}

#[test]
fn restore_keeps_a_bucket_memory_already_holds() {
    let mut limiter = Limiter::new(1);
    let now = Instant::from_millis(START_MS);
    assert!(limiter.consume(b"k", Cost::new(3.0).unwrap(), now));
    let older = limiter.snapshot(b"k").unwrap().bytes;
    assert!(limiter.consume(b"k", Cost::new(3.0).unwrap(), now));
    limiter.restore(b"k", &older, "snapshot", now).unwrap();
    assert_eq!(limiter.status(b"k", now).remaining, 4.0);
}
