//! Reading the caller's JavaScript values into engine inputs. Each value is read once, and
//! every read that a caller's value can make throw (a Proxy trap, a revoked Proxy, a
//! getter) is caught: an exception must never unwind through the binding, which would skip
//! its cleanup and leave the `RateLimiter` borrowed (every later call would then fail).

use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

use super::errors::JsSpelling;
use super::key::encode_key;
use crate::engine::{
    block_nanos, decimal, join, permit_cost, permit_id, Cost, Error, GatePolicy, LeaseAsk,
    OptionsPatch, Request, Settlement, Spelling,
};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = Object, js_name = keys)]
    fn own_keys(object: &JsValue) -> Result<Array, JsValue>;

    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn is_array(value: &JsValue) -> Result<bool, JsValue>;
}

/// One request of a `limitAll` call, read and validated.
pub(crate) struct OwnedRequest {
    pub key: Vec<u8>,
    pub cost: Cost,
    pub policy: Option<OptionsPatch>,
    pub shadow: bool,
    pub penalty: Option<u64>,
}

impl OwnedRequest {
    /// The engine's request, borrowing the key.
    pub(crate) fn borrowed(&self) -> Request<'_> {
        Request {
            key: &self.key,
            cost: self.cost,
            policy: self.policy,
            shadow: self.shadow,
            penalty: self.penalty,
        }
    }
}

/// `undefined` means the default cost, 1.
pub(crate) fn read_cost(cost: &JsValue, field: &str) -> Result<Cost, Error> {
    if cost.is_undefined() {
        return Ok(Cost::ONE);
    }
    read_tokens(cost, field)
}

/// A number of tokens validated as a cost, with no default (`undefined` is a `TypeError`).
pub(crate) fn read_tokens(value: &JsValue, field: &str) -> Result<Cost, Error> {
    read_number(value, field).and_then(|c| Cost::new(c).map_err(|e| rename(e, field)))
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

/// A boolean; `undefined` is `false`.
fn read_flag(value: &JsValue, field: &str) -> Result<bool, Error> {
    if value.is_undefined() {
        return Ok(false);
    }
    value.as_bool().ok_or_else(|| Error::WrongType {
        field: field.into(),
        expected: "a boolean",
        got: describe(value),
    })
}

pub(crate) fn read_number(value: &JsValue, field: &str) -> Result<f64, Error> {
    value.as_f64().ok_or_else(|| Error::WrongType {
        field: field.into(),
        expected: "a number",
        got: describe(value),
    })
}

fn unreadable(field: &str) -> Error {
    Error::WrongType {
        field: field.into(),
        expected: "a readable value",
        got: "a property that throws when read".into(),
    }
}

/// Checks that `value` is a plain object whose own fields are all in `known`.
fn read_object<'v>(
    value: &'v JsValue,
    name: &str,
    known: &[&str],
    known_text: &'static str,
) -> Result<&'v Object, Error> {
    let unlistable = || Error::WrongType {
        field: name.into(),
        expected: "an object whose fields can be listed",
        got: "an object that throws when they are".into(),
    };
    if !value.is_object() || is_array(value).map_err(|_| unlistable())? {
        return Err(Error::WrongType {
            field: name.into(),
            expected: "an object",
            got: describe(value),
        });
    }
    for field in own_keys(value).map_err(|_| unlistable())?.iter() {
        let field = field.as_string().unwrap_or_default();
        if !known.contains(&field.as_str()) {
            return Err(Error::UnknownField {
                object: name.into(),
                name: field,
                known: known_text,
            });
        }
    }
    Ok(value.unchecked_ref())
}

/// Reads the field `field` of `object` (named `name`) with its path (`name.field`) for
/// messages; absent or `undefined` is `None`. The path is built only for a field that is
/// there: most calls leave most of their optional fields out.
fn read_named(
    object: &Object,
    name: &str,
    field: &str,
) -> Result<Option<(JsValue, String)>, Error> {
    let path = || join(&[name, ".", field]);
    let value = Reflect::get(object, &JsValue::from_str(field)).map_err(|_| unreadable(&path()))?;
    Ok((!value.is_undefined()).then(|| (value, path())))
}

/// Reads one field, named `path` in messages; absent or `undefined` is `None`.
fn read_field(object: &Object, name: &str, path: &str) -> Result<Option<JsValue>, Error> {
    let value = Reflect::get(object, &JsValue::from_str(name)).map_err(|_| unreadable(path))?;
    Ok((!value.is_undefined()).then_some(value))
}

/// Reads an options object into a patch. `name` names the object in messages; its fields
/// are named plainly (`max_tokens`) for setOptions, or after it (`policy.max_tokens`) when
/// `nested`. Range checks are the engine's.
pub(crate) fn read_options(
    options: &JsValue,
    name: &str,
    nested: bool,
) -> Result<OptionsPatch, Error> {
    const FIELDS: [&str; 2] = ["max_tokens", "refill_every_seconds"];
    let object = read_object(
        options,
        name,
        &FIELDS,
        "max_tokens and refill_every_seconds",
    )?;
    read_patch(object, name, nested)
}

/// The two fields of options, read from `object` (checked already).
fn read_patch(object: &Object, name: &str, nested: bool) -> Result<OptionsPatch, Error> {
    const FIELDS: [&str; 2] = ["max_tokens", "refill_every_seconds"];
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

/// A `limit()` policy named `name` and its penalty (`block_seconds`, in nanoseconds);
/// `undefined` means neither.
pub(crate) fn read_policy(
    policy: &JsValue,
    name: &str,
) -> Result<(Option<OptionsPatch>, Option<u64>), Error> {
    if policy.is_undefined() {
        return Ok((None, None));
    }
    let object = read_object(
        policy,
        name,
        &["max_tokens", "refill_every_seconds", "block_seconds"],
        "max_tokens, refill_every_seconds and block_seconds",
    )?;
    let patch = read_patch(object, name, true)?;
    let penalty = read_named(object, name, "block_seconds")?
        .map(|(v, path)| read_number(&v, &path).and_then(|s| block_nanos(s, &path)))
        .transpose()?;
    Ok((Some(patch), penalty))
}

/// The requests of a `limitAll` call.
pub(crate) fn read_requests(requests: &JsValue) -> Result<Vec<OwnedRequest>, Error> {
    const FIELDS: [&str; 4] = ["key", "cost", "policy", "shadow"];
    if !is_array(requests).map_err(|_| unreadable("requests"))? {
        return Err(Error::WrongType {
            field: "requests".into(),
            expected: "an array",
            got: describe(requests),
        });
    }
    // Read through Reflect (which catches): the list may be a Proxy or have getters.
    let length = Reflect::get(requests, &JsValue::from_str("length"))
        .map_err(|_| unreadable("requests.length"))?
        .as_f64()
        .unwrap_or(0.0) as u32;
    let mut out = Vec::new();
    for i in 0..length {
        let path = join(&["requests[", &decimal(i as usize), "]"]);
        let request = Reflect::get_u32(requests, i).map_err(|_| unreadable(&path))?;
        let object = read_object(&request, &path, &FIELDS, "key, cost, policy and shadow")?;
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
        let (policy, penalty) = read_policy(&value, &policy_path)?;
        let (value, shadow_path) = field("shadow")?;
        let shadow = read_flag(&value, &shadow_path)?;
        out.push(OwnedRequest {
            key,
            cost,
            policy,
            shadow,
            penalty,
        });
    }
    Ok(out)
}

/// The lease part of a `limitLeased` call, read and validated.
pub(crate) struct LeaseRequest {
    pub ask: LeaseAsk,
    pub settle: Option<Settlement>,
}

/// `{ want?, settle?, rate?, renew?, queue?, id? }` named `name`; `undefined` asks for no lease and
/// settles nothing.
pub(crate) fn read_lease_request(value: &JsValue, name: &str) -> Result<LeaseRequest, Error> {
    let mut ask = LeaseAsk::default();
    if value.is_undefined() {
        return Ok(LeaseRequest { ask, settle: None });
    }
    let object = read_object(
        value,
        name,
        &["want", "settle", "rate", "renew", "queue", "id"],
        "want, settle, rate, renew, queue and id",
    )?;
    if let Some((want, path)) = read_named(object, name, "want")? {
        ask.want = read_cost(&want, &path)?;
    }
    let settle = read_named(object, name, "settle")?
        .map(|(value, path)| read_settlement(&value, &path))
        .transpose()?;
    if let Some((rate, path)) = read_named(object, name, "rate")? {
        // A rate is validated as a cost: a finite number >= 0.
        read_cost(&rate, &path)?;
        ask.rate = rate.as_f64().unwrap_or(0.0);
    }
    if let Some((renew, path)) = read_named(object, name, "renew")? {
        ask.renew = Some(read_lease_id(&renew, &path)?);
    }
    if let Some((queue, path)) = read_named(object, name, "queue")? {
        ask.queue = read_flag(&queue, &path)?;
    }
    if let Some((id, path)) = read_named(object, name, "id")? {
        ask.id = Some(read_lease_id(&id, &path)?);
    }
    Ok(LeaseRequest { ask, settle })
}

/// A lease id: a whole number from 0 to 2^53 - 1.
fn read_lease_id(value: &JsValue, path: &str) -> Result<u64, Error> {
    let id = read_number(value, path)?;
    if !(id.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&id)) {
        return Err(Error::OutOfRange {
            field: path.into(),
            expected: "a lease id (a whole number from 0 to 9007199254740991)",
            got: id,
        });
    }
    Ok(id as u64)
}

/// `{ id, used }` named `name`: a lease id the limiter gave, and the tokens spent from it.
pub(crate) fn read_settlement(value: &JsValue, name: &str) -> Result<Settlement, Error> {
    let object = read_object(value, name, &["id", "used", "left"], "id, used and left")?;
    let id_path = join(&[name, ".id"]);
    let id = read_field(object, "id", &id_path)?.unwrap_or(JsValue::UNDEFINED);
    let id = read_lease_id(&id, &id_path)?;
    let used_path = join(&[name, ".used"]);
    let used = read_field(object, "used", &used_path)?.unwrap_or(JsValue::UNDEFINED);
    let used = read_tokens(&used, &used_path)?;
    let left = read_named(object, name, "left")?
        .map(|(value, path)| read_tokens(&value, &path))
        .transpose()?;
    Ok(Settlement { id, used, left })
}

/// A short description of a value for error messages, e.g. `string "10"` or `null`.
pub(crate) fn describe(value: &JsValue) -> String {
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

/// A permit's cost; `undefined` means 1.
pub(crate) fn read_permit_cost(cost: &JsValue, field: &str) -> Result<u64, Error> {
    if cost.is_undefined() {
        return Ok(1);
    }
    read_number(cost, field).and_then(|c| permit_cost(c).map_err(|e| rename(e, field)))
}

/// A permit id, with no default.
pub(crate) fn read_permit_id(id: &JsValue, field: &str) -> Result<u64, Error> {
    read_number(id, field).and_then(|n| permit_id(n).map_err(|e| rename(e, field)))
}

/// A gate policy `{ max_in_flight, ttl_seconds? }` named `name`; it is required.
pub(crate) fn read_gate_policy(policy: &JsValue, name: &str) -> Result<GatePolicy, Error> {
    const FIELDS: [&str; 2] = ["max_in_flight", "ttl_seconds"];
    let object = read_object(policy, name, &FIELDS, "max_in_flight and ttl_seconds")?;
    let max_path = join(&[name, ".", FIELDS[0]]);
    let max_in_flight = match read_field(object, FIELDS[0], &max_path)? {
        Some(value) => read_number(&value, &max_path)?,
        None => {
            return Err(Error::WrongType {
                field: max_path,
                expected: "a number",
                got: "undefined".into(),
            })
        }
    };
    let ttl_seconds = read_named(object, name, FIELDS[1])?
        .map(|(v, path)| read_number(&v, &path))
        .transpose()?;
    GatePolicy::new(max_in_flight, ttl_seconds).map_err(|e| e.within(name))
}

/// The permit of a `limitAllWithPermit` call, read and validated.
pub(crate) struct PermitRequest {
    pub key: Vec<u8>,
    pub cost: u64,
    pub policy: GatePolicy,
}

/// `{ key, cost?, policy }` named `name`.
pub(crate) fn read_permit_request(value: &JsValue, name: &str) -> Result<PermitRequest, Error> {
    const FIELDS: [&str; 3] = ["key", "cost", "policy"];
    let object = read_object(value, name, &FIELDS, "key, cost and policy")?;
    let field = |field: &str| -> Result<(JsValue, String), Error> {
        let path = join(&[name, ".", field]);
        let value = read_field(object, field, &path)?.unwrap_or(JsValue::UNDEFINED);
        Ok((value, path))
    };
    let mut key = Vec::new();
    let (value, key_path) = field(FIELDS[0])?;
    encode_key(&value, &key_path, &mut key)?;
    let (value, cost_path) = field(FIELDS[1])?;
    let cost = read_permit_cost(&value, &cost_path)?;
    let (value, policy_path) = field(FIELDS[2])?;
    let policy = read_gate_policy(&value, &policy_path)?;
    Ok(PermitRequest { key, cost, policy })
}
