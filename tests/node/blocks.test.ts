// Blocks (docs/SPEC.md, section 13) on both classes of the Node entry: block, unblock and the
// paginated list of blocked keys, every call on a blocked key denied with the exact time
// left, reset lifting no block, the exact errors of bad input, and a durable object's blocks
// through an eviction.
import { describe, expect, it, vi } from 'vitest';
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import type { Ctx } from './support';
import { SECOND, T0, thrown } from './support';

for (const Server of [RateLimiterServer, DurableRateLimiterServer]) {
  describe(`${Server.name}: blocks`, () => {
    it('a blocked key is denied every call, with the time left, until the block ends; reset lifts none', () => {
      const server = new Server({} as Ctx, {});
      expect(server.consume('k', 2)).toBe(true);
      server.block('k', 30);
      vi.setSystemTime(T0 + 10 * SECOND);
      expect(server.consume('k')).toBe(false);
      expect(server.check('k')).toBe(false);
      expect(server.limit('k', 1)).toMatchObject({ allowed: false, retry_after_ms: 20_000, remaining: 9 });
      expect(server.limitAll([{ key: 'other' }, { key: 'k' }])).toMatchObject({ allowed: false, retry_after_ms: 20_000 });
      expect(server.limitLeased('k', 1, undefined, { want: 5 })).toMatchObject({ allowed: false, lease: null });
      server.reset('k');
      expect(server.consume('k')).toBe(false);
      vi.setSystemTime(T0 + 30 * SECOND);
      expect(server.limit('k', 1)).toMatchObject({ allowed: true, remaining: 9 });
    });

    it('unblock ends a block at once; blocked() lists the keys blocked now, in key order, a page at a time', () => {
      const server = new Server({} as Ctx, {});
      for (const key of ['carol', 'alice', 'bob', 'dave']) server.block(key, 60);
      server.block('short', 1);
      vi.setSystemTime(T0 + 2 * SECOND);
      expect(server.unblock('dave')).toBe(true);
      expect(server.unblock('dave')).toBe(false);
      expect(server.consume('dave')).toBe(true);
      const first = server.blocked({ limit: 2 });
      expect(first).toEqual({
        keys: [
          { key: 'alice', blocked_for_ms: 58_000 },
          { key: 'bob', blocked_for_ms: 58_000 },
        ],
        next: 'bob',
      });
      expect(server.blocked({ limit: 2, after: first.next! })).toEqual({ keys: [{ key: 'carol', blocked_for_ms: 58_000 }], next: null });
      expect(server.blocked().keys.map((b) => b.key)).toEqual(['alice', 'bob', 'carol']);
    });

    it('bad input is a TypeError or RangeError naming the field and value, and changes nothing', () => {
      const server = new Server({} as Ctx, {});
      server.block('k', 5);
      const cases: [() => unknown, string, string][] = [
        [() => server.block('k', 0), 'RangeError', 'seconds must be a finite number > 0 and at most 31536000, got 0'],
        [() => server.block('k', Infinity), 'RangeError', 'seconds must be a finite number > 0 and at most 31536000, got Infinity'],
        [() => server.block('k', NaN), 'RangeError', 'seconds must be a finite number > 0 and at most 31536000, got NaN'],
        [() => server.block('k', '5' as never), 'TypeError', 'seconds must be a number, got string "5"'],
        [() => server.block(5 as never, 5), 'TypeError', 'key must be a string, got number 5'],
        [() => server.unblock(undefined as never), 'TypeError', 'key must be a string, got undefined'],
        [() => server.blocked({ limit: 0 }), 'RangeError', 'options.limit must be a whole number from 1 to 1000, got 0'],
        [() => server.blocked({ limit: 2.5 }), 'RangeError', 'options.limit must be a whole number from 1 to 1000, got 2.5'],
        [() => server.blocked({ after: 3 } as never), 'TypeError', 'options.after must be a string, got number'],
        [() => server.blocked({ page: 1 } as never), 'TypeError', 'options has no field "page" (the fields are limit and after)'],
      ];
      for (const [call, kind, message] of cases) {
        const error = thrown(call);
        expect(error.name, message).toBe(kind);
        expect(error.message).toBe(message);
      }
      expect(server.blocked().keys).toEqual([{ key: 'k', blocked_for_ms: 5_000 }]);
    });
  });
}

describe('DurableRateLimiterServer blocks through an eviction', () => {
  it('a new server on the same ctx is blocked as the old one was; an unblock is kept too', () => {
    const ctx = {} as Ctx;
    const first = new DurableRateLimiterServer(ctx, {});
    first.block('mallory', 600);
    first.block('eve', 600);
    first.unblock('eve');
    vi.setSystemTime(T0 + 100 * SECOND);
    const second = new DurableRateLimiterServer(ctx, {});
    expect(second.consume('mallory')).toBe(false);
    expect(second.limit('mallory', 1)).toMatchObject({ retry_after_ms: 500_000 });
    expect(second.consume('eve')).toBe(true);
    expect(second.blocked()).toEqual({ keys: [{ key: 'mallory', blocked_for_ms: 500_000 }], next: null });
    // The in-memory class forgets its blocks with its memory.
    const memory = new RateLimiterServer(ctx, {});
    memory.block('mallory', 600);
    expect(new RateLimiterServer(ctx, {}).consume('mallory')).toBe(true);
  });
});

describe('a penalty: block_seconds in a policy', () => {
  const LOGIN = { max_tokens: 3, refill_every_seconds: 60, block_seconds: 900 };
  for (const Server of [RateLimiterServer, DurableRateLimiterServer]) {
    it(`${Server.name}: the denial that goes over blocks the key, and says so; a denial during the block extends nothing`, () => {
      const ctx = {} as Ctx;
      const server = new Server(ctx, {});
      for (let i = 0; i < 3; i++) expect(server.limit('login:alice', 1, LOGIN).allowed).toBe(true);
      expect(server.limit('login:alice', 1, LOGIN)).toMatchObject({ allowed: false, retry_after_ms: 900_000 });
      vi.setSystemTime(T0 + 300 * SECOND);
      // The bucket has refilled 5 tokens' worth by now: the block alone denies.
      expect(server.limit('login:alice', 1, LOGIN)).toMatchObject({ allowed: false, retry_after_ms: 600_000 });
      expect(server.blocked().keys).toEqual([{ key: 'login:alice', blocked_for_ms: 600_000 }]);
      if (Server === DurableRateLimiterServer) {
        expect(new DurableRateLimiterServer(ctx, {}).limit('login:alice', 1, LOGIN)).toMatchObject({ retry_after_ms: 600_000 });
      }
      vi.setSystemTime(T0 + 900 * SECOND);
      expect(server.limit('login:alice', 1, LOGIN).allowed).toBe(true);
      // limitAll: only an enforced member without room is penalized.
      const all = server.limitAll([
        { key: 'second', policy: { max_tokens: 1, refill_every_seconds: 1 } },
        { key: 'daily', policy: { max_tokens: 1, refill_every_seconds: 86_400, block_seconds: 3_600 } },
      ]);
      expect(all.allowed).toBe(true);
      const over = server.limitAll([
        { key: 'second', policy: { max_tokens: 1, refill_every_seconds: 1 } },
        { key: 'daily', policy: { max_tokens: 1, refill_every_seconds: 86_400, block_seconds: 3_600 } },
      ]);
      expect(over.allowed).toBe(false);
      expect(server.blocked().keys.map((b) => b.key)).toEqual(['daily']);
      expect(thrown(() => server.limit('k', 1, { block_seconds: 0 })).message).toBe(
        'policy.block_seconds must be a finite number > 0 and at most 31536000, got 0',
      );
      expect(thrown(() => server.setOptions({ block_seconds: 5 } as never)).message).toBe(
        'options has no field "block_seconds" (the fields are max_tokens and refill_every_seconds)',
      );
    });
  }
});
