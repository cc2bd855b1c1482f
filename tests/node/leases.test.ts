// Leases over the node entry (limitLeased, settle, refund) on both classes: a grant is at
// most half of what the bucket has left, leased tokens count as still in the bucket for
// refill until settled or expired, settle gives the unused part back, an expired lease counts
// as fully used, refund gives tokens back up to capacity, bad input changes nothing, and the
// durable class keeps leases across a new instance on the same ctx (an eviction). Fake time.
import { describe, expect, it, vi } from 'vitest';
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimiterOptions } from '@delightstack/rate-limiter';
import type { Ctx } from './support';
import { SECOND, status, T0, thrown } from './support';

const at = (ms: number) => vi.setSystemTime(T0 + ms);
const HOUR = 3600 * SECOND;
// 10 tokens, one back every hour: nothing refills during a test unless it waits hours.
const SLOW: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 3600 };

const CLASSES = [
  ['RateLimiterServer', RateLimiterServer],
  ['DurableRateLimiterServer', DurableRateLimiterServer],
] as const;

describe.each(CLASSES)('%s', (_, Server) => {
  const fresh = () => new Server({} as Ctx, {});

  it('a grant is at most half of what is left after the cost; what is not asked for is not granted', () => {
    const server = fresh();
    const first = server.limitLeased('k', 2, SLOW, { want: 100 });
    // 10 - 2 = 8 left: half of it is leased, 4 stay.
    expect(first).toMatchObject({ allowed: true, remaining: 4, limit: 10, retry_after_ms: 0 });
    expect(first.lease).toEqual({ id: expect.any(Number), tokens: 4, ttl_ms: 10_000 });
    expect(server.getStatus('k')).toEqual(status(4, 10, HOUR));
    // Less than half wanted: exactly the want.
    const second = server.limitLeased('k', 1, SLOW, { want: 1 });
    expect(second.lease?.tokens).toBe(1);
    expect(server.getStatus('k').remaining).toBe(2);
    // Fractional halves (the bucket counts billionths): 2 - 1 = 1 left, 0.5 leased.
    const third = server.limitLeased('k', 1, SLOW, { want: 5 });
    expect(third.lease?.tokens).toBe(0.5);
    expect(server.getStatus('k').remaining).toBe(0.5);
    // Lease ids are distinct.
    expect(new Set([first.lease!.id, second.lease!.id, third.lease!.id]).size).toBe(3);
  });

  it('no lease without a want, on a denial, or on a bucket too empty to halve', () => {
    const server = fresh();
    expect(server.limitLeased('k', 1, SLOW).lease).toBeNull();
    expect(server.limitLeased('k', 1, SLOW, {}).lease).toBeNull();
    expect(server.limitLeased('k', 1, SLOW, { want: 0 }).lease).toBeNull();
    expect(server.limitLeased('k', 7, SLOW, { want: 5 })).toMatchObject({ allowed: true, remaining: 0, lease: null });
    const denied = server.limitLeased('k', 1, SLOW, { want: 5 });
    expect(denied).toMatchObject({ allowed: false, remaining: 0, lease: null, retry_after_ms: HOUR });
    // A cost above the capacity: null wait, no lease.
    expect(server.limitLeased('other', 11, SLOW, { want: 5 })).toMatchObject({
      allowed: false,
      retry_after_ms: null,
      lease: null,
    });
  });

  it('limitLeased without a lease request answers like limit on a twin server', () => {
    const server = fresh();
    const twin = fresh();
    for (const [ms, cost] of [[0, 3], [10, 4], [20, 4], [HOUR + 5, 2], [HOUR + 6, 0.5]] as const) {
      at(ms);
      const { lease, ...decision } = server.limitLeased('k', cost, SLOW, { want: 0 });
      expect(lease).toBeNull();
      expect(decision).toEqual(twin.limit('k', cost, SLOW));
    }
  });

  // With leases out, reset_in_ms is still the time to the next token, not to one in the bucket.
  it('the decision that grants a lease reports the reset_in_ms of getStatus (rule 2.8)', () => {
    const server = fresh();
    const decision = server.limitLeased('k', 1, SLOW, { want: 4 });
    expect(decision.lease?.tokens).toBe(4);
    // Next token in an hour, as getStatus and limit() say.
    expect(server.getStatus('k').reset_in_ms).toBe(HOUR);
    expect(fresh().limit('k', 1, SLOW).reset_in_ms).toBe(HOUR);
    expect(decision.reset_in_ms).toBe(HOUR);
  });

  it('settle gives the unused tokens back, once', () => {
    const server = fresh();
    const { lease } = server.limitLeased('k', 1, SLOW, { want: 4 });
    expect(server.getStatus('k').remaining).toBe(5);
    at(5 * SECOND);
    expect(server.settle('k', { id: lease!.id, used: 1.5 })).toBe(true);
    expect(server.getStatus('k')).toEqual(status(7.5, 10, HOUR - 5 * SECOND));
    // Settled already: false, nothing changes.
    expect(server.settle('k', { id: lease!.id, used: 0 })).toBe(false);
    expect(server.getStatus('k').remaining).toBe(7.5);
  });

  it('settle: unknown ids, another key, or used above the lease', () => {
    const server = fresh();
    const { lease } = server.limitLeased('k', 1, SLOW, { want: 4 });
    expect(server.settle('k', { id: lease!.id + 1, used: 0 })).toBe(false);
    expect(server.settle('other', { id: lease!.id, used: 0 })).toBe(false);
    expect(server.getStatus('other')).toEqual(status(10, 10, 0));
    expect(server.getStatus('k').remaining).toBe(5);
    // Used more than leased: the whole lease counts as used, nothing comes back.
    expect(server.settle('k', { id: lease!.id, used: 99 })).toBe(true);
    expect(server.getStatus('k').remaining).toBe(5);
  });

  it('a settle that frees every token makes the bucket full again', () => {
    const server = fresh();
    const { lease } = server.limitLeased('k', 0, SLOW, { want: 3 });
    expect(lease?.tokens).toBe(3);
    // Full with its leased tokens: the next token waits for the lease, an interval after it ends.
    expect(server.getStatus('k')).toEqual(status(7, 10, 10_000 + HOUR));
    expect(server.settle('k', { id: lease!.id, used: 0 })).toBe(true);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
  });

  it('an expired lease counts as fully used: settle is false from its 10th second', () => {
    const server = fresh();
    const a = server.limitLeased('a', 1, SLOW, { want: 4 }).lease!;
    const b = server.limitLeased('b', 1, SLOW, { want: 4 }).lease!;
    at(9_999);
    expect(server.settle('a', { id: a.id, used: 0 })).toBe(true);
    expect(server.getStatus('a').remaining).toBe(9);
    at(10_000);
    expect(server.settle('b', { id: b.id, used: 0 })).toBe(false);
    expect(server.getStatus('b').remaining).toBe(5);
    // limitLeased settling an expired lease: nothing comes back either.
    const c = server.limitLeased('c', 1, SLOW, { want: 4 }).lease!;
    at(20_000);
    const next = server.limitLeased('c', 1, SLOW, { settle: { id: c.id, used: 0 } });
    expect(next).toMatchObject({ allowed: true, remaining: 4, lease: null });
  });

  it('leased tokens count as in the bucket for refill: a bucket at capacity with them banks nothing', () => {
    const fast: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 1 };
    const server = fresh();
    server.limitLeased('k', 4, fast, { want: 0 }); // 6 left, refilling from T0
    const { lease } = server.limitLeased('k', 0, fast, { want: 2 });
    expect(lease?.tokens).toBe(2);
    expect(server.getStatus('k').remaining).toBe(4);
    // Refill stops at 8 in the bucket + 2 leased = 10 (reached at 4 s; the lease lives 10 s).
    at(4 * SECOND);
    expect(server.getStatus('k').remaining).toBe(8);
    at(9 * SECOND);
    expect(server.getStatus('k').remaining).toBe(8);
    expect(server.settle('k', { id: lease!.id, used: 2 })).toBe(true);
    // Nothing banked while at capacity with the lease: 8 now, the next token a whole interval later.
    expect(server.getStatus('k')).toEqual(status(8, 10, SECOND));
    at(9 * SECOND + 999);
    expect(server.getStatus('k').remaining).toBe(8);
    at(10 * SECOND);
    expect(server.getStatus('k').remaining).toBe(9);
  });

  it('refund gives tokens back up to the capacity, leased tokens included', () => {
    const server = fresh();
    server.limit('k', 6, SLOW);
    server.refund('k', 2.5);
    expect(server.getStatus('k')).toEqual(status(6.5, 10, HOUR));
    server.refund('k', 100);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    // With 3 tokens out on a lease, the bucket holds at most 7.
    server.limit('j', 2, SLOW);
    const { lease } = server.limitLeased('j', 1, SLOW, { want: 3 });
    expect(server.getStatus('j').remaining).toBe(4);
    server.refund('j', 100);
    expect(server.getStatus('j').remaining).toBe(7);
    expect(server.settle('j', { id: lease!.id, used: 0 })).toBe(true);
    expect(server.getStatus('j').remaining).toBe(10);
    // On a full or unknown bucket: nothing to do.
    server.refund('unknown', 5);
    expect(server.getStatus('unknown')).toEqual(status(10, 10, 0));
  });

  it('refund of 0 and of a fractional part', () => {
    const server = fresh();
    server.limit('k', 5, SLOW);
    server.refund('k', 0);
    expect(server.getStatus('k').remaining).toBe(5);
    server.refund('k', 0.1);
    server.refund('k', 0.2);
    expect(server.getStatus('k').remaining).toBeCloseTo(5.3, 12);
  });

  it('reset forgets leases: settling one afterwards is false and mints nothing', () => {
    const server = fresh();
    const { lease } = server.limitLeased('k', 1, SLOW, { want: 4 });
    server.reset('k');
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    server.limit('k', 5, SLOW);
    expect(server.settle('k', { id: lease!.id, used: 0 })).toBe(false);
    expect(server.getStatus('k').remaining).toBe(5);
  });

  it('at most 1,024 leases per key: further calls are served without one', () => {
    const server = fresh();
    const big: RateLimiterOptions = { max_tokens: 1_000_000, refill_every_seconds: 3600 };
    const granted = Array.from({ length: 1_024 }, () => server.limitLeased('k', 1, big, { want: 1 }).lease);
    expect(granted.every((l) => l !== null && l.tokens === 1)).toBe(true);
    expect(server.limitLeased('k', 1, big, { want: 1 })).toMatchObject({ allowed: true, lease: null });
    // Settling one makes room again.
    const next = server.limitLeased('k', 1, big, { want: 1, settle: { id: granted[0]!.id, used: 1 } });
    expect(next.lease?.tokens).toBe(1);
  });

  it('whole-token buckets (capacity above 18 446 744 073) lease whole tokens', () => {
    const server = fresh();
    const huge: RateLimiterOptions = { max_tokens: 2 ** 40, refill_every_seconds: 1 };
    server.limit('k', 2 ** 40 - 5, huge);
    // 5 - 1 = 4 left: 2 leased.
    expect(server.limitLeased('k', 1, huge, { want: 10 }).lease?.tokens).toBe(2);
    // 2 left: 1; then 1 left: nothing (half a whole token is none).
    expect(server.limitLeased('k', 0, huge, { want: 10 }).lease?.tokens).toBe(1);
    expect(server.limitLeased('k', 0, huge, { want: 10 }).lease).toBeNull();
  });

  describe('bad input throws the error naming the field and changes nothing', () => {
    const CASES: [string, unknown, 'TypeError' | 'RangeError', string][] = [
      ['want not a number', { want: '3' }, 'TypeError', 'lease.want must be a number, got string "3"'],
      ['want negative', { want: -1 }, 'RangeError', 'lease.want'],
      ['want NaN', { want: NaN }, 'RangeError', 'lease.want'],
      ['want Infinity', { want: Infinity }, 'RangeError', 'lease.want'],
      ['unknown field', { wants: 3 }, 'TypeError', 'lease has no field "wants"'],
      ['lease null', null, 'TypeError', 'lease must be an object'],
      ['lease a number', 3, 'TypeError', 'lease must be an object'],
      ['settle.id a string', { settle: { id: '1', used: 0 } }, 'TypeError', 'lease.settle.id'],
      ['settle.id fractional', { settle: { id: 1.5, used: 0 } }, 'RangeError', 'lease.settle.id'],
      ['settle.id negative', { settle: { id: -1, used: 0 } }, 'RangeError', 'lease.settle.id'],
      ['settle.used missing', { settle: { id: 1 } }, 'TypeError', 'lease.settle.used'],
      ['settle.used negative', { settle: { id: 1, used: -2 } }, 'RangeError', 'lease.settle.used'],
      ['settle unknown field', { settle: { id: 1, used: 0, extra: 1 } }, 'TypeError', 'lease.settle has no field "extra"'],
      ['settle not an object', { settle: 7 }, 'TypeError', 'lease.settle'],
    ];
    it.each(CASES)('%s', (_, lease, kind, message) => {
      const server = fresh();
      const held = server.limitLeased('k', 1, SLOW, { want: 4 }).lease!;
      const before = server.getStatus('k');
      const request = lease as { settle?: { id: number; used: number } };
      // Even with a valid settle alongside, the lease is not settled.
      const withSettle =
        typeof lease === 'object' && lease !== null && !('settle' in lease)
          ? { ...lease, settle: { id: held.id, used: 0 } }
          : request;
      for (const arg of [request, withSettle]) {
        const error = thrown(() => server.limitLeased('k', 1, SLOW, arg as never));
        expect(error.name).toBe(kind);
        expect(error.message).toContain(message);
        expect(server.getStatus('k')).toEqual(before);
      }
      // The lease is still live: it settles now.
      expect(server.settle('k', { id: held.id, used: 0 })).toBe(true);
      expect(server.getStatus('k').remaining).toBe(9);
    });

    it('a bad policy or cost with a valid settle settles nothing', () => {
      const server = fresh();
      const held = server.limitLeased('k', 1, SLOW, { want: 4 }).lease!;
      const settle = { id: held.id, used: 0 };
      const e1 = thrown(() => server.limitLeased('k', 1, { max_token: 3 } as never, { settle }));
      expect(e1).toBeInstanceOf(TypeError);
      expect(e1.message).toContain('policy');
      const e2 = thrown(() => server.limitLeased('k', -1, SLOW, { settle }));
      expect(e2).toBeInstanceOf(RangeError);
      expect(e2.message).toContain('cost');
      expect(server.getStatus('k').remaining).toBe(5);
      expect(server.settle('k', settle)).toBe(true);
    });

    it('settle: bad argument', () => {
      const server = fresh();
      server.limitLeased('k', 1, SLOW, { want: 4 });
      const before = server.getStatus('k');
      const cases: [unknown, 'TypeError' | 'RangeError', string][] = [
        [undefined, 'TypeError', 'lease must be an object'],
        [{ id: 1 }, 'TypeError', 'lease.used'],
        [{ used: 1 }, 'TypeError', 'lease.id'],
        [{ id: 1, used: -1 }, 'RangeError', 'lease.used'],
        [{ id: 1, used: 1, x: 1 }, 'TypeError', 'lease has no field "x"'],
      ];
      for (const [arg, kind, message] of cases) {
        const error = thrown(() => server.settle('k', arg as never));
        expect(error.name).toBe(kind);
        expect(error.message).toContain(message);
      }
      expect(thrown(() => server.settle(3 as never, { id: 1, used: 0 }))).toBeInstanceOf(TypeError);
      expect(server.getStatus('k')).toEqual(before);
    });

    it('refund: tokens validated like a cost, undefined included', () => {
      const server = fresh();
      server.limit('k', 5, SLOW);
      const before = server.getStatus('k');
      const cases: [unknown, 'TypeError' | 'RangeError'][] = [
        [undefined, 'TypeError'],
        [null, 'TypeError'],
        ['1', 'TypeError'],
        [-1, 'RangeError'],
        [NaN, 'RangeError'],
        [Infinity, 'RangeError'],
      ];
      for (const [tokens, kind] of cases) {
        const error = thrown(() => server.refund('k', tokens as never));
        expect(error.name, String(tokens)).toBe(kind);
        expect(error.message).toMatch(/^tokens /);
      }
      expect(thrown(() => server.refund(1 as never, 1))).toBeInstanceOf(TypeError);
      expect(server.getStatus('k')).toEqual(before);
    });
  });
});

describe('DurableRateLimiterServer: leases survive a new instance on the same ctx', () => {
  it('leased tokens stay out; settle on the new instance gives them back', () => {
    const ctx = {} as Ctx;
    const first = new DurableRateLimiterServer(ctx, {});
    const { lease } = first.limitLeased('k', 1, SLOW, { want: 4 });
    expect(first.getStatus('k').remaining).toBe(5);
    at(2 * SECOND);
    const second = new DurableRateLimiterServer(ctx, {});
    // An eviction does not mint the leased tokens.
    expect(second.getStatus('k')).toEqual(status(5, 10, HOUR - 2 * SECOND));
    expect(second.limit('k', 6, SLOW).allowed).toBe(false);
    expect(second.settle('k', { id: lease!.id, used: 1 })).toBe(true);
    expect(second.getStatus('k').remaining).toBe(8);
    // Settled is saved too.
    const third = new DurableRateLimiterServer(ctx, {});
    expect(third.getStatus('k').remaining).toBe(8);
    expect(third.settle('k', { id: lease!.id, used: 0 })).toBe(false);
  });

  it('a lease that expires while the object is away counts as used', () => {
    const ctx = {} as Ctx;
    const { lease } = new DurableRateLimiterServer(ctx, {}).limitLeased('k', 1, SLOW, { want: 4 });
    at(11 * SECOND);
    const later = new DurableRateLimiterServer(ctx, {});
    expect(later.settle('k', { id: lease!.id, used: 0 })).toBe(false);
    expect(later.getStatus('k').remaining).toBe(5);
  });

  // Restored with its leases, the bucket is kept even when it would be full without them:
  // otherwise it would read 10 while the holder still has 3 tokens, 13 on a bucket of 10.
  it('a bucket full but for its lease is kept until the lease ends: an eviction mints nothing', () => {
    const ctx = {} as Ctx;
    const fast: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 1 };
    const first = new DurableRateLimiterServer(ctx, {});
    const { lease } = first.limitLeased('k', 0, fast, { want: 3 });
    at(5 * SECOND);
    const second = new DurableRateLimiterServer(ctx, {});
    expect(second.getStatus('k').remaining).toBe(7);
    expect(second.settle('k', { id: lease!.id, used: 0 })).toBe(true);
    expect(second.getStatus('k')).toEqual(status(10, 10, 0));
  });

  it('refund is saved', () => {
    const ctx = {} as Ctx;
    const first = new DurableRateLimiterServer(ctx, {});
    first.limit('k', 6, SLOW);
    first.refund('k', 2);
    expect(new DurableRateLimiterServer(ctx, {}).getStatus('k').remaining).toBe(6);
  });
});
