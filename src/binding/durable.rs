//! Snapshots, for the durable class: its shim keeps a snapshot of every bucket that is not
//! full in Durable Object storage and restores it after an eviction, and it passes the
//! loaders of `setOptions` and `limitAll` (module docs of the binding).

use js_sys::{Array, ArrayBuffer, Function, Uint8Array};
use wasm_bindgen::prelude::*;

use super::errors::snapshot_field;
use super::key::{decode_key, encode_key};
use super::objects::{keyed_snapshot_object, snapshot_object};
use super::read::OwnedRequest;
use super::RateLimiter;
use crate::engine::{decimal, join, Instant};

#[wasm_bindgen]
impl RateLimiter {
    /// Whether `key` has a bucket in memory; throws for a key that is not a string.
    pub fn holds(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<bool, JsValue> {
        encode_key(key, "key", &mut self.key)?;
        Ok(self.engine.holds(&self.key))
    }

    /// `holds` for a well-formed string key.
    #[wasm_bindgen(js_name = holdsText)]
    pub fn holds_text(&self, key: &str) -> bool {
        self.engine.holds(key.as_bytes())
    }

    /// The snapshot of `key`'s bucket: `{ bytes, full_at_ms, has_policy }` (`bytes`: an
    /// ArrayBuffer; `full_at_ms`: when the bucket is full if nothing consumes, rounded up,
    /// at most 2^53 - 1; `has_policy`: whether the key has its own), or `undefined` when the
    /// bucket is full.
    pub fn snapshot(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<JsValue, JsValue> {
        encode_key(key, "key", &mut self.key)?;
        Ok(match self.engine.snapshot(&self.key) {
            Some(snapshot) => snapshot_object(&snapshot).into(),
            None => JsValue::UNDEFINED,
        })
    }

    /// Restores the bucket of `key` from snapshot bytes, unless `key` holds one already.
    /// Throws an `Error` for bytes that are not a snapshot.
    pub fn restore(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        bytes: &ArrayBuffer,
    ) -> Result<(), JsValue> {
        self.restore_at(key, bytes, Instant::from_millis(now_ms))
    }

    /// `{ key, bytes, full_at_ms }` of every bucket without a policy of its own: the ones
    /// an options change changes.
    #[wasm_bindgen(js_name = snapshotsWithoutPolicy)]
    pub fn snapshots_without_policy(&self) -> Array {
        self.engine
            .snapshots_without_policy()
            .iter()
            .map(|keyed| {
                JsValue::from(keyed_snapshot_object(
                    &decode_key(&keyed.key),
                    &keyed.snapshot,
                ))
            })
            .collect()
    }
}

impl RateLimiter {
    /// The loader of `limitAll`: `load(key, held)` for each key, in order; restores the
    /// snapshot bytes it returns (ignored where memory holds the key). One copy for
    /// `limitAll` and `limitAllWithPermit`, not one inlined into each.
    #[inline(never)]
    pub(super) fn load_each(
        &mut self,
        load: &JsValue,
        requests: &[OwnedRequest],
        now: Instant,
    ) -> Result<(), JsValue> {
        let Some(load) = load.dyn_ref::<Function>() else {
            return Ok(());
        };
        for (i, key) in requests.iter().map(|r| r.key.as_slice()).enumerate() {
            let held = JsValue::from_bool(self.engine.holds(key));
            let bytes = load.call2(&JsValue::UNDEFINED, &decode_key(key), &held)?;
            if let Some(bytes) = bytes.dyn_ref::<ArrayBuffer>() {
                let field = join(&["the stored bucket of requests[", &decimal(i), "].key"]);
                let bytes = Uint8Array::new(bytes).to_vec();
                self.engine.restore(key, &bytes, &field, now)?;
            }
        }
        Ok(())
    }

    /// The loader of `setOptions`: `load()` returns `[key, snapshot bytes]` pairs, each
    /// restored unless memory holds the key.
    pub(super) fn load_all(&mut self, load: &JsValue, now: Instant) -> Result<(), JsValue> {
        let Some(load) = load.dyn_ref::<Function>() else {
            return Ok(());
        };
        let pairs = Array::from(&load.call0(&JsValue::UNDEFINED)?);
        for pair in pairs.iter() {
            let pair = Array::from(&pair);
            if let Some(bytes) = pair.get(1).dyn_ref::<ArrayBuffer>() {
                self.restore_at(&pair.get(0), bytes, now)?;
            }
        }
        Ok(())
    }

    fn restore_at(
        &mut self,
        key: &JsValue,
        bytes: &ArrayBuffer,
        now: Instant,
    ) -> Result<(), JsValue> {
        let bytes = Uint8Array::new(bytes).to_vec();
        encode_key(key, "key", &mut self.key)?;
        self.engine
            .restore(&self.key, &bytes, &snapshot_field(key), now)?;
        Ok(())
    }
}
