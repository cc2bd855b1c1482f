//! The wasm-bindgen layer: the class `RateLimiter` that JavaScript calls. It converts
//! JavaScript values into engine inputs (`read`, `key`) and engine results into JavaScript
//! values (`objects`), and makes JavaScript errors (`errors`); the engine decides.
//!
//! `now_ms` is `Date.now()` at the call, read once by the shim; it comes first so that the
//! optional arguments can be last.
//!
//! Loaders: `setOptions` and `limitAll` take an optional `load` function, for a caller that
//! keeps snapshots of its buckets outside memory (the durable class). The binding reads
//! the caller's value once and validates it, then calls `load`, restores the snapshots it
//! returns, and only then decides. So a getter cannot show the loader other keys than the
//! engine sees, and a bad value loads nothing.

mod blocks;
mod durable;
mod errors;
mod gates;
mod key;
mod leases;
mod objects;
mod read;
mod test_hooks;
mod types;

use wasm_bindgen::prelude::*;

use crate::engine::{Cost, Instant, Limiter, OptionsPatch, Request};
use key::encode_key;
use objects::{all_decision_object, decision_object, options_object, status_object};
use read::{read_cost, read_options, read_policy, read_requests};
use test_hooks::trap_if_asked;
use tsify::Ts;
pub use types::{
    RateLimitAllDecision, RateLimitDecision, RateLimitGatePolicy, RateLimitGateStatus,
    RateLimitLease, RateLimitLeaseRequest, RateLimitPermit, RateLimitPermitRequest,
    RateLimitRelease, RateLimitRequest, RateLimitSettlement, RateLimitShare, RateLimitShareTerm,
    RateLimiterOptions, RateLimiterPolicy, RateLimiterStatus,
};

/// What the fast paths (`checkText`, `consumeText`) answer.
#[wasm_bindgen]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastAnswer {
    Denied = 0,
    Allowed = 1,
    /// The cost is out of range: the general path reports the error.
    UseGeneralPath = 2,
}

impl FastAnswer {
    fn from_bool(allowed: bool) -> FastAnswer {
        if allowed {
            FastAnswer::Allowed
        } else {
            FastAnswer::Denied
        }
    }
}

/// Token-bucket rate limiter over string keys.
#[wasm_bindgen]
pub struct RateLimiter {
    engine: Limiter,
    /// Reused buffer for the encoded key of the current call.
    key: Vec<u8>,
    /// The key of the last `consumeText` or `checkText` call: `consumeSame` and `checkSame`
    /// decide on it again without the key crossing into wasm (the shim calls them when the
    /// key is the same string, as a Durable Object per client mostly sees).
    text_key: Vec<u8>,
    /// The numbers of the last `limitInto` decision, read by the shim.
    slots: [f64; 5],
}

#[wasm_bindgen]
impl RateLimiter {
    /// `seed_high`/`seed_low`: a random 64-bit seed for the key hash, fresh per instance.
    #[wasm_bindgen(constructor)]
    pub fn new(seed_high: u32, seed_low: u32) -> RateLimiter {
        RateLimiter {
            engine: Limiter::new(((seed_high as u64) << 32) | seed_low as u64),
            key: Vec::new(),
            text_key: Vec::new(),
            slots: [0.0; 5],
        }
    }

    /// Whether this limiter holds nothing a new one would not (every bucket full, no block,
    /// permit or lease in force): then it can be freed and made anew with its options.
    #[wasm_bindgen(js_name = holdsNothing)]
    pub fn holds_nothing(&mut self, now_ms: f64) -> bool {
        self.engine.holds_nothing(Instant::from_millis(now_ms))
    }

    /// Updates the instance options, all or nothing, and returns whether they changed.
    /// `load` (see the module docs) is called only when they change, before they do, and
    /// returns `[key, snapshot bytes]` pairs of every bucket kept outside memory: how a
    /// bucket meets new options depends on when it was last refilled, which the snapshot
    /// holds.
    #[wasm_bindgen(js_name = setOptions)]
    pub fn set_options(
        &mut self,
        now_ms: f64,
        options: Ts<RateLimiterOptions>,
        #[wasm_bindgen(unchecked_optional_param_type = "() => [string, ArrayBuffer][]")]
        load: &JsValue,
    ) -> Result<bool, JsValue> {
        let patch = read_options(&options.js_value(), "options", false)?;
        let changed = self.engine.options().patched(patch)? != self.engine.options();
        let now = Instant::from_millis(now_ms);
        if changed {
            self.load_all(load, now)?;
        }
        self.engine.set_options(patch, now)?;
        Ok(changed)
    }

    /// Whether `consume(key, cost)` would succeed now. Consumes nothing.
    pub fn check(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
    ) -> Result<bool, JsValue> {
        self.answer(now_ms, key, cost, Limiter::check)
    }

    /// Takes `cost` tokens (default 1) if the bucket holds that many; else changes nothing.
    pub fn consume(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
    ) -> Result<bool, JsValue> {
        self.answer(now_ms, key, cost, Limiter::consume)
    }

    /// `check` for a well-formed string key and a number cost: the shim's fast path.
    /// Such a key's UTF-8 bytes are exactly what `encode_key` makes of it. No `Result`, so
    /// no error slot to return.
    #[wasm_bindgen(js_name = checkText)]
    pub fn check_text(&mut self, now_ms: f64, key: String, cost: f64) -> FastAnswer {
        // Kept as it came (no copy): the buffer the glue allocated for it is ours.
        self.text_key = key.into_bytes();
        let Ok(cost) = Cost::new(cost) else {
            return FastAnswer::UseGeneralPath;
        };
        let now = Instant::from_millis(now_ms);
        FastAnswer::from_bool(self.engine.check(&self.text_key, cost, now))
    }

    /// `consume` for a well-formed string key and a number cost: the shim's fast path.
    #[wasm_bindgen(js_name = consumeText)]
    pub fn consume_text(&mut self, now_ms: f64, key: String, cost: f64) -> FastAnswer {
        trap_if_asked(key.as_bytes());
        self.text_key = key.into_bytes();
        let Ok(cost) = Cost::new(cost) else {
            return FastAnswer::UseGeneralPath;
        };
        let now = Instant::from_millis(now_ms);
        FastAnswer::from_bool(self.engine.consume(&self.text_key, cost, now))
    }

    /// `checkText` on the key of the last `consumeText` or `checkText` call.
    #[wasm_bindgen(js_name = checkSame)]
    pub fn check_same(&mut self, now_ms: f64, cost: f64) -> FastAnswer {
        let Ok(cost) = Cost::new(cost) else {
            return FastAnswer::UseGeneralPath;
        };
        let now = Instant::from_millis(now_ms);
        FastAnswer::from_bool(self.engine.check(&self.text_key, cost, now))
    }

    /// `consumeText` on the key of the last `consumeText` or `checkText` call.
    #[wasm_bindgen(js_name = consumeSame)]
    pub fn consume_same(&mut self, now_ms: f64, cost: f64) -> FastAnswer {
        trap_if_asked(&self.text_key);
        let Ok(cost) = Cost::new(cost) else {
            return FastAnswer::UseGeneralPath;
        };
        let now = Instant::from_millis(now_ms);
        FastAnswer::from_bool(self.engine.consume(&self.text_key, cost, now))
    }

    /// The bucket of `key` now: `{ remaining, limit, reset_in_ms }`.
    #[wasm_bindgen(js_name = getStatus)]
    pub fn get_status(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<Ts<RateLimiterStatus>, JsValue> {
        encode_key(key, "key", &mut self.key)?;
        let status = self.engine.status(&self.key, Instant::from_millis(now_ms));
        Ok(Ts::new_unchecked(status_object(&status).into()))
    }

    /// `getStatus` for a well-formed string key: the shim's fast path.
    #[wasm_bindgen(js_name = getStatusText)]
    pub fn get_status_text(&mut self, now_ms: f64, key: &str) -> Ts<RateLimiterStatus> {
        let now = Instant::from_millis(now_ms);
        let status = self.engine.status(key.as_bytes(), now);
        Ts::new_unchecked(status_object(&status).into())
    }

    /// Forgets the bucket of `key` and its policy: it is full at its next access.
    pub fn reset(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<(), JsValue> {
        encode_key(key, "key", &mut self.key)?;
        self.engine.reset(&self.key);
        Ok(())
    }

    /// Applies `policy` to the key, consumes `cost` and reports, in one call.
    pub fn limit(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "RateLimiterPolicy")] policy: &JsValue,
    ) -> Result<Ts<RateLimitDecision>, JsValue> {
        let cost = self.read_key_and_cost(key, cost)?;
        let (policy, penalty) = read_policy(policy, "policy")?;
        let key = std::mem::take(&mut self.key);
        let decision = self.decide(&key, cost, policy, penalty, now_ms);
        self.key = key;
        decision
    }

    /// `limit` for a well-formed string key, a number cost and a policy that the shim has
    /// read as two numbers (`NaN`: the field is absent; the shim sends real NaNs and
    /// anything unusual down the general path). The decision's numbers go to the slots at
    /// `decisionSlots` (remaining, limit, reset_in_ms, retry_after_ms or -1 for `null`,
    /// window_ms), from which the shim builds the object: cheaper than building it through
    /// an import. A bad cost or policy changes nothing and answers `UseGeneralPath`, whose
    /// call reports it.
    #[wasm_bindgen(js_name = limitInto)]
    pub fn limit_into(
        &mut self,
        now_ms: f64,
        key: &str,
        cost: f64,
        has_policy: bool,
        max_tokens: f64,
        refill_every_seconds: f64,
    ) -> FastAnswer {
        let Ok(cost) = Cost::new(cost) else {
            return FastAnswer::UseGeneralPath;
        };
        let present = |x: f64| (!x.is_nan()).then_some(x);
        let policy = has_policy.then(|| OptionsPatch {
            max_tokens: present(max_tokens),
            refill_every_seconds: present(refill_every_seconds),
        });
        let now = Instant::from_millis(now_ms);
        let Ok(decision) = self.engine.limit(key.as_bytes(), cost, policy, now) else {
            return FastAnswer::UseGeneralPath;
        };
        let status = &decision.status;
        self.slots = [
            status.remaining,
            status.limit,
            status.reset_in_ms,
            decision.retry_after_ms.unwrap_or(-1.0),
            decision.window_ms,
        ];
        FastAnswer::from_bool(decision.allowed)
    }

    /// Where `limitInto` writes a decision's numbers: a byte offset in wasm memory, 8-byte
    /// aligned, fixed for this limiter's life.
    #[wasm_bindgen(js_name = decisionSlots)]
    pub fn decision_slots(&self) -> usize {
        self.slots.as_ptr() as usize
    }

    /// `limit` over several keys, all or nothing. `load` (see the module docs) is called
    /// for each request's key in order, with whether memory holds a bucket for it, and
    /// may return that key's snapshot bytes.
    #[wasm_bindgen(js_name = limitAll)]
    pub fn limit_all(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "RateLimitRequest[]")] requests: &JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "(key: string, held: boolean) => ArrayBuffer | undefined"
        )]
        load: &JsValue,
    ) -> Result<Ts<RateLimitAllDecision>, JsValue> {
        let requests = read_requests(requests)?;
        let now = Instant::from_millis(now_ms);
        self.load_each(load, &requests, now)?;
        let borrowed: Vec<Request<'_>> = requests.iter().map(|r| r.borrowed()).collect();
        let decision = self.engine.limit_all(&borrowed, now)?;
        Ok(Ts::new_unchecked(all_decision_object(&decision).into()))
    }

    /// The instance options, all fields filled in.
    #[wasm_bindgen(getter)]
    pub fn options(&self) -> Ts<RateLimiterOptions> {
        Ts::new_unchecked(options_object(&self.engine.options()).into())
    }

    /// Buckets held in memory: only keys that were not full when last seen.
    #[wasm_bindgen(getter, js_name = storedBuckets)]
    pub fn stored_buckets(&self) -> usize {
        self.engine.stored_buckets()
    }
}

impl RateLimiter {
    /// Reads the cost, then the key into `self.key` (in that order: a bad cost is reported
    /// before a bad key).
    pub(crate) fn read_key_and_cost(
        &mut self,
        key: &JsValue,
        cost: &JsValue,
    ) -> Result<Cost, JsValue> {
        let cost = read_cost(cost, "cost")?;
        encode_key(key, "key", &mut self.key)?;
        Ok(cost)
    }

    /// `check` or `consume` (`call`) on the caller's key and cost.
    fn answer(
        &mut self,
        now_ms: f64,
        key: &JsValue,
        cost: &JsValue,
        call: fn(&mut Limiter, &[u8], Cost, Instant) -> bool,
    ) -> Result<bool, JsValue> {
        let cost = self.read_key_and_cost(key, cost)?;
        Ok(call(
            &mut self.engine,
            &self.key,
            cost,
            Instant::from_millis(now_ms),
        ))
    }

    fn decide(
        &mut self,
        key: &[u8],
        cost: Cost,
        policy: Option<OptionsPatch>,
        penalty: Option<u64>,
        now_ms: f64,
    ) -> Result<Ts<RateLimitDecision>, JsValue> {
        let now = Instant::from_millis(now_ms);
        let mut decision = self
            .engine
            .limit(key, cost, policy, now)
            .map_err(|e| e.within("policy"))?;
        if let Some(nanos) = penalty {
            self.engine.apply_penalty(key, &mut decision, nanos, now);
        }
        Ok(Ts::new_unchecked(decision_object(&decision).into()))
    }
}
