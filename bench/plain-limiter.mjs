// The plain-JS baseline of the benchmarks, in one place: the Node benchmarks use it through
// bench/common.mjs, and the end-to-end Worker (bench/e2e/worker.js, bundled by wrangler) wraps
// it in a Durable Object. A plain ES module with no imports, so that both can load it.

/**
 * The baseline: the same lazy token bucket over a Map, in plain JavaScript. Whole tokens,
 * refills in whole intervals keeping sub-interval progress, like the engine.
 */
export class PlainJsLimiter {
  buckets = new Map();
  max = 10;
  everyMs = 10_000;

  setOptions({ max_tokens, refill_every_seconds }) {
    if (max_tokens !== undefined) this.max = max_tokens;
    if (refill_every_seconds !== undefined) this.everyMs = refill_every_seconds * 1000;
  }

  consume(key, cost = 1) {
    const now = Date.now();
    const b = this.buckets.get(key);
    if (b === undefined) {
      if (cost > this.max) return false;
      if (cost > 0) this.buckets.set(key, { tokens: this.max - cost, last: now });
      return true;
    }
    // k whole tokens since the last refill; a full bank makes no progress.
    const k = Math.floor((now - b.last) / this.everyMs);
    if (k > 0) {
      if (b.tokens + k >= this.max) {
        b.tokens = this.max;
        b.last = now;
      } else {
        b.tokens += k;
        b.last += k * this.everyMs;
      }
    }
    if (b.tokens < cost) return false;
    b.tokens -= cost;
    return true;
  }

  /** `limit(key, cost)` without a policy: decides and reports, like the engine's. */
  limit(key, cost = 1) {
    const now = Date.now();
    const max = this.max;
    const everyMs = this.everyMs;
    let b = this.buckets.get(key);
    if (b === undefined) {
      b = { tokens: max, last: now };
      this.buckets.set(key, b);
    } else {
      const k = Math.floor((now - b.last) / everyMs);
      if (k > 0) {
        if (b.tokens + k >= max) {
          b.tokens = max;
          b.last = now;
        } else {
          b.tokens += k;
          b.last += k * everyMs;
        }
      }
    }
    const allowed = b.tokens >= cost;
    if (allowed) b.tokens -= cost;
    const full = b.tokens >= max;
    let retry = 0;
    if (!allowed) retry = cost > max ? null : Math.ceil(b.last + Math.ceil(cost - b.tokens) * everyMs - now);
    return {
      allowed,
      remaining: b.tokens,
      limit: max,
      reset_in_ms: full ? 0 : Math.ceil(b.last + everyMs - now),
      retry_after_ms: retry,
      window_ms: max * everyMs,
    };
  }
}
