// Concurrency limits (docs/SPEC.md, section 12) on both classes of the Node entry: acquire,
// release and gateStatus, the exact errors of bad input (which change nothing), expiry by
// the object's clock, and a durable object's permits through an eviction.
import { describe, expect, it, vi } from 'vitest';
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimitGatePolicy } from '@delightstack/rate-limiter';
import type { Ctx } from './support';
import { newServer, SECOND, T0, thrown } from './support';

const TWO: RateLimitGatePolicy = { max_in_flight: 2, ttl_seconds: 30 };

describe('acquire and release', () => {
  it('admit up to max_in_flight; a release frees its slot once; gateStatus changes nothing', () => {
    const server = newServer();
    const a = server.acquire('gen', 1, TWO);
    const b = server.acquire('gen', undefined, TWO);
    expect(a).toEqual({ allowed: true, id: a.id, in_flight: 1, limit: 2, ttl_ms: 30_000, retry_after_ms: 0 });
    expect(b.in_flight).toBe(2);
    expect(Number.isSafeInteger(a.id)).toBe(true);
    expect(a.id).not.toBe(b.id);
    vi.setSystemTime(T0 + 10 * SECOND);
    expect(server.acquire('gen', 1, TWO)).toEqual({
      allowed: false,
      id: null,
      in_flight: 2,
      limit: 2,
      ttl_ms: 0,
      retry_after_ms: 20_000,
    });
    expect(server.gateStatus('gen')).toEqual({ in_flight: 2, permits: 2 });
    expect(server.release('gen', a.id!)).toEqual({ released: true, in_flight: 1 });
    expect(server.release('gen', a.id!)).toEqual({ released: false, in_flight: 1 });
    expect(server.acquire('gen', 1, TWO).allowed).toBe(true);
  });

  it('a permit never released frees its slot at its expiry, by the object clock', () => {
    const server = newServer();
    const held = server.acquire('gen', 2, TWO);
    vi.setSystemTime(T0 + 30 * SECOND - 1);
    expect(server.acquire('gen', 1, TWO).allowed).toBe(false);
    vi.setSystemTime(T0 + 30 * SECOND);
    expect(server.acquire('gen', 1, TWO).allowed).toBe(true);
    expect(server.release('gen', held.id!).released).toBe(false);
  });

  it('a cost above max_in_flight can never pass: retry_after_ms null', () => {
    const server = newServer();
    expect(server.acquire('gen', 3, TWO)).toMatchObject({ allowed: false, retry_after_ms: null, in_flight: 0 });
  });

  it('gates and buckets of one key never touch', () => {
    const server = newServer();
    server.acquire('k', 2, TWO);
    expect(server.getStatus('k').remaining).toBe(10);
    server.reset('k');
    expect(server.gateStatus('k')).toEqual({ in_flight: 2, permits: 1 });
  });

  it('bad input is a TypeError or RangeError naming the field and value, and changes nothing', () => {
    const server = newServer();
    const held = server.acquire('k', 1, TWO);
    const cases: [() => unknown, string, string][] = [
      [() => server.acquire('k', 0, TWO), 'RangeError', 'cost must be a whole number from 1 to 9007199254740991, got 0'],
      [() => server.acquire('k', 1.5, TWO), 'RangeError', 'cost must be a whole number from 1 to 9007199254740991, got 1.5'],
      [() => server.acquire('k', '1' as never, TWO), 'TypeError', 'cost must be a number, got string "1"'],
      [() => server.acquire('k', 1, undefined as never), 'TypeError', 'policy must be an object, got undefined'],
      [() => server.acquire('k', 1, {} as never), 'TypeError', 'policy.max_in_flight must be a number, got undefined'],
      [() => server.acquire('k', 1, { max_in_flight: 0 }), 'RangeError', 'policy.max_in_flight must be a whole number from 1 to 9007199254740991, got 0'],
      [() => server.acquire('k', 1, { max_in_flight: NaN }), 'RangeError', 'policy.max_in_flight must be a whole number from 1 to 9007199254740991, got NaN'],
      [() => server.acquire('k', 1, { max_in_flight: 2, ttl_seconds: Infinity }), 'RangeError', 'policy.ttl_seconds must be a finite number > 0 and at most 86400, got Infinity'],
      [() => server.acquire('k', 1, { max_in_flight: 2, ttl_seconds: 0 }), 'RangeError', 'policy.ttl_seconds must be a finite number > 0 and at most 86400, got 0'],
      [() => server.acquire('k', 1, { max_in_flight: 2, ttl: 5 } as never), 'TypeError', 'policy has no field "ttl" (the fields are max_in_flight and ttl_seconds)'],
      [() => server.acquire(7 as never, 1, TWO), 'TypeError', 'key must be a string, got number 7'],
      [() => server.release('k', -1), 'RangeError', 'id must be a whole number from 0 to 9007199254740991, got -1'],
      [() => server.release('k', 2 ** 53), 'RangeError', 'id must be a whole number from 0 to 9007199254740991, got 9007199254740992'],
      [() => server.release('k', `${held.id}` as never), 'TypeError', `id must be a number, got string "${held.id}"`],
      [() => server.release('k', undefined as never), 'TypeError', 'id must be a number, got undefined'],
    ];
    for (const [call, kind, message] of cases) {
      const error = thrown(call);
      expect(error.name, message).toBe(kind);
      expect(error.message).toBe(message);
    }
    expect(server.gateStatus('k')).toEqual({ in_flight: 1, permits: 1 });
    expect(server.release('k', held.id!).released).toBe(true);
  });
});

describe('limitAll with a permit', () => {
  const RATE = { max_tokens: 2, refill_every_seconds: 60 };
  for (const Server of [RateLimiterServer, DurableRateLimiterServer]) {
    it(`${Server.name}: the permit and the buckets are all or nothing in one call`, () => {
      const server = new Server({} as Ctx, {});
      const call = () => server.limitAll([{ key: 'api', policy: RATE }], { key: 'gen', policy: { max_in_flight: 1 } });
      const first = call();
      expect(first.allowed).toBe(true);
      expect(first.permit).toMatchObject({ allowed: true, in_flight: 1, limit: 1, ttl_ms: 60_000 });
      // The gate is full: the bucket, which had room, gives nothing.
      const second = call();
      expect([second.allowed, second.results[0].allowed, second.permit!.allowed, second.permit!.id]).toEqual([false, true, false, null]);
      expect(second.retry_after_ms).toBe(60_000);
      expect(server.getStatus('api').remaining).toBe(1);
      expect(server.release('gen', first.permit!.id!).released).toBe(true);
      const third = call();
      expect(third.allowed).toBe(true);
      server.release('gen', third.permit!.id!);
      // The bucket is empty: the gate had room, and grants nothing.
      const fourth = call();
      expect([fourth.allowed, fourth.results[0].allowed, fourth.permit!.allowed, fourth.permit!.id]).toEqual([false, false, true, null]);
      expect(server.gateStatus('gen')).toEqual({ in_flight: 0, permits: 0 });
      expect(thrown(() => server.limitAll([{ key: 'api' }], { key: 'gen', policy: { max_in_flight: 0 } })).message).toBe(
        'permit.policy.max_in_flight must be a whole number from 1 to 9007199254740991, got 0',
      );
      expect(thrown(() => server.limitAll([{ key: 'api' }], { key: 'gen', policy: { max_in_flight: 1 }, colour: 1 } as never)).message).toBe(
        'permit has no field "colour" (the fields are key, cost and policy)',
      );
    });
  }
});

describe('DurableRateLimiterServer gates', () => {
  it('a new server on the same ctx holds the same live permits, releasable by their ids', () => {
    const ctx = {} as Ctx;
    const first = new DurableRateLimiterServer(ctx, {});
    const a = first.acquire('gen', 1, TWO);
    first.acquire('gen', 1, TWO);
    vi.setSystemTime(T0 + SECOND);

    const second = new DurableRateLimiterServer(ctx, {});
    expect(second.gateStatus('gen')).toEqual({ in_flight: 2, permits: 2 });
    expect(second.acquire('gen', 1, TWO).allowed).toBe(false);
    expect(second.release('gen', a.id!).released).toBe(true);

    const third = new DurableRateLimiterServer(ctx, {});
    const c = third.acquire('gen', 1, TWO);
    expect(c).toMatchObject({ allowed: true, in_flight: 2 });
    expect(third.release('gen', a.id!).released).toBe(false);
    // Expired by the object's clock while nobody held the object in memory.
    vi.setSystemTime(T0 + SECOND + 30 * SECOND);
    expect(new DurableRateLimiterServer(ctx, {}).gateStatus('gen')).toEqual({ in_flight: 0, permits: 0 });
  });

  it('the in-memory class on the same ctx starts with no permits: the difference between the two', () => {
    const ctx = {} as Ctx;
    new RateLimiterServer(ctx, {}).acquire('gen', 2, TWO);
    expect(new RateLimiterServer(ctx, {}).gateStatus('gen')).toEqual({ in_flight: 0, permits: 0 });
  });
});
