// A Worker calling RateLimiterServer over native Durable Object RPC, inside workerd.
// Each test uses its own idFromName, so its own Durable Object and fresh state.
import { runInDurableObject } from 'cloudflare:test';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection } from './support';

const full = { remaining: 10, limit: 10, reset_in_ms: 0 };

afterEach(() => {
  vi.useRealTimers();
});

describe('RPC methods', () => {
  it('starts full with the default options (10 tokens, one every 10 s)', async () => {
    const stub = limiter('rpc-defaults');
    expect(await stub.getStatus('api')).toEqual(full);
    expect(await stub.getStatus('other')).toEqual(full);
  });

  it('consume depletes the bucket, then refuses without consuming', async () => {
    const stub = limiter('rpc-deplete');
    for (let i = 9; i >= 0; i--) {
      expect(await stub.consume('api')).toBe(true);
      expect((await stub.getStatus('api')).remaining).toBe(i);
    }
    expect(await stub.consume('api')).toBe(false);
    expect(await stub.consume('api', 1)).toBe(false);
    const status = await stub.getStatus('api');
    expect(status.remaining).toBe(0);
    expect(status.limit).toBe(10);
    expect(status.reset_in_ms).toBeGreaterThan(0);
    expect(status.reset_in_ms).toBeLessThanOrEqual(10_000);
    // Keys are separate buckets.
    expect(await stub.getStatus('other')).toEqual(full);
  });

  it('check answers like consume would, and consumes nothing', async () => {
    const stub = limiter('rpc-check');
    for (let i = 0; i < 20; i++) expect(await stub.check('api')).toBe(true);
    expect(await stub.check('api', 10)).toBe(true);
    expect(await stub.check('api', 10.5)).toBe(false);
    expect(await stub.getStatus('api')).toEqual(full);

    expect(await stub.consume('api', 7)).toBe(true);
    expect(await stub.check('api', 3)).toBe(true);
    expect(await stub.check('api', 4)).toBe(false);
    expect((await stub.getStatus('api')).remaining).toBe(3);
  });

  it('reset makes a bucket full again; an unknown key is a no-op', async () => {
    const stub = limiter('rpc-reset');
    expect(await stub.consume('api', 10)).toBe(true);
    expect(await stub.consume('api')).toBe(false);
    expect(await stub.reset('api')).toBeUndefined();
    expect(await stub.getStatus('api')).toEqual(full);
    expect(await stub.consume('api')).toBe(true);

    await stub.reset('never-seen');
    expect(await stub.getStatus('never-seen')).toEqual(full);
  });

  it('cost 0 always succeeds and changes nothing', async () => {
    const stub = limiter('rpc-cost-zero');
    expect(await stub.consume('api', 0)).toBe(true);
    expect(await stub.check('api', 0)).toBe(true);
    expect(await stub.getStatus('api')).toEqual(full);

    expect(await stub.consume('api', 10)).toBe(true);
    const empty = await stub.getStatus('api');
    expect(await stub.consume('api', 0)).toBe(true);
    expect(await stub.check('api', 0)).toBe(true);
    expect((await stub.getStatus('api')).remaining).toBe(empty.remaining);
  });

  it('a cost above capacity is never satisfiable: false, nothing consumed', async () => {
    const stub = limiter('rpc-cost-above');
    expect(await stub.consume('api', 11)).toBe(false);
    expect(await stub.check('api', 11)).toBe(false);
    expect(await stub.consume('api', 1e9)).toBe(false);
    expect(await stub.getStatus('api')).toEqual(full);
  });

  it('fractional costs are allowed', async () => {
    const stub = limiter('rpc-cost-fraction');
    expect(await stub.consume('api', 0.5)).toBe(true);
    expect((await stub.getStatus('api')).remaining).toBe(9.5);
    expect(await stub.consume('api', 9.5)).toBe(true);
    expect(await stub.check('api', 0.25)).toBe(false);
  });

  it('setOptions is partial and applies to every key of that instance only', async () => {
    const stub = limiter('rpc-options');
    expect(await stub.setOptions({ max_tokens: 3, refill_every_seconds: 1 })).toBeUndefined();
    expect(await stub.getStatus('a')).toEqual({ remaining: 3, limit: 3, reset_in_ms: 0 });
    expect(await stub.consume('b', 3)).toBe(true);
    expect(await stub.consume('b')).toBe(false);
    const status = await stub.getStatus('b');
    expect(status.reset_in_ms).toBeGreaterThan(0);
    expect(status.reset_in_ms).toBeLessThanOrEqual(1_000);

    // {} changes nothing; an omitted field keeps its value.
    await stub.setOptions({});
    expect((await stub.getStatus('a')).limit).toBe(3);
    await stub.setOptions({ max_tokens: 5 });
    expect(await stub.getStatus('a')).toEqual({ remaining: 5, limit: 5, reset_in_ms: 0 });
    expect((await stub.getStatus('b')).reset_in_ms).toBeLessThanOrEqual(1_000);

    // Lowering max_tokens clamps a bucket holding more.
    expect(await stub.consume('a')).toBe(true);
    await stub.setOptions({ max_tokens: 2 });
    expect((await stub.getStatus('a')).remaining).toBe(2);

    // Another Durable Object keeps the defaults.
    expect(await limiter('rpc-options-other').getStatus('a')).toEqual(full);
  });

  it('ids from different names are independent objects', async () => {
    const one = limiter('rpc-ids-one');
    const two = limiter('rpc-ids-two');
    expect(await one.consume('api', 10)).toBe(true);
    expect(await one.consume('api')).toBe(false);
    expect(await two.getStatus('api')).toEqual(full);
    expect(await two.consume('api')).toBe(true);
    // A second stub for the same name reaches the same object.
    expect((await limiter('rpc-ids-one').getStatus('api')).remaining).toBe(0);
  });

  it('getStatus returns a plain object over RPC', async () => {
    const s = await limiter('rpc-plain').getStatus('api');
    expect(Object.getPrototypeOf(s)).toBe(Object.prototype);
    expect(Object.keys(s).sort()).toEqual(['limit', 'remaining', 'reset_in_ms']);
    expect(s).toEqual(full);
  });
});

describe('errors over RPC', () => {
  it('keep their class and message, and leave the state unchanged', async () => {
    // A frozen clock, so that "unchanged" includes reset_in_ms.
    vi.useFakeTimers();
    const stub = limiter('rpc-errors');
    expect(await stub.consume('k', 4)).toBe(true);
    const before = await stub.getStatus('k');
    expect(before.remaining).toBe(6);

    const nan = await rejection(stub.consume('k', NaN));
    expect(nan).toBeInstanceOf(RangeError);
    expect(nan?.name).toBe('RangeError');
    expect(nan?.message).toMatch(/cost/);
    expect(nan?.message).toMatch(/NaN/);

    const typo = await rejection(stub.setOptions({ max_token: 1 } as any));
    expect(typo).toBeInstanceOf(TypeError);
    expect(typo?.name).toBe('TypeError');
    expect(typo?.message).toMatch(/max_token\b/);

    const key = await rejection(stub.consume(5 as any));
    expect(key).toBeInstanceOf(TypeError);
    expect(key?.name).toBe('TypeError');
    expect(key?.message).toMatch(/key/);

    // All or nothing: one invalid field and the valid one is not applied either.
    const range = await rejection(stub.setOptions({ max_tokens: 5, refill_every_seconds: -1 }));
    expect(range?.name).toBe('RangeError');
    expect(range?.message).toMatch(/refill_every_seconds/);

    for (const [cost, name] of [
      [-1, 'RangeError'],
      [Infinity, 'RangeError'],
      ['1', 'TypeError'],
      [null, 'TypeError'],
    ] as const) {
      const e = await rejection(stub.check('k', cost as any));
      expect(e?.name).toBe(name);
    }

    // The object keeps serving, with the same state and options.
    expect(await stub.getStatus('k')).toEqual(before);
    expect(await stub.consume('k')).toBe(true);
    expect((await stub.getStatus('k')).remaining).toBe(5);
  });
});

describe('time (fake timers reach the Durable Object: it runs in the test isolate)', () => {
  it('refills one token per interval, and reset_in_ms counts down exactly', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-04-01T00:00:00Z'));
    const t0 = Date.now();
    const stub = limiter('rpc-refill');

    expect(await stub.consume('api', 10)).toBe(true);
    expect(await stub.getStatus('api')).toEqual({ remaining: 0, limit: 10, reset_in_ms: 10_000 });

    vi.setSystemTime(t0 + 9_999);
    expect(await stub.getStatus('api')).toEqual({ remaining: 0, limit: 10, reset_in_ms: 1 });
    expect(await stub.consume('api')).toBe(false);

    vi.setSystemTime(t0 + 10_000);
    expect(await stub.getStatus('api')).toEqual({ remaining: 1, limit: 10, reset_in_ms: 10_000 });

    // Sub-interval progress is kept: 2.5 intervals later, two more tokens and 5 s to the third.
    vi.setSystemTime(t0 + 35_000);
    expect(await stub.getStatus('api')).toEqual({ remaining: 3, limit: 10, reset_in_ms: 5_000 });
    expect(await stub.consume('api', 3)).toBe(true);
    expect(await stub.getStatus('api')).toEqual({ remaining: 0, limit: 10, reset_in_ms: 5_000 });

    // Long after, the bucket is full and banks nothing.
    vi.setSystemTime(t0 + 1_000_000);
    expect(await stub.getStatus('api')).toEqual(full);

    // The same clock is seen directly inside the object.
    await runInDurableObject(stub, (instance) => {
      expect(instance.consume('api', 10)).toBe(true);
      expect(instance.getStatus('api')).toEqual({ remaining: 0, limit: 10, reset_in_ms: 10_000 });
    });
    // A clock that goes back never refills and never throws.
    vi.setSystemTime(t0);
    expect((await stub.getStatus('api')).remaining).toBe(0);
    expect(await stub.consume('api')).toBe(false);
  });
});
