//! The wasm-bindgen layer: converts JavaScript values into engine inputs and engine results
//! into JavaScript values. The only place where JavaScript errors are made.

use js_sys::{Array, JsString, Object, RangeError, Reflect, TypeError};
use serde::{Deserialize, Serialize};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use crate::engine::{Cost, Error, Instant, JsNumber, Limiter, OptionsPatch, Status};

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

#[wasm_bindgen]
extern "C" {
    /// A JS string, seen through the one method of it we need.
    #[wasm_bindgen(extends = JsString)]
    type Text;

    /// `String.prototype.isWellFormed`: false when the string holds a lone surrogate.
    #[wasm_bindgen(method, js_name = isWellFormed)]
    fn is_well_formed(this: &Text) -> bool;
}

/// Token-bucket rate limiter over string keys. `now_ms` is `Date.now()` at the call; it
/// comes first so that the optional `cost` can be last.
#[wasm_bindgen]
pub struct RateLimiter {
    engine: Limiter,
    /// Reused buffer for the encoded key of the current call.
    key: Vec<u8>,
}

#[wasm_bindgen]
impl RateLimiter {
    /// `seed_high`/`seed_low`: a random 64-bit seed for the key hash, fresh per instance.
    #[wasm_bindgen(constructor)]
    pub fn new(seed_high: u32, seed_low: u32) -> RateLimiter {
        RateLimiter {
            engine: Limiter::new(((seed_high as u64) << 32) | seed_low as u64),
            key: Vec::new(),
        }
    }

    /// Updates the options of every bucket. All or nothing.
    #[wasm_bindgen(js_name = setOptions)]
    pub fn set_options(
        &mut self,
        now_ms: f64,
        options: Ts<RateLimiterOptions>,
    ) -> Result<(), JsValue> {
        let patch = read_options(&options.js_value()).map_err(to_js_error)?;
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
        let cost = read_cost(cost).map_err(to_js_error)?;
        self.encode_key(key)?;
        let now = Instant::from_millis(now_ms);
        Ok(self.engine.check(&self.key, cost, now))
    }

    /// Takes `cost` tokens (default 1) if the bucket holds that many; else changes nothing.
    pub fn consume(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
    ) -> Result<bool, JsValue> {
        let cost = read_cost(cost).map_err(to_js_error)?;
        self.encode_key(key)?;
        let now = Instant::from_millis(now_ms);
        Ok(self.engine.consume(&self.key, cost, now))
    }

    /// The bucket of `key` now: `{ remaining, limit, reset_in_ms }`.
    #[wasm_bindgen(js_name = getStatus)]
    pub fn get_status(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<Ts<RateLimiterStatus>, JsValue> {
        self.encode_key(key)?;
        let status = self.engine.status(&self.key, Instant::from_millis(now_ms));
        Ok(status_object(status))
    }

    /// Forgets the bucket of `key`: it is full at its next access.
    pub fn reset(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<(), JsValue> {
        self.encode_key(key)?;
        self.engine.reset(&self.key);
        Ok(())
    }

    /// The options in force, all fields filled in.
    #[wasm_bindgen(getter)]
    pub fn options(&self) -> Ts<RateLimiterOptions> {
        let options = self.engine.options();
        plain_object(&[
            ("max_tokens", options.max_tokens() as f64),
            ("refill_every_seconds", options.refill_every_seconds()),
        ])
    }

    /// Buckets held in memory: only keys that were not full when last seen.
    #[wasm_bindgen(getter, js_name = storedBuckets)]
    pub fn stored_buckets(&self) -> usize {
        self.engine.stored_buckets()
    }

    /// Encodes a JS string into `self.key` so that distinct strings give distinct bytes:
    /// well-formed strings as UTF-8; strings with lone surrogates (which UTF-8 cannot hold)
    /// as 0xFF, a byte UTF-8 never contains, followed by their UTF-16 code units.
    fn encode_key(&mut self, key: &JsValue) -> Result<(), JsValue> {
        let Some(text) = key.dyn_ref::<JsString>() else {
            return Err(to_js_error(Error::WrongType {
                field: "key",
                expected: "a string",
                got: describe(key),
            }));
        };
        self.key.clear();
        if text.unchecked_ref::<Text>().is_well_formed() {
            self.key.extend_from_slice(String::from(text).as_bytes());
        } else {
            self.key.push(0xFF);
            for unit in text.iter() {
                self.key.extend_from_slice(&unit.to_le_bytes());
            }
        }
        Ok(())
    }
}

fn to_js_error(error: Error) -> JsValue {
    let message = error.to_string();
    if error.is_type_error() {
        TypeError::new(&message).into()
    } else {
        RangeError::new(&message).into()
    }
}

/// `undefined` means the default cost, 1.
fn read_cost(cost: &JsValue) -> Result<Cost, Error> {
    if cost.is_undefined() {
        return Ok(Cost::ONE);
    }
    read_number("cost", cost).and_then(Cost::new)
}

fn read_number(field: &'static str, value: &JsValue) -> Result<f64, Error> {
    value.as_f64().ok_or_else(|| Error::WrongType {
        field,
        expected: "a number",
        got: describe(value),
    })
}

/// Reads an options object into a patch, rejecting unknown fields and non-numbers.
fn read_options(options: &JsValue) -> Result<OptionsPatch, Error> {
    if !options.is_object() || Array::is_array(options) {
        return Err(Error::WrongType {
            field: "options",
            expected: "an object",
            got: describe(options),
        });
    }
    let object: &Object = options.unchecked_ref();
    for name in Object::keys(object) {
        let name = name.as_string().unwrap_or_default();
        if name != "max_tokens" && name != "refill_every_seconds" {
            return Err(Error::UnknownField { name });
        }
    }
    let field = |name: &'static str| -> Result<Option<f64>, Error> {
        let value =
            Reflect::get(object, &JsValue::from_str(name)).map_err(|_| Error::WrongType {
                field: name,
                expected: "a readable number",
                got: "a property that throws when read".into(),
            })?;
        if value.is_undefined() {
            return Ok(None);
        }
        read_number(name, &value).map(Some)
    };
    Ok(OptionsPatch {
        max_tokens: field("max_tokens")?,
        refill_every_seconds: field("refill_every_seconds")?,
    })
}

/// A short description of a value for error messages, e.g. `string "10"` or `null`.
fn describe(value: &JsValue) -> String {
    const SHOWN_CHARS: usize = 40;
    if let Some(text) = value.as_string() {
        let shown: String = text.chars().take(SHOWN_CHARS).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        return format!("string {shown:?}{more}");
    }
    if let Some(x) = value.as_f64() {
        return format!("number {}", JsNumber(x));
    }
    if let Some(b) = value.as_bool() {
        return format!("boolean {b}");
    }
    if value.is_null() {
        "null".into()
    } else if value.is_undefined() {
        "undefined".into()
    } else if let Some(big) = value.dyn_ref::<js_sys::BigInt>() {
        let digits = big.to_string(10).map(String::from).unwrap_or_default();
        format!("bigint {digits}n")
    } else if value.is_symbol() {
        "a symbol".into()
    } else if value.is_function() {
        "a function".into()
    } else if Array::is_array(value) {
        "an array".into()
    } else {
        "an object".into()
    }
}

fn status_object(status: Status) -> Ts<RateLimiterStatus> {
    plain_object(&[
        ("remaining", status.remaining),
        ("limit", status.limit),
        ("reset_in_ms", status.reset_in_ms),
    ])
}

/// A plain object of number fields, typed as the tsify interface `T` it matches.
fn plain_object<T: Tsify>(fields: &[(&str, f64)]) -> Ts<T> {
    let object = Object::new();
    for &(name, value) in fields {
        // Defining a property on a fresh plain object cannot fail.
        let _ = Reflect::set(&object, &JsValue::from_str(name), &JsValue::from_f64(value));
    }
    Ts::new_unchecked(object.into())
}
