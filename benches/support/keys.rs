//! The keys the native benchmarks call, and the fixed shuffled order they visit them in (not
//! the insertion order, which would favour the store's layout). Shared by benches/engine.rs
//! and bench/compare/native.rs.

/// The `i`-th key, shaped like a middleware key (client and policy).
pub fn key(i: usize) -> String {
    format!("client-{i}:api")
}

/// SplitMix64: a tiny deterministic generator for the shuffle (same order every run).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 0..n in a fixed shuffled order (Fisher-Yates over SplitMix64).
pub fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = 0x5EED_u64;
    for i in (1..n).rev() {
        let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}
