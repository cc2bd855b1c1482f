//! The TypeScript types of the binding. tsify writes them, doc comments included, into the
//! generated `.d.ts`; values are read and built by hand (`read.rs`, `objects.rs`), so these
//! structs carry no serde derives.

use tsify::Tsify;

/// Options of a rate limiter. Every field is optional: an omitted field keeps its value.
#[derive(Tsify)]
pub struct RateLimiterOptions {
    /// Bucket capacity: the most tokens a key can hold, and so the largest burst.
    /// A whole number from 1 to 2^53 - 1. Default: 10.
    #[tsify(optional, type = "number | undefined")]
    pub max_tokens: Option<f64>,
    /// Seconds between two refilled tokens: a finite number > 0, fractions allowed
    /// (0.25 refills four tokens a second). Default: 10.
    #[tsify(optional, type = "number | undefined")]
    pub refill_every_seconds: Option<f64>,
}

/// A key's own options (`limit`, `limitLeased`, a `limitAll` request): the fields of the
/// options, and a penalty.
#[derive(Tsify)]
pub struct RateLimiterPolicy {
    /// As in the options. Default: the instance options'.
    #[tsify(optional, type = "number | undefined")]
    pub max_tokens: Option<f64>,
    /// As in the options. Default: the instance options'.
    #[tsify(optional, type = "number | undefined")]
    pub refill_every_seconds: Option<f64>,
    /// A penalty: a call under this policy that is denied blocks the key for this many
    /// seconds (finite, > 0, at most a year), unless a block is in force.
    #[tsify(optional, type = "number | undefined")]
    pub block_seconds: Option<f64>,
}

/// The state of one key's bucket, as `getStatus` reports it. Consumes nothing.
#[derive(Tsify)]
pub struct RateLimiterStatus {
    /// Tokens available now (after refilling); fractional after fractional costs.
    pub remaining: f64,
    /// The bucket capacity (`max_tokens`).
    pub limit: f64,
    /// 0 when the bucket is full, else milliseconds until the next token is added,
    /// a whole number rounded up: a client that waits this long is never early.
    pub reset_in_ms: f64,
}

/// What `limit` decided for one key, and the state of its bucket after the call.
#[derive(Tsify)]
pub struct RateLimitDecision {
    /// Whether the call consumed its cost.
    pub allowed: bool,
    /// Tokens available after this call (after refilling).
    pub remaining: f64,
    /// The bucket capacity (`max_tokens`) this call used.
    pub limit: f64,
    /// 0 when the bucket is full, else milliseconds until the next token, rounded up.
    pub reset_in_ms: f64,
    /// 0 when allowed. When denied: whole milliseconds, rounded up, after which the same
    /// call succeeds if nothing else consumes; `null` when no wait can help (cost above
    /// capacity).
    #[tsify(type = "number | null")]
    pub retry_after_ms: Option<f64>,
    /// Milliseconds an empty bucket takes to refill completely (`max_tokens` intervals),
    /// rounded up: the window of the policy, as the IETF RateLimit-Policy `w` reports it.
    pub window_ms: f64,
}

/// One limit of a `limitAll` call.
#[derive(Tsify)]
pub struct RateLimitRequest {
    /// The bucket's key; each key may appear once per call.
    pub key: String,
    /// Tokens to take, a finite number >= 0. Default: 1.
    #[tsify(optional, type = "number | undefined")]
    pub cost: Option<f64>,
    /// Options for this key, remembered by its bucket; missing fields come from the
    /// instance options. Default: the key's remembered policy, else the instance options.
    #[tsify(optional, type = "RateLimiterPolicy | undefined")]
    pub policy: Option<RateLimiterPolicy>,
    /// A limit on trial: it never changes the answer, and takes its cost (if it has room)
    /// only when the other requests allowed. Default: false.
    #[tsify(optional, type = "boolean | undefined")]
    pub shadow: Option<bool>,
}

/// What `limitAll` decided: every enforced bucket consumed, or none did.
#[derive(Tsify)]
pub struct RateLimitAllDecision {
    /// Whether every enforced request consumed its cost (if false, none did); shadow
    /// requests never change it.
    pub allowed: bool,
    /// 0 when allowed, else the largest wait among the enforced results; `null` when some
    /// enforced request can never pass (cost above its capacity).
    #[tsify(type = "number | null")]
    pub retry_after_ms: Option<f64>,
    /// One decision per request, in order. When denied, `allowed` tells whether that limit
    /// had room, and nothing was consumed.
    pub results: Vec<RateLimitDecision>,
    /// Only when the call asked for a permit: granted (with its id) when the call is
    /// allowed; when denied, `allowed` tells whether the gate had room.
    #[tsify(optional, type = "RateLimitPermit | undefined")]
    pub permit: Option<RateLimitPermit>,
}

/// What `limitLeased` asks besides the call's own cost.
#[derive(Tsify)]
pub struct RateLimitLeaseRequest {
    /// Tokens wanted for later requests, spent by the caller on its own. The limiter grants
    /// at most half of what the bucket has left after this call. Default: 0 (no lease).
    #[tsify(optional, type = "number | undefined")]
    pub want: Option<f64>,
    /// The caller's previous lease on this key, settled before this call is decided.
    #[tsify(optional, type = "RateLimitSettlement | undefined")]
    pub settle: Option<RateLimitSettlement>,
    /// Tokens per second the caller expects to need: above 0 asks for a share, a part of the
    /// bucket's capacity and refill that the caller runs as a bucket of its own (granted
    /// whether or not this call's cost is allowed), where the demand on the key is well above
    /// its refill or the caller's alone reaches it; else the call gets a plain lease of
    /// `want`. Default: 0 (a plain lease of `want`).
    #[tsify(optional, type = "number | undefined")]
    pub rate: Option<f64>,
    /// The `id` of the caller's share on this key, to renew: it gets a next term (if it has
    /// none yet) and may be topped up with up to `want` tokens.
    #[tsify(optional, type = "number | undefined")]
    pub renew: Option<f64>,
    /// Whether the caller keeps appointments: when the key is starved (its refill cannot
    /// keep up with its callers), a call without a share is given a turn in the key's queue
    /// (`call_after_ms` in the answer) and the caller does not call again before it. Default:
    /// false.
    #[tsify(optional, type = "boolean | undefined")]
    pub queue: Option<bool>,
    /// The id the caller chooses for the lease or share granted (a whole number from 0 to
    /// 2^53 - 1), so that it can settle it even when it never hears this call's answer. One
    /// that a lease on this key has already is not taken: the answer's `lease.id` is then
    /// another. Default: an id the limiter chooses.
    #[tsify(optional, type = "number | undefined")]
    pub id: Option<f64>,
}

/// A lease as its holder reports it at the end.
#[derive(Tsify)]
pub struct RateLimitSettlement {
    /// The lease's `id`.
    pub id: f64,
    /// Tokens spent from it; the rest goes back into the bucket.
    pub used: f64,
    /// For a share: the tokens its bucket has left, which go back (without it, none do).
    #[tsify(optional, type = "number | undefined")]
    pub left: Option<f64>,
}

/// Tokens granted to spend locally.
#[derive(Tsify)]
pub struct RateLimitLease {
    /// Names the lease when it is settled.
    pub id: f64,
    /// Tokens granted, besides the call's own cost (for a share: moved into its bucket). 0,
    /// without `share`: the ask for a share was kept on record instead (the key has more
    /// isolates asking than shares fit); ask again after `ttl_ms`.
    pub tokens: f64,
    /// Milliseconds the lease (a share: its current term; a record: the record) is valid from
    /// the call; after that it counts as fully used.
    pub ttl_ms: f64,
    /// Present for a share: its terms.
    #[tsify(optional, type = "RateLimitShare | undefined")]
    pub share: Option<RateLimitShare>,
}

/// A share's terms: the capacity and refill of the caller's own bucket.
#[derive(Tsify)]
pub struct RateLimitShare {
    /// Whole tokens the caller's bucket holds at most.
    pub capacity: f64,
    /// Nanoseconds between two tokens of its refill; `null`: no refill.
    #[tsify(type = "number | null")]
    pub refill_every_ns: Option<f64>,
    /// Milliseconds the next term lasts from the current one's end (without one: how long a
    /// term of the current terms would last). Longer where a share's refill is slow.
    pub term_ms: f64,
    /// The terms that follow the current one (for another term), once the share is renewed;
    /// still `null` after a renewal when the demand no longer is due a share: the share ends
    /// with its current term.
    #[tsify(type = "RateLimitShareTerm | null")]
    pub next: Option<RateLimitShareTerm>,
}

/// The terms of a share's next term.
#[derive(Tsify)]
pub struct RateLimitShareTerm {
    pub capacity: f64,
    #[tsify(type = "number | null")]
    pub refill_every_ns: Option<f64>,
}

// A `limit` decision plus its lease: written by hand, since tsify cannot say `extends`.
#[wasm_bindgen::prelude::wasm_bindgen(typescript_custom_section)]
const RATE_LIMIT_LEASE_DECISION: &str = r#"
/**
 * A `limit` decision with the lease granted for later requests, if any.
 */
export interface RateLimitLeaseDecision extends RateLimitDecision {
    /**
     * `null` when nothing was granted.
     */
    lease: RateLimitLease | null;
    /**
     * Only for a caller that asked for appointments (`queue`), on a starved key: milliseconds
     * until its turn, before which it does not call again. A denial's `retry_after_ms` is at
     * least as long.
     */
    call_after_ms?: number;
}
"#;

/// A concurrency limit, for `acquire`: at most `max_in_flight` in flight on the key.
#[derive(Tsify)]
pub struct RateLimitGatePolicy {
    /// The most the key's live permits may cost together: a whole number from 1 to 2^53 - 1.
    pub max_in_flight: f64,
    /// Seconds a permit stays live if it is not released: finite, > 0, at most 86,400.
    /// Default: 60.
    #[tsify(optional, type = "number | undefined")]
    pub ttl_seconds: Option<f64>,
}

/// What `acquire` decided.
#[derive(Tsify)]
pub struct RateLimitPermit {
    /// Whether the permit was granted.
    pub allowed: bool,
    /// The permit's id, for `release`; `null` when denied.
    #[tsify(type = "number | null")]
    pub id: Option<f64>,
    /// The cost of the key's live permits after the call.
    pub in_flight: f64,
    /// The `max_in_flight` of the call.
    pub limit: f64,
    /// Milliseconds the permit stays live if it is not released; 0 when denied.
    pub ttl_ms: f64,
    /// 0 when allowed; when denied, whole milliseconds until expiries alone make room (the
    /// longest wait if nobody releases); `null` when the cost is above `max_in_flight`.
    #[tsify(type = "number | null")]
    pub retry_after_ms: Option<f64>,
}

/// What `release` did.
#[derive(Tsify)]
pub struct RateLimitRelease {
    /// Whether a live permit with that id ended (false: released already, expired or never
    /// granted; nothing changed).
    pub released: bool,
    /// The cost of the key's live permits after the call.
    pub in_flight: f64,
}

/// The live permits of a key, as `gateStatus` reports them.
#[derive(Tsify)]
pub struct RateLimitGateStatus {
    /// What they cost together.
    pub in_flight: f64,
    /// How many there are.
    pub permits: f64,
}

/// The permit of a `limitAll` call with a concurrency limit.
#[derive(Tsify)]
pub struct RateLimitPermitRequest {
    /// The gate's key (apart from the buckets' keys).
    pub key: String,
    /// A whole number from 1 to 2^53 - 1. Default: 1.
    #[tsify(optional, type = "number | undefined")]
    pub cost: Option<f64>,
    pub policy: RateLimitGatePolicy,
}
