//! `@delightstack/rate-limiter`: a token-bucket rate limiter for Cloudflare Workers.
//!
//! [`engine`] is the pure algorithm (no JavaScript, no clock); [`binding`] exposes it to
//! JavaScript through wasm-bindgen. The Durable Object class lives in the JS shim (`js/`).

pub mod binding;
pub mod engine;

/// Talc instead of Rust's default dlmalloc: smaller in the binary and as fast here.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: talc::TalckWasm = unsafe { talc::TalckWasm::new_global() };
