//! Leases, for holders that spend tokens locally (the middleware's `local` mode and the
//! lease client): `limitLeased`, `settle` and `refund`.

use wasm_bindgen::prelude::*;

use super::key::encode_key;
use super::objects::lease_decision_object;
use super::read::{read_lease_request, read_policy, read_settlement, read_tokens};
use super::RateLimiter;
use crate::engine::Instant;

#[wasm_bindgen]
impl RateLimiter {
    /// `limit` that also settles the holder's previous lease (`lease.settle`) and may grant
    /// a new one of up to `lease.want` tokens for later requests.
    #[wasm_bindgen(js_name = limitLeased, unchecked_return_type = "RateLimitLeaseDecision")]
    pub fn limit_leased(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] cost: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "RateLimiterPolicy")] policy: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "RateLimitLeaseRequest")] lease: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let cost = self.read_key_and_cost(key, cost)?;
        let (policy, penalty) = read_policy(policy, "policy")?;
        let mut request = read_lease_request(lease, "lease")?;
        // A penalty blocks the key at the first denial, which must then reach the object: no
        // appointment defers it (docs/SPEC.md, 11.11).
        request.ask.queue &= penalty.is_none();
        let now = Instant::from_millis(now_ms);
        let mut decision = self
            .engine
            .limit_shared(&self.key, cost, policy, request.settle, request.ask, now)
            .map_err(|e| e.within("policy"))?;
        if let Some(nanos) = penalty {
            self.engine
                .apply_penalty(&self.key, &mut decision.decision, nanos, now);
        }
        Ok(lease_decision_object(&decision, now).into())
    }

    /// Ends a lease: `{ id, used }`, the unused part back into the bucket. Returns false
    /// for a lease that is unknown or has expired (it counted as fully used).
    pub fn settle(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "RateLimitSettlement")] lease: &JsValue,
    ) -> Result<bool, JsValue> {
        let settlement = read_settlement(lease, "lease")?;
        encode_key(key, "key", &mut self.key)?;
        let now = Instant::from_millis(now_ms);
        Ok(self.engine.settle(&self.key, settlement, now))
    }

    /// Gives `tokens` back to the bucket of `key`, up to its capacity.
    pub fn refund(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] tokens: &JsValue,
    ) -> Result<(), JsValue> {
        let tokens = read_tokens(tokens, "tokens")?;
        encode_key(key, "key", &mut self.key)?;
        self.engine
            .refund(&self.key, tokens, Instant::from_millis(now_ms));
        Ok(())
    }
}
