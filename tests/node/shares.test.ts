// Shares (docs/SPEC.md, section 11): a part of a bucket's capacity and refill that an isolate
// runs as a bucket of its own. The binding's share answers and their validation, a share
// carried through a new durable instance, and LocalLimits with `shares: true` against the
// real RateLimiterServer of the node entry under fake timers (setup.ts). Nothing sleeps.
import { describe, expect, it, vi } from 'vitest';
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimiterOptions, RateLimitLeaseRequest } from '@delightstack/rate-limiter';
import { LocalLimits, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { Ctx } from './support';
import { T0, thrown } from './support';

const at = (ms: number) => vi.setSystemTime(T0 + ms);
/** 10 tokens, one every 100 ms. */
const TEN: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 0.1 };
/** 200 tokens, one every 10 ms. */
const BUSY: RateLimiterOptions = { max_tokens: 200, refill_every_seconds: 0.01 };

describe('limitLeased with a rate: shares', () => {
  it('grants a share of the refill beside the decision, with its terms', () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const d = server.limitLeased('k', 1, TEN, { rate: 100, want: 4 });
    expect(d.allowed).toBe(true);
    // Alone and wanting more than the whole refill: all of it, and all the capacity, so the
    // nine tokens left no longer fit the object's bucket: they move into the share. Its term
    // lasts as long as 12 tokens of its refill take: 1.2 s.
    expect(d.lease).toEqual({
      id: expect.any(Number),
      tokens: 9,
      ttl_ms: 1_200,
      share: { capacity: 10, refill_every_ns: 100_000_000, term_ms: 1_200, next: null },
    });
    expect(d.remaining).toBe(0);
    at(500);
    const plain = server.limit('k', 6, TEN);
    expect(plain.allowed).toBe(false);
    // Its wait assumes the share is spent in full and ends only at its term's end (1.2 s), then
    // one refill per token missing.
    expect(plain.retry_after_ms).toBe(700 + 6 * 100);
  });

  it('renews a share with a next term from the end of the current one, once', () => {
    const server = new RateLimiterServer({} as Ctx, {});
    // Four plain leases: their holders count as asking as much as the share's, so 4 tokens/s
    // of a 10/s refill is demand at 2x the refill.
    for (let i = 0; i < 4; i++) server.limitLeased('k', 0, TEN, { want: 1 });
    const id = server.limitLeased('k', 1, TEN, { rate: 4 }).lease!.id;
    at(500);
    const renewed = server.limitLeased('k', 0, TEN, { rate: 4, renew: id }).lease!;
    expect(renewed.id).toBe(id);
    // 2 tokens a second (below) would take 6 s to bring 12: its terms last the longest, 5 s.
    expect(renewed.ttl_ms).toBe(4_500);
    // The holder wants 1.5 x 4 tokens/s of a 10 tokens/s refill (a fifth of it, divided
    // fairly among five holders that want as much). The key is overloaded (2x its refill,
    // from more than this holder), so the share holds a third of what it wants: 2 tokens a
    // second (its parts rounded down, so a little slower), and the least capacity of a share
    // of an overloaded key, 3 whole tokens.
    expect(renewed.share).toEqual({
      capacity: 3,
      refill_every_ns: 500_000_477,
      term_ms: 5_000,
      next: { capacity: 3, refill_every_ns: 500_000_477 },
    });
    at(600);
    const again = server.limitLeased('k', 0, TEN, { rate: 50, renew: id }).lease!;
    expect(again.share!.next).toEqual(renewed.share!.next);
  });

  it('grants a share only where the demand is well above the refill or one holder alone reaches it, and renews it while it stays', () => {
    // 9 tokens/s of a 10/s refill, alone: a plain lease of the tokens wanted instead.
    const near = new RateLimiterServer({} as Ctx, {}).limitLeased('k', 1, TEN, { rate: 9, want: 3 });
    expect(near.lease).toEqual({ id: expect.any(Number), tokens: 3, ttl_ms: 10_000 });
    // 6/s beside a plain lease, whose holder counts as asking as much (1.2x in all): the same.
    const two = new RateLimiterServer({} as Ctx, {});
    two.limitLeased('k', 0, TEN, { want: 1 });
    expect(two.limitLeased('k', 1, TEN, { rate: 6, want: 1 }).lease!.share).toBeUndefined();
    // 8/s beside it (1.6x in all): a share.
    expect(two.limitLeased('k', 1, TEN, { rate: 8 }).lease!.share).toBeDefined();
    // 10/s alone (1x): a share.
    const server = new RateLimiterServer({} as Ctx, {});
    const share = server.limitLeased('k', 1, TEN, { rate: 10 }).lease!;
    expect(share.share).toBeDefined();
    // Renewed while its holder alone reports at least half the refill; below, the renewal
    // gets no next term and the share ends with its term.
    at(500);
    expect(server.limitLeased('k', 0, TEN, { rate: 5, renew: share.id }).lease!.share!.next).not.toBeNull();
    at(1_500);
    expect(server.limitLeased('k', 0, TEN, { rate: 4, renew: share.id }).lease!.share!.next).toBeNull();
    at(4_000);
    expect(server.getStatus('k').remaining).toBe(10);
  });

  it('settles a share by what its bucket has left', () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const lease = server.limitLeased('k', 1, TEN, { rate: 100, want: 4 }).lease!;
    expect(server.getStatus('k').remaining).toBe(0);
    // Its capacity and refill come back; of its tokens, the three it says it has left.
    expect(server.settle('k', { id: lease.id, used: 0, left: 3 })).toBe(true);
    expect(server.getStatus('k')).toEqual({ remaining: 3, limit: 10, reset_in_ms: 100 });
    expect(server.settle('k', { id: lease.id, used: 0, left: 3 })).toBe(false);
  });

  it('rejects a bad rate, renew, id or left with the field named, and changes nothing', () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const bad: [RateLimitLeaseRequest | unknown, string, string][] = [
      [{ rate: -1 }, 'RangeError', 'lease.rate'],
      [{ rate: '5' }, 'TypeError', 'lease.rate'],
      [{ rate: Number.NaN }, 'RangeError', 'lease.rate'],
      [{ renew: 1.5 }, 'RangeError', 'lease.renew'],
      [{ renew: -1 }, 'RangeError', 'lease.renew'],
      [{ id: 2 ** 53 }, 'RangeError', 'lease.id'],
      [{ id: '7' }, 'TypeError', 'lease.id'],
      [{ settle: { id: 1, used: 0, left: 'x' } }, 'TypeError', 'lease.settle.left'],
      [{ rates: 5 }, 'TypeError', 'rates'],
    ];
    for (const [lease, name, field] of bad) {
      const error = thrown(() => server.limitLeased('k', 1, TEN, lease as RateLimitLeaseRequest));
      expect(error.name).toBe(name);
      expect(error.message).toContain(field);
    }
    expect(server.getStatus('k')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('a lease or share takes the id its holder chose, unless the key holds it already', () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const plain = server.limitLeased('k', 1, TEN, { want: 2, id: 42 }).lease;
    expect(plain?.id).toBe(42);
    // Taken on this key: the limiter chooses another. On another key it is free.
    const again = server.limitLeased('k', 1, TEN, { want: 2, id: 42 }).lease;
    expect(again?.id).not.toBe(42);
    expect(server.limitLeased('other', 1, TEN, { want: 2, id: 42 }).lease?.id).toBe(42);
    const share = server.limitLeased('k', 1, TEN, { rate: 100, id: 2 ** 53 - 1 }).lease;
    expect(share?.share).toBeDefined();
    expect(share?.id).toBe(2 ** 53 - 1);
    // A holder that never heard an answer settles by the id it chose: the tokens come back.
    const before = server.getStatus('other').remaining;
    expect(server.settle('other', { id: 42, used: 0 })).toBe(true);
    expect(server.getStatus('other').remaining).toBe(before + 2);
  });

  it('a durable share outlives the instance: a new one on the same ctx still counts it', () => {
    const ctx = {} as Ctx;
    const first = new DurableRateLimiterServer(ctx, {});
    first.limitLeased('k', 1, TEN, { rate: 100, want: 4 });
    at(500);
    const second = new DurableRateLimiterServer(ctx, {});
    const plain = second.limit('k', 6, TEN);
    expect(plain.allowed).toBe(false);
    expect(plain.retry_after_ms).toBe(700 + 6 * 100);
  });
});

/** One isolate with shares on `server`, its calls counted, its background work collected. */
function isolate(server: RateLimiterServer, policy: RateLimiterOptions = TEN) {
  const calls: string[] = [];
  const stub = {
    limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => {
      calls.push('limit');
      return server.limit(key, cost, policy);
    },
    limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
      calls.push(lease?.renew !== undefined && cost === 0 ? 'renew' : 'limitLeased');
      return server.limitLeased(key, cost, policy, lease);
    },
    settle: async (key: string, settlement: { id: number; used: number }) => {
      calls.push('settle');
      return server.settle(key, settlement);
    },
  };
  const local = new LocalLimits({ clock: () => Date.now(), shares: true });
  const background: Promise<unknown>[] = [];
  const owner = {};
  const ask = () => local.limit(owner, 'o', stub, 'k', 1, policy, (promise) => background.push(promise));
  return { local, ask, calls, background, owner };
}

/** A stub of `server` that keeps the demand (`rate`) of every call that reports one. */
function reportingRates(server: RateLimiterServer) {
  const rates: number[] = [];
  const stub = {
    limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
    limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
      if (lease?.rate !== undefined) rates.push(lease.rate);
      return server.limitLeased(key, cost, policy, lease);
    },
    settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
  };
  return { stub, rates };
}

/**
 * One isolate with shares on a bucket of TEN taken down to 2 tokens at 0 ms, with the rates its
 * calls report; `pair(ms)` makes two of its requests, at `ms` and 50 ms later (so that it asks
 * for a lease or share at the second: requests keep coming).
 */
function onALowBucket() {
  const server = new RateLimiterServer({} as Ctx, {});
  const { stub, rates } = reportingRates(server);
  const local = new LocalLimits({ clock: () => Date.now(), shares: true });
  const owner = {};
  at(0);
  for (let i = 0; i < 8; i++) expect(server.limit('k', 1, TEN).allowed).toBe(true);
  const pair = async (ms: number) => {
    const answers = [];
    for (const t of [ms, ms + 50]) {
      at(t);
      answers.push(await local.limit(owner, 'o', stub, 'k', 1, TEN, () => {}));
    }
    return answers;
  };
  return { server, rates, pair };
}

describe('LocalLimits with shares', () => {
  it('at 10x the limit for 30 s: exact, and the object hears about one call a second (its renewals)', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const { ask, calls, background } = isolate(server);
    const admitted: number[] = [];
    for (let ms = 0; ms < 30_000; ms += 1) {
      at(ms);
      if ((await ask()).allowed) admitted.push(ms);
      await Promise.all(background.splice(0));
    }
    // Never more than one bucket admits: 10 + one per 100 ms over any window.
    for (let i = 0; i < admitted.length; i++) {
      for (let j = i; j < admitted.length && admitted[j] - admitted[i] <= 2_000; j++) {
        expect(j - i + 1).toBeLessThanOrEqual(10 + Math.floor((admitted[j] - admitted[i]) / 100));
      }
    }
    expect(admitted.length).toBeGreaterThanOrEqual(0.95 * (10 + 300));
    expect(admitted.length).toBeLessThanOrEqual(10 + 300);
    // 30,000 requests; once the share is held, only renewals reach the object, one a term.
    const renewals = calls.filter((c) => c === 'renew').length;
    expect(renewals).toBeGreaterThanOrEqual(25);
    expect(calls.length - renewals).toBeLessThan(10);
  });

  it('asks for a share only with demand for the refill of 6 tokens of capacity (6/s here)', async () => {
    const asked = async (everyMs: number) => {
      const server = new RateLimiterServer({} as Ctx, {});
      const { stub, rates } = reportingRates(server);
      const local = new LocalLimits({ clock: () => Date.now(), shares: true });
      const owner = {};
      // Other isolates keep the bucket near empty: one call every 50 ms (20/s).
      for (let ms = 0; ms < 10_000; ms += 50) {
        at(ms);
        server.limit('k', 1, TEN);
        if (ms % everyMs === 0) await local.limit(owner, 'o', stub, 'k', 1, TEN, () => {});
      }
      return rates;
    };
    // One request every 200 ms (5/s): each is decided as with plain leases.
    expect(await asked(200)).toEqual([]);
    // One every 50 ms (20/s): a share is asked for, with the demand measured over a second.
    const rates = await asked(50);
    expect(rates.length).toBeGreaterThan(0);
    expect(rates[0]).toBeGreaterThanOrEqual(6);
    expect(rates[0]).toBeLessThanOrEqual(21);
  });

  it('asks for no share while the low bucket admits all but a few of its requests, and does once a fifth are denied', async () => {
    const { server, rates, pair } = onALowBucket();
    // A pair every 250 ms: 8 requests a second, above the 6/s a share takes and below the
    // refill (10/s); another isolate takes the other 2 a second. The bucket stays below a
    // quarter of its capacity, but its refill covers them: plain calls serve. Every 2 s a burst
    // of others takes every token just before a pair: what its lease does not cover is denied,
    // one or two of each 16 requests, as bursts at the limit deny a few.
    let denied = 0;
    for (let ms = 0; ms < 6_000; ms += 250) {
      if (ms % 2_000 === 1_000) {
        at(ms);
        while (server.limit('k', 1, TEN).allowed);
      }
      for (const answer of await pair(ms)) if (!answer.allowed) denied += 1;
      if (ms % 500 === 250) {
        at(ms + 200);
        server.limit('k', 1, TEN);
      }
      expect(server.limit('k', 0, TEN).remaining).toBeLessThan(2.5);
    }
    expect(denied).toBeGreaterThanOrEqual(3);
    expect(rates).toEqual([]);
    // For two seconds others take every token first: this isolate's requests are denied, and
    // once a fifth of those since its demand was measured are, its calls ask for a share,
    // reporting its demand.
    for (let ms = 6_000; ms < 9_000 && rates.length === 0; ms += 250) {
      at(ms);
      while (ms < 8_000 && server.limit('k', 1, TEN).allowed);
      for (const answer of await pair(ms)) if (!answer.allowed) denied += 1;
    }
    expect(rates.length).toBe(1);
    expect(rates[0]).toBeGreaterThanOrEqual(6);
    expect(rates[0]).toBeLessThanOrEqual(9);
  });

  it('takes no plain lease once a low bucket denies it while it sees few of the requests, as plain leases alone do', async () => {
    // 100 tokens, one a millisecond: an isolate at 4 requests a second asks for a 32nd of the
    // refill and less. The others keep the bucket low (10 tokens left before each of its
    // requests); from 1.5 s on they take every token just before each.
    const P: RateLimiterOptions = { max_tokens: 100, refill_every_seconds: 0.001 };
    const wants = async (shares: boolean) => {
      const server = new RateLimiterServer({} as Ctx, {});
      const asked: { ms: number; want: number }[] = [];
      const stub = {
        limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
        limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
          asked.push({ ms: Date.now() - T0, want: lease?.want ?? 0 });
          return server.limitLeased(key, cost, policy, lease);
        },
        settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
      };
      const local = new LocalLimits({ clock: () => Date.now(), shares });
      const owner = {};
      const leaving = (left: number) => {
        const remaining = server.limit('k', 0, P).remaining;
        if (remaining > left) expect(server.limit('k', remaining - left, P).allowed).toBe(true);
      };
      let denied = 0;
      for (let ms = 0; ms < 4_000; ms += 500) {
        for (const t of [ms, ms + 50]) {
          at(t);
          leaving(ms >= 1_500 ? 0 : 10);
          if (!(await local.limit(owner, 'o', stub, 'k', 1, P, () => {})).allowed) denied += 1;
        }
      }
      expect(denied).toBeGreaterThanOrEqual(3);
      return {
        before: asked.filter((a) => a.ms < 1_500).map((a) => a.want),
        after: asked.filter((a) => a.ms > 1_600).map((a) => a.want),
      };
    };
    // Low but admitting, requests keep coming (50 ms apart): it leases, in both modes.
    const plain = await wants(false);
    const shared = await wants(true);
    expect(Math.max(...shared.before)).toBeGreaterThan(0);
    expect(Math.max(...plain.before)).toBeGreaterThan(0);
    // Once denied, with shares its calls take no lease (a leased token would wait a quarter of
    // a second for its next request while the others are denied); plain leases alone still
    // ask for them.
    expect(shared.after.length).toBeGreaterThanOrEqual(4);
    expect(shared.after.every((want) => want === 0)).toBe(true);
    expect(Math.max(...plain.after)).toBeGreaterThan(0);
  });

  it('asks for a share without a denial when its own demand is the whole refill', async () => {
    const { rates, pair } = onALowBucket();
    // A pair every 200 ms: 10 requests a second, the refill, alone on the bucket. Nothing is
    // denied, and within two seconds it asks for a share.
    for (let ms = 0; ms < 2_000 && rates.length === 0; ms += 200) {
      for (const answer of await pair(ms)) expect(answer.allowed).toBe(true);
    }
    expect(rates.length).toBe(1);
    expect(rates[0]).toBeGreaterThanOrEqual(10);
    expect(rates[0]).toBeLessThanOrEqual(11);
  });

  it('asks no share while its ask is on record at an object crowded with shares, and again after', async () => {
    const SEVEN = { max_tokens: 7, refill_every_seconds: 0.1 };
    const server = new RateLimiterServer({} as Ctx, {});
    // Two other isolates hold shares of an overloaded key (a plain lease's holder counts as
    // asking as much): 3 tokens each, the least such a share holds, so a third would not fit.
    at(0);
    const plain = server.limitLeased('k', 0, SEVEN, { want: 1 }).lease!;
    const first = server.limitLeased('k', 1, SEVEN, { rate: 10 }).lease!;
    server.settle('k', { id: plain.id, used: 0 });
    const second = server.limitLeased('k', 1, SEVEN, { rate: 10 }).lease!;
    expect([first.share!.capacity, second.share!.capacity]).toEqual([3, 3]);
    const asks: { at: number; lease: unknown }[] = [];
    const stub = {
      limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
      limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        const answer = server.limitLeased(key, cost, policy, lease);
        if (lease?.rate !== undefined) asks.push({ at: Date.now() - T0, lease: answer.lease });
        return answer;
      },
      settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
    };
    const local = new LocalLimits({ clock: () => Date.now(), shares: true });
    const owner = {};
    for (let ms = 0; ms < 5_000; ms += 50) {
      at(ms);
      if (ms % 500 === 0) {
        for (const { id } of [first, second]) server.limitLeased('k', 0, SEVEN, { rate: 10, renew: id });
      }
      await local.limit(owner, 'o', stub, 'k', 1, SEVEN, () => {});
    }
    // Each ask comes back as a record of the ask (no tokens, no share) for a term (1 s): the
    // isolate asks again only after it ends, not at its next request.
    expect(asks.length).toBeGreaterThanOrEqual(2);
    expect(asks.length).toBeLessThanOrEqual(5);
    for (const ask of asks) expect(ask.lease).toEqual({ id: expect.any(Number), tokens: 0, ttl_ms: 1_000 });
    for (let i = 1; i < asks.length; i++) expect(asks[i].at - asks[i - 1].at).toBeGreaterThanOrEqual(1_000);
  });

  it('renews a share while its holder asks for half of what a share takes, and lets it end below', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const renewals: number[] = [];
    const stub = {
      limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
      limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        if (lease?.renew !== undefined && cost === 0) renewals.push(Date.now() - T0);
        return server.limitLeased(key, cost, policy, lease);
      },
      settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
    };
    const local = new LocalLimits({ clock: () => Date.now(), shares: true });
    const background: Promise<unknown>[] = [];
    const owner = {};
    // A bucket of 2 tokens that refills 10 a second: a share takes 8 tokens' refill, 40/s, and
    // the object keeps one while the demand stays above 12/s (1.2x its refill). Other isolates
    // keep the bucket low (a call every 50 ms); this one asks 50 a second for 3 s (a share),
    // then 25 a second for 3 s (above 20/s, half of 40), then 14 a second (which the object
    // would still renew).
    const TWO: RateLimiterOptions = { max_tokens: 2, refill_every_seconds: 0.1 };
    const phases = [
      { until: 3_000, everyMs: 20 },
      { until: 6_000, everyMs: 40 },
      { until: 9_000, everyMs: 70 },
    ];
    let start = 0;
    for (const { until, everyMs } of phases) {
      for (let ms = start; ms < until; ms += 1) {
        at(ms);
        if (ms % 50 === 0) server.limit('k', 1, TWO);
        if ((ms - start) % everyMs === 0) {
          await local.limit(owner, 'o', stub, 'k', 1, TWO, (promise) => background.push(promise));
          await Promise.all(background.splice(0));
        }
      }
      start = until;
    }
    const within = (from: number, to: number) => renewals.filter((t) => t >= from && t < to).length;
    expect(within(1_000, 3_000)).toBeGreaterThanOrEqual(1);
    // One renewal a term while the demand is 25/s; none once it is 14/s (after the first term
    // measured at that rate).
    expect(within(3_500, 6_000)).toBeGreaterThanOrEqual(2);
    expect(within(7_000, 9_000)).toBe(0);
  });

  it('near the refill its ask for a share comes back as a plain lease, which it spends locally', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const a = isolate(server, BUSY);
    const b = isolate(server, BUSY);
    const admitted: number[] = [];
    // Two isolates at 60 requests a second each on a bucket of 200 that refills 100 a second:
    // worth a share for each (4/s here), but together 1.2x the refill and each below it.
    for (let ms = 0; ms < 30_000; ms += 1) {
      at(ms);
      for (const { ask, background } of ms % 17 === 0 ? [a] : ms % 17 === 8 ? [b] : []) {
        if ((await ask()).allowed) admitted.push(ms);
        await Promise.all(background.splice(0));
      }
    }
    const calls = [...a.calls, ...b.calls];
    expect(calls.filter((c) => c === 'limitLeased').length).toBeGreaterThan(0);
    expect(calls).not.toContain('renew');
    // About 3,500 requests: about 900 decided here (their plain leases, and held denials);
    // without spending those leases, under 300.
    expect(a.local.localAnswers + b.local.localAnswers).toBeGreaterThan(600);
    expect(admitted.length).toBeLessThanOrEqual(200 + 3_000);
    expect(admitted.length).toBeGreaterThanOrEqual(0.95 * (200 + 3_000));
  });

  it('does not ask again when a renewal comes back without a next term: the share ends with its term', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const renewals: { id: number; next: boolean }[] = [];
    const stub = {
      limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
      limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        const answer = server.limitLeased(key, cost, policy, lease);
        if (lease?.renew !== undefined && cost === 0) renewals.push({ id: lease.renew, next: answer.lease?.share?.next != null });
        return answer;
      },
      settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
    };
    const local = new LocalLimits({ clock: () => Date.now(), shares: true });
    const background: Promise<unknown>[] = [];
    const owner = {};
    // 25 a second for 4 s (a share), then about 4.5 a second: enough to keep a share for this
    // isolate (4/s), not for the object (5/s, half the refill, from a holder alone).
    for (let ms = 0; ms < 10_000; ms += ms < 4_000 ? 40 : 220) {
      at(ms);
      await local.limit(owner, 'o', stub, 'k', 1, TEN, (promise) => background.push(promise));
      await Promise.all(background.splice(0));
    }
    expect(renewals.filter((r) => r.next).length).toBeGreaterThanOrEqual(2);
    const declined = renewals.filter((r) => !r.next);
    expect(declined.length).toBeGreaterThanOrEqual(1);
    // Each share is asked to continue at most once after the object declined.
    for (const { id } of declined) {
      const after = renewals.slice(renewals.findIndex((r) => r.id === id && !r.next) + 1);
      expect(after.filter((r) => r.id === id)).toEqual([]);
    }
  });

  it('reports its whole demand at the renewal that comes half a second after the grant', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const { stub, rates } = reportingRates(server);
    const local = new LocalLimits({ clock: () => Date.now(), shares: true });
    const background: Promise<unknown>[] = [];
    const owner = {};
    // 200 requests a second on a bucket of 300 that refills 100 a second: it runs low after
    // about 2 s, when the share is asked for with the demand of those 2 s; its first term
    // is renewed half a second later.
    const policy: RateLimiterOptions = { max_tokens: 300, refill_every_seconds: 0.01 };
    for (let ms = 0; ms < 6_000; ms += 5) {
      at(ms);
      await local.limit(owner, 'o', stub, 'k', 1, policy, (promise) => background.push(promise));
      await Promise.all(background.splice(0));
    }
    expect(rates.length).toBeGreaterThanOrEqual(2);
    // Half a second since the last report is not counted as a whole second (which reported
    // half the demand): the rate reported then fills the rest of the second.
    for (const rate of rates) expect(rate).toBeGreaterThanOrEqual(180);
  });

  it('holds its top-ups after a denied one: twice as long each time, up to 10 s, whatever its renewals', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const topUps: { who: number; ms: number; allowed: boolean }[] = [];
    const stubOf = (who: number) => ({
      limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
      limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        const answer = server.limitLeased(key, cost, policy, lease);
        if (lease?.renew !== undefined && cost !== 0) topUps.push({ who, ms: Date.now() - T0, allowed: answer.allowed });
        return answer;
      },
      settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
    });
    // Four isolates at 25 requests a second each on a bucket of 40 that refills 16 a second.
    const policy: RateLimiterOptions = { max_tokens: 40, refill_every_seconds: 0.0625 };
    const isolates = [0, 1, 2, 3].map((who) => ({ local: new LocalLimits({ clock: () => Date.now(), shares: true }), owner: {}, stub: stubOf(who) }));
    const background: Promise<unknown>[] = [];
    let admitted = 0;
    for (let ms = 0; ms < 60_000; ms += 10) {
      at(ms);
      const { local, owner, stub } = isolates[(ms / 10) % 4];
      if ((await local.limit(owner, 'o', stub, 'k', 1, policy, (promise) => background.push(promise))).allowed) admitted += 1;
      await Promise.all(background.splice(0));
    }
    // The shares hold the whole refill: top-ups are denied but for a few tokens between terms.
    // Once denied, each holder asks again after the wait the object named, then twice as
    // long each time: in the last 30 s, fewer than 6 each (holders that top up once a term, as
    // their renewals would allow, make about 40 in all).
    expect(topUps.filter((t) => !t.allowed).length).toBeGreaterThan(topUps.length / 2);
    expect(topUps.filter((t) => t.ms >= 30_000).length).toBeLessThanOrEqual(24);
    // And nothing is lost: the bucket's bound, all but a few tokens of it admitted.
    const bound = 40 + 60 * 16;
    expect(admitted).toBeLessThanOrEqual(bound);
    expect(admitted).toBeGreaterThanOrEqual(0.97 * bound);
  });

  it('a top-up past the middle of its term reports the demand and renews: no renewal of its own follows', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    type Call = { id: number; ms: number; topUp: boolean; renews: boolean; next: boolean; ttl: number };
    const calls: Call[] = [];
    const stub = {
      limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
      limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        const answer = server.limitLeased(key, cost, policy, lease);
        if (lease?.renew !== undefined) {
          const share = answer.lease?.share;
          calls.push({
            id: lease.renew,
            ms: Date.now() - T0,
            topUp: cost !== 0,
            renews: lease.rate !== undefined,
            next: share?.next != null,
            ttl: answer.lease?.ttl_ms ?? 0,
          });
        }
        return answer;
      },
      settle: async (key: string, settlement: { id: number; used: number }) => server.settle(key, settlement),
    };
    // As above: four isolates at 25 requests a second each on a bucket that refills 16 a second.
    const policy: RateLimiterOptions = { max_tokens: 40, refill_every_seconds: 0.0625 };
    const isolates = [0, 1, 2, 3].map(() => ({ local: new LocalLimits({ clock: () => Date.now(), shares: true }), owner: {} }));
    const background: Promise<unknown>[] = [];
    for (let ms = 0; ms < 60_000; ms += 10) {
      at(ms);
      const { local, owner } = isolates[(ms / 10) % 4];
      await local.limit(owner, 'o', stub, 'k', 1, policy, (promise) => background.push(promise));
      await Promise.all(background.splice(0));
    }
    const renewingTopUps = calls.filter((c) => c.topUp && c.renews && c.next);
    expect(renewingTopUps.length).toBeGreaterThan(0);
    // The next term it got starts when the current one ends (`ttl_ms` from then): until then
    // its share is not renewed again, neither in the background nor by another top-up.
    for (const t of renewingTopUps) {
      const again = calls.filter((c) => c.id === t.id && c.renews && c.ms > t.ms && c.ms < t.ms + t.ttl);
      expect(again).toEqual([]);
    }
    // Top-ups before the middle of a term ask for tokens only.
    expect(calls.some((c) => c.topUp && !c.renews)).toBe(true);
  });

  it('renews in the background: the request that starts it is answered without waiting', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const { ask, calls, background } = isolate(server);
    for (let ms = 0; ms < 1_000; ms += 5) {
      at(ms);
      await ask();
      if (calls.at(-1) === 'renew') break;
      // (Before the bucket runs low, plain leases are renewed ahead of time, in the background too.)
      await Promise.all(background.splice(0));
    }
    expect(background).toHaveLength(1);
    expect(calls.at(-1)).toBe('renew');
    // The renewal is still pending (its answer has not been taken in) while requests go on.
    const answered = await ask();
    expect(answered).toHaveProperty('allowed');
    await Promise.all(background);
  });

  it('takes a refund back into a live share that has room for it, with no call; else it is a call', async () => {
    const server = new RateLimiterServer({} as Ctx, {});
    const { local, ask, calls, background, owner } = isolate(server);
    const refunds: number[] = [];
    const refunding = { refund: async (key: string, cost: number) => void (refunds.push(cost), server.refund(key, cost)) };
    // 10x the limit until a share is held and spent: the next request is denied here.
    let ms = 0;
    for (; ms < 5_000; ms += 1) {
      at(ms);
      await ask();
      await Promise.all(background.splice(0));
    }
    const denied = await ask();
    expect(denied.allowed).toBe(false);
    const before = { calls: calls.length, answers: local.localAnswers };
    await local.refund(owner, 'o', refunding, 'k', 1, TEN);
    expect(refunds).toEqual([]);
    // The token given back is the share's: the next request takes it here, with no call.
    expect((await ask()).allowed).toBe(true);
    expect((await ask()).allowed).toBe(false);
    expect(calls.length).toBe(before.calls);
    expect(local.localAnswers).toBe(before.answers + 2);
    // More than the share can hold, or a fraction of a token: the object takes it.
    await local.refund(owner, 'o', refunding, 'k', 1_000, TEN);
    await local.refund(owner, 'o', refunding, 'k', 0.5, TEN);
    expect(refunds).toEqual([1_000, 0.5]);
  });

  it('takes shares: true from the middleware and rejects anything else', () => {
    expect(() => new LocalLimits({ shares: 'yes' as unknown as boolean })).toThrow(TypeError);
    const policy = TEN;
    expect(() => rateLimit({ binding: 'LIMITER', policy, local: { shares: true } })).not.toThrow();
    expect(() => rateLimit({ binding: 'LIMITER', policy, local: { share: true } as never })).toThrow(/shares/);
  });
});
