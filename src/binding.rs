//! The wasm-bindgen layer: converts JavaScript values into engine inputs and engine results
//! into JavaScript values. The only place where JavaScript errors are made.

use js_sys::{Array, JsString, Object, RangeError, Reflect, TypeError};
use serde::{Deserialize, Serialize};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use crate::engine::{
    decimal, join, AllDecision, Cost, Decision, Error, Instant, Limiter, OptionsPatch, Request,
    Spelling, Status, MAX_SAFE_INTEGER,
};

/// Options of a rate limiter. Every field is optional: an omitted field keeps its value.
#[derive(Tsify, Serialize, Deserialize, Default)]
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

/// The state of one key's bucket, as `getStatus` reports it. Consumes nothing.
#[derive(Tsify, Serialize, Deserialize)]
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
#[derive(Tsify, Serialize, Deserialize)]
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
#[derive(Tsify, Serialize, Deserialize)]
pub struct RateLimitRequest {
    /// The bucket's key; each key may appear once per call.
    pub key: String,
    /// Tokens to take, a finite number >= 0. Default: 1.
    #[tsify(optional, type = "number | undefined")]
    pub cost: Option<f64>,
    /// Options for this key, remembered by its bucket; missing fields come from the
    /// instance options. Default: the key's remembered policy, else the instance options.
    #[tsify(optional, type = "RateLimiterOptions | undefined")]
    pub policy: Option<RateLimiterOptions>,
}

/// What `limitAll` decided: every bucket consumed, or none did.
#[derive(Tsify, Serialize, Deserialize)]
pub struct RateLimitAllDecision {
    /// Whether every request consumed its cost (if false, none did).
    pub allowed: bool,
    /// 0 when allowed, else the largest wait among the results; `null` when some request
    /// can never pass (cost above its capacity).
    #[tsify(type = "number | null")]
    pub retry_after_ms: Option<f64>,
    /// One decision per request, in order. When denied, `allowed` tells whether that limit
    /// had room, and nothing was consumed.
    pub results: Vec<RateLimitDecision>,
}

// Result objects are built by JavaScript in one call each: object literals get a stable
// shape at once, where setting fields one by one from wasm costs a boundary crossing and a
// property-name string per field. A negative `retry_after_ms` stands for `null`.
#[wasm_bindgen(inline_js = "
export function statusObject(remaining, limit, reset_in_ms) {
  return { remaining, limit, reset_in_ms };
}
export function decisionObject(allowed, remaining, limit, reset_in_ms, retry_after_ms, window_ms) {
  return {
    allowed, remaining, limit, reset_in_ms,
    retry_after_ms: retry_after_ms < 0 ? null : retry_after_ms,
    window_ms,
  };
}
export function savedObject(state, full_at_ms, policy) {
  // `state` views wasm memory: copy it out.
  return { state: state.slice().buffer, full_at_ms, policy };
}
export function allDecisionObject(allowed, retry_after_ms, results) {
  return { allowed, retry_after_ms: retry_after_ms < 0 ? null : retry_after_ms, results };
}
")]
extern "C" {
    #[wasm_bindgen(js_name = statusObject)]
    fn status_object_js(remaining: f64, limit: f64, reset_in_ms: f64) -> Object;

    #[wasm_bindgen(js_name = decisionObject)]
    fn decision_object_js(
        allowed: bool,
        remaining: f64,
        limit: f64,
        reset_in_ms: f64,
        retry_after_ms: f64,
        window_ms: f64,
    ) -> Object;

    #[wasm_bindgen(js_name = savedObject)]
    fn saved_object_js(state: &[u8], full_at_ms: f64, policy: bool) -> Object;

    #[wasm_bindgen(js_name = allDecisionObject)]
    fn all_decision_object_js(allowed: bool, retry_after_ms: f64, results: Array) -> Object;
}

// Every JS call that a caller's value can make throw (a Proxy trap, a revoked Proxy, a getter)
// is imported with `catch`: an exception must never unwind through the binding, which would
// skip its cleanup and leave the RateLimiter borrowed (every later call would then fail).
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = Object, js_name = keys)]
    fn own_keys(object: &JsValue) -> Result<Array, JsValue>;

    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn is_array(value: &JsValue) -> Result<bool, JsValue>;
}

#[wasm_bindgen]
extern "C" {
    /// A JS string, seen through the one method of it we need.
    #[wasm_bindgen(extends = JsString)]
    type Text;

    /// `String.prototype.isWellFormed`: false when the string holds a lone surrogate.
    #[wasm_bindgen(method, js_name = isWellFormed)]
    fn is_well_formed(this: &Text) -> bool;
}

/// What the fast paths return.
pub const DENIED: u32 = 0;
pub const ALLOWED: u32 = 1;
pub const USE_GENERAL_PATH: u32 = 2;

/// Token-bucket rate limiter over string keys. `now_ms` is `Date.now()` at the call; it
/// comes first so that the optional arguments can be last.
#[wasm_bindgen]
pub struct RateLimiter {
    engine: Limiter,
    /// Reused buffer for the encoded key of the current call.
    key: Vec<u8>,
    /// Options read by `prepareOptions`, waiting for `applyPreparedOptions`.
    prepared: Option<OptionsPatch>,
}

#[wasm_bindgen]
impl RateLimiter {
    /// `seed_high`/`seed_low`: a random 64-bit seed for the key hash, fresh per instance.
    #[wasm_bindgen(constructor)]
    pub fn new(seed_high: u32, seed_low: u32) -> RateLimiter {
        RateLimiter {
            engine: Limiter::new(((seed_high as u64) << 32) | seed_low as u64),
            key: Vec::new(),
            prepared: None,
        }
    }

    /// Updates the instance options. All or nothing.
    #[wasm_bindgen(js_name = setOptions)]
    pub fn set_options(
        &mut self,
        now_ms: f64,
        options: Ts<RateLimiterOptions>,
    ) -> Result<(), JsValue> {
        let patch = read_options(&options.js_value(), "options", false).map_err(to_js_error)?;
        let now = Instant::from_millis(now_ms);
        self.engine.set_options(patch, now).map_err(to_js_error)
    }

    /// Whether `consume(key, cost)` would succeed now. Consumes nothing.
    pub fn check(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
    ) -> Result<bool, JsValue> {
        let cost = read_cost(cost, "cost").map_err(to_js_error)?;
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        Ok(self
            .engine
            .check(&self.key, cost, Instant::from_millis(now_ms)))
    }

    /// Takes `cost` tokens (default 1) if the bucket holds that many; else changes nothing.
    pub fn consume(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
    ) -> Result<bool, JsValue> {
        let cost = read_cost(cost, "cost").map_err(to_js_error)?;
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        Ok(self
            .engine
            .consume(&self.key, cost, Instant::from_millis(now_ms)))
    }

    /// `check` for a well-formed string key and a number cost: the shim's fast path.
    /// Returns [`DENIED`], [`ALLOWED`] or [`USE_GENERAL_PATH`] (a cost out of range: the
    /// general `check` then throws the error). No `Result`, so no error slot to return.
    #[wasm_bindgen(js_name = checkText)]
    pub fn check_text(&mut self, now_ms: f64, key: &str, cost: f64) -> u32 {
        let Ok(cost) = Cost::new(cost) else {
            return USE_GENERAL_PATH;
        };
        let now = Instant::from_millis(now_ms);
        if self.engine.check(key.as_bytes(), cost, now) {
            ALLOWED
        } else {
            DENIED
        }
    }

    /// `consume` for a well-formed string key and a number cost: the shim's fast path.
    /// Such a key's UTF-8 bytes are exactly what `encode_key` makes of it. Returns as
    /// `checkText` does.
    #[wasm_bindgen(js_name = consumeText)]
    pub fn consume_text(&mut self, now_ms: f64, key: &str, cost: f64) -> u32 {
        trap_if_asked(key.as_bytes());
        let Ok(cost) = Cost::new(cost) else {
            return USE_GENERAL_PATH;
        };
        let now = Instant::from_millis(now_ms);
        if self.engine.consume(key.as_bytes(), cost, now) {
            ALLOWED
        } else {
            DENIED
        }
    }

    /// The bucket of `key` now: `{ remaining, limit, reset_in_ms }`.
    #[wasm_bindgen(js_name = getStatus)]
    pub fn get_status(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<Ts<RateLimiterStatus>, JsValue> {
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        let status = self.engine.status(&self.key, Instant::from_millis(now_ms));
        Ok(Ts::new_unchecked(status_object(&status).into()))
    }

    /// `getStatus` for a well-formed string key: the shim's fast path.
    #[wasm_bindgen(js_name = getStatusText)]
    pub fn get_status_text(&mut self, now_ms: f64, key: &str) -> Ts<RateLimiterStatus> {
        let status = self
            .engine
            .status(key.as_bytes(), Instant::from_millis(now_ms));
        Ts::new_unchecked(status_object(&status).into())
    }

    /// Forgets the bucket of `key` and its policy: it is full at its next access.
    pub fn reset(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<(), JsValue> {
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        self.engine.reset(&self.key);
        Ok(())
    }

    /// Applies `policy` to the key, consumes `cost` and reports, in one call.
    pub fn limit(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "RateLimiterOptions")] policy: &JsValue,
    ) -> Result<Ts<RateLimitDecision>, JsValue> {
        let cost = read_cost(cost, "cost").map_err(to_js_error)?;
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        let policy = read_policy(policy, "policy").map_err(to_js_error)?;
        let key = std::mem::take(&mut self.key);
        let decision = self.decide(&key, cost, policy, now_ms);
        self.key = key;
        decision
    }

    /// `limit` for a well-formed string key, a number cost and a policy that the shim has
    /// read as two numbers (`NaN`: the field is absent; the shim sends real NaNs and
    /// anything unusual down the general path).
    #[wasm_bindgen(js_name = limitText)]
    pub fn limit_text(
        &mut self,
        now_ms: f64,
        key: &str,
        cost: f64,
        has_policy: bool,
        max_tokens: f64,
        refill_every_seconds: f64,
    ) -> Result<Ts<RateLimitDecision>, JsValue> {
        let cost = Cost::new(cost).map_err(to_js_error)?;
        let present = |x: f64| (!x.is_nan()).then_some(x);
        let policy = has_policy.then(|| OptionsPatch {
            max_tokens: present(max_tokens),
            refill_every_seconds: present(refill_every_seconds),
        });
        self.decide(key.as_bytes(), cost, policy, now_ms)
    }

    /// `limit` over several keys, all or nothing. `load` (the durable class): called for each
    /// request's key in order, with whether memory holds a bucket for it, after the requests
    /// are read and before anything is decided; it may return the state `saved` gave for the
    /// key, restored unless memory holds one. The requests are read once, so a getter cannot
    /// show `load` other keys than the engine sees.
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
        let requests = read_requests(requests).map_err(to_js_error)?;
        let now = Instant::from_millis(now_ms);
        if let Some(load) = load.dyn_ref::<js_sys::Function>() {
            for (i, (key, _, _)) in requests.iter().enumerate() {
                let held = JsValue::from_bool(self.engine.holds(key));
                let state = load.call2(&JsValue::UNDEFINED, &decode_key(key), &held)?;
                if let Some(buffer) = state.dyn_ref::<js_sys::ArrayBuffer>() {
                    let bytes = js_sys::Uint8Array::new(buffer).to_vec();
                    let field = join(&["the stored bucket of requests[", &decimal(i), "].key"]);
                    self.engine
                        .restore(key, &bytes, &field, now)
                        .map_err(to_js_error)?;
                }
            }
        }
        let borrowed: Vec<Request<'_>> = requests
            .iter()
            .map(|(key, cost, policy)| Request {
                key,
                cost: *cost,
                policy: *policy,
            })
            .collect();
        let decision = self.engine.limit_all(&borrowed, now).map_err(to_js_error)?;
        Ok(Ts::new_unchecked(all_decision_object(&decision).into()))
    }

    /// The instance options, all fields filled in.
    #[wasm_bindgen(getter)]
    pub fn options(&self) -> Ts<RateLimiterOptions> {
        let options = self.engine.options();
        let object = Object::new();
        set(
            &object,
            "max_tokens",
            JsValue::from_f64(options.max_tokens() as f64),
        );
        let every = JsValue::from_f64(options.refill_every_seconds());
        set(&object, "refill_every_seconds", every);
        Ts::new_unchecked(object.into())
    }

    /// Buckets held in memory: only keys that were not full when last seen.
    #[wasm_bindgen(getter, js_name = storedBuckets)]
    pub fn stored_buckets(&self) -> usize {
        self.engine.stored_buckets()
    }

    // Saving and restoring buckets, for the durable class. Its shim keeps a copy of every
    // bucket in Durable Object storage and puts it back after an eviction.

    /// Whether `key` has a bucket in memory; throws for a key that is not a string.
    pub fn holds(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<bool, JsValue> {
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        Ok(self.engine.holds(&self.key))
    }

    /// `holds` for a well-formed string key.
    #[wasm_bindgen(js_name = holdsText)]
    pub fn holds_text(&self, key: &str) -> bool {
        self.engine.holds(key.as_bytes())
    }

    /// The bucket of `key` to save: `{ state, full_at_ms, policy }` (`state`: an ArrayBuffer;
    /// `full_at_ms`: when it is full if nothing consumes, rounded up, at most 2^53 - 1;
    /// `policy`: whether the key has its own), or `undefined` when it is full.
    pub fn saved(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<JsValue, JsValue> {
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        Ok(match self.engine.snapshot(&self.key) {
            Some((state, full_at, policy)) => {
                saved_object_js(&state, full_at_ms(full_at), policy).into()
            }
            None => JsValue::UNDEFINED,
        })
    }

    /// Puts back a bucket that `saved` gave for `key`, unless `key` holds one already.
    /// Throws an `Error` for bytes that are not such a bucket.
    pub fn restore(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        state: &js_sys::ArrayBuffer,
    ) -> Result<(), JsValue> {
        let state = js_sys::Uint8Array::new(state).to_vec();
        encode_key(key, "key", &mut self.key).map_err(to_js_error)?;
        let field = join(&["the stored bucket of key ", &JsSpelling.key(key)]);
        self.engine
            .restore(&self.key, &state, &field, Instant::from_millis(now_ms))
            .map_err(to_js_error)
    }

    /// `setOptions` for the durable class, in two steps so that the options are read once:
    /// this reads and validates them (throwing as `setOptions` does) and returns whether
    /// they change the instance options. If so, the caller restores every saved bucket
    /// first and, after `applyPreparedOptions`, saves every bucket that follows the instance
    /// options again: how a bucket meets new options depends on when it was last refilled
    /// (and a raised capacity keeps full buckets full), which memory knows best.
    #[wasm_bindgen(js_name = prepareOptions)]
    pub fn prepare_options(&mut self, options: Ts<RateLimiterOptions>) -> Result<bool, JsValue> {
        let patch = read_options(&options.js_value(), "options", false).map_err(to_js_error)?;
        let new = self.engine.options().patched(patch).map_err(to_js_error)?;
        self.prepared = Some(patch);
        Ok(new != self.engine.options())
    }

    /// Applies what `prepareOptions` read (nothing if it threw).
    #[wasm_bindgen(js_name = applyPreparedOptions)]
    pub fn apply_prepared_options(&mut self, now_ms: f64) -> Result<(), JsValue> {
        match self.prepared.take() {
            Some(patch) => self
                .engine
                .set_options(patch, Instant::from_millis(now_ms))
                .map_err(to_js_error),
            None => Ok(()),
        }
    }

    /// `[key, state, full_at_ms]` of every bucket that follows the instance options.
    #[wasm_bindgen(js_name = defaultBuckets)]
    pub fn default_buckets(&self) -> Array {
        self.engine
            .default_snapshots()
            .into_iter()
            .map(|(key, state, full_at)| {
                let entry = Array::new();
                entry.push(&decode_key(&key));
                entry.push(&js_sys::Uint8Array::from(state.as_slice()));
                entry.push(&JsValue::from_f64(full_at_ms(full_at)));
                JsValue::from(entry)
            })
            .collect()
    }
}

/// A moment in nanoseconds as whole milliseconds, rounded up and capped at 2^53 - 1 (a
/// bucket that never refills is full "never").
fn full_at_ms(nanos: u128) -> f64 {
    let ms = nanos.div_ceil(1_000_000);
    ms.min(MAX_SAFE_INTEGER as u128) as f64
}

/// The JS string `encode_key` made `bytes` from.
fn decode_key(bytes: &[u8]) -> JsValue {
    match bytes.split_first() {
        Some((0xFF, units)) => {
            let units: Vec<u16> = units
                .chunks_exact(2)
                .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
                .collect();
            JsString::from_char_code(&units).into()
        }
        // Keys without the marker came from a well-formed string: valid UTF-8.
        _ => JsValue::from_str(core::str::from_utf8(bytes).unwrap_or_default()),
    }
}

impl RateLimiter {
    fn decide(
        &mut self,
        key: &[u8],
        cost: Cost,
        policy: Option<OptionsPatch>,
        now_ms: f64,
    ) -> Result<Ts<RateLimitDecision>, JsValue> {
        let now = Instant::from_millis(now_ms);
        let decision = self
            .engine
            .limit(key, cost, policy, now)
            .map_err(|e| to_js_error(e.within("policy")))?;
        Ok(Ts::new_unchecked(decision_object(&decision).into()))
    }
}

/// Values spelled by JavaScript itself, exactly as the caller would print them.
struct JsSpelling;

impl Spelling for JsSpelling {
    fn number(&self, x: f64) -> String {
        if x == 0.0 && x.is_sign_negative() {
            return "-0".into(); // Number.prototype.toString drops the sign of -0
        }
        js_sys::Number::from(x)
            .to_string_with_radix(10)
            .map(String::from)
            .unwrap_or_default()
    }

    fn quoted(&self, text: &str) -> String {
        js_sys::JSON::stringify(&JsValue::from_str(text))
            .map(String::from)
            .unwrap_or_default()
    }
}

impl JsSpelling {
    /// A key as JSON quotes it (lone surrogates escaped), whatever it holds.
    fn key(&self, key: &JsValue) -> String {
        js_sys::JSON::stringify(key)
            .ok()
            .and_then(|s| s.as_string())
            .unwrap_or_default()
    }
}

fn to_js_error(error: Error) -> JsValue {
    let message = error.message(&JsSpelling);
    if error.is_storage_error() {
        js_sys::Error::new(&message).into()
    } else if error.is_type_error() {
        TypeError::new(&message).into()
    } else {
        RangeError::new(&message).into()
    }
}

/// Encodes a JS string into `out` so that distinct strings give distinct bytes:
/// well-formed strings as UTF-8; strings with lone surrogates (which UTF-8 cannot hold)
/// as 0xFF, a byte UTF-8 never contains, followed by their UTF-16 code units.
fn encode_key(key: &JsValue, field: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    let Some(text) = key.dyn_ref::<JsString>() else {
        return Err(Error::WrongType {
            field: field.into(),
            expected: "a string",
            got: describe(key),
        });
    };
    out.clear();
    if text.unchecked_ref::<Text>().is_well_formed() {
        out.extend_from_slice(String::from(text).as_bytes());
    } else {
        out.push(0xFF);
        for unit in text.iter() {
            out.extend_from_slice(&unit.to_le_bytes());
        }
    }
    Ok(())
}

/// `undefined` means the default cost, 1.
fn read_cost(cost: &JsValue, field: &str) -> Result<Cost, Error> {
    if cost.is_undefined() {
        return Ok(Cost::ONE);
    }
    read_number(cost, field).and_then(|c| Cost::new(c).map_err(|e| rename(e, field)))
}

/// Puts the caller's name for the cost (e.g. `requests[1].cost`) into an engine error.
fn rename(error: Error, field: &str) -> Error {
    match error {
        Error::OutOfRange { expected, got, .. } => Error::OutOfRange {
            field: field.into(),
            expected,
            got,
        },
        other => other,
    }
}

fn read_number(value: &JsValue, field: &str) -> Result<f64, Error> {
    value.as_f64().ok_or_else(|| Error::WrongType {
        field: field.into(),
        expected: "a number",
        got: describe(value),
    })
}

/// Checks that `value` is a plain object whose own fields are all in `known`.
fn read_object<'v>(
    value: &'v JsValue,
    name: &str,
    known: &[&str],
    known_text: &'static str,
) -> Result<&'v Object, Error> {
    let unreadable = || Error::WrongType {
        field: name.into(),
        expected: "an object whose fields can be listed",
        got: "an object that throws when they are".into(),
    };
    if !value.is_object() || is_array(value).map_err(|_| unreadable())? {
        return Err(Error::WrongType {
            field: name.into(),
            expected: "an object",
            got: describe(value),
        });
    }
    let object: &Object = value.unchecked_ref();
    for field in own_keys(value).map_err(|_| unreadable())?.iter() {
        let field = field.as_string().unwrap_or_default();
        if !known.contains(&field.as_str()) {
            return Err(Error::UnknownField {
                object: name.into(),
                name: field,
                known: known_text,
            });
        }
    }
    Ok(object)
}

/// Reads one field, named `path` in messages; absent or `undefined` is `None`.
fn read_field(object: &Object, name: &str, path: &str) -> Result<Option<JsValue>, Error> {
    let value = Reflect::get(object, &JsValue::from_str(name)).map_err(|_| Error::WrongType {
        field: path.into(),
        expected: "a readable value",
        got: "a property that throws when read".into(),
    })?;
    Ok((!value.is_undefined()).then_some(value))
}

/// Reads an options object into a patch. `name` names the object in messages; its fields
/// are named plainly (`max_tokens`) for setOptions, or after it (`policy.max_tokens`) when
/// `nested`. Range checks are the engine's.
fn read_options(options: &JsValue, name: &str, nested: bool) -> Result<OptionsPatch, Error> {
    const FIELDS: [&str; 2] = ["max_tokens", "refill_every_seconds"];
    let object = read_object(
        options,
        name,
        &FIELDS,
        "max_tokens and refill_every_seconds",
    )?;
    let number = |field: &str| -> Result<Option<f64>, Error> {
        let path = if nested {
            join(&[name, ".", field])
        } else {
            field.to_string()
        };
        read_field(object, field, &path)?
            .map(|v| read_number(&v, &path))
            .transpose()
    };
    Ok(OptionsPatch {
        max_tokens: number(FIELDS[0])?,
        refill_every_seconds: number(FIELDS[1])?,
    })
}

/// A `limit()` policy named `name`; `undefined` means none.
fn read_policy(policy: &JsValue, name: &str) -> Result<Option<OptionsPatch>, Error> {
    if policy.is_undefined() {
        return Ok(None);
    }
    read_options(policy, name, true).map(Some)
}

type OwnedRequest = (Vec<u8>, Cost, Option<OptionsPatch>);

fn read_requests(requests: &JsValue) -> Result<Vec<OwnedRequest>, Error> {
    const FIELDS: [&str; 3] = ["key", "cost", "policy"];
    let unreadable = |field: String| Error::WrongType {
        field,
        expected: "a readable value",
        got: "a property that throws when read".into(),
    };
    if !is_array(requests).map_err(|_| unreadable("requests".into()))? {
        return Err(Error::WrongType {
            field: "requests".into(),
            expected: "an array",
            got: describe(requests),
        });
    }
    // Read through Reflect (which catches): the list may be a Proxy or have getters.
    let length = Reflect::get(requests, &JsValue::from_str("length"))
        .map_err(|_| unreadable("requests.length".into()))?
        .as_f64()
        .unwrap_or(0.0) as u32;
    let mut out = Vec::new();
    for i in 0..length {
        let path = join(&["requests[", &decimal(i as usize), "]"]);
        let request = Reflect::get_u32(requests, i).map_err(|_| unreadable(path.clone()))?;
        let object = read_object(&request, &path, &FIELDS, "key, cost and policy")?;
        let field = |name: &str| -> Result<(JsValue, String), Error> {
            let field_path = join(&[&path, ".", name]);
            let value = read_field(object, name, &field_path)?.unwrap_or(JsValue::UNDEFINED);
            Ok((value, field_path))
        };
        let mut key = Vec::new();
        let (value, key_path) = field("key")?;
        encode_key(&value, &key_path, &mut key)?;
        let (value, cost_path) = field("cost")?;
        let cost = read_cost(&value, &cost_path)?;
        let (value, policy_path) = field("policy")?;
        let policy = read_policy(&value, &policy_path)?;
        out.push((key, cost, policy));
    }
    Ok(out)
}

/// A short description of a value for error messages, e.g. `string "10"` or `null`.
fn describe(value: &JsValue) -> String {
    const SHOWN_CHARS: usize = 40;
    if let Some(text) = value.as_string() {
        let shown: String = text.chars().take(SHOWN_CHARS).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        return join(&["string ", &JsSpelling.quoted(&shown), more]);
    }
    if let Some(x) = value.as_f64() {
        return join(&["number ", &JsSpelling.number(x)]);
    }
    if let Some(b) = value.as_bool() {
        return join(&["boolean ", if b { "true" } else { "false" }]);
    }
    if value.is_null() {
        "null".into()
    } else if value.is_undefined() {
        "undefined".into()
    } else if let Some(big) = value.dyn_ref::<js_sys::BigInt>() {
        let digits = big.to_string(10).map(String::from).unwrap_or_default();
        join(&["bigint ", &digits, "n"])
    } else if value.is_symbol() {
        "a symbol".into()
    } else if value.is_function() {
        "a function".into()
    } else if is_array(value).unwrap_or(false) {
        "an array".into()
    } else {
        "an object".into()
    }
}

fn status_object(status: &Status) -> Object {
    status_object_js(status.remaining, status.limit, status.reset_in_ms)
}

fn decision_object(decision: &Decision) -> Object {
    let status = &decision.status;
    decision_object_js(
        decision.allowed,
        status.remaining,
        status.limit,
        status.reset_in_ms,
        decision.retry_after_ms.unwrap_or(-1.0),
        decision.window_ms,
    )
}

fn all_decision_object(decision: &AllDecision) -> Object {
    let results: Array = decision.results.iter().map(decision_object).collect();
    let retry = decision.retry_after_ms.unwrap_or(-1.0);
    all_decision_object_js(decision.allowed, retry, results)
}

fn set(object: &Object, name: &str, value: JsValue) {
    // Defining a property on a fresh plain object cannot fail.
    let _ = Reflect::set(object, &JsValue::from_str(name), &value);
}

/// The test-only trap switch (cargo feature `trap-switch`): consuming this key traps, as a
/// bug in the engine would. Compiled out of every other build.
#[cfg(all(feature = "trap-switch", target_arch = "wasm32"))]
fn trap_if_asked(key: &[u8]) {
    if key == b"\0trap-switch" {
        core::arch::wasm32::unreachable();
    }
}

#[cfg(not(all(feature = "trap-switch", target_arch = "wasm32")))]
fn trap_if_asked(_key: &[u8]) {}

/// The floor of the Node benchmark: receives a key the way the fast path does, nothing more.
#[cfg(feature = "bench-floor")]
#[wasm_bindgen(js_name = receiveKey)]
pub fn receive_key(key: &str) -> usize {
    key.len()
}
