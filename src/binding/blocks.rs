//! Blocks, for operators: `block`, `unblock` and the blocks in force (`blocks`), and
//! `restoreBlock` for the durable class.

use js_sys::{Array, Object};
use wasm_bindgen::prelude::*;

use super::key::{decode_key, encode_key};
use super::read::read_number;
use super::RateLimiter;
use crate::engine::{block_nanos, Instant};

#[wasm_bindgen(inline_js = "
export function blockObject(key, blocked_until_ms, blocked_for_ms) {
  return { key, blocked_until_ms, blocked_for_ms };
}
")]
extern "C" {
    #[wasm_bindgen(js_name = blockObject)]
    fn block_object(key: &JsValue, blocked_until_ms: f64, blocked_for_ms: f64) -> Object;
}

#[wasm_bindgen]
impl RateLimiter {
    /// Blocks `key` for `seconds` (finite, > 0, at most a year), replacing a block in force.
    /// Returns when it ends (epoch ms, rounded up).
    pub fn block(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] seconds: &JsValue,
    ) -> Result<f64, JsValue> {
        let nanos = block_nanos(read_number(seconds, "seconds")?, "seconds")?;
        encode_key(key, "key", &mut self.key)?;
        let now = Instant::from_millis(now_ms);
        self.engine.block(&self.key, nanos, now);
        let end = now.saturating_add(nanos);
        Ok((end.as_nanos() as f64 / 1e6).ceil())
    }

    /// Ends the block of `key`; whether one was in force.
    pub fn unblock(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<bool, JsValue> {
        encode_key(key, "key", &mut self.key)?;
        Ok(self.engine.unblock(&self.key, Instant::from_millis(now_ms)))
    }

    /// `{ key, blocked_until_ms, blocked_for_ms }` of every block in force, in no order.
    #[wasm_bindgen(
        unchecked_return_type = "{ key: string; blocked_until_ms: number; blocked_for_ms: number }[]"
    )]
    pub fn blocks(&self, now_ms: f64) -> Array {
        let now = Instant::from_millis(now_ms);
        self.engine
            .blocks(now)
            .iter()
            .map(|(key, end)| {
                let until = (end.as_nanos() as f64 / 1e6).ceil();
                let left = (end.saturating_since(now) as f64 / 1e6).ceil();
                JsValue::from(block_object(&decode_key(key), until, left))
            })
            .collect()
    }

    /// When the block of `key` in force ends (epoch ms, rounded up), if there is one: for
    /// the durable class, which saves the blocks a penalty begins.
    #[wasm_bindgen(js_name = blockedUntil)]
    pub fn blocked_until(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<Option<f64>, JsValue> {
        encode_key(key, "key", &mut self.key)?;
        let end = self
            .engine
            .blocked_until(&self.key, Instant::from_millis(now_ms));
        Ok(end.map(|end| (end.as_nanos() as f64 / 1e6).ceil()))
    }

    /// Keys with blocks in memory (in force, or over and not yet swept).
    #[wasm_bindgen(getter, js_name = blockedKeys)]
    pub fn blocked_keys(&self) -> usize {
        self.engine.blocked_keys()
    }

    /// Puts back a block that ends at `until_ms` (epoch ms), as the durable class saved it.
    #[wasm_bindgen(js_name = restoreBlock)]
    pub fn restore_block(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        until_ms: f64,
    ) -> Result<(), JsValue> {
        encode_key(key, "key", &mut self.key)?;
        let now = Instant::from_millis(now_ms);
        let end = Instant::from_millis(until_ms);
        if end > now {
            self.engine.block(&self.key, end.saturating_since(now), now);
        }
        Ok(())
    }
}
