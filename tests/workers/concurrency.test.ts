// Exact under concurrency, inside workerd: many concurrent RPC calls
// (`Promise.all`) to Durable Objects whose buckets cannot refill during the test (one token
// per hour, and a frozen clock where noted), so the number admitted must be exactly the
// capacity: never one more (a lost update), never one less (a spurious denial).
// Each test uses its own idFromName(s), so its own Durable Objects and fresh state.
import type { RateLimitAllDecision, RateLimitDecision } from '@delightstack/rate-limiter';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection } from './support';


const T0 = Date.UTC(2026, 3, 1);
const HOUR_MS = 3_600_000;
/** 100 tokens, one back per hour: nothing refills during a test. */
const HOURLY = { max_tokens: 100, refill_every_seconds: 3_600 };

const count = (results: boolean[]) => results.filter(Boolean).length;

/** Calls `call(object, i)` `perObject` times for each object, interleaved round-robin, all
 *  at once; returns the results grouped by object, in call order. */
async function interleaved<T>(objects: number, perObject: number, call: (object: number, i: number) => Promise<T>) {
  const calls: Promise<T>[] = [];
  for (let i = 0; i < perObject; i++) for (let o = 0; o < objects; o++) calls.push(call(o, i));
  const flat = await Promise.all(calls);
  return Array.from({ length: objects }, (_, o) => flat.filter((_, j) => j % objects === o));
}

describe('on the real clock, with a refill of one token per hour', () => {
  it('1,000 concurrent consume calls to one object, each through its own stub, admit exactly 100', async () => {
    const name = 'concurrency-consume-real-clock';
    await limiter(name).setOptions(HOURLY);
    const results = await Promise.all(Array.from({ length: 1_000 }, () => limiter(name).consume('api')));
    console.log(
      `concurrency: 1,000 concurrent consume, max_tokens 100: ${count(results)} admitted; ` +
        `the admitted calls are ${results.slice(0, 100).every(Boolean) ? '' : 'not '}the first 100 sent`,
    );
    expect(count(results)).toBe(100);
    const status = await limiter(name).getStatus('api');
    expect(status.remaining).toBe(0);
    expect(status.limit).toBe(100);
    expect(status.reset_in_ms).toBeGreaterThan(HOUR_MS - 60_000);
    expect(status.reset_in_ms).toBeLessThanOrEqual(HOUR_MS);
    expect(await limiter(name).consume('api')).toBe(false);
  });
});

describe('on a frozen clock', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('300 concurrent fractional costs (0.1) admit exactly 100 from 10 tokens', async () => {
    const stub = limiter('concurrency-fractional');
    await stub.setOptions({ max_tokens: 10, refill_every_seconds: 3_600 });
    const results = await Promise.all(Array.from({ length: 300 }, () => stub.consume('api', 0.1)));
    expect(count(results)).toBe(100);
    expect((await stub.getStatus('api')).remaining).toBe(0);
  });

  it('10 objects under interleaved concurrent load (200 calls each) each admit exactly their own limit', async () => {
    const limits = Array.from({ length: 10 }, (_, o) => 7 + 19 * o); // 7, 26, …, 178
    const stubs = limits.map((_, o) => limiter(`concurrency-consume-${o}`));
    await Promise.all(stubs.map((stub, o) => stub.setOptions({ max_tokens: limits[o], refill_every_seconds: 3_600 })));

    const results = await interleaved(10, 200, (o) => stubs[o]!.consume('api'));
    expect(results.map(count)).toEqual(limits);
    const statuses = await Promise.all(stubs.map((stub) => stub.getStatus('api')));
    expect(statuses.map((s) => s.remaining)).toEqual(limits.map(() => 0));
  });

  it('one object, 10 keys under interleaved concurrent load: each key admits exactly its limit', async () => {
    const stub = limiter('concurrency-keys');
    await stub.setOptions({ max_tokens: 50, refill_every_seconds: 3_600 });
    const costs = Array.from({ length: 10 }, (_, k) => k + 1); // key k costs k + 1: 50, 25, 16, … admitted
    const results = await interleaved(10, 60, (k) => stub.consume(`key-${k}`, costs[k]));
    expect(results.map(count)).toEqual(costs.map((cost) => Math.floor(50 / cost)));
    const remaining = await Promise.all(costs.map(async (_, k) => (await stub.getStatus(`key-${k}`)).remaining));
    expect(remaining).toEqual(costs.map((cost) => 50 % cost));
  });

  it('limit(): 1,000 concurrent calls admit exactly max_tokens; every denial has the exact wait', async () => {
    const stub = limiter('concurrency-limit');
    const decisions = await Promise.all(Array.from({ length: 1_000 }, () => stub.limit('api', 1, HOURLY)));
    const allowed = decisions.filter((d) => d.allowed);
    const denied = decisions.filter((d) => !d.allowed);
    expect(allowed.length).toBe(100);
    // Each admitted call saw its own bucket state: remaining 99, 98, …, 0, each exactly once.
    expect(allowed.map((d) => d.remaining).sort((a, b) => b - a)).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
    expect(allowed.every((d) => d.retry_after_ms === 0 && d.limit === 100)).toBe(true);
    // Every denial: nothing left, and the exact wait for one token (> 0).
    expect(denied.length).toBe(900);
    const distinctDenials = new Set(denied.map((d) => JSON.stringify(d)));
    expect([...distinctDenials].map((d) => JSON.parse(d) as RateLimitDecision)).toEqual([
      { allowed: false, remaining: 0, limit: 100, reset_in_ms: HOUR_MS, retry_after_ms: HOUR_MS, window_ms: 100 * HOUR_MS },
    ]);
    expect(await stub.getStatus('api')).toEqual({ remaining: 0, limit: 100, reset_in_ms: HOUR_MS });
  });

  it('limit(): 10 objects under interleaved concurrent load (200 calls each) each admit exactly their own max_tokens', async () => {
    const policies = Array.from({ length: 10 }, (_, o) => ({ max_tokens: 11 + 17 * o, refill_every_seconds: 3_600 }));
    const stubs = policies.map((_, o) => limiter(`concurrency-limit-${o}`));
    const results = await interleaved<RateLimitDecision>(10, 200, (o) => stubs[o]!.limit('api', 1, policies[o]));
    expect(results.map((ds) => ds.filter((d) => d.allowed).length)).toEqual(policies.map((p) => p.max_tokens));
    const denials = results.flatMap((ds) => ds.filter((d) => !d.allowed));
    expect(denials.length).toBe(10 * 200 - policies.reduce((sum, p) => sum + p.max_tokens, 0));
    expect(denials.every((d) => d.retry_after_ms !== null && d.retry_after_ms > 0 && d.remaining === 0)).toBe(true);
    expect(new Set(denials.map((d) => d.retry_after_ms))).toEqual(new Set([HOUR_MS]));
  });

  describe('limitAll(): all or nothing under concurrency', () => {
    const A = { max_tokens: 30, refill_every_seconds: 3_600 };
    const B = { max_tokens: 80, refill_every_seconds: 3_600 };

    /** Runs `calls` concurrent limitAll of key a (cost costA) and key b (cost costB). */
    async function run(name: string, calls: number, costA: number, costB: number) {
      const stub = limiter(name);
      const request = [
        { key: 'a', cost: costA, policy: A },
        { key: 'b', cost: costB, policy: B },
      ];
      const decisions = await Promise.all(Array.from({ length: calls }, () => stub.limitAll(request)));
      const [a, b] = await Promise.all([stub.getStatus('a'), stub.getStatus('b')]);
      return { decisions, a, b };
    }

    const deniedWaits = (decisions: RateLimitAllDecision[]) =>
      decisions.filter((d) => !d.allowed).every((d) => d.retry_after_ms !== null && d.retry_after_ms > 0);

    it('a binds (30 of cost 1 vs 80 of cost 1): 30 admitted, b keeps exactly 80 - 30', async () => {
      const { decisions, a, b } = await run('concurrency-all-a', 300, 1, 1);
      const admitted = decisions.filter((d) => d.allowed).length;
      expect(admitted).toBe(Math.min(30, 80)); // 30
      expect(a.remaining).toBe(0);
      // Denied calls took nothing from b: it holds exactly what the admitted calls left.
      expect(b.remaining).toBe(80 - admitted);
      expect(deniedWaits(decisions)).toBe(true);
      // Each denial: a had no room, b had room (and still took nothing).
      const denied = decisions.filter((d) => !d.allowed);
      expect(denied.length).toBe(270);
      expect(denied.every((d) => !d.results[0]!.allowed && d.results[1]!.allowed)).toBe(true);
      expect(denied.every((d) => d.results[1]!.remaining === 50)).toBe(true);
    });

    it('b binds (30 of cost 1 vs 80 of cost 3): 26 admitted, a keeps exactly 30 - 26', async () => {
      const { decisions, a, b } = await run('concurrency-all-b', 300, 1, 3);
      const admitted = decisions.filter((d) => d.allowed).length;
      expect(admitted).toBe(Math.min(30, Math.floor(80 / 3))); // 26
      expect(a.remaining).toBe(30 - admitted);
      expect(b.remaining).toBe(80 - 3 * admitted);
      expect(deniedWaits(decisions)).toBe(true);
      // b holds 2 tokens, needs 3: the wait is one hour.
      expect(new Set(decisions.filter((d) => !d.allowed).map((d) => d.retry_after_ms))).toEqual(new Set([HOUR_MS]));
    });
  });

  it('600 concurrent mixed calls, half of them invalid: exactly 100 admitted, every bad call rejected', async () => {
    const stub = limiter('concurrency-mixed');
    await stub.setOptions(HOURLY);
    type Outcome = { kind: 'admit'; allowed: boolean } | { kind: 'read' } | { kind: 'error'; error: Error | null };
    const calls: Promise<Outcome>[] = [];
    for (let i = 0; i < 600; i++) {
      switch (i % 6) {
        case 0:
          calls.push(stub.consume('api').then((allowed) => ({ kind: 'admit', allowed })));
          break;
        case 1:
          calls.push(stub.limit('api').then((d) => ({ kind: 'admit', allowed: d.allowed })));
          break;
        case 2:
          calls.push(stub.check('api', 0.5).then(() => ({ kind: 'read' })));
          break;
        case 3:
          calls.push(rejection(stub.consume('api', NaN)).then((error) => ({ kind: 'error', error })));
          break;
        case 4:
          calls.push(
            rejection(stub.limit('api', 1, { max_tokens: 1.5 })).then((error) => ({ kind: 'error', error })),
          );
          break;
        default:
          calls.push(
            rejection(stub.limitAll([{ key: 'api' }, { key: 'api' }])).then((error) => ({ kind: 'error', error })),
          );
      }
    }
    const outcomes = await Promise.all(calls);
    const admitted = outcomes.filter((o) => o.kind === 'admit' && o.allowed).length;
    expect(admitted).toBe(100);
    const errors = outcomes.flatMap((o) => (o.kind === 'error' ? [o.error] : []));
    expect(errors.length).toBe(300); // i % 6 in 3..5
    expect(new Set(errors.map((e) => `${e?.name}: ${e?.message}`))).toEqual(
      new Set([
        'RangeError: cost must be a finite number >= 0, got NaN',
        'RangeError: policy.max_tokens must be a whole number from 1 to 9007199254740991, got 1.5',
        'TypeError: requests[1].key repeats the key of requests[0].key: give each key once, with the costs added up',
      ]),
    );
    expect(await stub.getStatus('api')).toEqual({ remaining: 0, limit: 100, reset_in_ms: HOUR_MS });
  });
});
