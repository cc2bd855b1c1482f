// Blocks (docs/SPEC.md, section 13) over native Durable Object RPC inside workerd, in both
// projects (the in-memory class and the durable one on SQLite): a blocked key denied every
// call with the time left, unblock, the list of blocked keys, and hostile input that gets
// the exact error and changes nothing. The clock is faked.
import { env } from 'cloudflare:workers';
import { createExecutionContext } from 'cloudflare:test';
import { LocalLimits, rateLimit } from '@delightstack/rate-limiter/middleware';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection } from './support';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});
afterEach(() => {
  vi.useRealTimers();
});

describe('blocks over RPC', () => {
  it('deny every call with the time left; unblock ends one; blocked() lists them in key order', async () => {
    const stub = limiter('blocks-basic');
    await stub.block('mallory', 900);
    await stub.block('eve', 60);
    at(15_000);
    expect(await stub.consume('mallory')).toBe(false);
    expect(await stub.limit('mallory', 1, { max_tokens: 5 })).toMatchObject({ allowed: false, retry_after_ms: 885_000 });
    expect(await stub.blocked()).toEqual({
      keys: [
        { key: 'eve', blocked_for_ms: 45_000 },
        { key: 'mallory', blocked_for_ms: 885_000 },
      ],
      next: null,
    });
    expect(await stub.unblock('mallory')).toBe(true);
    expect(await stub.consume('mallory')).toBe(true);
    at(60_000);
    expect((await stub.blocked()).keys).toEqual([]);
  });

  it('hostile input gets the exact TypeError or RangeError and changes nothing', async () => {
    const stub = limiter('blocks-hostile');
    await stub.block('k', 10);
    const loose = stub as unknown as Record<'block' | 'unblock' | 'blocked', (...args: unknown[]) => Promise<unknown>>;
    const cases: [() => Promise<unknown>, string, string][] = [
      [() => loose.block('k', -5), 'RangeError', 'seconds must be a finite number > 0 and at most 31536000, got -5'],
      [() => loose.block('k', 1e10), 'RangeError', 'seconds must be a finite number > 0 and at most 31536000, got 10000000000'],
      [() => loose.block('k', null), 'TypeError', 'seconds must be a number, got null'],
      [() => loose.block(['k'], 5), 'TypeError', 'key must be a string, got an array'],
      [() => loose.unblock(1n), 'TypeError', 'key must be a string, got bigint 1n'],
      [() => loose.blocked({ limit: 1001 }), 'RangeError', 'options.limit must be a whole number from 1 to 1000, got 1001'],
      [() => loose.blocked(null), 'TypeError', 'options must be an object, got null'],
    ];
    const got = [];
    for (const [call] of cases) {
      const error = await rejection(call());
      got.push([error?.name, error?.message]);
    }
    expect(got).toEqual(cases.map(([, kind, message]) => [kind, message]));
    expect(await stub.blocked()).toEqual({ keys: [{ key: 'k', blocked_for_ms: 10_000 }], next: null });
  });
});

describe('a penalty through the middleware', () => {
  it('the request that goes over blocks its client for block_seconds, and every request until then hears the time left, with no call', async () => {
    const local = new LocalLimits();
    const policy = { name: 'login', max_tokens: 2, refill_every_seconds: 60, block_seconds: 300 };
    const fetch = rateLimit({ binding: 'LIMITER', policy, local })(async () => new Response('ok'));
    const request = () => new Request('https://example.com/login', { headers: { 'CF-Connecting-IP': '198.51.100.190' } });
    const ctx = createExecutionContext();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(request(), env, ctx)).status);
    expect(statuses).toEqual([200, 200, 429]);
    // The isolate holds the block's whole denial: a flood of retries meanwhile makes no call.
    const calls = local.calls;
    for (let i = 1; i <= 500; i++) {
      at(i * 200); // 100 s of retries, beyond the 10 s a bucket's denial is held at most
      expect((await fetch(request(), env, ctx)).status).toBe(429);
    }
    expect(local.calls).toBe(calls);
    expect(local.localAnswers).toBeGreaterThanOrEqual(500);
    at(120_000);
    // Two tokens are back by now, but the block holds, with the time left.
    const held = await fetch(request(), env, ctx);
    expect(held.status).toBe(429);
    expect(held.headers.get('Retry-After')).toBe('180');
    expect((await limiter('198.51.100.190').blocked()).keys).toEqual([{ key: 'login', blocked_for_ms: 180_000 }]);
    at(300_000);
    expect((await fetch(request(), env, ctx)).status).toBe(200);
  });
});
