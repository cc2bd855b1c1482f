// ns per consume() through the JS shim in Node, beside a plain-JS Map implementation of the
// same algorithm measured in the same run. Run with `npm run bench` (after `npm run build`).
import { RateLimiterServer } from '@delightstack/rate-limiter';

const CALLS = 1_000_000;
const SIZES = [1, 10_000];
// Large enough that no bucket fills up or runs dry during the run: every call consumes.
const OPTIONS = { max_tokens: 1e15, refill_every_seconds: 3600 };

/** The baseline: the same lazy token bucket over a Map, in plain JavaScript. */
class PlainJsLimiter {
  buckets = new Map();
  max = OPTIONS.max_tokens;
  everyMs = OPTIONS.refill_every_seconds * 1000;

  consume(key, cost = 1) {
    const now = Date.now();
    const b = this.buckets.get(key);
    if (b === undefined) {
      if (cost > this.max) return false;
      if (cost > 0) this.buckets.set(key, { tokens: this.max - cost, last: now });
      return true;
    }
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
}

function nsPerCall(limiter, keys) {
  for (const key of keys) limiter.consume(key, 1); // every key exists before timing
  for (let i = 0; i < 100_000; i++) limiter.consume(keys[i % keys.length], 1); // warm-up
  const start = process.hrtime.bigint();
  let allowed = 0;
  for (let i = 0; i < CALLS; i++) if (limiter.consume(keys[i % keys.length], 1)) allowed++;
  const ns = Number(process.hrtime.bigint() - start) / CALLS;
  if (allowed !== CALLS) throw new Error(`expected every call to be allowed, got ${allowed}`);
  return ns;
}

const rows = [];
for (const size of SIZES) {
  const keys = Array.from({ length: size }, (_, i) => `client-${i}:api`);
  const server = new RateLimiterServer({}, {});
  server.setOptions(OPTIONS);
  const shim = nsPerCall(server, keys);
  const plain = nsPerCall(new PlainJsLimiter(), keys);
  rows.push({ keys: size, shim, plain });
}

console.log(`consume() on an existing key, ${CALLS.toLocaleString('en')} calls, Node ${process.version}\n`);
console.log('| live keys | shim (wasm) ns/call | plain JS Map ns/call | ratio shim/plain |');
console.log('|---:|---:|---:|---:|');
for (const { keys, shim, plain } of rows) {
  console.log(`| ${keys.toLocaleString('en')} | ${shim.toFixed(0)} | ${plain.toFixed(0)} | ${(shim / plain).toFixed(2)}× |`);
}
