// Concurrency limits (docs/SPEC.md, section 12) over native Durable Object RPC inside
// workerd, in both projects (the in-memory class and the durable one on SQLite): permits
// granted and released, concurrent acquires that never exceed max_in_flight, and hostile
// input that gets the package's exact error and changes nothing. The clock is faked.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection } from './support';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const GATE = { max_in_flight: 3, ttl_seconds: 20 };

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});
afterEach(() => {
  vi.useRealTimers();
});

describe('acquire and release over RPC', () => {
  it('grants up to max_in_flight, releases once, and frees a lost permit at its expiry', async () => {
    const stub = limiter('gates-basic');
    const permits = [];
    for (let i = 0; i < 4; i++) permits.push(await stub.acquire('gen', 1, GATE));
    expect(permits.map((p) => p.allowed)).toEqual([true, true, true, false]);
    expect(permits[3]).toEqual({ allowed: false, id: null, in_flight: 3, limit: 3, ttl_ms: 0, retry_after_ms: 20_000 });
    expect(await stub.release('gen', permits[0].id!)).toEqual({ released: true, in_flight: 2 });
    expect(await stub.release('gen', permits[0].id!)).toEqual({ released: false, in_flight: 2 });
    at(5_000);
    expect((await stub.acquire('gen', 1, GATE)).allowed).toBe(true);
    // The three of t=0 that nobody released have expired; the one of t=5 s has not.
    at(20_000);
    expect(await stub.gateStatus('gen')).toEqual({ in_flight: 1, permits: 1 });
  });

  it('200 concurrent acquires on a limit of 5 grant exactly 5', async () => {
    const stub = limiter('gates-concurrent');
    const all = await Promise.all(Array.from({ length: 200 }, () => stub.acquire('gen', 1, { max_in_flight: 5 })));
    expect(all.filter((p) => p.allowed)).toHaveLength(5);
    expect(new Set(all.filter((p) => p.allowed).map((p) => p.id)).size).toBe(5);
    expect(await stub.gateStatus('gen')).toEqual({ in_flight: 5, permits: 5 });
  });

  it('limitAll with a permit: one call, all or nothing; over RPC and after the object forgets', async () => {
    const stub = limiter('gates-limitall');
    const RATE = { max_tokens: 5, refill_every_seconds: 60 };
    const call = () => stub.limitAll([{ key: 'api', policy: RATE }], { key: 'gen', policy: { max_in_flight: 2 } });
    const [a, b, c] = [await call(), await call(), await call()];
    expect([a.allowed, b.allowed, c.allowed]).toEqual([true, true, false]);
    expect(c.permit).toEqual({ allowed: false, id: null, in_flight: 2, limit: 2, ttl_ms: 0, retry_after_ms: 60_000 });
    expect(c.results[0]).toMatchObject({ allowed: true, remaining: 3 });
    expect(await stub.release('gen', a.permit!.id!)).toEqual({ released: true, in_flight: 1 });
    expect((await call()).allowed).toBe(true);
    expect((await stub.getStatus('api')).remaining).toBe(2);
  });

  it('hostile input gets the exact TypeError or RangeError and changes nothing', async () => {
    const stub = limiter('gates-hostile');
    const held = await stub.acquire('gen', 1, GATE);
    const loose = stub as unknown as Record<'acquire' | 'release', (...args: unknown[]) => Promise<unknown>>;
    const cases: [() => Promise<unknown>, string, string][] = [
      [() => loose.acquire('gen', NaN, GATE), 'RangeError', 'cost must be a whole number from 1 to 9007199254740991, got NaN'],
      [() => loose.acquire('gen', -1, GATE), 'RangeError', 'cost must be a whole number from 1 to 9007199254740991, got -1'],
      [() => loose.acquire('gen', 1, { max_in_flight: 3, ttl_seconds: 1e9 }), 'RangeError', 'policy.ttl_seconds must be a finite number > 0 and at most 86400, got 1000000000'],
      [() => loose.acquire('gen', 1, { max_in_flight: '3' }), 'TypeError', 'policy.max_in_flight must be a number, got string "3"'],
      [() => loose.acquire('gen', 1, null), 'TypeError', 'policy must be an object, got null'],
      [() => loose.acquire('gen', 1, [3]), 'TypeError', 'policy must be an object, got an array'],
      [() => loose.acquire({ key: 'gen' }, 1, GATE), 'TypeError', 'key must be a string, got an object'],
      [() => loose.release('gen', 1e300), 'RangeError', 'id must be a whole number from 0 to 9007199254740991, got 1e+300'],
      [() => loose.release('gen', 0.5), 'RangeError', 'id must be a whole number from 0 to 9007199254740991, got 0.5'],
      [() => loose.release('gen', null), 'TypeError', 'id must be a number, got null'],
      [() => loose.release('gen', BigInt(held.id!)), 'TypeError', `id must be a number, got bigint ${held.id}n`],
    ];
    const got = [];
    for (const [call, kind, message] of cases) {
      const error = await rejection(call());
      got.push([error?.name, error?.message]);
      expect(error?.name, message).toBe(kind);
    }
    expect(got).toEqual(cases.map(([, kind, message]) => [kind, message]));
    expect(await stub.gateStatus('gen')).toEqual({ in_flight: 1, permits: 1 });
    // Lone surrogates are keys of their own, as for buckets.
    expect((await stub.acquire('\uD800', 1, { max_in_flight: 1 })).allowed).toBe(true);
    expect((await stub.acquire('\uDC00', 1, { max_in_flight: 1 })).allowed).toBe(true);
    expect((await stub.acquire('\uFFFD', 1, { max_in_flight: 1 })).allowed).toBe(true);
  });
});
