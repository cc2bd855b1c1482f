// limit() and limitAll() (docs/SPEC.md, rules 2.7 to 2.9) as a consumer sees them: the
// decision object, exact retry times (never early, never late by a whole millisecond) for
// fractional intervals, per-key policies (remembered, replaced, forgotten), all-or-nothing
// limitAll across keys with different policies, and input validation that changes nothing.
// Time is Date.now() under vi.useFakeTimers(): nothing here sleeps.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import type {
  RateLimitAllDecision,
  RateLimitDecision,
  RateLimiterOptions,
  RateLimiterStatus,
  RateLimitRequest,
} from '@delightstack/rate-limiter';
import { SECOND, newServer, status, thrown } from './support';

type ErrorKind = 'TypeError' | 'RangeError';

const ERRORS = { TypeError, RangeError } as const;
const HOUR = 3600 * SECOND;
const DECISION_KEYS = ['allowed', 'limit', 'remaining', 'reset_in_ms', 'retry_after_ms', 'window_ms'];

let server: RateLimiterServer;

// setup.ts has set the fake clock to T0 by now.
beforeEach(() => {
  server = newServer();
});

function statuses(keys: readonly string[]): RateLimiterStatus[] {
  return keys.map((key) => server.getStatus(key));
}

function decision(
  allowed: boolean,
  remaining: number,
  limit: number,
  reset_in_ms: number,
  retry_after_ms: number | null,
  window_ms: number,
): RateLimitDecision {
  return <RateLimitDecision>{ allowed, remaining, limit, reset_in_ms, retry_after_ms, window_ms };
}

/** A plain object with exactly the six decision fields, each of the right type. */
function expectDecisionShape(d: unknown): asserts d is RateLimitDecision {
  expect(typeof d).toBe('object');
  expect(d).not.toBeNull();
  expect(Object.getPrototypeOf(d)).toBe(Object.prototype);
  expect(Object.keys(d as object).sort()).toEqual(DECISION_KEYS);
  const x = d as RateLimitDecision;
  expect(typeof x.allowed).toBe('boolean');
  for (const field of ['remaining', 'limit', 'reset_in_ms', 'window_ms'] as const) {
    expect(typeof x[field], field).toBe('number');
  }
  expect(x.retry_after_ms === null || typeof x.retry_after_ms === 'number').toBe(true);
}

/** The status part of a decision, to compare with getStatus. */
function statusOf(d: RateLimitDecision): RateLimiterStatus {
  return status(d.remaining, d.limit, d.reset_in_ms);
}

function expectError(error: Error, kind: ErrorKind, message: string): void {
  expect(error).toBeInstanceOf(ERRORS[kind]);
  expect(error.name).toBe(kind);
  expect(error.message).toBe(message);
}

// Exact time model, in BigInt nanoseconds (the interval is refill_every_seconds rounded UP
// to whole nanoseconds).
const NS_PER_MS = 1_000_000n;

function intervalNs(refillEverySeconds: number): bigint {
  return BigInt(Math.ceil(refillEverySeconds * 1e9));
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

function expectedWindowMs(maxTokens: number, refillEverySeconds: number): number {
  return Number(ceilDiv(BigInt(maxTokens) * intervalNs(refillEverySeconds), NS_PER_MS));
}

/** Whole ms (rounded up) until a bucket emptied `waitedMs` ago holds `cost` whole tokens. */
function expectedRetryMs(cost: number, waitedMs: number, refillEverySeconds: number): number {
  const need = BigInt(cost) * intervalNs(refillEverySeconds) - BigInt(waitedMs) * NS_PER_MS;
  return need <= 0n ? 0 : Number(ceilDiv(need, NS_PER_MS));
}

// ---------------------------------------------------------------------------------------
// The decision

describe('limit(): the decision', () => {
  it('is a plain object with exactly allowed, remaining, limit, reset_in_ms, retry_after_ms, window_ms', () => {
    const d = server.limit('k');
    expectDecisionShape(d);
    expect(d).not.toBeInstanceOf(Promise);
    expect(d).toStrictEqual(decision(true, 9, 10, 10_000, 0, 100_000));
    expect(server.getStatus('k')).toEqual(status(9, 10, 10_000));
  });

  it('is read right after wasm memory grew, and beside other servers\' decisions', () => {
    const server = newServer();
    const other = newServer();
    expect(server.limit('k', 3, { max_tokens: 5, refill_every_seconds: 2 })).toEqual({
      allowed: true, remaining: 2, limit: 5, reset_in_ms: 2_000, retry_after_ms: 0, window_ms: 10_000,
    });
    // Enough new buckets to grow wasm memory (the old view of it is then detached).
    for (let i = 0; i < 200_000; i++) other.consume(`grow-${i}`);
    expect(other.limit('x', 11)).toMatchObject({ allowed: false, retry_after_ms: null });
    expect(server.limit('k', 3, { max_tokens: 5, refill_every_seconds: 2 })).toEqual({
      allowed: false, remaining: 2, limit: 5, reset_in_ms: 2_000, retry_after_ms: 2_000, window_ms: 10_000,
    });
  });

  it('cost defaults to 1 (undefined too), and consumes like consume()', () => {
    expect(server.limit('k', undefined)).toStrictEqual(decision(true, 9, 10, 10_000, 0, 100_000));
    expect(server.limit('k')).toStrictEqual(decision(true, 8, 10, 10_000, 0, 100_000));
    expect(server.limit('k', 3)).toStrictEqual(decision(true, 5, 10, 10_000, 0, 100_000));
    expect(server.consume('k', 5)).toBe(true);
    expect(server.limit('k')).toStrictEqual(decision(false, 0, 10, 10_000, 10_000, 100_000));
  });

  it('cost 0 is allowed and changes nothing', () => {
    expect(server.limit('k', 0)).toStrictEqual(decision(true, 10, 10, 0, 0, 100_000));
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    server.consume('k', 10);
    expect(server.limit('k', 0)).toStrictEqual(decision(true, 0, 10, 10_000, 0, 100_000));
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });

  it('fractional costs', () => {
    expect(server.limit('k', 2.5)).toStrictEqual(decision(true, 7.5, 10, 10_000, 0, 100_000));
    expect(server.limit('k', 7)).toStrictEqual(decision(true, 0.5, 10, 10_000, 0, 100_000));
    // Needs 0.5 more token: the next refill, 10 s after the first consumption.
    expect(server.limit('k', 1)).toStrictEqual(decision(false, 0.5, 10, 10_000, 10_000, 100_000));
    vi.advanceTimersByTime(10_000);
    expect(server.limit('k', 1)).toStrictEqual(decision(true, 0.5, 10, 10_000, 0, 100_000));
  });

  it('remaining, limit and reset_in_ms are what getStatus reports right after the call', () => {
    server.setOptions({ max_tokens: 5, refill_every_seconds: 1 / 3 });
    const steps = [0, 1, 0, 7, 333, 1, 0, 0, 250, 2000, 0, 1];
    const costs = [1, 2, 3, 1.5, 0.25, 4, 1, 5, 1, 2, 6, 0];
    for (let i = 0; i < steps.length; i++) {
      vi.advanceTimersByTime(steps[i]);
      const d = server.limit('k', costs[i]);
      expectDecisionShape(d);
      expect(statusOf(d), `step ${i}`).toEqual(server.getStatus('k'));
      expect(d.window_ms).toBe(expectedWindowMs(5, 1 / 3));
      if (d.allowed) expect(d.retry_after_ms).toBe(0);
      else expect(d.retry_after_ms === null || d.retry_after_ms > 0, `step ${i}`).toBe(true);
    }
  });

  it('a denied call consumes nothing', () => {
    server.consume('k', 8);
    vi.advanceTimersByTime(3_000);
    const before = server.getStatus('k');
    const d = server.limit('k', 3);
    expect(d).toStrictEqual(decision(false, 2, 10, 7_000, 7_000, 100_000));
    expect(server.getStatus('k')).toEqual(before);
    expect(server.check('k', 2)).toBe(true);
  });

  it('a cost above capacity is denied with retry_after_ms null and consumes nothing', () => {
    expect(server.limit('k', 11)).toStrictEqual(decision(false, 10, 10, 0, null, 100_000));
    expect(server.limit('k', 10.5)).toStrictEqual(decision(false, 10, 10, 0, null, 100_000));
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    server.consume('k', 4);
    vi.advanceTimersByTime(1_234);
    expect(server.limit('k', 1e9)).toStrictEqual(decision(false, 6, 10, 8_766, null, 100_000));
    expect(server.getStatus('k')).toEqual(status(6, 10, 8_766));
    // Exactly the capacity is satisfiable: a finite wait.
    expect(server.limit('k', 10)).toStrictEqual(decision(false, 6, 10, 8_766, 38_766, 100_000));
  });

  it('a cost above the capacity of the given policy is null, and the policy is not remembered', () => {
    const d = server.limit('k', 4, { max_tokens: 3 });
    expect(d).toStrictEqual(decision(false, 3, 3, 0, null, 30_000));
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    expect(server.limit('k', 4)).toStrictEqual(decision(true, 6, 10, 10_000, 0, 100_000));
  });

  const windows: [number, number, number][] = [
    [10, 10, 100_000],
    [10, 0.25, 2_500],
    [10, 1 / 3, 3_334], // 10 × 333_333_334 ns = 3_333_333_340 ns
    [7, 1 / 3, 2_334], // 2_333_333_338 ns
    [10, 0.0015, 15],
    [3, 0.0015, 5], // 4.5 ms
    [1, 1e-7, 1], // 100 ns
    [1000, 3.6, 3_600_000],
    [9_007_199_254_740_991, 1, 9_007_199_254_740_991_000],
  ];

  it.each(windows)(
    'window_ms for max_tokens %s, refill_every_seconds %s is %s (ceil of max_tokens × interval)',
    (max_tokens, refill_every_seconds, window_ms) => {
      expect(expectedWindowMs(max_tokens, refill_every_seconds)).toBe(window_ms);
      // From a policy.
      expect(server.limit('p', 0, { max_tokens, refill_every_seconds }).window_ms).toBe(window_ms);
      // From the instance options.
      server.setOptions({ max_tokens, refill_every_seconds });
      expect(server.limit('i', 1).window_ms).toBe(window_ms);
      expect(server.limit('i', max_tokens + 1).window_ms).toBe(window_ms);
    },
  );
});

// ---------------------------------------------------------------------------------------
// Exact retry times

const INTERVALS: { every: number; label: string; waits: number[] }[] = [
  { every: 10, label: '10', waits: [0, 4_000, 13_000, 25_500] },
  { every: 0.25, label: '0.25', waits: [0, 100, 600, 1_249] },
  { every: 1 / 3, label: '1/3', waits: [0, 1, 400, 1_000, 2_000] },
  { every: 0.0015, label: '0.0015', waits: [0, 1, 4, 8] },
];
const COSTS = [1, 3, 7];

interface RetryCase {
  every: number;
  label: string;
  cost: number;
  wait: number;
  retry: number;
}

// Every (interval, cost, partial wait) after which the call is still denied.
const retryCases: RetryCase[] = INTERVALS.flatMap(({ every, label, waits }) =>
  COSTS.flatMap((cost) =>
    waits
      .map((wait) => ({ every, label, cost, wait, retry: expectedRetryMs(cost, wait, every) }))
      .filter((c) => c.retry > 0),
  ),
);

describe('retry_after_ms is exact: waiting it succeeds, 1 ms less does not', () => {
  it('the model agrees with hand-computed edges', () => {
    // 3 × 333_333_334 ns = 1_000_000_002 ns: 1001 ms, not 1000.
    expect(expectedRetryMs(3, 0, 1 / 3)).toBe(1_001);
    expect(expectedRetryMs(3, 1_000, 1 / 3)).toBe(1);
    expect(expectedRetryMs(7, 0, 0.0015)).toBe(11);
    expect(expectedRetryMs(3, 4, 0.0015)).toBe(1);
    expect(expectedRetryMs(3, 4_000, 10)).toBe(26_000);
    expect(retryCases.length).toBeGreaterThan(30);
  });

  describe.each(['instance options', 'policy'] as const)('under the %s', (mode) => {
    it.each(retryCases)(
      'refill every $label s, cost $cost, asked $wait ms after draining: retry $retry ms',
      ({ every, cost, wait, retry }) => {
        const policy: RateLimiterOptions = { refill_every_seconds: every };
        const call = (): RateLimitDecision =>
          mode === 'policy' ? server.limit('k', cost, policy) : server.limit('k', cost);
        if (mode === 'policy') {
          // The instance default (10 tokens every 10 s) must not be what is used.
          if (every === 10) policy.max_tokens = 9;
          expect(server.limit('k', every === 10 ? 9 : 10, policy).allowed).toBe(true);
        } else {
          server.setOptions(policy);
          expect(server.consume('k', 10)).toBe(true);
        }
        expect(server.getStatus('k').remaining).toBe(0);
        vi.advanceTimersByTime(wait);

        const before = server.getStatus('k');
        const denied = call();
        expectDecisionShape(denied);
        expect(denied.allowed).toBe(false);
        expect(denied.retry_after_ms).toBe(retry);
        expect(statusOf(denied)).toEqual(before);
        expect(server.getStatus('k')).toEqual(before);

        vi.advanceTimersByTime(retry - 1);
        expect(server.check('k', cost), '1 ms early: check').toBe(false);
        const early = call();
        expect(early.allowed, '1 ms early: limit').toBe(false);
        expect(early.retry_after_ms).toBe(1);

        vi.advanceTimersByTime(1);
        const ok = call();
        expect(ok.allowed, 'after exactly retry_after_ms').toBe(true);
        expect(ok.retry_after_ms).toBe(0);
        expect(statusOf(ok)).toEqual(server.getStatus('k'));
      },
    );
  });

  it('however often the key is asked in between, the retry counts down to the same moment', () => {
    server.setOptions({ refill_every_seconds: 0.0015 });
    server.consume('k', 10);
    const first = server.limit('k', 7);
    expect(first.retry_after_ms).toBe(11);
    for (let elapsed = 0; elapsed < 11; elapsed++) {
      const d = server.limit('k', 7);
      expect(d.allowed, `${elapsed} ms`).toBe(false);
      expect(d.retry_after_ms, `${elapsed} ms`).toBe(11 - elapsed);
      expect(server.getStatus('k').remaining).toBe(Math.floor((elapsed * 2) / 3));
      vi.advanceTimersByTime(1);
    }
    expect(server.limit('k', 7)).toStrictEqual(decision(true, 0, 10, 1, 0, 15));
  });

  it('the retry of a denied call with a fractional remainder is never early', () => {
    server.setOptions({ refill_every_seconds: 1 / 3 });
    server.consume('k', 9.75);
    vi.advanceTimersByTime(500); // one token at 333.33… ms: 1.25 tokens
    const d = server.limit('k', 3);
    // 1.75 more tokens → 2 refills after the one at 333_333_334 ns: 1_000_000_002 ns.
    expect(d.retry_after_ms).toBe(501);
    vi.advanceTimersByTime(500);
    expect(server.check('k', 3)).toBe(false);
    vi.advanceTimersByTime(1);
    expect(server.limit('k', 3).allowed).toBe(true);
  });

  // The same call: same key, cost and policy, on a key whose bucket followed other options
  // until the first denied call, which switched it to its policy (consuming nothing).
  it('a denied call whose policy refills faster than the remembered one: waiting retry_after_ms succeeds', () => {
    expect(server.consume('k', 10)).toBe(true); // instance: 10 tokens every 10 s
    const policy = { max_tokens: 20, refill_every_seconds: 1 };
    const denied = server.limit('k', 15, policy);
    expect(denied.allowed).toBe(false);
    expect(denied.retry_after_ms).toBe(15_000);
    vi.advanceTimersByTime(14_999);
    expect(server.limit('k', 15, policy).allowed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(server.limit('k', 15, policy).allowed, 'after exactly retry_after_ms').toBe(true);
  });

  it('a denied call whose policy refills slower than the remembered one: 1 ms less is still denied', () => {
    const fast = { max_tokens: 10, refill_every_seconds: 1 };
    expect(server.limit('k', 10, fast).allowed).toBe(true);
    const slow = { max_tokens: 10, refill_every_seconds: 10 };
    const denied = server.limit('k', 5, slow);
    expect(denied.allowed).toBe(false);
    const retry = denied.retry_after_ms as number;
    expect(retry).toBe(50_000);
    vi.advanceTimersByTime(retry - 1);
    expect(server.limit('k', 5, slow).allowed, '1 ms before retry_after_ms').toBe(false);
    vi.advanceTimersByTime(1);
    expect(server.limit('k', 5, slow).allowed).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------
// Per-key policies

describe('limit() with a policy', () => {
  const P = { max_tokens: 3, refill_every_seconds: 1 };

  it('applies the policy to the call', () => {
    expect(server.limit('a', 1, P)).toStrictEqual(decision(true, 2, 3, 1_000, 0, 3_000));
  });

  it('is remembered by the key after an allowed call: check, consume, getStatus and limit use it', () => {
    server.limit('a', 1, P);
    expect(server.getStatus('a')).toEqual(status(2, 3, 1_000));
    expect(server.check('a', 3)).toBe(false);
    expect(server.check('a', 2)).toBe(true);
    expect(server.consume('a', 2)).toBe(true);
    expect(server.getStatus('a')).toEqual(status(0, 3, 1_000));
    expect(server.consume('a')).toBe(false);
    expect(server.limit('a')).toStrictEqual(decision(false, 0, 3, 1_000, 1_000, 3_000));
    vi.advanceTimersByTime(1_000);
    expect(server.getStatus('a')).toEqual(status(1, 3, 1_000));
    expect(server.limit('a')).toStrictEqual(decision(true, 0, 3, 1_000, 0, 3_000));
  });

  it('other keys are unaffected', () => {
    server.limit('a', 1, P);
    expect(server.getStatus('b')).toEqual(status(10, 10, 0));
    expect(server.limit('b')).toStrictEqual(decision(true, 9, 10, 10_000, 0, 100_000));
    expect(server.consume('c', 5)).toBe(true);
    expect(server.getStatus('c')).toEqual(status(5, 10, 10_000));
    expect(server.getStatus('a')).toEqual(status(2, 3, 1_000));
  });

  it('missing fields come from the instance options at the time of the call', () => {
    server.setOptions({ max_tokens: 5, refill_every_seconds: 2 });
    expect(server.limit('a', 1, { max_tokens: 3 })).toStrictEqual(decision(true, 2, 3, 2_000, 0, 6_000));
    expect(server.limit('b', 1, { refill_every_seconds: 1 })).toStrictEqual(
      decision(true, 4, 5, 1_000, 0, 5_000),
    );
    expect(server.limit('c', 1, {})).toStrictEqual(decision(true, 4, 5, 2_000, 0, 10_000));
    expect(server.limit('d', 1, { max_tokens: undefined, refill_every_seconds: undefined })).toStrictEqual(
      decision(true, 4, 5, 2_000, 0, 10_000),
    );
    // Instance options changed later: the keys keep the policy they were given.
    server.setOptions({ max_tokens: 50, refill_every_seconds: 20 });
    expect(server.getStatus('a')).toEqual(status(2, 3, 2_000));
    expect(server.getStatus('b')).toEqual(status(4, 5, 1_000));
    expect(server.getStatus('fresh')).toEqual(status(50, 50, 0));
    expect(server.limit('fresh')).toStrictEqual(decision(true, 49, 50, 20_000, 0, 1_000_000));
  });

  it('a denied call with the remembered policy changes nothing', () => {
    server.limit('a', 2, P); // 1 left
    vi.advanceTimersByTime(400);
    const before = server.getStatus('a');
    expect(before).toEqual(status(1, 3, 600));
    expect(server.limit('a', 3, P)).toStrictEqual(decision(false, 1, 3, 600, 1_600, 3_000));
    expect(server.limit('a', 2)).toStrictEqual(decision(false, 1, 3, 600, 600, 3_000));
    expect(server.getStatus('a')).toEqual(before);
  });

  it('a denied call consumes nothing, but the key now follows the policy it brought', () => {
    const other = { max_tokens: 100, refill_every_seconds: 100 };
    for (const key of ['a', 'twin']) {
      server.limit(key, 3, P);
      expect(server.getStatus(key)).toEqual(status(0, 3, 1_000));
    }
    // Denied under `other`, and reported under it; the twin gets `other` by a cost-0 call.
    expect(server.limit('a', 1, other)).toStrictEqual(decision(false, 0, 100, 100_000, 100_000, 10_000_000));
    expect(server.limit('twin', 0, other)).toStrictEqual(decision(true, 0, 100, 100_000, 0, 10_000_000));
    expect(server.getStatus('a')).toEqual(status(0, 100, 100_000));
    expect(server.getStatus('a')).toEqual(server.getStatus('twin'));
    // Calls without a policy use `other` now, not P.
    expect(server.limit('a')).toStrictEqual(decision(false, 0, 100, 100_000, 100_000, 10_000_000));
    vi.advanceTimersByTime(1_000); // a token under P; none under `other`
    expect(server.getStatus('a')).toEqual(status(0, 100, 99_000));
    expect(server.check('a', 1)).toBe(false);
    expect(server.consume('a')).toBe(false);
    expect(statuses(['a', 'twin'])).toEqual([status(0, 100, 99_000), status(0, 100, 99_000)]);
    vi.advanceTimersByTime(99_000);
    expect(server.limit('a')).toStrictEqual(decision(true, 0, 100, 100_000, 0, 10_000_000));
  });

  it('a denied call with a higher capacity and a shorter interval: progress counts in the new interval, nothing is taken', () => {
    const Q = { max_tokens: 20, refill_every_seconds: 1 };
    for (const key of ['k', 'twin']) server.consume(key, 3); // 7 left, instance options
    vi.advanceTimersByTime(4_000); // no refill under 10 s; 4 under 1 s
    expect(server.limit('k', 15, Q)).toStrictEqual(decision(false, 11, 20, 1_000, 4_000, 20_000));
    expect(server.limit('twin', 0, Q)).toStrictEqual(decision(true, 11, 20, 1_000, 0, 20_000));
    expect(server.getStatus('k')).toEqual(status(11, 20, 1_000));
    expect(server.getStatus('k')).toEqual(server.getStatus('twin'));
    // Without a policy the key uses Q: 11 tokens, one per second.
    expect(server.limit('k', 12)).toStrictEqual(decision(false, 11, 20, 1_000, 1_000, 20_000));
    vi.advanceTimersByTime(3_999);
    expect(server.limit('k', 15, Q)).toStrictEqual(decision(false, 14, 20, 1, 1, 20_000));
    vi.advanceTimersByTime(1);
    expect(server.limit('k', 15, Q)).toStrictEqual(decision(true, 0, 20, 1_000, 0, 20_000));
  });

  it('a denied call with a lower capacity clamps the tokens: the bucket is full, so the key is forgotten', () => {
    for (const key of ['k', 'twin']) server.consume(key, 3); // 7 left, instance options
    vi.advanceTimersByTime(4_000);
    expect(statuses(['k', 'twin'])).toEqual([status(7, 10, 6_000), status(7, 10, 6_000)]);
    // 7 clamp to 5: full under { max_tokens: 5 }, where a cost of 6 can never pass.
    expect(server.limit('k', 6, { max_tokens: 5 })).toStrictEqual(decision(false, 5, 5, 0, null, 50_000));
    expect(server.limit('twin', 0, { max_tokens: 5 })).toStrictEqual(decision(true, 5, 5, 0, 0, 50_000));
    // A full bucket is not stored, nor its policy: both keys meet the instance options, full.
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    expect(server.getStatus('k')).toEqual(server.getStatus('twin'));
    expect(server.limit('k', 10)).toStrictEqual(decision(true, 0, 10, 10_000, 0, 100_000));
  });

  it('a denied call on a fresh key leaves it full, so nothing is stored, not even its policy', () => {
    expect(server.limit('f', 5, P)).toStrictEqual(decision(false, 3, 3, 0, null, 3_000));
    expect(server.getStatus('f')).toEqual(status(10, 10, 0));
    expect(server.consume('f')).toBe(true);
    expect(server.getStatus('f')).toEqual(status(9, 10, 10_000));
  });

  it('is forgotten on reset(key)', () => {
    server.limit('a', 2, P);
    server.limit('b', 1, P);
    server.reset('a');
    expect(server.getStatus('a')).toEqual(status(10, 10, 0));
    expect(server.limit('a')).toStrictEqual(decision(true, 9, 10, 10_000, 0, 100_000));
    expect(server.getStatus('b')).toEqual(status(2, 3, 1_000));
  });

  it('is replaced when a different policy is given in an allowed call', () => {
    server.limit('a', 1, P);
    const Q = { max_tokens: 5, refill_every_seconds: 2 };
    // Tokens kept (2), last refill kept (now): the next token comes one new interval later.
    expect(server.limit('a', 1, Q)).toStrictEqual(decision(true, 1, 5, 2_000, 0, 10_000));
    expect(server.getStatus('a')).toEqual(status(1, 5, 2_000));
    expect(server.limit('a')).toStrictEqual(decision(true, 0, 5, 2_000, 0, 10_000));
    expect(server.limit('a')).toStrictEqual(decision(false, 0, 5, 2_000, 2_000, 10_000));
    vi.advanceTimersByTime(2_000);
    expect(server.getStatus('a')).toEqual(status(1, 5, 2_000));
  });

  it('the same policy again keeps it', () => {
    server.limit('a', 1, P);
    expect(server.limit('a', 1, { ...P })).toStrictEqual(decision(true, 1, 3, 1_000, 0, 3_000));
    expect(server.getStatus('a')).toEqual(status(1, 3, 1_000));
  });

  it('is forgotten when the bucket refills to full: later calls without a policy use the instance options', () => {
    server.limit('a', 1, { max_tokens: 2, refill_every_seconds: 1 });
    vi.advanceTimersByTime(999);
    expect(server.getStatus('a')).toEqual(status(1, 2, 1));
    vi.advanceTimersByTime(1);
    expect(server.getStatus('a')).toEqual(status(10, 10, 0));
    expect(server.consume('a')).toBe(true);
    expect(server.getStatus('a')).toEqual(status(9, 10, 10_000));
  });

  it.each(['check', 'consume', 'limit', 'getStatus'] as const)(
    'is forgotten when full, seen first by %s',
    (method) => {
      server.limit('a', 2, { max_tokens: 2, refill_every_seconds: 0.5 });
      vi.advanceTimersByTime(1_000);
      if (method === 'check') expect(server.check('a', 5)).toBe(true);
      if (method === 'consume') expect(server.consume('a', 5)).toBe(true);
      if (method === 'limit') expect(server.limit('a', 5)).toStrictEqual(decision(true, 5, 10, 10_000, 0, 100_000));
      if (method === 'getStatus') expect(server.getStatus('a')).toEqual(status(10, 10, 0));
      expect(server.getStatus('a').limit).toBe(10);
    },
  );

  it('is forgotten when full even if the key is not touched until long after', () => {
    server.limit('a', 1, { max_tokens: 2, refill_every_seconds: 1 });
    for (let i = 0; i < 50; i++) server.consume(`other-${i}`);
    vi.advanceTimersByTime(HOUR);
    for (let i = 0; i < 50; i++) server.consume(`later-${i}`);
    expect(server.getStatus('a')).toEqual(status(10, 10, 0));
    expect(server.limit('a', 10)).toStrictEqual(decision(true, 0, 10, 10_000, 0, 100_000));
  });
});

// A call without a policy on a key that only remembers one: if the bucket would refill to
// full (under that policy) before it holds the cost, the key is forgotten at that moment and
// the instance options decide. So the retry is the time until full if the instance capacity
// holds the cost, else null.
describe('retry_after_ms without a policy, on a key that remembers one', () => {
  const BIG = { max_tokens: 12, refill_every_seconds: 3 }; // instance: 10 tokens, every 10 s

  it('null when the cost is only reached at full and the instance capacity is below it', () => {
    for (const key of ['k', 'twin']) {
      expect(server.limit(key, 3, BIG)).toStrictEqual(decision(true, 9, 12, 3_000, 0, 36_000));
    }
    // 11.5 needs 3 refills (9 s), when the bucket is full (12): forgotten, and 11.5 > 10.
    expect(server.limit('k', 11.5)).toStrictEqual(decision(false, 9, 12, 3_000, null, 36_000));
    expect(server.getStatus('k')).toEqual(status(9, 12, 3_000));
    // Given the policy, the same cost has a finite wait: the policy stays, its capacity holds it.
    expect(server.limit('twin', 11.5, BIG)).toStrictEqual(decision(false, 9, 12, 3_000, 9_000, 36_000));

    // 9.5 needs 1 refill (3 s); 10 tokens are not full under BIG: the policy is still in force.
    expect(server.limit('k', 9.5)).toStrictEqual(decision(false, 9, 12, 3_000, 3_000, 36_000));
    vi.advanceTimersByTime(2_999);
    expect(server.limit('k', 9.5)).toStrictEqual(decision(false, 9, 12, 1, 1, 36_000));
    vi.advanceTimersByTime(1);
    expect(server.limit('k', 9.5)).toStrictEqual(decision(true, 0.5, 12, 3_000, 0, 36_000));
  });

  it('the null is right: at full the key follows the instance options, where 11.5 never passes', () => {
    expect(server.limit('k', 3, BIG).allowed).toBe(true);
    vi.advanceTimersByTime(8_999); // 11 tokens; the 12th (full) at 9 s
    expect(server.limit('k', 11.5)).toStrictEqual(decision(false, 11, 12, 1, null, 36_000));
    vi.advanceTimersByTime(1);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    expect(server.limit('k', 11.5)).toStrictEqual(decision(false, 10, 10, 0, null, 100_000));
    expect(server.limit('k', 10)).toStrictEqual(decision(true, 0, 10, 10_000, 0, 100_000));
  });

  it('the time until full when the instance capacity holds the cost, even above the policy capacity', () => {
    const P = { max_tokens: 3, refill_every_seconds: 1 };
    expect(server.limit('k', 3, P)).toStrictEqual(decision(true, 0, 3, 1_000, 0, 3_000));
    // 5 > 3 can never pass under P, but at 3 s the bucket is full and forgotten: 10 tokens.
    expect(server.limit('k', 5)).toStrictEqual(decision(false, 0, 3, 1_000, 3_000, 3_000));
    // Exactly the policy capacity is reached at full too: the same moment.
    expect(server.limit('k', 3)).toStrictEqual(decision(false, 0, 3, 1_000, 3_000, 3_000));
    // Below it, the policy decides.
    expect(server.limit('k', 2)).toStrictEqual(decision(false, 0, 3, 1_000, 2_000, 3_000));
    // Above the instance capacity: never.
    expect(server.limit('k', 11).retry_after_ms).toBeNull();
    // With P given, the policy stays: 5 never passes.
    expect(server.limit('k', 5, P).retry_after_ms).toBeNull();
    expect(server.getStatus('k')).toEqual(status(0, 3, 1_000));

    vi.advanceTimersByTime(2_999);
    expect(server.check('k', 5)).toBe(false);
    expect(server.limit('k', 5)).toStrictEqual(decision(false, 2, 3, 1, 1, 3_000));
    vi.advanceTimersByTime(1);
    expect(server.limit('k', 5)).toStrictEqual(decision(true, 5, 10, 10_000, 0, 100_000));
  });
});

describe('a policy change on a key', () => {
  it('keeps the tokens of a partly used bucket, clamped to a lower capacity', () => {
    server.consume('k', 3); // 7 left
    expect(server.limit('k', 1, { max_tokens: 5 })).toStrictEqual(decision(true, 4, 5, 10_000, 0, 50_000));
    expect(server.getStatus('k')).toEqual(status(4, 5, 10_000));
  });

  it('keeps the tokens when the lower capacity is still above them', () => {
    server.consume('k', 8); // 2 left
    expect(server.limit('k', 1, { max_tokens: 5 })).toStrictEqual(decision(true, 1, 5, 10_000, 0, 50_000));
  });

  it('keeps the tokens and the progress under a higher capacity', () => {
    server.consume('k', 3); // 7 left
    vi.advanceTimersByTime(4_000);
    expect(server.limit('k', 1, { max_tokens: 20 })).toStrictEqual(decision(true, 6, 20, 6_000, 0, 200_000));
    expect(server.getStatus('k')).toEqual(status(6, 20, 6_000));
  });

  it('keeps the tokens when moving from one policy to another', () => {
    server.limit('k', 3, { max_tokens: 5, refill_every_seconds: 1 }); // 2 left
    expect(server.limit('k', 1, { max_tokens: 50, refill_every_seconds: 1 })).toStrictEqual(
      decision(true, 1, 50, 1_000, 0, 50_000),
    );
    expect(server.limit('k', 0, { max_tokens: 1 })).toStrictEqual(decision(true, 1, 1, 0, 0, 10_000));
  });

  it('counts a full bucket as full under the new policy', () => {
    expect(server.limit('fresh', 1, { max_tokens: 20 })).toStrictEqual(decision(true, 19, 20, 10_000, 0, 200_000));
    server.consume('refilled', 10);
    vi.advanceTimersByTime(100 * SECOND);
    expect(server.limit('refilled', 1, { max_tokens: 20 })).toStrictEqual(
      decision(true, 19, 20, 10_000, 0, 200_000),
    );
    server.limit('policy-full', 2, { max_tokens: 2, refill_every_seconds: 1 });
    vi.advanceTimersByTime(2 * SECOND);
    expect(server.limit('policy-full', 1, { max_tokens: 7 })).toStrictEqual(
      decision(true, 6, 7, 10_000, 0, 70_000),
    );
  });
});

// ---------------------------------------------------------------------------------------
// Validation of limit()

describe('limit() rejects bad input and changes nothing', () => {
  const KEYS = ['k', 'p', 'fresh'];

  beforeEach(() => {
    server.consume('k', 3);
    server.limit('p', 1, { max_tokens: 4, refill_every_seconds: 2 });
    vi.advanceTimersByTime(1_500);
    expect(statuses(KEYS)).toEqual([status(7, 10, 8_500), status(3, 4, 500), status(10, 10, 0)]);
  });

  const badPolicies: { name: string; policy: unknown; kind: ErrorKind; message: string }[] = [
    { name: 'null', policy: null, kind: 'TypeError', message: 'policy must be an object, got null' },
    { name: "'x'", policy: 'x', kind: 'TypeError', message: 'policy must be an object, got string "x"' },
    { name: '3', policy: 3, kind: 'TypeError', message: 'policy must be an object, got number 3' },
    {
      name: 'an unknown field',
      policy: { x: 1 },
      kind: 'TypeError',
      message: 'policy has no field "x" (the fields are max_tokens, refill_every_seconds and block_seconds)',
    },
    {
      name: 'a typo next to a good field',
      policy: { max_tokens: 3, refill_every_second: 1 },
      kind: 'TypeError',
      message: 'policy has no field "refill_every_second" (the fields are max_tokens, refill_every_seconds and block_seconds)',
    },
    {
      name: "max_tokens '3'",
      policy: { max_tokens: '3' },
      kind: 'TypeError',
      message: 'policy.max_tokens must be a number, got string "3"',
    },
    {
      name: 'max_tokens null',
      policy: { max_tokens: null },
      kind: 'TypeError',
      message: 'policy.max_tokens must be a number, got null',
    },
    {
      name: 'max_tokens 0',
      policy: { max_tokens: 0 },
      kind: 'RangeError',
      message: 'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0',
    },
    {
      name: 'max_tokens 1.5',
      policy: { max_tokens: 1.5 },
      kind: 'RangeError',
      message: 'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 1.5',
    },
    {
      name: 'max_tokens 2^53',
      policy: { max_tokens: 2 ** 53 },
      kind: 'RangeError',
      message: 'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 9007199254740992',
    },
    {
      name: 'refill_every_seconds 0',
      policy: { refill_every_seconds: 0 },
      kind: 'RangeError',
      message: 'policy.refill_every_seconds must be a finite number > 0, got 0',
    },
    {
      name: 'refill_every_seconds NaN',
      policy: { max_tokens: 5, refill_every_seconds: NaN },
      kind: 'RangeError',
      message: 'policy.refill_every_seconds must be a finite number > 0, got NaN',
    },
    {
      name: 'refill_every_seconds -1',
      policy: { refill_every_seconds: -1 },
      kind: 'RangeError',
      message: 'policy.refill_every_seconds must be a finite number > 0, got -1',
    },
    {
      name: 'refill_every_seconds Infinity',
      policy: { refill_every_seconds: Infinity },
      kind: 'RangeError',
      message: 'policy.refill_every_seconds must be a finite number > 0, got Infinity',
    },
    {
      name: "refill_every_seconds '1'",
      policy: { refill_every_seconds: '1' },
      kind: 'TypeError',
      message: 'policy.refill_every_seconds must be a number, got string "1"',
    },
  ];

  it.each(badPolicies)('policy $name: $kind', ({ policy, kind, message }) => {
    const before = statuses(KEYS);
    for (const key of KEYS) {
      expectError(thrown(() => server.limit(key, 1, policy as never)), kind, message);
      expectError(thrown(() => server.limit(key, 0, policy as never)), kind, message);
    }
    expect(statuses(KEYS)).toEqual(before);
    // The remembered policy is still there.
    expect(server.limit('p')).toStrictEqual(decision(true, 2, 4, 500, 0, 8_000));
  });

  it('a policy that is an array is not an object', () => {
    const before = statuses(KEYS);
    const error = thrown(() => server.limit('k', 1, [] as never));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^policy must be an object, got /);
    expect(statuses(KEYS)).toEqual(before);
  });

  const badCosts: unknown[] = [NaN, -1, -0.5, Infinity, -Infinity, '1', null, 1n, true, {}, [1]];

  it.each(badCosts.map((cost) => ({ cost, shown: String(cost) })))('cost $shown: as for consume', ({ cost }) => {
    const before = statuses(KEYS);
    for (const key of KEYS) {
      const expected = thrown(() => server.consume(key, cost as never));
      for (const policy of [undefined, { max_tokens: 2 }]) {
        const error = thrown(() => server.limit(key, cost as never, policy));
        expect(error.name).toBe(expected.name);
        expect(error.constructor).toBe(expected.constructor);
        expect(error.message).toBe(expected.message);
      }
    }
    expect(statuses(KEYS)).toEqual(before);
  });

  it('cost NaN: RangeError "cost must be a finite number >= 0, got NaN"', () => {
    expectError(thrown(() => server.limit('k', NaN)), 'RangeError', 'cost must be a finite number >= 0, got NaN');
  });

  const badKeys: unknown[] = [1, null, undefined, {}, ['k'], 1n, true, Symbol('k')];

  it.each(badKeys.map((key) => ({ key, shown: String(key) })))('key $shown: as for consume', ({ key }) => {
    const before = statuses(KEYS);
    const expected = thrown(() => server.consume(key as never));
    expect(expected).toBeInstanceOf(TypeError);
    for (const policy of [undefined, { max_tokens: 2 }]) {
      const error = thrown(() => server.limit(key as never, 1, policy));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toBe(expected.message);
    }
    expect(statuses(KEYS)).toEqual(before);
  });

  it('key 1: TypeError "key must be a string, got number 1"', () => {
    expectError(thrown(() => server.limit(1 as never)), 'TypeError', 'key must be a string, got number 1');
  });
});

// ---------------------------------------------------------------------------------------
// limitAll

describe('limitAll()', () => {
  function expectAllShape(d: unknown): asserts d is RateLimitAllDecision {
    expect(Object.getPrototypeOf(d)).toBe(Object.prototype);
    expect(Object.keys(d as object).sort()).toEqual(['allowed', 'results', 'retry_after_ms']);
    const x = d as RateLimitAllDecision;
    expect(Array.isArray(x.results)).toBe(true);
    for (const r of x.results) expectDecisionShape(r);
  }

  const SEC = { max_tokens: 10, refill_every_seconds: 0.1 };
  const PER_HOUR = { max_tokens: 1000, refill_every_seconds: 3.6 };
  const both = (): RateLimitRequest[] => [
    { key: 'sec', policy: SEC },
    { key: 'hour', policy: PER_HOUR },
  ];

  it('a shadow member never changes the answer; it takes its cost only when the others allowed', () => {
    const trial = { max_tokens: 2, refill_every_seconds: 3600 };
    const members = (): RateLimitRequest[] => [
      { key: 'sec', policy: SEC },
      { key: 'trial', policy: trial, shadow: true },
    ];
    for (let i = 0; i < 10; i++) expect(server.limitAll(members()).allowed, `request ${i}`).toBe(true);
    expect(server.getStatus('trial').remaining).toBe(0);
    // The trial is empty: it says so, with its own wait, and the answer stays the others'.
    const denied = server.limitAll(members());
    expectAllShape(denied);
    expect(denied.allowed).toBe(false);
    expect(denied.retry_after_ms).toBe(100);
    expect(denied.results.map((r) => [r.allowed, r.retry_after_ms])).toEqual([
      [false, 100],
      [false, 3_600_000],
    ]);
    vi.advanceTimersByTime(100);
    const allowed = server.limitAll(members());
    expect([allowed.allowed, allowed.retry_after_ms, allowed.results[1].allowed]).toEqual([true, 0, false]);
    expect(server.getStatus('trial').remaining).toBe(0);
  });

  it('an empty array is allowed with no results', () => {
    const d = server.limitAll([]);
    expectAllShape(d);
    expect(d).toStrictEqual({ allowed: true, retry_after_ms: 0, results: [] });
  });

  it('all members have room: all consume; each result is its decision after consuming', () => {
    server.consume('b', 4);
    const d = server.limitAll([
      { key: 'a' },
      { key: 'b', cost: 3 },
      { key: 'c', cost: 2, policy: { max_tokens: 5, refill_every_seconds: 1 } },
      { key: 'd', cost: 0 },
    ]);
    expectAllShape(d);
    expect(d).toStrictEqual({
      allowed: true,
      retry_after_ms: 0,
      results: [
        decision(true, 9, 10, 10_000, 0, 100_000),
        decision(true, 3, 10, 10_000, 0, 100_000),
        decision(true, 3, 5, 1_000, 0, 5_000),
        decision(true, 10, 10, 0, 0, 100_000),
      ],
    });
    expect(statuses(['a', 'b', 'c', 'd'])).toEqual(d.results.map(statusOf));
  });

  it('10 per second AND 1000 per hour: the denied limit does not use up the other', () => {
    for (let i = 0; i < 10; i++) expect(server.limitAll(both()).allowed, `request ${i}`).toBe(true);
    expect(statuses(['sec', 'hour'])).toEqual([status(0, 10, 100), status(990, 1000, 3_600)]);

    const before = statuses(['sec', 'hour']);
    const d = server.limitAll(both());
    expectAllShape(d);
    expect(d).toStrictEqual({
      allowed: false,
      retry_after_ms: 100,
      results: [decision(false, 0, 10, 100, 100, 1_000), decision(true, 990, 1000, 3_600, 0, 3_600_000)],
    });
    expect(statuses(['sec', 'hour'])).toEqual(before);

    // Hammering while denied costs the hourly limit nothing.
    for (let i = 0; i < 50; i++) expect(server.limitAll(both()).allowed).toBe(false);
    expect(statuses(['sec', 'hour'])).toEqual(before);

    vi.advanceTimersByTime(99);
    expect(server.limitAll(both()).allowed).toBe(false);
    vi.advanceTimersByTime(1);
    const ok = server.limitAll(both());
    expect(ok).toStrictEqual({
      allowed: true,
      retry_after_ms: 0,
      results: [decision(true, 0, 10, 100, 0, 1_000), decision(true, 989, 1000, 3_500, 0, 3_600_000)],
    });
    expect(statuses(['sec', 'hour'])).toEqual(ok.results.map(statusOf));
  });

  it('the hourly limit used up: the per-second limit keeps its tokens', () => {
    expect(server.limit('hour', 999, PER_HOUR).allowed).toBe(true);
    expect(server.limitAll(both()).allowed).toBe(true);
    expect(statuses(['sec', 'hour'])).toEqual([status(9, 10, 100), status(0, 1000, 3_600)]);
    vi.advanceTimersByTime(1_000);
    const before = statuses(['sec', 'hour']);
    expect(before).toEqual([status(10, 10, 0), status(0, 1000, 2_600)]);
    const d = server.limitAll(both());
    expect(d).toStrictEqual({
      allowed: false,
      retry_after_ms: 2_600,
      results: [decision(true, 10, 10, 0, 0, 1_000), decision(false, 0, 1000, 2_600, 2_600, 3_600_000)],
    });
    expect(statuses(['sec', 'hour'])).toEqual(before);
    vi.advanceTimersByTime(2_599);
    expect(server.limitAll(both()).allowed).toBe(false);
    expect(statuses(['sec', 'hour'])).toEqual([status(10, 10, 0), status(0, 1000, 1)]);
    vi.advanceTimersByTime(1);
    expect(server.limitAll(both()).allowed).toBe(true);
    expect(statuses(['sec', 'hour'])).toEqual([status(9, 10, 100), status(0, 1000, 3_600)]);
  });

  it('denied: no member consumes; members with room say so with retry 0; the top-level retry is the largest', () => {
    server.setOptions({ refill_every_seconds: 1 / 3 });
    server.consume('a', 9); // 1 left
    server.consume('b', 10); // 0 left
    server.limit('c', 5, { max_tokens: 5, refill_every_seconds: 0.0015 }); // 0 left
    vi.advanceTimersByTime(1); // 'a', 'b': no refill yet; 'c': none (1.5 ms)
    const keys = ['a', 'b', 'c', 'd'];
    const before = statuses(keys);
    expect(before).toEqual([status(1, 10, 333), status(0, 10, 333), status(0, 5, 1), status(10, 10, 0)]);

    const d = server.limitAll([
      { key: 'a', cost: 1 },
      { key: 'b', cost: 3 },
      { key: 'c', cost: 5 },
      { key: 'd', cost: 10 },
    ]);
    expectAllShape(d);
    const w = expectedWindowMs(10, 1 / 3);
    const retryB = expectedRetryMs(3, 1, 1 / 3); // 1000
    const retryC = expectedRetryMs(5, 1, 0.0015); // 7.5 ms - 1 ms → 7
    expect(retryB).toBe(1_000);
    expect(retryC).toBe(7);
    expect(d).toStrictEqual({
      allowed: false,
      retry_after_ms: retryB,
      results: [
        decision(true, 1, 10, 333, 0, w),
        decision(false, 0, 10, 333, retryB, w),
        decision(false, 0, 5, 1, retryC, 8),
        decision(true, 10, 10, 0, 0, w),
      ],
    });
    expect(statuses(keys)).toEqual(before);

    vi.advanceTimersByTime(retryB - 1);
    expect(server.check('b', 3)).toBe(false);
    const early = server.limitAll([
      { key: 'a', cost: 1 },
      { key: 'b', cost: 3 },
      { key: 'c', cost: 5 },
      { key: 'd', cost: 10 },
    ]);
    expect(early.allowed).toBe(false);
    expect(early.retry_after_ms).toBe(1);
    vi.advanceTimersByTime(1);
    const ok = server.limitAll([
      { key: 'a', cost: 1 },
      { key: 'b', cost: 3 },
      { key: 'c', cost: 5 },
      { key: 'd', cost: 10 },
    ]);
    expect(ok.allowed).toBe(true);
    expect(ok.retry_after_ms).toBe(0);
    expect(ok.results.map((r) => r.allowed)).toEqual([true, true, true, true]);
    expect(statuses(keys)).toEqual(ok.results.map(statusOf));
  });

  it.each([
    { every: 10, costs: [1, 3, 7] },
    { every: 0.25, costs: [3, 7, 1] },
    { every: 1 / 3, costs: [7, 3, 1] },
    { every: 0.0015, costs: [3, 1, 7] },
  ])('refill every $every s: waiting the top-level retry succeeds, 1 ms less does not', ({ every, costs }) => {
    const policy = { max_tokens: 8, refill_every_seconds: every };
    const keys = ['x', 'y', 'z'];
    for (const key of keys) expect(server.limit(key, 8, policy).allowed).toBe(true);
    vi.advanceTimersByTime(1);
    const requests = (): RateLimitRequest[] => keys.map((key, i) => ({ key, cost: costs[i], policy }));
    const d = server.limitAll(requests());
    expect(d.allowed).toBe(false);
    const want = Math.max(...costs.map((c) => expectedRetryMs(c, 1, every)));
    expect(d.retry_after_ms).toBe(want);
    d.results.forEach((r, i) => {
      const own = expectedRetryMs(costs[i], 1, every);
      expect(r.allowed).toBe(own === 0);
      expect(r.retry_after_ms).toBe(own);
    });
    const before = statuses(keys);
    vi.advanceTimersByTime(want - 1);
    const early = server.limitAll(requests());
    expect(early.allowed, '1 ms before the top-level retry').toBe(false);
    vi.advanceTimersByTime(1);
    const ok = server.limitAll(requests());
    expect(ok.allowed, 'after exactly the top-level retry').toBe(true);
    expect(statuses(keys)).toEqual(ok.results.map(statusOf));
    expect(statuses(keys)).not.toEqual(before);
  });

  it('a member whose cost exceeds its capacity: top-level retry null, nothing consumed', () => {
    server.consume('a', 4);
    server.consume('b', 8);
    const keys = ['a', 'b', 'c'];
    const before = statuses(keys);
    expect(before).toEqual([status(6, 10, 10_000), status(2, 10, 10_000), status(10, 10, 0)]);
    const d = server.limitAll([
      { key: 'a', cost: 1 },
      { key: 'b', cost: 4, policy: { max_tokens: 3 } },
      { key: 'c', cost: 1 },
    ]);
    expect(d).toStrictEqual({
      allowed: false,
      retry_after_ms: null,
      results: [
        decision(true, 6, 10, 10_000, 0, 100_000),
        decision(false, 2, 3, 10_000, null, 30_000),
        decision(true, 10, 10, 0, 0, 100_000),
      ],
    });
    // No member consumed; 'b' (2 tokens, below the new capacity) now follows its policy.
    expect(statuses(keys)).toEqual([before[0], status(2, 3, 10_000), before[2]]);
    expect(server.consume('b', 3)).toBe(false);
    expect(server.consume('b', 2)).toBe(true);
    expect(server.getStatus('b')).toEqual(status(0, 3, 10_000));
  });

  it('null wins over a finite wait elsewhere', () => {
    server.consume('a', 10);
    const d = server.limitAll([
      { key: 'a', cost: 1 },
      { key: 'b', cost: 11 },
    ]);
    expect(d.allowed).toBe(false);
    expect(d.retry_after_ms).toBeNull();
    expect(d.results.map((r) => r.retry_after_ms)).toEqual([10_000, null]);
  });

  it('policies are remembered after an allowed call; a denied one that leaves a bucket full stores nothing', () => {
    server.limitAll([
      { key: 'a', policy: { max_tokens: 3, refill_every_seconds: 1 } },
      { key: 'b' },
    ]);
    expect(statuses(['a', 'b'])).toEqual([status(2, 3, 1_000), status(9, 10, 10_000)]);
    expect(server.limit('a')).toStrictEqual(decision(true, 1, 3, 1_000, 0, 3_000));

    server.consume('z', 10);
    const d = server.limitAll([
      { key: 'fresh', policy: { max_tokens: 3, refill_every_seconds: 1 } },
      { key: 'z' },
    ]);
    expect(d.allowed).toBe(false);
    expect(d.results[0]).toStrictEqual(decision(true, 3, 3, 0, 0, 3_000));
    expect(server.getStatus('fresh')).toEqual(status(10, 10, 0));
  });

  it('a denied call consumes nothing, but every member takes the policy it gave', () => {
    const P = { max_tokens: 5, refill_every_seconds: 1 };
    const Q = { max_tokens: 50, refill_every_seconds: 100 };
    const Z = { max_tokens: 1 };
    for (const [p, z] of [['p', 'z'], ['p2', 'z2']]) {
      server.limit(p, 2, P); // 3 left under P
      server.consume(z, 10);
    }
    const before = statuses(['p', 'z']);
    expect(before).toEqual([status(3, 5, 1_000), status(0, 10, 10_000)]);
    const d = server.limitAll([
      { key: 'p', policy: Q },
      { key: 'z', policy: Z },
    ]);
    expect(d).toStrictEqual({
      allowed: false,
      retry_after_ms: 10_000,
      results: [decision(true, 3, 50, 100_000, 0, 5_000_000), decision(false, 0, 1, 10_000, 10_000, 10_000)],
    });
    // The twins take the same policies by cost-0 calls, which consume nothing.
    expect(server.limit('p2', 0, Q).allowed).toBe(true);
    expect(server.limit('z2', 0, Z).allowed).toBe(true);
    const after = [status(3, 50, 100_000), status(0, 1, 10_000)];
    expect(statuses(['p', 'z'])).toEqual(after);
    expect(statuses(['p2', 'z2'])).toEqual(after);
    // P would have added a token by now; Q does not.
    vi.advanceTimersByTime(1_000);
    expect(statuses(['p', 'z'])).toEqual([status(3, 50, 99_000), status(0, 1, 9_000)]);
    // 'z' is full under Z (1 token) at 10 s: forgotten with its policy, the instance options apply.
    vi.advanceTimersByTime(9_000);
    expect(statuses(['p', 'z'])).toEqual([status(3, 50, 90_000), status(10, 10, 0)]);
    expect(statuses(['p2', 'z2'])).toEqual(statuses(['p', 'z']));
  });

  describe('rejects bad input, and nothing is consumed for any member', () => {
    const KEYS = ['a', 'b', 'c'];

    beforeEach(() => {
      server.consume('a', 2);
      server.limit('b', 1, { max_tokens: 4, refill_every_seconds: 2 });
      vi.advanceTimersByTime(500);
      expect(statuses(KEYS)).toEqual([status(8, 10, 9_500), status(3, 4, 1_500), status(10, 10, 0)]);
    });

    const cases: { name: string; requests: unknown; kind: ErrorKind; message: string | RegExp }[] = [
      {
        name: 'a duplicate key',
        requests: [{ key: 'a' }, { key: 'a' }],
        kind: 'TypeError',
        message: 'requests[1].key repeats the key of requests[0].key: give each key once, with the costs added up',
      },
      {
        name: 'a duplicate key further on',
        requests: [{ key: 'a' }, { key: 'b', cost: 1 }, { key: 'c' }, { key: 'b', cost: 2 }],
        kind: 'TypeError',
        message: 'requests[3].key repeats the key of requests[1].key: give each key once, with the costs added up',
      },
      {
        name: 'a duplicate key with different policies',
        requests: [
          { key: 'c', policy: { max_tokens: 1 } },
          { key: 'c', policy: { max_tokens: 2 } },
        ],
        kind: 'TypeError',
        message: 'requests[1].key repeats the key of requests[0].key: give each key once, with the costs added up',
      },
      {
        name: 'not an array',
        requests: 'x',
        kind: 'TypeError',
        message: 'requests must be an array, got string "x"',
      },
      { name: 'null', requests: null, kind: 'TypeError', message: 'requests must be an array, got null' },
      {
        name: 'a key that is a number',
        requests: [{ key: 1 }, { key: 'b' }],
        kind: 'TypeError',
        message: 'requests[0].key must be a string, got number 1',
      },
      {
        name: 'a missing key',
        requests: [{ key: 'a' }, { cost: 1 }],
        kind: 'TypeError',
        message: 'requests[1].key must be a string, got undefined',
      },
      {
        name: 'a NaN cost',
        requests: [{ key: 'a', cost: NaN }],
        kind: 'RangeError',
        message: 'requests[0].cost must be a finite number >= 0, got NaN',
      },
      {
        name: 'a negative cost on the last member',
        requests: [{ key: 'a' }, { key: 'b' }, { key: 'c', cost: -1 }],
        kind: 'RangeError',
        message: 'requests[2].cost must be a finite number >= 0, got -1',
      },
      {
        name: 'a string cost',
        requests: [{ key: 'a' }, { key: 'b', cost: '2' }],
        kind: 'TypeError',
        message: 'requests[1].cost must be a number, got string "2"',
      },
      {
        name: 'policy max_tokens 0',
        requests: [{ key: 'a', policy: { max_tokens: 0 } }],
        kind: 'RangeError',
        message: 'requests[0].policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0',
      },
      {
        name: 'policy max_tokens 0 on a later member',
        requests: [{ key: 'a' }, { key: 'c', cost: 1, policy: { max_tokens: 0 } }],
        kind: 'RangeError',
        message: 'requests[1].policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0',
      },
      {
        name: "policy max_tokens '3'",
        requests: [{ key: 'a', policy: { max_tokens: '3' } }],
        kind: 'TypeError',
        message: 'requests[0].policy.max_tokens must be a number, got string "3"',
      },
      {
        name: 'policy refill_every_seconds 0',
        requests: [{ key: 'a' }, { key: 'b', policy: { refill_every_seconds: 0 } }],
        kind: 'RangeError',
        message: 'requests[1].policy.refill_every_seconds must be a finite number > 0, got 0',
      },
      {
        name: 'a policy with an unknown field',
        requests: [{ key: 'a', policy: { x: 1 } }],
        kind: 'TypeError',
        message: 'requests[0].policy has no field "x" (the fields are max_tokens, refill_every_seconds and block_seconds)',
      },
      {
        name: 'a null policy',
        requests: [{ key: 'a', policy: null }],
        kind: 'TypeError',
        message: 'requests[0].policy must be an object, got null',
      },
      {
        name: 'a shadow flag that is not a boolean',
        requests: [{ key: 'a' }, { key: 'b', shadow: 'yes' }],
        kind: 'TypeError',
        message: 'requests[1].shadow must be a boolean, got string "yes"',
      },
      {
        name: 'an unknown member field',
        requests: [{ key: 'a', colour: 'red' }],
        kind: 'TypeError',
        message: 'requests[0] has no field "colour" (the fields are key, cost, policy and shadow)',
      },
      {
        name: 'a member that is not an object',
        requests: [{ key: 'a' }, null],
        kind: 'TypeError',
        message: /^requests\[1\] must be an object, got null$/,
      },
      {
        name: 'a member that is a string',
        requests: [{ key: 'a' }, 'b'],
        kind: 'TypeError',
        message: /^requests\[1\] must be an object, got string "b"$/,
      },
    ];

    it.each(cases)('$name: $kind', ({ requests, kind, message }) => {
      const before = statuses(KEYS);
      const error = thrown(() => server.limitAll(requests as never));
      expect(error).toBeInstanceOf(ERRORS[kind]);
      expect(error.name).toBe(kind);
      if (typeof message === 'string') expect(error.message).toBe(message);
      else expect(error.message).toMatch(message);
      expect(statuses(KEYS)).toEqual(before);
      // Policies of the bad call were not remembered either; the old one still is.
      expect(server.limit('b')).toStrictEqual(decision(true, 2, 4, 1_500, 0, 8_000));
    });
  });
});
