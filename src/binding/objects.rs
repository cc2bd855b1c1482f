//! Result objects. Each is built by JavaScript in one call: object literals get a stable
//! shape at once, where setting fields one by one from wasm costs a boundary crossing and a
//! property-name string per field. A negative `retry_after_ms` stands for `null`.

use js_sys::{Array, Object};
use wasm_bindgen::prelude::*;

use crate::engine::{
    ceil_millis, div_ceil_small, share_period, term_nanos, AllDecision, Decision, Instant, Lease,
    LeaseDecision, Options, Status, StoredSnapshot, LEASE_TTL_NANOS, MAX_SAFE_INTEGER,
};

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
export function allDecisionObject(allowed, retry_after_ms, results) {
  return { allowed, retry_after_ms: retry_after_ms < 0 ? null : retry_after_ms, results };
}
export function leaseDecisionObject(decision, id, tokens, ttl_ms, call_after_ms) {
  decision.lease = tokens > 0 ? { id, tokens, ttl_ms } : null;
  if (call_after_ms >= 0) decision.call_after_ms = call_after_ms;
  return decision;
}
export function recordDecisionObject(decision, id, ttl_ms) {
  decision.lease = { id, tokens: 0, ttl_ms };
  return decision;
}
export function shareDecisionObject(decision, id, tokens, ttl_ms, term_ms, capacity, refill_every_ns, next) {
  const share = {
    capacity, refill_every_ns: refill_every_ns < 0 ? null : refill_every_ns, term_ms, next: null,
  };
  if (next.length > 0) {
    share.next = { capacity: next[0], refill_every_ns: next[1] < 0 ? null : next[1] };
  }
  decision.lease = { id, tokens, ttl_ms, share };
  return decision;
}
export function optionsObject(max_tokens, refill_every_seconds) {
  return { max_tokens, refill_every_seconds };
}
// `bytes` views wasm memory: copy it out.
export function snapshotObject(bytes, full_at_ms, has_policy) {
  return { bytes: bytes.slice().buffer, full_at_ms, has_policy };
}
export function keyedSnapshotObject(key, bytes, full_at_ms) {
  return { key, bytes: bytes.slice().buffer, full_at_ms };
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

    #[wasm_bindgen(js_name = allDecisionObject)]
    fn all_decision_object_js(allowed: bool, retry_after_ms: f64, results: Array) -> Object;

    #[wasm_bindgen(js_name = leaseDecisionObject)]
    fn lease_decision_object_js(
        decision: Object,
        id: f64,
        tokens: f64,
        ttl_ms: f64,
        call_after_ms: f64,
    ) -> Object;

    #[wasm_bindgen(js_name = recordDecisionObject)]
    fn record_decision_object_js(decision: Object, id: f64, ttl_ms: f64) -> Object;

    #[wasm_bindgen(js_name = shareDecisionObject)]
    #[allow(clippy::too_many_arguments)]
    fn share_decision_object_js(
        decision: Object,
        id: f64,
        tokens: f64,
        ttl_ms: f64,
        term_ms: f64,
        capacity: f64,
        refill_every_ns: f64,
        next: Vec<f64>,
    ) -> Object;

    #[wasm_bindgen(js_name = optionsObject)]
    fn options_object_js(max_tokens: f64, refill_every_seconds: f64) -> Object;

    #[wasm_bindgen(js_name = snapshotObject)]
    fn snapshot_object_js(bytes: &[u8], full_at_ms: f64, has_policy: bool) -> Object;

    #[wasm_bindgen(js_name = keyedSnapshotObject)]
    fn keyed_snapshot_object_js(key: &JsValue, bytes: &[u8], full_at_ms: f64) -> Object;
}

pub(crate) fn status_object(status: &Status) -> Object {
    status_object_js(status.remaining, status.limit, status.reset_in_ms)
}

pub(crate) fn decision_object(decision: &Decision) -> Object {
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

pub(crate) fn all_decision_object(decision: &AllDecision) -> Object {
    let results: Array = decision.results.iter().map(decision_object).collect();
    let retry = decision.retry_after_ms.unwrap_or(-1.0);
    all_decision_object_js(decision.allowed, retry, results)
}

/// A decision with `lease: { id, tokens, ttl_ms, share? } | null`: `tokens` moved into the
/// lease by the call, `ttl_ms` until its current term ends, and for a share its terms; an ask
/// for a share put on record instead is `{ id, tokens: 0, ttl_ms }`, `ttl_ms` until it ends;
/// with an appointment, `call_after_ms` too.
pub(crate) fn lease_decision_object(decision: &LeaseDecision, now: Instant) -> Object {
    let object = decision_object(&decision.decision);
    let tokens = decision.moved as f64 / 1e9;
    if let Some(record) = decision.lease.filter(Lease::is_record) {
        let ttl_ms = record.expires_at.saturating_since(now) as f64 / 1e6;
        return record_decision_object_js(object, record.id as f64, ttl_ms);
    }
    let Some(lease) = decision.lease.filter(Lease::is_share) else {
        let id = decision.lease.map_or(0.0, |lease| lease.id as f64);
        let ttl_ms = (LEASE_TTL_NANOS / 1_000_000) as f64;
        // (An appointment, when the holder keeps them: a negative stands for none.)
        let call_after_ms = decision
            .call_after
            .map_or(-1.0, |nanos| ceil_millis(u128::from(nanos)));
        return lease_decision_object_js(object, id, tokens, ttl_ms, call_after_ms);
    };
    let options = &decision.options;
    let ttl_ms = lease.expires_at.saturating_since(now) as f64 / 1e6;
    let period = |parts| share_period(options, parts).map_or(-1.0, whole_nanos);
    let next = lease.next.map_or(Vec::new(), |next| {
        vec![next.billionths as f64 / 1e9, period(next.parts)]
    });
    share_decision_object_js(
        object,
        lease.id as f64,
        tokens,
        ttl_ms,
        lease
            .next
            .map_or(term_nanos(options, lease.parts), |next| next.nanos) as f64
            / 1e6,
        lease.billionths as f64 / 1e9,
        period(lease.parts),
        next,
    )
}

/// A period as a JavaScript number of nanoseconds; one too long to hold exactly is "never"
/// (-1), so a holder never refills early.
fn whole_nanos(period: u128) -> f64 {
    if period > MAX_SAFE_INTEGER as u128 {
        -1.0
    } else {
        period as f64
    }
}

pub(crate) fn options_object(options: &Options) -> Object {
    options_object_js(options.max_tokens() as f64, options.refill_every_seconds())
}

/// `{ bytes, full_at_ms, has_policy }`.
pub(crate) fn snapshot_object(snapshot: &StoredSnapshot) -> Object {
    let full_at = full_at_ms(snapshot.full_at_nanos);
    snapshot_object_js(&snapshot.bytes, full_at, snapshot.has_policy)
}

/// `{ key, bytes, full_at_ms }`.
pub(crate) fn keyed_snapshot_object(key: &JsValue, snapshot: &StoredSnapshot) -> Object {
    keyed_snapshot_object_js(key, &snapshot.bytes, full_at_ms(snapshot.full_at_nanos))
}

/// A moment in nanoseconds as whole milliseconds, rounded up and capped at 2^53 - 1 (a
/// bucket that never refills is full "never").
fn full_at_ms(nanos: u128) -> f64 {
    let ms = div_ceil_small(nanos, 1_000_000);
    ms.min(MAX_SAFE_INTEGER as u128) as f64
}
