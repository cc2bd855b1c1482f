#![cfg(not(target_arch = "wasm32"))]
//! Property tests of concurrency limits (docs/SPEC.md, section 12) against a model: a list of
//! live permits per key. Callers acquire with changing limits and times to live, release
//! permits they hold, permits they released already and ids they made up, time passes, and
//! the object is evicted (its gates carried through snapshots into a new limiter with
//! another seed). After every step the engine holds exactly the model's live permits, so at
//! no instant do a key's live permits cost more than the limit that admitted the last of
//! them; a slot comes back at a release or an expiry, and never twice.

use proptest::prelude::*;
use rate_limiter::engine::{gate_snapshot, GatePolicy, Instant, Limiter, Permit};

const START_MS: u64 = 1_800_000_000_000;
const KEYS: [&[u8]; 3] = [b"generate", b"upload", b""];

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        key: usize,
        cost: u8,
        max: u8,
        ttl_ms: u16,
    },
    /// Releases the `pick`-th permit ever granted on the key (maybe released or expired).
    Release {
        key: usize,
        pick: usize,
    },
    /// Releases an id that was never granted.
    Forged {
        key: usize,
        id: u64,
    },
    Advance {
        ms: u16,
    },
    Evict,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..KEYS.len(), 1u8..=3, 1u8..=6, 1u16..=3_000).prop_map(|(key, cost, max, ttl_ms)| Op::Acquire { key, cost, max, ttl_ms }),
        4 => (0..KEYS.len(), 0usize..40).prop_map(|(key, pick)| Op::Release { key, pick }),
        1 => (0..KEYS.len(), any::<u64>()).prop_map(|(key, id)| Op::Forged { key, id: id & ((1 << 53) - 1) }),
        4 => (0u16..1_500).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Evict),
    ]
}

/// The model: every permit granted per key, and whether it was released.
#[derive(Default)]
struct Model {
    granted: Vec<Vec<(Permit, bool)>>,
}

impl Model {
    fn live(&self, key: usize, now: Instant) -> Vec<Permit> {
        let mut live: Vec<Permit> = self.granted[key]
            .iter()
            .filter(|(p, released)| !released && p.expires_at > now)
            .map(|(p, _)| *p)
            .collect();
        live.sort_by_key(|p| p.id);
        live
    }

    fn in_flight(&self, key: usize, now: Instant) -> u64 {
        self.live(key, now).iter().map(|p| p.cost).sum()
    }
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms as f64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn live_permits_are_exactly_the_models(ops in proptest::collection::vec(op(), 1..120), seed in any::<u64>()) {
        let mut engine = Limiter::new(seed);
        let mut model = Model { granted: vec![Vec::new(); KEYS.len()] };
        let mut now = START_MS;
        let mut evictions = 0u64;
        for op in ops {
            let t = at(now);
            match op {
                Op::Acquire { key, cost, max, ttl_ms } => {
                    let policy = GatePolicy::new(max.into(), Some(f64::from(ttl_ms) / 1000.0)).unwrap();
                    let before = model.in_flight(key, t);
                    let d = engine.acquire(KEYS[key], cost.into(), policy, t);
                    prop_assert_eq!(d.allowed, before + u64::from(cost) <= u64::from(max), "{:?}", d);
                    prop_assert_eq!(d.limit, u64::from(max));
                    if d.allowed {
                        let id = d.id.unwrap();
                        prop_assert!(model.live(key, t).iter().all(|p| p.id != id), "id {} is live already", id);
                        prop_assert_eq!(d.ttl_ms, f64::from(ttl_ms));
                        model.granted[key].push((Permit { id, cost: cost.into(), expires_at: at(now + u64::from(ttl_ms)) }, false));
                        prop_assert_eq!(d.in_flight, before + u64::from(cost));
                    } else {
                        prop_assert_eq!(d.in_flight, before);
                        prop_assert_eq!(d.id, None);
                        // Expiries alone make room after exactly retry_after_ms, not 1 ms sooner.
                        match d.retry_after_ms {
                            None => prop_assert!(cost > max),
                            Some(wait) => {
                                prop_assert!(wait > 0.0);
                                let mut later = engine.clone();
                                prop_assert!(later.acquire(KEYS[key], cost.into(), policy, at(now + wait as u64)).allowed);
                                let mut sooner = engine.clone();
                                prop_assert!(!sooner.acquire(KEYS[key], cost.into(), policy, at(now + wait as u64 - 1)).allowed);
                            }
                        }
                    }
                }
                Op::Release { key, pick } => {
                    let granted = &mut model.granted[key];
                    if granted.is_empty() {
                        continue;
                    }
                    let i = pick % granted.len();
                    let (permit, released) = granted[i];
                    let live = !released && permit.expires_at > t;
                    let r = engine.release(KEYS[key], permit.id, t);
                    prop_assert_eq!(r.released, live);
                    granted[i].1 = true;
                    prop_assert_eq!(r.in_flight, model.in_flight(key, t));
                }
                Op::Forged { key, id } => {
                    if model.granted[key].iter().any(|(p, _)| p.id == id) {
                        continue;
                    }
                    let r = engine.release(KEYS[key], id, t);
                    prop_assert!(!r.released);
                    prop_assert_eq!(r.in_flight, model.in_flight(key, t));
                }
                Op::Advance { ms } => now += u64::from(ms),
                Op::Evict => {
                    // Each incarnation has a seed of its own, as the class draws one.
                    evictions += 1;
                    let mut fresh = Limiter::new(seed.wrapping_add(evictions));
                    for key in KEYS {
                        let permits = engine.permits_of(key, t);
                        if !permits.is_empty() {
                            fresh.restore_gate(key, &gate_snapshot(&permits), t).unwrap();
                        }
                    }
                    engine = fresh;
                }
            }
            let t = at(now);
            for (key, name) in KEYS.iter().enumerate() {
                let mut held = engine.permits_of(name, t);
                held.sort_by_key(|p| p.id);
                prop_assert_eq!(held, model.live(key, t));
            }
        }
    }
}
