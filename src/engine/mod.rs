//! The pure token-bucket engine: no JavaScript, no clock, no panics on any input.
//! Callers validate raw numbers into [`Options`] and [`Cost`] and pass time as an [`Instant`].

mod all_keys;
mod appointment;
mod block;
mod bucket;
mod error;
mod gate;
mod in_force;
mod keyed;
mod lease;
mod leased;
mod leasing;
mod limiter;
mod options;
mod share;
mod snapshot;
mod store;
mod time;
mod view;
mod wide;

pub use all_keys::{AllDecision, Request};
pub use block::{block_nanos, MAX_BLOCK_SECONDS};
pub use bucket::Status;
pub use error::{decimal, join, Error, JsNumber, Spelling};
pub use gate::{
    gate_snapshot, permit_cost, permit_id, GatePolicy, Permit, PermitAsk, PermitDecision, Released,
    DEFAULT_PERMIT_TTL_SECONDS, MAX_PERMITS_PER_KEY, MAX_PERMIT_TTL_SECONDS,
};
pub use lease::{
    Lease, Term, LEASE_TTL_NANOS, LONGEST_TERM_NANOS, MAX_LEASES_PER_KEY, SHARE_TERM_NANOS,
};
pub use leased::{LeaseAsk, LeaseDecision, Settlement};
pub use limiter::{Decision, Limiter};
pub use options::{
    Cost, Options, OptionsPatch, DEFAULT_MAX_TOKENS, DEFAULT_REFILL_EVERY_SECONDS,
    MAX_SAFE_INTEGER, MAX_TOKENS_IN_BILLIONTHS, UNITS_PER_TOKEN,
};
pub use share::{main_period, share_period, term_nanos, RATE_PARTS};
pub use snapshot::{KeyedSnapshot, Snapshot, StoredSnapshot};
pub use store::SWEEP_STEPS;
pub use time::{ceil_millis, Instant};
pub use wide::div_ceil_small;
