//! The "native speed" goal (bench/README.md): nanoseconds per `consume` on an EXISTING key with
//! 1 / 10 000 / 1 000 000 live keys, for our `Limiter` and, as the baseline in the same run,
//! `governor`'s keyed limiter (DashMap store, `FakeRelativeClock`) on the same keys.
//!
//! Run: `cargo bench --bench engine` (a few minutes at most on 2 cores).
//!
//! What is timed, for both limiters alike:
//! - Keys are `client-{i}:api`. Governor is keyed on `String` (its store needs an owned key
//!   type; `check_key` takes `&String` and clones only on insertion, which never happens while
//!   timing); ours receives `key.as_bytes()` of the very same `String`s.
//! - Setup (untimed) inserts every key once, in natural order 0..n, into both limiters. Ours
//!   gets `max_tokens = 1e15` and a refill interval of 1e9 s: after one consume each bucket
//!   is one token short of full, so it is stored (ours only stores non-full buckets), never
//!   refills during the run and never runs out. Governor gets one cell per microsecond with a
//!   burst of `u32::MAX`. `stored_buckets()` / `len()` must equal the key count before and
//!   after timing, and every timed call must be allowed (counted, checked after the run).
//! - Timed calls visit the keys in a fixed shuffled order (not the insertion order, which
//!   would make our dense slot array look sequential to the CPU). The key strings of the
//!   call sequence are allocated in that order, so reading the key costs the harness a
//!   sequential, prefetched access; the random accesses left are inside the limiters.
//! - Time moves in chunks of `CHUNK` calls: each chunk is timed on its own with
//!   `std::time::Instant`, and between chunks, outside the timed region, the fake clock is
//!   advanced by `CHUNK` µs (governor: `FakeRelativeClock::advance`, an atomic CAS; ours: the
//!   `Instant` passed to `consume`). The clock is thus really advanced, never read from the
//!   OS, and the advance costs nothing in the measurement; two timer reads per 1024 calls
//!   add well under 0.1 ns per call, the same to both sides.
//!
//! Criterion (`iter_custom` over that loop, one group with `Throughput::Elements(1)`) prints
//! its own estimates. Then this file measures the same loop itself — warm-up of
//! max(keys, 200k) calls, then `ROUNDS` rounds of `CALLS` calls per limiter, interleaved
//! ours/governor so machine noise hits both — and prints one machine-readable line per size,
//! parsed by the Node bench script:
//!
//! ```text
//! ENGINE_BENCH keys=10000 ours_ns=… governor_ns=… ratio=…          (ratio = ours / governor)
//! ENGINE_BENCH_GROWTH from_keys=1 to_keys=1000000 ours=… governor=…
//! ```
//!
//! Note: the `bench` profile inherits `[profile.release]` (opt-level 3, LTO), so both
//! crates are optimised as the shipped wasm is.

use std::hash::{BuildHasher, Hasher};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant as WallClock};

use criterion::{BenchmarkId, Criterion, Throughput};
use governor::clock::FakeRelativeClock;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use rate_limiter::engine::{Cost, Instant, Limiter, OptionsPatch};

#[path = "support/keys.rs"]
mod keys;
use keys::{key, shuffled};

/// Live key counts measured; `ENGINE_BENCH_KEYS=1,10000` (comma-separated) picks others.
const SIZES: [usize; 3] = [1, 10_000, 1_000_000];
/// Calls per timed chunk; the clock advances between chunks.
const CHUNK: u64 = 1024;
/// Simulated time per call, in nanoseconds (the clock advances `CHUNK` times this per chunk).
const STEP_NANOS: u64 = 1_000;
/// Calls per round of the summary measurement, and rounds per limiter (median taken).
const CALLS: u64 = 2_000_000;
const ROUNDS: usize = 7;
/// Start of our clock: an epoch time in 2026, in milliseconds.
const START_MS: f64 = 1_780_000_000_000.0;

type Governor = RateLimiter<
    String,
    DefaultKeyedStateStore<String>,
    FakeRelativeClock,
    governor::middleware::NoOpMiddleware<governor::nanos::Nanos>,
>;

/// Both limiters holding the same `n` live keys, and the keys in call order.
struct Fixture {
    n: usize,
    ours: Limiter,
    /// Nanoseconds since the epoch of the `Instant` passed to our `consume`; advanced like
    /// governor's clock.
    ours_nanos: u64,
    governor: Governor,
    clock: FakeRelativeClock,
    /// Every key once, in a fixed shuffled order; calls cycle through it.
    call_keys: Vec<String>,
    /// Next position in `call_keys`, kept across samples so they never restart at key 0.
    ours_cursor: usize,
    governor_cursor: usize,
}

impl Fixture {
    fn new(n: usize) -> Fixture {
        // A random seed per instance, as in production.
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let mut ours = Limiter::new(seed);
        let ours_now = Instant::from_millis(START_MS);
        let ours_nanos = START_MS as u64 * 1_000_000;
        ours.set_options(
            OptionsPatch {
                max_tokens: Some(1e15),
                refill_every_seconds: Some(1e9),
            },
            ours_now,
        )
        .expect("valid options");

        let quota = Quota::with_period(Duration::from_nanos(STEP_NANOS))
            .expect("non-zero period")
            .allow_burst(NonZeroU32::MAX);
        let clock = FakeRelativeClock::default();
        clock.advance(Duration::from_secs(1));
        let governor: Governor = RateLimiter::dashmap_with_clock(quota, clock.clone());

        for i in 0..n {
            let k = key(i);
            assert!(ours.consume(k.as_bytes(), Cost::ONE, ours_now));
            assert!(governor.check_key(&k).is_ok());
        }
        assert_eq!(ours.stored_buckets(), n, "every key must be live in ours");
        assert_eq!(governor.len(), n, "every key must be live in governor");

        let call_keys = shuffled(n).into_iter().map(key).collect();
        Fixture {
            n,
            ours,
            ours_nanos,
            governor,
            clock,
            call_keys,
            ours_cursor: 0,
            governor_cursor: 0,
        }
    }

    /// `calls` consumes on ours; returns the time spent inside the chunks.
    fn run_ours(&mut self, calls: u64) -> Duration {
        let cost = Cost::ONE;
        let len = self.call_keys.len();
        let mut cursor = self.ours_cursor;
        let mut left = calls;
        let mut allowed = 0u64;
        let mut timed = Duration::ZERO;
        while left > 0 {
            let chunk = left.min(CHUNK);
            // `.into()`: whatever integer width `from_nanos` takes, u64 converts losslessly.
            let now = Instant::from_nanos(self.ours_nanos);
            let start = WallClock::now();
            for _ in 0..chunk {
                let k = self.call_keys[cursor].as_bytes();
                allowed += self.ours.consume(k, cost, now) as u64;
                cursor += 1;
                if cursor == len {
                    cursor = 0;
                }
            }
            timed += start.elapsed();
            // Untimed: move the clock on.
            self.ours_nanos += chunk * STEP_NANOS;
            left -= chunk;
        }
        self.ours_cursor = cursor;
        assert_eq!(black_box(allowed), calls, "ours denied a call");
        timed
    }

    /// `calls` checks on governor; returns the time spent inside the chunks.
    fn run_governor(&mut self, calls: u64) -> Duration {
        let len = self.call_keys.len();
        let mut cursor = self.governor_cursor;
        let mut left = calls;
        let mut allowed = 0u64;
        let mut timed = Duration::ZERO;
        while left > 0 {
            let chunk = left.min(CHUNK);
            let start = WallClock::now();
            for _ in 0..chunk {
                let k = &self.call_keys[cursor];
                allowed += self.governor.check_key(k).is_ok() as u64;
                cursor += 1;
                if cursor == len {
                    cursor = 0;
                }
            }
            timed += start.elapsed();
            // Untimed: move the clock on.
            self.clock.advance(Duration::from_nanos(chunk * STEP_NANOS));
            left -= chunk;
        }
        self.governor_cursor = cursor;
        assert_eq!(black_box(allowed), calls, "governor denied a call");
        timed
    }

    fn check_live(&self) {
        assert_eq!(self.ours.stored_buckets(), self.n, "ours lost keys");
        assert_eq!(self.governor.len(), self.n, "governor lost keys");
    }
}

fn ns_per_call(d: Duration, calls: u64) -> f64 {
    d.as_nanos() as f64 / calls as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

/// Median ns per call of each limiter over `ROUNDS` interleaved rounds, after a warm-up.
fn summary(f: &mut Fixture) -> (f64, f64) {
    let warm_up = (f.n as u64).max(200_000);
    f.run_ours(warm_up);
    f.run_governor(warm_up);
    let mut ours = Vec::with_capacity(ROUNDS);
    let mut governor = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        ours.push(ns_per_call(f.run_ours(CALLS), CALLS));
        governor.push(ns_per_call(f.run_governor(CALLS), CALLS));
    }
    f.check_live();
    (median(ours), median(governor))
}

fn sizes() -> Vec<usize> {
    match std::env::var("ENGINE_BENCH_KEYS") {
        Ok(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .replace('_', "")
                    .parse()
                    .expect("ENGINE_BENCH_KEYS: numbers")
            })
            .collect(),
        Err(_) => SIZES.to_vec(),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) criterion runs each
    // benchmark once as a smoke test, and the summary is skipped.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    let mut results = Vec::new();
    {
        let mut group = criterion.benchmark_group("consume_existing_key");
        group.throughput(Throughput::Elements(1));
        for n in sizes() {
            let setup = WallClock::now();
            let mut f = Fixture::new(n);
            eprintln!("setup of {n} keys took {:.2?}", setup.elapsed());

            group.bench_function(BenchmarkId::new("ours", n), |b| {
                b.iter_custom(|iters| f.run_ours(iters))
            });
            group.bench_function(BenchmarkId::new("governor", n), |b| {
                b.iter_custom(|iters| f.run_governor(iters))
            });
            f.check_live();

            if bench_mode {
                results.push((n, summary(&mut f)));
            }
        }
        group.finish();
    }
    criterion.final_summary();

    if results.is_empty() {
        return;
    }
    println!();
    println!(
        "# consume on an existing key, median of {ROUNDS} rounds x {CALLS} calls, keys cycled in shuffled order"
    );
    for &(n, (ours, governor)) in &results {
        println!(
            "ENGINE_BENCH keys={n} ours_ns={ours:.2} governor_ns={governor:.2} ratio={:.3}",
            ours / governor
        );
    }
    let first = results.first().expect("non-empty");
    let last = results.last().expect("non-empty");
    println!(
        "ENGINE_BENCH_GROWTH from_keys={} to_keys={} ours={:.3} governor={:.3}",
        first.0,
        last.0,
        last.1 .0 / first.1 .0,
        last.1 .1 / first.1 .1
    );
}
