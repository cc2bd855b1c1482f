// Limiters of servers nobody uses any more (docs/SPEC.md, section 5). With finalizers, each
// is freed with its server. Without them (compatibility dates before 2025-05-05, the suite's
// `no-finalizers` run), each new limiter frees those of others that hold nothing, and a
// server whose limiter was freed answers as if nothing happened.
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import { liveLimiters } from '#installed-limiter';
import { describe, expect, it, vi } from 'vitest';
import type { Ctx } from './support';
import { SECOND, status } from './support';

const sweeping = !('FinalizationRegistry' in globalThis);

/** `n` servers, each with a bucket that is not full (10 tokens, one back per 10 s). */
function busyServers(n: number): void {
  for (let i = 0; i < n; i++) expect(new RateLimiterServer({} as Ctx, {}).consume('k')).toBe(true);
}

describe.runIf(!sweeping)('with FinalizationRegistry', () => {
  it('keeps no list of limiters: the finalizers free them', () => {
    busyServers(10);
    expect(liveLimiters()).toBeUndefined();
  });
});

describe.runIf(sweeping)('without FinalizationRegistry', () => {
  it('frees the limiters of servers that are gone once they hold nothing, and no others', () => {
    const before = liveLimiters()!;
    busyServers(1_000);
    // Every bucket still refills: nothing could be freed.
    expect(liveLimiters()).toBe(before + 1_000);
    let most = 0;
    for (let round = 0; round < 20; round++) {
      vi.advanceTimersByTime(10 * SECOND); // the last round's buckets are full again
      busyServers(1_000);
      most = Math.max(most, liveLimiters()!);
    }
    // 21,000 servers made: memory holds the last round's and what is left of the one before.
    expect(most).toBeLessThanOrEqual(before + 2_000);
    expect(liveLimiters()).toBeGreaterThanOrEqual(1_000);
  });

  it('a server whose limiter was freed keeps its options and answers as before', () => {
    const server = new RateLimiterServer({} as Ctx, {});
    server.setOptions({ max_tokens: 3, refill_every_seconds: 1 });
    expect(server.limit('k', 3).allowed).toBe(true);
    expect(server.consume('k')).toBe(false);
    vi.advanceTimersByTime(3 * SECOND);
    const before = liveLimiters()!;
    busyServers(before); // inspects every limiter alive, this one included
    expect(liveLimiters()).toBeLessThan(2 * before);
    expect(server.getStatus('k')).toEqual(status(3, 3, 0));
    expect(server.limit('k', 2)).toMatchObject({ allowed: true, remaining: 1, limit: 3, reset_in_ms: 1_000 });
  });

  it('keeps a limiter while a block, a permit or a lease is in force', () => {
    const blocked = new DurableRateLimiterServer({} as Ctx, {});
    blocked.block('login', 60);
    const gated = new RateLimiterServer({} as Ctx, {});
    const permit = gated.acquire('generate', 1, { max_in_flight: 1, ttl_seconds: 60 });
    expect(permit.allowed).toBe(true);
    const leased = new RateLimiterServer({} as Ctx, {});
    const granted = leased.limitLeased('api', 0, undefined, { want: 4 });
    expect(granted.lease?.tokens).toBeGreaterThan(0);

    vi.advanceTimersByTime(5 * SECOND); // the lease is out, never settled: its tokens stay gone
    busyServers(2 * liveLimiters()!);
    expect(leased.getStatus('api').remaining).toBe(10 - granted.lease!.tokens);

    vi.advanceTimersByTime(54 * SECOND); // every bucket full again; the block and permit still in force
    busyServers(2 * liveLimiters()!);
    expect(blocked.limit('login')).toMatchObject({ allowed: false });
    expect(gated.acquire('generate', 1, { max_in_flight: 1, ttl_seconds: 60 }).allowed).toBe(false);

    vi.advanceTimersByTime(1 * SECOND);
    busyServers(2 * liveLimiters()!);
    expect(blocked.limit('login').allowed).toBe(true);
    expect(gated.acquire('generate', 1, { max_in_flight: 1, ttl_seconds: 60 }).allowed).toBe(true);
  });
});
