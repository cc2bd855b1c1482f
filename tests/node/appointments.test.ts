// Appointments on a starved key (docs/SPEC.md, 11.11): the turns limitLeased hands out to a
// caller that asks for them, their validation, and LocalLimits keeping its turn, against the
// real RateLimiterServer of the node entry under fake timers (setup.ts). Nothing sleeps.
import { describe, expect, it, vi } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimiterOptions, RateLimitLeaseRequest } from '@delightstack/rate-limiter';
import { LocalLimits } from '@delightstack/rate-limiter/middleware';
import type { Ctx } from './support';
import { T0, thrown } from './support';

const at = (ms: number) => vi.setSystemTime(T0 + ms);
/** 10 tokens, one every 100 ms. */
const TEN: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 0.1 };
/** 10 tokens, one every 2 s: too slow for shares, so an isolate holds plain leases only. */
const SLOW: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 2 };

/**
 * A server whose bucket `k` (under `policy`) is empty at 0 ms, with `queued` callers already
 * in its queue.
 */
function starved(queued = 0, policy = TEN) {
  at(0);
  const server = new RateLimiterServer({} as Ctx, {});
  expect(server.limit('k', 10, policy).allowed).toBe(true);
  for (let i = 0; i < queued; i++) server.limitLeased('k', 1, policy, { want: 1, queue: true });
  return server;
}

/** A stub of `server` that records every lease request, answered after `delayMs` (0: at once). */
function recording(server: RateLimiterServer) {
  const requests: (RateLimitLeaseRequest | undefined)[] = [];
  let plainCalls = 0;
  const stub = {
    limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => {
      plainCalls += 1;
      return server.limit(key, cost, policy);
    },
    limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
      requests.push(lease);
      return server.limitLeased(key, cost, policy, lease);
    },
    settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
  };
  return { stub, requests, plainCalls: () => plainCalls };
}

describe('limitLeased with queue: appointments', () => {
  it('gives the callers of a starved key turns one token apart, and a denial waits for its turn', () => {
    const server = starved();
    const turns = [0, 1, 2].map(() => server.limitLeased('k', 1, TEN, { want: 1, queue: true }));
    expect(turns.map((d) => d.call_after_ms)).toEqual([100, 200, 300]);
    expect(turns.map((d) => d.retry_after_ms)).toEqual([100, 200, 300]);
    // A caller that asks for no appointments gets none and the bucket's own wait.
    const plain = server.limitLeased('k', 1, TEN, { want: 1 });
    expect('call_after_ms' in plain).toBe(false);
    expect(plain.retry_after_ms).toBe(100);
    // Far from the limit there is no queue.
    const roomy = new RateLimiterServer({} as Ctx, {}).limitLeased('k', 1, TEN, { want: 1, queue: true });
    expect('call_after_ms' in roomy).toBe(false);
  });

  it('rejects a queue that is not a boolean with the field named, and changes nothing', () => {
    const server = starved(2);
    for (const queue of ['yes', 1, null]) {
      const error = thrown(() => server.limitLeased('k', 1, TEN, { want: 1, queue } as unknown as RateLimitLeaseRequest));
      expect(error.name).toBe('TypeError');
      expect(error.message).toContain('lease.queue');
    }
    // The queue is where it was: the next caller's turn follows the two before it.
    expect(server.limitLeased('k', 1, TEN, { want: 1, queue: true }).call_after_ms).toBe(300);
  });
});

describe('LocalLimits keeps its turn', () => {
  it('denies here until its turn, without a call, then calls once and gets the tokens that came in', async () => {
    // Five callers before this isolate: turns at 2, 4, 6, 8 and 10 s.
    const server = starved(5, SLOW);
    const { stub, requests } = recording(server);
    const local = new LocalLimits({ clock: () => Date.now() });
    const owner = {};
    // Its first request takes the token of 2 s, and its turn is the next one: 12 s.
    at(2_000);
    expect((await local.limit(owner, 'o', stub, 'k', 1, SLOW)).allowed).toBe(true);
    // Requests every 50 ms (busy: its call at the turn asks for a lease).
    const denials: number[] = [];
    let calledAt = 0;
    for (let ms = 2_050; ms < 13_000 && calledAt === 0; ms += 50) {
      at(ms);
      const d = await local.limit(owner, 'o', stub, 'k', 1, SLOW);
      if (requests.length === 2) {
        calledAt = ms;
        // The tokens of the turns nobody came for: its request, and a lease of one more.
        expect(d).toMatchObject({ allowed: true, remaining: expect.any(Number) });
      } else {
        expect(d.allowed).toBe(false);
        denials.push(d.retry_after_ms!);
      }
    }
    expect(requests[0]).toEqual({ want: 0, queue: true });
    expect(requests[1]).toMatchObject({ want: 1, queue: true });
    expect(calledAt).toBe(12_000);
    // Every request before the turn was denied here, with the time left to it.
    expect(denials).toEqual(Array.from({ length: 199 }, (_, i) => 9_950 - 50 * i));
  });

  it('with a queue longer than its round trip, requests while its call is in flight are denied here, not called', async () => {
    // Twenty callers before it: turns two seconds out, far beyond a round trip.
    const server = starved(20);
    const recorded = recording(server);
    let release = () => {};
    const stub = {
      ...recorded.stub,
      limitLeased: (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        const answer = server.limitLeased(key, cost, policy, lease);
        return new Promise<typeof answer>((resolve) => (release = () => resolve(answer)));
      },
    };
    const local = new LocalLimits({ clock: () => Date.now() });
    const owner = {};
    const first = local.limit(owner, 'o', stub, 'k', 1, TEN);
    at(10);
    release();
    expect((await first).allowed).toBe(false);
    // Its turn, 2,100 ms after the call by the object's count, comes at 2,110 ms by its own:
    // the next request calls, and those while that call is out are denied here.
    at(2_110);
    const call = local.limit(owner, 'o', stub, 'k', 1, TEN);
    for (let ms = 2_120; ms < 2_200; ms += 10) {
      at(ms);
      expect((await local.limit(owner, 'o', stub, 'k', 1, TEN)).allowed).toBe(false);
    }
    release();
    await call;
    expect(recorded.plainCalls()).toBe(0);
  });

  it('with plain leases only (shares: false) it asks for no appointments', async () => {
    const server = starved(3);
    const { stub, requests } = recording(server);
    const local = new LocalLimits({ clock: () => Date.now(), shares: false });
    at(50);
    await local.limit({}, 'o', stub, 'k', 1, TEN);
    expect(requests).toEqual([{ want: 0 }]);
  });
});
