// limit() and limitAll() over native Durable Object RPC, inside workerd, on fake timers
// (the Durable Object runs in the test isolate, so vi.setSystemTime reaches its Date.now()).
// Each test uses its own idFromName, so its own Durable Object and fresh state.
import { rateLimitHeaders } from '@delightstack/rate-limiter';
import type { RateLimiterOptions } from '@delightstack/rate-limiter';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection, type Stub } from './support';


const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const DECISION_KEYS = ['allowed', 'limit', 'remaining', 'reset_in_ms', 'retry_after_ms', 'window_ms'];
const fullDefault = { remaining: 10, limit: 10, reset_in_ms: 0 };

/** getStatus of several keys, for before/after comparisons. */
const statuses = (stub: Stub, keys: string[]) => Promise.all(keys.map((k) => stub.getStatus(k)));

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('limit(): the decision', () => {
  it('is a plain object with allowed, remaining, limit, reset_in_ms, retry_after_ms, window_ms', async () => {
    const stub = limiter('limit-shape');
    const d = await stub.limit('api');
    expect(Object.getPrototypeOf(d)).toBe(Object.prototype);
    expect(Object.keys(d).sort()).toEqual(DECISION_KEYS);
    // Default cost 1 and the instance options: 10 tokens, one per 10 s, so a 100 s window.
    expect(d).toEqual({
      allowed: true,
      remaining: 9,
      limit: 10,
      reset_in_ms: 10_000,
      retry_after_ms: 0,
      window_ms: 100_000,
    });

    const withPolicy = await stub.limit('other', 2, { max_tokens: 4, refill_every_seconds: 0.25 });
    expect(withPolicy).toEqual({
      allowed: true,
      remaining: 2,
      limit: 4,
      reset_in_ms: 250,
      retry_after_ms: 0,
      window_ms: 1_000,
    });

    // remaining, limit and reset_in_ms are what getStatus says right after.
    const { allowed, retry_after_ms, window_ms, ...status } = await stub.limit('api', 4);
    expect([allowed, retry_after_ms, window_ms]).toEqual([true, 0, 100_000]);
    expect(status).toEqual(await stub.getStatus('api'));
    expect(status).toEqual({ remaining: 5, limit: 10, reset_in_ms: 10_000 });
  });

  it('a denied call reports the bucket as it is and the exact wait', async () => {
    const stub = limiter('limit-denied-shape');
    expect((await stub.limit('api', 10)).allowed).toBe(true);
    at(2_500);
    const d = await stub.limit('api', 3);
    expect(Object.getPrototypeOf(d)).toBe(Object.prototype);
    expect(Object.keys(d).sort()).toEqual(DECISION_KEYS);
    // Three refills are needed: at 10, 20 and 30 s.
    expect(d).toEqual({
      allowed: false,
      remaining: 0,
      limit: 10,
      reset_in_ms: 7_500,
      retry_after_ms: 27_500,
      window_ms: 100_000,
    });
  });

  it('retry_after_ms is null when the cost is above the capacity; nothing is consumed', async () => {
    const stub = limiter('limit-unsatisfiable');
    expect(await stub.limit('api', 11)).toEqual({
      allowed: false,
      remaining: 10,
      limit: 10,
      reset_in_ms: 0,
      retry_after_ms: null,
      window_ms: 100_000,
    });
    const d = await stub.limit('small', 5.5, { max_tokens: 5 });
    expect(d.allowed).toBe(false);
    expect(d.retry_after_ms).toBeNull();
    expect(d.limit).toBe(5);
    // Even from an empty bucket, cost above capacity stays null (not a long wait).
    expect((await stub.limit('api', 10)).allowed).toBe(true);
    expect((await stub.limit('api', 10.5)).retry_after_ms).toBeNull();
    expect((await stub.limit('api', 10)).retry_after_ms).toBe(100_000);
    // No wait can help, so no Retry-After header either.
    expect(rateLimitHeaders(d)['Retry-After']).toBeUndefined();
    expect(await stub.getStatus('small')).toEqual(fullDefault);
  });
});

// Waiting exactly retry_after_ms makes the same call succeed; 1 ms less does not.
// The interval is a whole number of nanoseconds, rounded up (never more generous than
// asked): 1/3 s is 333_333_334 ns. The model below computes the wait from that.
describe.each([
  ['10 s', 10],
  ['0.25 s', 0.25],
  ['1/3 s', 1 / 3],
])('retry_after_ms is exact, refill every %s', (_, seconds) => {
  const policy = { max_tokens: 10, refill_every_seconds: seconds };
  const intervalNs = BigInt(Math.ceil(seconds * 1e9));
  const ms = (ns: bigint) => Number((ns + 999_999n) / 1_000_000n); // rounded up

  describe.each([1, 3, 7])('cost %i', (cost) => {
    // Tokens left before the denied call: none, a fraction, one short.
    const starts = [...new Set([0, 0.5, cost - 1])].filter((s) => s < cost);

    it.each(starts)('from %d tokens left', async (start) => {
      const stub = limiter(`retry-${seconds}-${cost}-${start}`);
      const key = 'api';
      // Leave `start` tokens, with the last refill 2 intervals after T0 (off the millisecond
      // grid for 1/3 s) and the clock part-way into the next interval.
      expect((await stub.limit(key, 10 - start, policy)).allowed).toBe(true);
      const t1 = Math.floor(2.6 * seconds * 1000);
      at(t1);
      expect((await stub.getStatus(key)).remaining).toBe(start + 2);
      expect((await stub.limit(key, 2, policy)).allowed).toBe(true);
      expect((await stub.getStatus(key)).remaining).toBe(start);

      const denied = await stub.limit(key, cost, policy);
      expect(denied.allowed).toBe(false);
      expect(denied.remaining).toBe(start);
      const refills = BigInt(Math.ceil(cost - start));
      const t1Ns = BigInt(t1) * 1_000_000n;
      const wait = ms((2n + refills) * intervalNs - t1Ns);
      expect(denied.retry_after_ms).toBe(wait);
      expect(denied.reset_in_ms).toBe(ms(3n * intervalNs - t1Ns));
      expect(wait).toBeGreaterThan(0);

      at(t1 + wait - 1);
      const early = await stub.limit(key, cost, policy);
      expect(early.allowed).toBe(false);
      expect(early.retry_after_ms).toBe(1);

      at(t1 + wait);
      const ok = await stub.limit(key, cost, policy);
      expect(ok.allowed).toBe(true);
      expect(ok.retry_after_ms).toBe(0);
      expect(ok.remaining).toBeCloseTo(start + Number(refills) - cost, 9);
    });
  });
});

describe('per-key policy', () => {
  const policy = { max_tokens: 3, refill_every_seconds: 1 };

  it('is remembered after an allowed call: getStatus, consume, check and limit use it', async () => {
    const stub = limiter('policy-remembered');
    expect(await stub.limit('a', 1, policy)).toMatchObject({ allowed: true, remaining: 2, limit: 3 });
    expect(await stub.getStatus('a')).toEqual({ remaining: 2, limit: 3, reset_in_ms: 1_000 });
    expect(await stub.consume('a')).toBe(true);
    expect(await stub.check('a', 1)).toBe(true);
    expect(await stub.check('a', 2)).toBe(false);
    expect(await stub.limit('a')).toEqual({
      allowed: true,
      remaining: 0,
      limit: 3,
      reset_in_ms: 1_000,
      retry_after_ms: 0,
      window_ms: 3_000,
    });
    // It refills at the policy's pace (1 s), not the instance's (10 s).
    at(1_000);
    expect(await stub.getStatus('a')).toEqual({ remaining: 1, limit: 3, reset_in_ms: 1_000 });
    expect(await stub.consume('a')).toBe(true);
    expect(await stub.consume('a')).toBe(false);
  });

  it('leaves other keys and the instance options alone', async () => {
    const stub = limiter('policy-other-keys');
    expect((await stub.limit('a', 1, policy)).allowed).toBe(true);
    expect(await stub.getStatus('b')).toEqual(fullDefault);
    expect(await stub.limit('b')).toMatchObject({ allowed: true, remaining: 9, limit: 10 });
    // A later setOptions reaches keys without a policy of their own only.
    await stub.setOptions({ max_tokens: 4 });
    expect((await stub.getStatus('a')).limit).toBe(3);
    expect((await stub.getStatus('c')).limit).toBe(4);
    // Another object knows nothing of it.
    expect(await limiter('policy-other-keys-2').getStatus('a')).toEqual(fullDefault);
  });

  it('takes missing fields from the instance options', async () => {
    const stub = limiter('policy-partial');
    await stub.setOptions({ refill_every_seconds: 2 });
    expect(await stub.limit('a', 1, { max_tokens: 4 })).toMatchObject({
      limit: 4,
      reset_in_ms: 2_000,
      window_ms: 8_000,
    });
    expect(await stub.limit('b', 1, { refill_every_seconds: 0.5 })).toMatchObject({
      limit: 10,
      reset_in_ms: 500,
      window_ms: 5_000,
    });
  });

  it('is replaced by a different policy on an allowed call', async () => {
    const stub = limiter('policy-replaced');
    expect((await stub.limit('a', 1, policy)).allowed).toBe(true);
    expect(await stub.limit('a', 1, { max_tokens: 5, refill_every_seconds: 1 })).toMatchObject({
      allowed: true,
      remaining: 1,
      limit: 5,
    });
    expect((await stub.getStatus('a')).limit).toBe(5);
  });

  it('is forgotten by reset(key): the key follows the instance options again', async () => {
    const stub = limiter('policy-reset');
    expect((await stub.limit('a', 1, policy)).allowed).toBe(true);
    expect((await stub.limit('b', 1, policy)).allowed).toBe(true);
    await stub.reset('a');
    expect(await stub.getStatus('a')).toEqual(fullDefault);
    expect(await stub.limit('a')).toMatchObject({ allowed: true, remaining: 9, limit: 10 });
    expect(await stub.getStatus('a')).toEqual({ remaining: 9, limit: 10, reset_in_ms: 10_000 });
    // b keeps its own.
    expect(await stub.getStatus('b')).toEqual({ remaining: 2, limit: 3, reset_in_ms: 1_000 });
  });

  // Memory stays bounded by the buckets that are not full: a bucket that refills to full is
  // forgotten together with its policy, and a call that leaves the bucket full stores none.
  it('is in force while the bucket is not full, and forgotten once it refills to full', async () => {
    const stub = limiter('policy-after-full');
    expect((await stub.limit('a', 1, policy)).allowed).toBe(true);
    at(999); // 2 of 3, the third token at 1 s
    expect(await stub.getStatus('a')).toEqual({ remaining: 2, limit: 3, reset_in_ms: 1 });
    expect(await stub.check('a', 3)).toBe(false);
    expect(await stub.limit('a', 0)).toEqual({
      allowed: true,
      remaining: 2,
      limit: 3,
      reset_in_ms: 1,
      retry_after_ms: 0,
      window_ms: 3_000,
    });
    at(1_000); // one refill: the 3-token bucket is full, so the key is forgotten
    expect(await stub.getStatus('a')).toEqual(fullDefault);
    expect(await stub.check('a', 4)).toBe(true);
    // The instance options apply: 10 at once, then one per 10 s.
    expect(await stub.consume('a', 10)).toBe(true);
    expect(await stub.limit('a', 0)).toMatchObject({ allowed: true, remaining: 0, limit: 10, reset_in_ms: 10_000 });
    expect(await stub.getStatus('a')).toEqual({ remaining: 0, limit: 10, reset_in_ms: 10_000 });

    // A cost-0 call with a policy leaves a full bucket full: nothing is stored.
    expect(await stub.limit('z', 0, policy)).toEqual({
      allowed: true,
      remaining: 3,
      limit: 3,
      reset_in_ms: 0,
      retry_after_ms: 0,
      window_ms: 3_000,
    });
    expect(await stub.getStatus('z')).toEqual(fullDefault);
    // On a bucket that is not full, the same call stores the policy.
    expect(await stub.consume('y', 9)).toBe(true);
    expect((await stub.limit('y', 0, policy)).limit).toBe(3);
    expect(await stub.getStatus('y')).toEqual({ remaining: 1, limit: 3, reset_in_ms: 1_000 });
  });

  it('without a policy, a denied call waits until full when only then the instance options hold the cost', async () => {
    const stub = limiter('policy-retry-at-full');
    expect((await stub.limit('a', 3, policy)).allowed).toBe(true); // 0 of 3, full at 3 s
    // 5 never fits in 3, but at 3 s the key is forgotten and holds 10 under the instance options.
    expect(await stub.limit('a', 5)).toMatchObject({ allowed: false, limit: 3, retry_after_ms: 3_000 });
    expect((await stub.limit('a', 11)).retry_after_ms).toBeNull();
    at(2_999);
    expect(await stub.limit('a', 5)).toMatchObject({ allowed: false, remaining: 2, retry_after_ms: 1 });
    at(3_000);
    expect(await stub.limit('a', 5)).toMatchObject({ allowed: true, remaining: 5, limit: 10 });
  });
});

describe('a denied limit() consumes nothing', () => {
  it('with the same policy, the bucket is untouched', async () => {
    const stub = limiter('denied-same');
    const own = { max_tokens: 5, refill_every_seconds: 1 };
    expect((await stub.limit('k', 5, own)).allowed).toBe(true);
    at(500);
    const before = await stub.getStatus('k');
    expect(before).toEqual({ remaining: 0, limit: 5, reset_in_ms: 500 });
    expect(await stub.limit('k')).toMatchObject({ allowed: false, retry_after_ms: 500 });
    expect(await stub.limit('k', 3, own)).toMatchObject({ allowed: false, retry_after_ms: 2_500 });
    expect(await stub.getStatus('k')).toEqual(before);
    at(1_000);
    expect(await stub.getStatus('k')).toEqual({ remaining: 1, limit: 5, reset_in_ms: 1_000 });
  });

  it('but when it brings another policy, the bucket follows it from then on', async () => {
    const stub = limiter('denied-other-policy');
    const own = { max_tokens: 5, refill_every_seconds: 1 };
    const other = { max_tokens: 20, refill_every_seconds: 100 };
    for (const key of ['k', 'twin']) expect((await stub.limit(key, 5, own)).allowed).toBe(true);
    at(500);
    expect(await stub.getStatus('k')).toEqual({ remaining: 0, limit: 5, reset_in_ms: 500 });

    // Reported under the policy it brings, which it applies: no token taken.
    expect(await stub.limit('k', 3, other)).toEqual({
      allowed: false,
      remaining: 0,
      limit: 20,
      reset_in_ms: 99_500,
      retry_after_ms: 299_500,
      window_ms: 2_000_000,
    });
    const after = { remaining: 0, limit: 20, reset_in_ms: 99_500 };
    expect(await stub.getStatus('k')).toEqual(after);
    // What a cost-0 call (always allowed, consumes nothing) with that policy does.
    expect((await stub.limit('twin', 0, other)).allowed).toBe(true);
    expect(await stub.getStatus('twin')).toEqual(after);
    expect((await stub.limit('k', 21, other)).retry_after_ms).toBeNull();
    expect(await stub.getStatus('k')).toEqual(after);

    // `own` would have given a token at 1 s; `other` gives the first at 100 s.
    at(1_000);
    expect(await statuses(stub, ['k', 'twin'])).toEqual([
      { remaining: 0, limit: 20, reset_in_ms: 99_000 },
      { remaining: 0, limit: 20, reset_in_ms: 99_000 },
    ]);
    expect(await stub.limit('k')).toMatchObject({ allowed: false, limit: 20, retry_after_ms: 99_000 });
    at(100_000);
    expect(await stub.limit('k')).toMatchObject({ allowed: true, remaining: 0, limit: 20 });
  });

  it('a denied first call with a policy leaves the key full, so unknown', async () => {
    const stub = limiter('denied-first');
    expect((await stub.limit('k', 30, { max_tokens: 20 })).allowed).toBe(false);
    expect(await stub.getStatus('k')).toEqual(fullDefault);
  });
});

describe('limitAll()', () => {
  // 10 per second AND 1000 per hour.
  const perSecond = { max_tokens: 10, refill_every_seconds: 0.1 };
  const perHour = { max_tokens: 1000, refill_every_seconds: 3.6 };

  it('returns a plain { allowed, retry_after_ms, results } with one plain decision per request', async () => {
    const stub = limiter('all-shape');
    const d = await stub.limitAll([{ key: 'a' }, { key: 'b', cost: 2, policy: perSecond }]);
    expect(Object.getPrototypeOf(d)).toBe(Object.prototype);
    expect(Object.keys(d).sort()).toEqual(['allowed', 'results', 'retry_after_ms']);
    expect(Array.isArray(d.results)).toBe(true);
    for (const r of d.results) {
      expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
      expect(Object.keys(r).sort()).toEqual(DECISION_KEYS);
    }
    expect(d).toEqual({
      allowed: true,
      retry_after_ms: 0,
      results: [
        { allowed: true, remaining: 9, limit: 10, reset_in_ms: 10_000, retry_after_ms: 0, window_ms: 100_000 },
        { allowed: true, remaining: 8, limit: 10, reset_in_ms: 100, retry_after_ms: 0, window_ms: 1_000 },
      ],
    });
    expect(await stub.limitAll([])).toEqual({ allowed: true, retry_after_ms: 0, results: [] });
  });

  it('10/s AND 1000/h: a request denied by the second limit uses up nothing of the first', async () => {
    const stub = limiter('all-sec-hour');
    const request = [
      { key: 'sec', policy: perSecond },
      { key: 'hour', policy: perHour },
    ];
    for (let i = 1; i <= 10; i++) {
      const d = await stub.limitAll(request);
      expect(d.allowed).toBe(true);
      expect(d.results.map((r) => r.remaining)).toEqual([10 - i, 1000 - i]);
    }
    const before = await statuses(stub, ['sec', 'hour']);
    expect(before).toEqual([
      { remaining: 0, limit: 10, reset_in_ms: 100 },
      { remaining: 990, limit: 1000, reset_in_ms: 3_600 },
    ]);

    const denied = await stub.limitAll(request);
    expect(denied.allowed).toBe(false);
    expect(denied.retry_after_ms).toBe(100);
    expect(denied.results.map((r) => [r.allowed, r.retry_after_ms, r.remaining])).toEqual([
      [false, 100, 0],
      [true, 0, 990], // had room, but took nothing
    ]);
    expect(await statuses(stub, ['sec', 'hour'])).toEqual(before);

    at(99);
    expect((await stub.limitAll(request)).allowed).toBe(false);
    expect(await statuses(stub, ['sec', 'hour'])).toEqual([
      { remaining: 0, limit: 10, reset_in_ms: 1 },
      { remaining: 990, limit: 1000, reset_in_ms: 3_501 },
    ]);
    at(100);
    const d = await stub.limitAll(request);
    expect(d.allowed).toBe(true);
    expect(d.results.map((r) => r.remaining)).toEqual([0, 989]);
  });

  it('a denied member leaves every other bucket untouched, whatever their policies', async () => {
    const stub = limiter('all-atomic');
    const keys = ['sec', 'hour', 'plain', 'tight', 'fresh'];
    const tight = { max_tokens: 2, refill_every_seconds: 60 };
    expect((await stub.limit('sec', 4, perSecond)).allowed).toBe(true);
    expect((await stub.limit('hour', 500, perHour)).allowed).toBe(true);
    expect((await stub.limit('plain', 3)).allowed).toBe(true);
    expect((await stub.limit('tight', 2, tight)).allowed).toBe(true);
    at(30);
    const before = await statuses(stub, keys);
    expect(before.map((s) => s.remaining)).toEqual([6, 500, 7, 0, 10]);

    const denied = await stub.limitAll([
      { key: 'sec', cost: 5, policy: perSecond },
      { key: 'hour', cost: 100, policy: perHour },
      { key: 'plain', cost: 2 },
      { key: 'tight', policy: tight }, // empty: denied
      { key: 'fresh', cost: 3, policy: { max_tokens: 50 } }, // unknown key, would fit
    ]);
    expect(denied.allowed).toBe(false);
    expect(denied.results.map((r) => r.allowed)).toEqual([true, true, true, false, true]);
    expect(denied.results.map((r) => r.retry_after_ms)).toEqual([0, 0, 0, 59_970, 0]);
    expect(denied.retry_after_ms).toBe(59_970);
    // The results report the buckets as they are: nothing was taken.
    expect(denied.results.map((r) => r.remaining)).toEqual([6, 500, 7, 0, 50]);
    // Untouched; 'fresh' stays full, so the policy it brought is not stored.
    expect(await statuses(stub, keys)).toEqual(before);
    expect(await stub.getStatus('fresh')).toEqual(fullDefault);

    // Waiting the overall retry lets the same call through; 1 ms less does not.
    at(30 + 59_970 - 1);
    const again = [
      { key: 'sec', cost: 5, policy: perSecond },
      { key: 'hour', cost: 100, policy: perHour },
      { key: 'plain', cost: 2 },
      { key: 'tight', policy: tight },
    ];
    const early = await stub.limitAll(again);
    expect(early.allowed).toBe(false);
    expect(early.retry_after_ms).toBe(1);
    at(30 + 59_970);
    expect((await stub.limitAll(again)).allowed).toBe(true);
  });

  it('the overall retry is the largest member wait; null if a member can never pass', async () => {
    const stub = limiter('all-retry');
    const a = { max_tokens: 2, refill_every_seconds: 0.25 };
    const b = { max_tokens: 3, refill_every_seconds: 1 / 3 };
    expect((await stub.limitAll([{ key: 'a', cost: 2, policy: a }, { key: 'b', cost: 3, policy: b }])).allowed).toBe(true);
    at(10);
    const request = [
      { key: 'a', cost: 2, policy: a }, // 500 ms - 10
      { key: 'b', cost: 3, policy: b }, // 3 * 333_333_334 ns = 1000.000002 ms - 10, rounded up
    ];
    const d = await stub.limitAll(request);
    expect(d.results.map((r) => r.retry_after_ms)).toEqual([490, 991]);
    expect(d.retry_after_ms).toBe(991);
    at(10 + 990);
    expect(await stub.limitAll(request)).toMatchObject({ allowed: false, retry_after_ms: 1 });
    at(10 + 991);
    expect((await stub.limitAll(request)).allowed).toBe(true);

    const before = await statuses(stub, ['a', 'c']);
    const never = await stub.limitAll([{ key: 'c' }, { key: 'a', cost: 3, policy: a }]);
    expect(never.allowed).toBe(false);
    expect(never.retry_after_ms).toBeNull();
    expect(never.results.map((r) => r.retry_after_ms)).toEqual([0, null]);
    expect(await statuses(stub, ['a', 'c'])).toEqual(before);
  });

  it('rejects duplicate keys with a TypeError, and changes nothing', async () => {
    const stub = limiter('all-duplicates');
    const e = await rejection(stub.limitAll([{ key: 'a' }, { key: 'a', cost: 2 }]));
    expect(e).toBeInstanceOf(TypeError);
    expect(e?.name).toBe('TypeError');
    expect(e?.message).toBe(
      'requests[1].key repeats the key of requests[0].key: give each key once, with the costs added up',
    );
    const later = await rejection(stub.limitAll([{ key: 'a' }, { key: 'b' }, { key: 'a' }]));
    expect(later?.message).toBe(
      'requests[2].key repeats the key of requests[0].key: give each key once, with the costs added up',
    );
    expect(await statuses(stub, ['a', 'b'])).toEqual([fullDefault, fullDefault]);
  });

  it('yields one RateLimit list member per limit in rateLimitHeaders', async () => {
    const stub = limiter('all-headers');
    const request = [
      { key: 'sec', policy: perSecond },
      { key: 'hour', policy: perHour },
    ];
    const ok = await stub.limitAll(request);
    expect(rateLimitHeaders(ok, { name: 'api' })).toEqual({
      'RateLimit-Policy': '"api-1";q=10;w=1, "api-2";q=1000;w=3600',
      'RateLimit': '"api-1";r=9;t=1, "api-2";r=999;t=4',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1',
    });
    for (let i = 0; i < 9; i++) await stub.limitAll(request);
    const denied = await stub.limitAll(request);
    const headers = rateLimitHeaders(denied, { name: ['second', 'hour'] });
    expect(headers['RateLimit']).toBe('"second";r=0;t=1, "hour";r=990;t=4');
    expect(headers['Retry-After']).toBe('1');
    expect(headers['X-RateLimit-Remaining']).toBe('0');
  });
});

describe('errors over RPC keep their class and message, and change nothing', () => {
  it('from limit()', async () => {
    const stub = limiter('errors-limit');
    expect((await stub.limit('k', 4)).allowed).toBe(true);
    const before = await stub.getStatus('k');

    // Each call is made only when its rejection handler is attached.
    const cases: [() => Promise<unknown>, string, string][] = [
      [
        () => stub.limit('k', 1, { max_tokens: 0 }),
        'RangeError',
        'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0',
      ],
      [
        () => stub.limit('k', 1, { refill_every_seconds: -1 }),
        'RangeError',
        'policy.refill_every_seconds must be a finite number > 0, got -1',
      ],
      [() => stub.limit('k', NaN), 'RangeError', 'cost must be a finite number >= 0, got NaN'],
      [
        () => stub.limit('k', 1, { max_token: 5 } as unknown as RateLimiterOptions),
        'TypeError',
        'policy has no field "max_token" (the fields are max_tokens, refill_every_seconds and block_seconds)',
      ],
      [
        () => stub.limit('k', 1, { max_tokens: '5' } as unknown as RateLimiterOptions),
        'TypeError',
        'policy.max_tokens must be a number, got string "5"',
      ],
    ];
    for (const [call, name, message] of cases) {
      const e = await rejection(call());
      expect(e, message).toBeInstanceOf(name === 'RangeError' ? RangeError : TypeError);
      expect(e?.name).toBe(name);
      expect(e?.message).toBe(message);
    }
    const key = await rejection(stub.limit(5 as unknown as string));
    expect(key?.name).toBe('TypeError');
    expect(key?.message).toMatch(/^key must be a string/);

    expect(await stub.getStatus('k')).toEqual(before);
    expect((await stub.limit('k')).remaining).toBe(5);
  });

  it('from limitAll(): every request is validated before anything changes', async () => {
    const stub = limiter('errors-limit-all');
    const nan = await rejection(stub.limitAll([{ key: 'a', cost: NaN }]));
    expect(nan).toBeInstanceOf(RangeError);
    expect(nan?.name).toBe('RangeError');
    expect(nan?.message).toBe('requests[0].cost must be a finite number >= 0, got NaN');

    const policy = await rejection(
      stub.limitAll([{ key: 'a', cost: 2 }, { key: 'b', policy: { max_tokens: 1.5 } }]),
    );
    expect(policy).toBeInstanceOf(RangeError);
    expect(policy?.message).toBe(
      'requests[1].policy.max_tokens must be a whole number from 1 to 9007199254740991, got 1.5',
    );

    const notArray = await rejection(stub.limitAll('a' as never));
    expect(notArray).toBeInstanceOf(TypeError);
    expect(notArray?.message).toBe('requests must be an array, got string "a"');

    const extra = await rejection(stub.limitAll([{ key: 'a', costs: 1 } as never]));
    expect(extra).toBeInstanceOf(TypeError);
    expect(extra?.message).toBe('requests[0] has no field "costs" (the fields are key, cost, policy and shadow)');

    const noKey = await rejection(stub.limitAll([{ cost: 1 } as never]));
    expect(noKey).toBeInstanceOf(TypeError);
    expect(noKey?.message).toMatch(/^requests\[0\]\.key must be a string/);

    expect(await statuses(stub, ['a', 'b'])).toEqual([fullDefault, fullDefault]);
  });
});

describe('RPC round trips of a denied request', () => {
  /** The stub behind a Proxy that counts the RPC method calls made through it. */
  function counting(stub: Stub) {
    const calls: string[] = [];
    const proxy = new Proxy(stub, {
      get(target, prop) {
        const value = Reflect.get(target, prop);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          calls.push(String(prop));
          return Reflect.apply(value, target, args);
        };
      },
    });
    return { stub: proxy, calls };
  }

  it('3 with setOptions + consume + getStatus, 1 with limit(), for the same 429 information', async () => {
    const POLICY = { max_tokens: 10, refill_every_seconds: 10 };
    const stub = limiter('round-trips');
    // A drained bucket, part-way to its next token.
    expect((await stub.limit('api', 10, POLICY)).allowed).toBe(true);
    at(3_456);

    // The original pattern: options live in memory, so they are set on every request;
    // then consume, then getStatus for the 429 headers.
    const original = counting(stub);
    await original.stub.setOptions(POLICY);
    const allowed = await original.stub.consume('api', 1);
    const status = await original.stub.getStatus('api');
    const before = { allowed, ...status };

    const single = counting(stub);
    const decision = await single.stub.limit('api', 1, POLICY);

    console.log(
      `RPC round trips for a denied request: original pattern ${original.calls.length} ` +
        `(${original.calls.join(' + ')}), limit() ${single.calls.length} (${single.calls.join(' + ')})`,
    );
    expect(original.calls).toEqual(['setOptions', 'consume', 'getStatus']);
    expect(single.calls).toEqual(['limit']);

    // The same 429 information from both.
    expect(before).toEqual({ allowed: false, remaining: 0, limit: 10, reset_in_ms: 6_544 });
    const { allowed: a, remaining, limit, reset_in_ms } = decision;
    expect({ allowed: a, remaining, limit, reset_in_ms }).toEqual(before);
    // And the same Retry-After: for cost 1 the wait is the time to the next token.
    expect(decision.retry_after_ms).toBe(status.reset_in_ms);
    expect(rateLimitHeaders(decision)['Retry-After']).toBe(String(Math.ceil(status.reset_in_ms / 1000)));
  });
});
