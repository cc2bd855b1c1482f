//! Concurrency limits: `acquire`, `release` and `gateStatus`, and the gate snapshots of the
//! durable class (`gateSnapshot`, `restoreGate`).

use js_sys::{ArrayBuffer, Function, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

use super::key::{decode_key, encode_key};
use super::objects::all_decision_object;
use super::read::{
    read_gate_policy, read_permit_cost, read_permit_id, read_permit_request, read_requests,
};
use super::RateLimiter;
use crate::engine::{gate_snapshot, Instant, Permit, PermitAsk, PermitDecision, Request};

#[wasm_bindgen(inline_js = "
export function permitObject(allowed, id, in_flight, limit, ttl_ms, retry_after_ms) {
  return {
    allowed, id: id < 0 ? null : id, in_flight, limit, ttl_ms,
    retry_after_ms: retry_after_ms < 0 ? null : retry_after_ms,
  };
}
export function releaseObject(released, in_flight) {
  return { released, in_flight };
}
export function gateStatusObject(in_flight, permits) {
  return { in_flight, permits };
}
// `bytes` views wasm memory: copy it out.
export function gateSnapshotObject(bytes, ends_at_ms) {
  return { bytes: bytes.slice().buffer, ends_at_ms };
}
")]
extern "C" {
    #[wasm_bindgen(js_name = permitObject)]
    fn permit_object(
        allowed: bool,
        id: f64,
        in_flight: f64,
        limit: f64,
        ttl_ms: f64,
        retry_after_ms: f64,
    ) -> Object;

    #[wasm_bindgen(js_name = releaseObject)]
    fn release_object(released: bool, in_flight: f64) -> Object;

    #[wasm_bindgen(js_name = gateStatusObject)]
    fn gate_status_object(in_flight: f64, permits: f64) -> Object;

    #[wasm_bindgen(js_name = gateSnapshotObject)]
    fn gate_snapshot_object(bytes: &[u8], ends_at_ms: f64) -> Object;
}

fn permit_of(d: &PermitDecision) -> Object {
    permit_object(
        d.allowed,
        d.id.map_or(-1.0, |id| id as f64),
        d.in_flight as f64,
        d.limit as f64,
        d.ttl_ms,
        d.retry_after_ms.unwrap_or(-1.0),
    )
}

impl RateLimiter {
    fn live_permits(&mut self, now_ms: f64, key: &JsValue) -> Result<Vec<Permit>, JsValue> {
        encode_key(key, "key", &mut self.key)?;
        Ok(self
            .engine
            .permits_of(&self.key, Instant::from_millis(now_ms)))
    }
}

#[wasm_bindgen]
impl RateLimiter {
    /// A permit of `cost` (default 1) on `key`'s gate, if its live permits leave room under
    /// `policy`; released with `release(key, id)` or expired after `ttl_seconds`.
    #[wasm_bindgen(unchecked_return_type = "RateLimitPermit")]
    pub fn acquire(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | undefined")] cost: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "RateLimitGatePolicy")] policy: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let cost = read_permit_cost(cost, "cost")?;
        let policy = read_gate_policy(policy, "policy")?;
        encode_key(key, "key", &mut self.key)?;
        let d = self
            .engine
            .acquire(&self.key, cost, policy, Instant::from_millis(now_ms));
        Ok(permit_of(&d).into())
    }

    /// `limitAll` with a permit (`{ key, cost?, policy }`), all or nothing with the enforced
    /// requests: the answer is `limitAll`'s with `permit` (its `allowed`, when the call is
    /// denied, says whether the gate had room; an id only when granted). `load` is
    /// `limitAll`'s; `loadGate(key)` is called once with the permit's key and may return its
    /// gate snapshot, which replaces what memory holds.
    #[wasm_bindgen(js_name = limitAllWithPermit, unchecked_return_type = "RateLimitAllDecision")]
    pub fn limit_all_with_permit(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "RateLimitRequest[]")] requests: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "RateLimitPermitRequest")] permit: &JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "(key: string, held: boolean) => ArrayBuffer | undefined"
        )]
        load: &JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "(key: string) => ArrayBuffer | undefined")]
        load_gate: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let requests = read_requests(requests)?;
        let ask = read_permit_request(permit, "permit")?;
        let now = Instant::from_millis(now_ms);
        self.load_each(load, &requests, now)?;
        if let Some(load_gate) = load_gate.dyn_ref::<Function>() {
            let bytes = load_gate.call1(&JsValue::UNDEFINED, &decode_key(&ask.key))?;
            let bytes = bytes
                .dyn_ref::<ArrayBuffer>()
                .map_or_else(|| gate_snapshot(&[]), |b| Uint8Array::new(b).to_vec());
            self.engine.restore_gate(&ask.key, &bytes, now)?;
        }
        let borrowed: Vec<Request<'_>> = requests.iter().map(|r| r.borrowed()).collect();
        let asked = PermitAsk {
            key: &ask.key,
            cost: ask.cost,
            policy: ask.policy,
        };
        let (decision, permit) = self
            .engine
            .limit_all_with_permit(&borrowed, Some(asked), now)?;
        let object = all_decision_object(&decision);
        if let Some(permit) = permit {
            Reflect::set(&object, &JsValue::from_str("permit"), &permit_of(&permit))?;
        }
        Ok(object.into())
    }

    /// Ends the live permit `id` of `key`: `{ released, in_flight }`, `released` false (and
    /// nothing changed) for a permit released already, expired or never granted.
    #[wasm_bindgen(unchecked_return_type = "RateLimitRelease")]
    pub fn release(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let id = read_permit_id(id, "id")?;
        encode_key(key, "key", &mut self.key)?;
        let r = self
            .engine
            .release(&self.key, id, Instant::from_millis(now_ms));
        Ok(release_object(r.released, r.in_flight as f64).into())
    }

    /// `{ in_flight, permits }` of `key`'s live permits. Changes nothing.
    #[wasm_bindgen(js_name = gateStatus, unchecked_return_type = "RateLimitGateStatus")]
    pub fn gate_status(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let live = self.live_permits(now_ms, key)?;
        let in_flight = live.iter().fold(0u64, |sum, p| sum.saturating_add(p.cost));
        Ok(gate_status_object(in_flight as f64, live.len() as f64).into())
    }

    /// Keys with permits in memory (live, or expired and not yet swept).
    #[wasm_bindgen(getter, js_name = gatedKeys)]
    pub fn gated_keys(&self) -> usize {
        self.engine.gated_keys()
    }

    /// `{ bytes, ends_at_ms }` of `key`'s live permits (`ends_at_ms`: when the last one
    /// expires, rounded up), or `undefined` when it has none: for the durable class.
    #[wasm_bindgen(js_name = gateSnapshot)]
    pub fn gate_snapshot(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let live = self.live_permits(now_ms, key)?;
        let Some(last) = live.iter().map(|p: &Permit| p.expires_at).max() else {
            return Ok(JsValue::UNDEFINED);
        };
        let ends_at_ms = (last.as_nanos() as f64 / 1e6).ceil();
        Ok(gate_snapshot_object(&gate_snapshot(&live), ends_at_ms).into())
    }

    /// Restores `key`'s gate from `gateSnapshot` bytes (`undefined`: no permits); its live
    /// permits replace what memory held. Throws an `Error` for bytes that are not a gate
    /// snapshot, changing nothing.
    #[wasm_bindgen(js_name = restoreGate)]
    pub fn restore_gate(
        &mut self,
        now_ms: f64,
        #[wasm_bindgen(unchecked_param_type = "string")] key: &JsValue,
        bytes: Option<ArrayBuffer>,
    ) -> Result<(), JsValue> {
        let bytes = bytes.map_or_else(|| gate_snapshot(&[]), |b| Uint8Array::new(&b).to_vec());
        encode_key(key, "key", &mut self.key)?;
        self.engine
            .restore_gate(&self.key, &bytes, Instant::from_millis(now_ms))?;
        Ok(())
    }
}
