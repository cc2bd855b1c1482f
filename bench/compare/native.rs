//! The native half of `scripts/bench-compare.sh` (bench/README.md, "before and after"): the
//! engines of two revisions, old and new, linked into one binary (the script generates its
//! Cargo.toml, with the two trees as the dependencies `old` and `new`), and the same calls on
//! both interleaved round by round, so that machine noise hits both alike. Nanoseconds per
//! call of `consume`, `check` and `limit` on an existing key with 1 / 10,000 / 1,000,000 live
//! keys, the old engine the baseline. With the feature `blocks` (the new engine has blocks,
//! docs/SPEC.md section 13), a third column: the new engine with 1,000 blocks in force on
//! other keys, so that every call takes the block branch and finds its key unblocked.
//!
//! The method is that of benches/engine.rs: every key live before timing (max_tokens 1e15,
//! one token short of full, never refilled up nor run dry), keys visited in a fixed shuffled
//! order, chunks of `CHUNK` calls timed on their own, the fake clock advanced between chunks
//! and never read from the OS. Both engines get the same hash seed, so their tables are laid
//! out alike. Unlike benches/engine.rs, the engines take turns chunk by chunk (the first one
//! rotating), so that a change of the machine's load hits them alike, and a round's figure
//! for an engine is the median of its chunks (ns per call): a chunk takes about 0.1 ms, so the
//! few that the OS preempts (on a shared machine, many times a chunk's time) drop out instead
//! of skewing the mean. A round is `CALLS` calls of each engine. Printed: the median of the
//! rounds, the ratio new / old of the medians, and the range of the per-round ratios (how
//! noisy the run was), as a table and as one machine-readable `COMPARE_NATIVE` line per row.
//!
//! Environment: `COMPARE_ROUNDS` (default 7), `COMPARE_KEYS` (default `1,10000,1000000`).

use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

#[path = "../../benches/support/keys.rs"]
mod keys;
use keys::{key, shuffled};

/// Calls per timed chunk; the clock advances between chunks.
const CHUNK: u64 = 1024;
/// Simulated time per call, in nanoseconds.
const STEP_NANOS: u64 = 1_000;
/// Calls per round and engine.
const CALLS: u64 = 2_000_000;
/// Start of the clock: an epoch time in 2026, in nanoseconds.
const START_NANOS: u64 = 1_780_000_000_000 * 1_000_000;
/// One hash seed for every engine, so that old and new lay their tables out alike.
const SEED: u64 = 0x5EED_0BAD_CAFE_F00D;
/// Blocks in force on other keys in the third column, and their length (a day: they stay in
/// force through the run).
#[cfg(feature = "blocks")]
const BLOCKS: usize = 1_000;
#[cfg(feature = "blocks")]
const BLOCK_NANOS: u64 = 86_400 * 1_000_000_000;

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Consume,
    Check,
    Limit,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Consume => "consume",
            Method::Check => "check",
            Method::Limit => "limit",
        }
    }
}

/// One engine's limiter and its fake clock, over the same API in both revisions.
macro_rules! engine {
    ($module:ident, $krate:ident) => {
        mod $module {
            use super::{Method, CHUNK, SEED, START_NANOS, STEP_NANOS};
            use std::time::{Duration, Instant as WallClock};

            pub use $krate::engine::Instant;
            use $krate::engine::{Cost, Limiter, OptionsPatch};

            pub struct Engine {
                pub limiter: Limiter,
                pub nanos: u64,
                cursor: usize,
            }

            impl Engine {
                /// Every key of `keys` live: consumed once.
                pub fn new(keys: &[String]) -> Engine {
                    let mut limiter = Limiter::new(SEED);
                    let now = Instant::from_nanos(START_NANOS);
                    limiter
                        .set_options(
                            OptionsPatch {
                                max_tokens: Some(1e15),
                                refill_every_seconds: Some(1e9),
                            },
                            now,
                        )
                        .expect("valid options");
                    for k in keys {
                        assert!(limiter.consume(k.as_bytes(), Cost::ONE, now));
                    }
                    assert_eq!(limiter.stored_buckets(), keys.len(), "every key live");
                    Engine {
                        limiter,
                        nanos: START_NANOS,
                        cursor: 0,
                    }
                }

                pub fn live(&self) -> usize {
                    self.limiter.stored_buckets()
                }

                /// `calls` calls of `method` over `order` (cycled); the time inside the chunks.
                pub fn run(&mut self, method: Method, order: &[String], calls: u64) -> Duration {
                    match method {
                        Method::Consume => {
                            self.chunks(order, calls, |l, k, now| l.consume(k, Cost::ONE, now))
                        }
                        Method::Check => {
                            self.chunks(order, calls, |l, k, now| l.check(k, Cost::ONE, now))
                        }
                        // The whole decision is kept, as the binding reads every field of it:
                        // reading `allowed` alone let the optimiser drop the computation of
                        // the waits and the status whenever it inlined the call.
                        Method::Limit => self.chunks(order, calls, |l, k, now| {
                            std::hint::black_box(l.limit(k, Cost::ONE, None, now))
                                .map(|d| d.allowed)
                                .unwrap_or(false)
                        }),
                    }
                }

                #[inline(always)]
                fn chunks(
                    &mut self,
                    order: &[String],
                    calls: u64,
                    call: impl Fn(&mut Limiter, &[u8], Instant) -> bool,
                ) -> Duration {
                    let len = order.len();
                    let mut cursor = self.cursor;
                    let mut left = calls;
                    let mut allowed = 0u64;
                    let mut timed = Duration::ZERO;
                    while left > 0 {
                        let chunk = left.min(CHUNK);
                        let now = Instant::from_nanos(self.nanos);
                        let start = WallClock::now();
                        for _ in 0..chunk {
                            let k = order[cursor].as_bytes();
                            allowed += call(&mut self.limiter, k, now) as u64;
                            cursor += 1;
                            if cursor == len {
                                cursor = 0;
                            }
                        }
                        timed += start.elapsed();
                        // Untimed: move the clock on.
                        self.nanos += chunk * STEP_NANOS;
                        left -= chunk;
                    }
                    self.cursor = cursor;
                    assert_eq!(std::hint::black_box(allowed), calls, "a call was denied");
                    timed
                }
            }
        }
    };
}

engine!(old_engine, old);
engine!(new_engine, new);

/// The engines of one column.
enum Subject {
    Old(old_engine::Engine),
    New(new_engine::Engine),
}

impl Subject {
    fn run(&mut self, method: Method, order: &[String], calls: u64) -> Duration {
        match self {
            Subject::Old(e) => e.run(method, order, calls),
            Subject::New(e) => e.run(method, order, calls),
        }
    }

    fn live(&self) -> usize {
        match self {
            Subject::Old(e) => e.live(),
            Subject::New(e) => e.live(),
        }
    }
}

/// The new engine with `BLOCKS` blocks in force on keys that are never called.
#[cfg(feature = "blocks")]
fn with_blocks(keys: &[String]) -> Subject {
    let mut e = new_engine::Engine::new(keys);
    let now = new_engine::Instant::from_nanos(e.nanos);
    for i in 0..BLOCKS {
        e.limiter
            .block(format!("blocked-{i}:api").as_bytes(), BLOCK_NANOS, now);
    }
    assert_eq!(e.limiter.blocked_keys(), BLOCKS);
    Subject::New(e)
}

#[cfg(feature = "blocks")]
fn blocks_in_force(subject: &Subject) -> usize {
    match subject {
        Subject::New(e) => {
            let now = new_engine::Instant::from_nanos(e.nanos);
            e.limiter.blocks(now).len()
        }
        Subject::Old(_) => 0,
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

fn range(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

fn env_usize_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .replace('_', "")
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: comma-separated numbers"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

struct Row {
    method: Method,
    keys: usize,
    /// ns per call of each round, per column (old, new, and the new engine with blocks).
    samples: Vec<Vec<f64>>,
}

fn main() {
    let rounds = env_usize_list("COMPARE_ROUNDS", &[7])[0].max(1);
    let sizes = env_usize_list("COMPARE_KEYS", &[1, 10_000, 1_000_000]);
    let mut columns = vec!["old", "new"];
    if cfg!(feature = "blocks") {
        columns.push("new, 1,000 blocks");
    }
    let mut rows = Vec::new();
    for &n in &sizes {
        let keys: Vec<String> = (0..n).map(key).collect();
        let order: Vec<String> = shuffled(n).into_iter().map(key).collect();
        let setup = WallClock::now();
        #[allow(unused_mut)]
        let mut subjects = vec![
            Subject::Old(old_engine::Engine::new(&keys)),
            Subject::New(new_engine::Engine::new(&keys)),
        ];
        #[cfg(feature = "blocks")]
        subjects.push(with_blocks(&keys));
        drop(keys);
        eprintln!("setup of {n} keys: {:.2?}", setup.elapsed());
        for method in [Method::Consume, Method::Check, Method::Limit] {
            let warm_up = (n as u64).max(200_000);
            for s in subjects.iter_mut() {
                s.run(method, &order, warm_up);
            }
            let columns = subjects.len();
            let mut samples = vec![Vec::with_capacity(rounds); columns];
            let mut chunks = vec![Vec::with_capacity((CALLS / CHUNK) as usize); columns];
            for _ in 0..rounds {
                for c in &mut chunks {
                    c.clear();
                }
                // One chunk of each column in turn, the first column rotating, so that every
                // column meets the same load and none always runs first.
                for step in 0..(CALLS / CHUNK) as usize {
                    for j in 0..columns {
                        let i = (step + j) % columns;
                        let d = subjects[i].run(method, &order, CHUNK);
                        chunks[i].push(d.as_nanos() as f64 / CHUNK as f64);
                    }
                }
                for (i, c) in chunks.iter().enumerate() {
                    samples[i].push(median(c));
                }
            }
            for s in &subjects {
                assert_eq!(s.live(), n, "every key stays live");
            }
            #[cfg(feature = "blocks")]
            assert_eq!(
                blocks_in_force(&subjects[2]),
                BLOCKS,
                "the blocks stay in force"
            );
            let row = Row {
                method,
                keys: n,
                samples,
            };
            eprintln!("  {}", line(&row));
            rows.push(row);
        }
        black_box(&subjects);
    }

    println!();
    println!(
        "# native: ns per call on an existing key, median of {rounds} rounds x {CALLS} calls (each round: the median of chunks of {CHUNK} calls, the columns taking turns chunk by chunk); ratio = new / old of the medians, [min-max of the per-round ratios]"
    );
    let mut header = vec!["method", "live keys", "old ns", "new ns", "new/old"];
    if columns.len() > 2 {
        header.extend(["new, 1,000 blocks ns", "blocks/new", "blocks/old"]);
    }
    println!("| {} |", header.join(" | "));
    println!(
        "|{}|",
        header.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    for row in &rows {
        let med: Vec<f64> = row.samples.iter().map(|s| median(s)).collect();
        let mut cells = vec![
            row.method.name().to_string(),
            thousands(row.keys),
            format!("{:.2}", med[0]),
            format!("{:.2}", med[1]),
            ratio_cell(row, 1, 0),
        ];
        if med.len() > 2 {
            cells.push(format!("{:.2}", med[2]));
            cells.push(ratio_cell(row, 2, 1));
            cells.push(ratio_cell(row, 2, 0));
        }
        println!("| {} |", cells.join(" | "));
    }
    println!();
    for row in &rows {
        println!("{}", line(row));
    }
}

/// `a / b` of the medians, and the range of the per-round ratios.
fn ratio_cell(row: &Row, a: usize, b: usize) -> String {
    let (lo, hi) = per_round(row, a, b);
    format!(
        "{:.3}× [{lo:.2}–{hi:.2}]",
        median(&row.samples[a]) / median(&row.samples[b])
    )
}

fn per_round(row: &Row, a: usize, b: usize) -> (f64, f64) {
    let ratios: Vec<f64> = row.samples[a]
        .iter()
        .zip(&row.samples[b])
        .map(|(x, y)| x / y)
        .collect();
    range(&ratios)
}

/// The machine-readable line of a row.
fn line(row: &Row) -> String {
    let med: Vec<f64> = row.samples.iter().map(|s| median(s)).collect();
    let (lo, hi) = per_round(row, 1, 0);
    let mut s = format!(
        "COMPARE_NATIVE method={} keys={} old_ns={:.2} new_ns={:.2} ratio={:.3} round_ratios={lo:.3}..{hi:.3}",
        row.method.name(),
        row.keys,
        med[0],
        med[1],
        med[1] / med[0]
    );
    if med.len() > 2 {
        s.push_str(&format!(
            " blocks_ns={:.2} blocks_vs_new={:.3} blocks_vs_old={:.3}",
            med[2],
            med[2] / med[1],
            med[2] / med[0]
        ));
    }
    s
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
