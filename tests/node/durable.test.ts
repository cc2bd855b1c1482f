// DurableRateLimiterServer from the Node entry, as a consumer's unit tests use it: where
// `cloudflare:workers` is unavailable and ctx has no storage, it keeps its copy in memory,
// one per ctx object, so a new server on the same ctx plays the object after an eviction.
import { describe, expect, it, vi } from 'vitest';
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import type { Ctx } from './support';
import { SECOND, status, T0, thrown } from './support';

describe('DurableRateLimiterServer in Node', () => {
  it('is a RateLimiterServer with the same answers', () => {
    const server = new DurableRateLimiterServer({} as Ctx, {});
    expect(server).toBeInstanceOf(RateLimiterServer);
    expect(server.consume('k', 4)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(6, 10, 10_000));
    expect(thrown(() => server.consume('k', -1))).toBeInstanceOf(RangeError);
  });

  it('a new server on the same ctx finds buckets, options and policies as they were', () => {
    const ctx = {} as Ctx;
    const first = new DurableRateLimiterServer(ctx, {});
    first.setOptions({ max_tokens: 5, refill_every_seconds: 300 });
    expect(first.consume('login:alice', 3)).toBe(true);
    expect(first.limit('upload:bob', 40, { max_tokens: 100 })).toMatchObject({ allowed: true, remaining: 60 });
    vi.setSystemTime(T0 + 100 * SECOND);

    const second = new DurableRateLimiterServer(ctx, {});
    expect(second.getStatus('login:alice')).toEqual(status(2, 5, 200_000));
    expect(second.getStatus('upload:bob')).toEqual(status(60, 100, 200_000));
    expect(second.getStatus('untouched')).toEqual(status(5, 5, 0));
    expect(second.consume('login:alice', 3)).toBe(false);

    // Another ctx is another Durable Object.
    expect(new DurableRateLimiterServer({} as Ctx, {}).getStatus('login:alice')).toEqual(status(10, 10, 0));
  });

  it('the in-memory class on the same ctx starts empty: the difference between the two', () => {
    const ctx = {} as Ctx;
    const memory = new RateLimiterServer(ctx, {});
    expect(memory.consume('k', 10)).toBe(true);
    expect(new RateLimiterServer(ctx, {}).getStatus('k')).toEqual(status(10, 10, 0));
  });
});
