// LocalLimits (`@delightstack/rate-limiter/middleware`): leases spent in the isolate and a
// denial cache, against the real RateLimiterServer of the node entry behind a stub whose
// methods return Promises, as RPC does. Time is Date.now() under fake timers (setup.ts): the
// server reads it, and the client's clock is `() => Date.now()`. Nothing sleeps.
import { describe, expect, it, vi } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimitDecision, RateLimiterOptions, RateLimitLeaseRequest } from '@delightstack/rate-limiter';
import { LocalLimits, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { LocalLimitsOptions } from '@delightstack/rate-limiter/middleware';
import type { Ctx } from './support';
import { T0 } from './support';

const at = (ms: number) => vi.setSystemTime(T0 + ms);
const now = () => Date.now() - T0;
const SLOW: RateLimiterOptions = { max_tokens: 50, refill_every_seconds: 3600 };
const BIG: RateLimiterOptions = { max_tokens: 1_000_000, refill_every_seconds: 3600 };

type Call = {
  method: 'limit' | 'limitLeased' | 'settle';
  key: unknown;
  cost?: unknown;
  lease?: RateLimitLeaseRequest;
  settlement?: { id: number; used: number };
  /** When it was made (ms from T0), and the lease it was granted (limitLeased). */
  sent: number;
  granted?: { id: number; tokens: number } | null;
};

/** A stub over `server` that logs every call; `yields` microtask turns before it answers. */
function stubOf(server: RateLimiterServer, yields = 0) {
  const calls: Call[] = [];
  const inFlight = { limit: 0, limitLeased: 0, settle: 0 };
  const stats = { maxInFlight: { limit: 0, limitLeased: 0, settle: 0 } };
  const pause = async (method: Call['method']) => {
    inFlight[method] += 1;
    stats.maxInFlight[method] = Math.max(stats.maxInFlight[method], inFlight[method]);
    for (let i = 0; i < yields; i++) await null;
    inFlight[method] -= 1;
  };
  const stub = {
    limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => {
      calls.push({ method: 'limit', key, cost, sent: now() });
      await pause('limit');
      return server.limit(key, cost, policy);
    },
    limitLeased: async (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
      const call: Call = { method: 'limitLeased', key, cost, lease: structuredClone(lease), sent: now() };
      calls.push(call);
      await pause('limitLeased');
      const answer = server.limitLeased(key, cost, policy, lease);
      call.granted = answer.lease === null ? null : { id: answer.lease.id, tokens: answer.lease.tokens };
      return answer;
    },
    settle: async (key: string, settlement: { id: number; used: number }) => {
      calls.push({ method: 'settle', key, settlement, sent: now() });
      await pause('settle');
      return server.settle(key, settlement);
    },
  };
  return { stub, calls, stats };
}

/** One isolate (a LocalLimits) on one server, asking about the bucket `key` of scope "o". */
function isolate(server: RateLimiterServer, options: LocalLimitsOptions = {}, yields = 0) {
  const { stub, calls, stats } = stubOf(server, yields);
  const local = new LocalLimits({ clock: () => Date.now(), ...options });
  const owner = {};
  // A decision made here resolves in fewer microtask turns than a call of the stub: the turns
  // after it stand for the time between requests, in which a background call answers.
  const ask = async (cost: number = 1, policy: RateLimiterOptions | undefined = SLOW, key = 'k') => {
    const decision = await local.limit(owner, 'o', stub, key, cost, policy);
    for (let i = 0; i < 8; i++) await null;
    return decision;
  };
  return { local, ask, calls, stats, stub, owner };
}

const newServer = () => new RateLimiterServer({} as Ctx, {});

describe('LocalLimits', () => {
  it('at a low rate (requests > 100 ms apart) every request makes its call, asks no lease, and answers as limit()', async () => {
    const server = newServer();
    const twin = newServer();
    const { local, ask, calls } = isolate(server);
    const got: RateLimitDecision[] = [];
    const expected: RateLimitDecision[] = [];
    // Costs 0 to 2 every 101 ms on a bucket refilling 1 every 100 ms: never denied, often not
    // full. (A leased token would wait for the next request, out of other isolates' reach.)
    const policy = { max_tokens: 5, refill_every_seconds: 0.1 };
    for (let i = 0; i < 60; i++) {
      at(i * 101);
      const cost = [1, 2, 1, 0][i % 4]!;
      got.push(await ask(cost, policy));
      expected.push(twin.limit('k', cost, policy));
    }
    expect(got).toEqual(expected);
    expect(got.every((d) => d.allowed)).toBe(true);
    expect(got.some((d) => d.remaining < 4)).toBe(true);
    expect(local.calls).toBe(60);
    expect(local.localAnswers).toBe(0);
    expect(calls).toHaveLength(60);
    expect(calls.every((c) => c.method === 'limitLeased' && c.lease?.want === 0 && c.lease.settle === undefined)).toBe(
      true,
    );
  });

  it('at a high rate the lease doubles up to maxLease, is renewed ahead of time, and calls become rare', async () => {
    const server = newServer();
    // A margin of 1 s: a moment at which every lease is past its local deadline and none has
    // ended at the object (below).
    const { local, ask, calls } = isolate(server, { marginMs: 1_000 });
    let allowed = 0;
    for (let i = 0; i < 2000; i++) {
      at(Math.floor(i / 4)); // 4 requests a millisecond
      if ((await ask(1, BIG)).allowed) allowed += 1;
    }
    expect(allowed).toBe(2000);
    const leaseCalls = calls.filter((c) => c.method === 'limitLeased');
    expect(leaseCalls.map((c) => c.lease?.want).slice(0, 12)).toEqual([0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]);
    // From the second lease on, each is asked for in the background (cost 0) once half of the
    // one being spent is gone: only the first two calls answered a request.
    const renewals = leaseCalls.filter((c) => c.cost === 0).length;
    expect(leaseCalls.slice(2).every((c) => c.cost === 0)).toBe(true);
    expect(local.calls).toBe(calls.length);
    expect(local.calls).toBeLessThanOrEqual(14);
    expect(local.calls - renewals + local.localAnswers).toBe(2000);
    expect(calls.every((c) => c.method === 'limitLeased')).toBe(true); // one settle per renewal
    // All leases were sent by 499 ms: at 9499 ms each is past its local deadline (9 s after its
    // call) and before the object's expiry (10 s after it). The next request calls, and that
    // call settles what this isolate holds: the bucket lacks exactly the 2001 admitted.
    at(9499);
    await ask(1, BIG);
    const last = calls.filter((c) => c.method === 'limitLeased').at(-1)!;
    expect(last.lease?.want).toBe(0);
    expect(last.cost).toBe(1);
    expect(server.getStatus('k').remaining).toBe(1_000_000 - 2001);
  });

  it('no lease is asked for ahead of time near the limit; far from it, shares take the same leases as plain leases', async () => {
    // 100 tokens: below half of them left, every lease call is a request's own.
    const near = isolate(newServer(), { shares: false });
    const policy = { max_tokens: 100, refill_every_seconds: 3600 };
    for (let i = 0; i < 100; i++) {
      at(i);
      await near.ask(1, policy);
    }
    const aheadWhenFull = near.calls.filter((c) => c.cost === 0 && c.sent < 50);
    const aheadWhenLow = near.calls.filter((c) => c.cost === 0 && c.sent >= 60);
    expect(aheadWhenFull.length).toBeGreaterThan(0);
    expect(aheadWhenLow).toEqual([]);
    // Far from the limit, shares change nothing: the same plain leases, asked for ahead of time.
    const far = [false, true].map((shares) => {
      const one = isolate(newServer(), { shares });
      return async () => {
        for (let i = 0; i < 2000; i++) {
          at(Math.floor(i / 4));
          await one.ask(1, BIG);
        }
        return one.calls.map(({ method, cost, lease, sent }) => ({ method, cost, want: lease?.want, sent }));
      };
    });
    const plain = await far[0]!();
    const shared = await far[1]!();
    expect(plain.filter((c) => c.cost === 0).length).toBeGreaterThan(5);
    expect(shared).toEqual(plain);
  });

  it('requests that make plain calls while a slow lease call is in flight keep the bucket busy', async () => {
    const server = newServer();
    const wants: (number | undefined)[] = [];
    let release = () => {};
    // A round trip of 300 ms for lease calls (longer than the 100 ms that counts as busy).
    const stub = {
      limit: async (key: string, cost?: number, policy?: RateLimiterOptions) => server.limit(key, cost, policy),
      limitLeased: (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) => {
        wants.push(lease?.want);
        const answer = server.limitLeased(key, cost, policy, lease);
        return new Promise<typeof answer>((resolve) => (release = () => resolve(answer)));
      },
    };
    const local = new LocalLimits({ clock: () => Date.now() });
    const owner = {};
    const ask = () => local.limit(owner, 'o', stub, 'k', 1, BIG);
    const first = ask();
    for (let t = 20; t <= 300; t += 20) {
      at(t);
      expect((await ask()).allowed).toBe(true); // a plain call of its own
    }
    release();
    await first;
    at(320);
    const next = ask();
    release();
    await next;
    // Requests kept coming every 20 ms: the next lease call asks for a lease.
    expect(wants).toEqual([0, 1]);
  });

  it('maxLease caps the want; maxLease 0 never leases', async () => {
    const server = newServer();
    const capped = isolate(server, { maxLease: 5 });
    for (let i = 0; i < 200; i++) await capped.ask(1, BIG, 'a');
    expect(Math.max(...capped.calls.map((c) => c.lease?.want ?? 0))).toBe(5);
    const none = isolate(server, { maxLease: 0 });
    for (let i = 0; i < 50; i++) await none.ask(1, BIG, 'b');
    expect(none.local.calls).toBe(50);
    expect(none.calls.every((c) => c.lease?.want === 0)).toBe(true);
  });

  it.each([
    [1, 200, 50],
    [0.25, 400, 200],
    [3, 100, 16],
    [7, 100, 7],
  ])('plain leases, cost %d: %d requests on max_tokens 50 admit exactly %d, in order, with no token lost', async (cost, n, admitted) => {
    const server = newServer();
    const { ask, local } = isolate(server, { shares: false });
    const answers: boolean[] = [];
    for (let i = 0; i < n; i++) {
      at(i * 3);
      answers.push((await ask(cost, SLOW)).allowed);
    }
    expect(answers.filter(Boolean)).toHaveLength(admitted);
    expect(answers.slice(0, admitted).every(Boolean)).toBe(true);
    expect(local.localAnswers).toBeGreaterThan(0);
    // The denial settled the last lease: the bucket holds exactly what was not admitted.
    expect(server.getStatus('k').remaining).toBeCloseTo(50 - admitted * cost, 9);
  });

  // A bucket that refills a token every 10 s is never shared (a 1 s term would bring a share
  // less than a token): by default too, its denials are held as with plain leases.
  it.each([{ shares: false }, {}])('a denial is answered locally, the same but for a shrinking retry_after_ms, until it has passed (%o)', async (options) => {
    const server = newServer();
    const policy = { max_tokens: 5, refill_every_seconds: 10 };
    const { ask, local, calls } = isolate(server, options);
    let denial: RateLimitDecision | undefined;
    for (let i = 0; i < 10 && denial === undefined; i++) {
      at(i);
      const d = await ask(1, policy);
      if (!d.allowed) denial = d;
    }
    expect(denial).toBeDefined();
    const deniedAt = now();
    const r = denial!.retry_after_ms!;
    expect(r).toBeGreaterThan(9000);
    // As the object says at that moment. With shares, this isolate's call put it in the
    // object's queue (docs/SPEC.md, 11.11): it denies here until its turn, which is never
    // before the object's own wait, and nothing left for a request here.
    const object = server.limit('k', 1, policy);
    if (options.shares === false) expect(denial).toEqual(object);
    else expect(denial).toMatchObject({ allowed: false, remaining: 0, limit: 5, window_ms: 50_000 });
    expect(r).toBeGreaterThanOrEqual(object.retry_after_ms!);
    const callsBefore = local.calls;
    for (const wait of [0, 1, 500, 4000, r - 1]) {
      at(deniedAt + wait);
      expect(await ask(1, policy)).toEqual({ ...denial, retry_after_ms: r - wait });
    }
    expect(local.calls).toBe(callsBefore);
    at(deniedAt + r);
    const after = await ask(1, policy);
    expect(local.calls).toBe(callsBefore + 1);
    expect(after.allowed).toBe(true);
    expect(calls.filter((c) => c.lease?.rate !== undefined)).toEqual([]);
  });

  it("a penalty's block is held here whole: one call for its 15 minutes, each answer with the time left", async () => {
    const server = newServer();
    const policy = { max_tokens: 2, refill_every_seconds: 1, block_seconds: 900 };
    const { ask, local } = isolate(server);
    // Requests 10 ms apart: lease calls, until the third finds the bucket empty.
    for (const t of [0, 10]) {
      at(t);
      expect((await ask(1, policy)).allowed).toBe(true);
    }
    at(20);
    const denied = await ask(1, policy);
    expect(denied).toMatchObject({ allowed: false, retry_after_ms: 900_000 });
    const calls = local.calls;
    for (let t = 1_020; t < 900_020; t += 1_000) {
      at(t);
      expect(await ask(1, policy)).toMatchObject({ allowed: false, retry_after_ms: 900_020 - t });
    }
    expect(local.calls).toBe(calls);
    at(900_020);
    expect(await ask(1, policy)).toMatchObject({ allowed: true });
    expect(local.calls).toBe(calls + 1);
  });

  it('maxHoldMs bounds how late an isolate learns of an unblock; without it the block is held whole', async () => {
    const server = newServer();
    const bounded = isolate(server, { maxHoldMs: 60_000 });
    const whole = isolate(server);
    at(0);
    server.block('k', 900);
    for (const holder of [bounded, whole]) {
      expect(await holder.ask()).toMatchObject({ allowed: false, retry_after_ms: 900_000 });
    }
    // Held for 60 s, each answer with the time left of the block (the client's wait).
    at(59_999);
    expect(await bounded.ask()).toMatchObject({ allowed: false, retry_after_ms: 840_001 });
    expect(bounded.local.calls).toBe(1);
    at(60_000); // the hold has passed: it asks again, and holds the next 60 s
    expect(await bounded.ask()).toMatchObject({ allowed: false, retry_after_ms: 840_000 });
    at(119_999);
    expect(await bounded.ask()).toMatchObject({ allowed: false, retry_after_ms: 780_001 });
    expect(bounded.local.calls).toBe(2);
    at(100_000);
    expect(server.unblock('k')).toBe(true);
    at(120_000);
    expect(await bounded.ask()).toMatchObject({ allowed: true });
    expect(bounded.local.calls).toBe(3);
    // The isolate holding the whole block still denies, with no call, until the block would end.
    expect(await whole.ask()).toMatchObject({ allowed: false, retry_after_ms: 780_000 });
    expect(whole.local.calls).toBe(1);
    at(900_000);
    expect(await whole.ask()).toMatchObject({ allowed: true });
  });

  it('a bucket this isolate keeps losing: each denial of its own call is held twice as long, up to 10 s; an allowed call halves the hold', async () => {
    const server = newServer();
    // One token a second; another isolate (direct calls) takes each token as it comes. Plain
    // leases: with shares, a denial waits for the isolate's turn instead (appointments.test.ts).
    const policy = { max_tokens: 1, refill_every_seconds: 1 };
    const { ask, local } = isolate(server, { shares: false });
    at(0);
    expect((await ask(1, policy)).allowed).toBe(true);
    let t = 0;
    const holds: number[] = [];
    for (let round = 0; round < 6; round++) {
      const denied = await ask(1, policy);
      expect(denied.allowed).toBe(false);
      const hold = denied.retry_after_ms!;
      holds.push(hold);
      const calls = local.calls;
      // Held: answered here until the hold has passed, with the time left of it.
      at(t + hold - 1);
      expect(await ask(1, policy)).toMatchObject({ allowed: false, retry_after_ms: 1 });
      expect(local.calls).toBe(calls);
      t += hold;
      at(t);
      expect(server.limit('k', 1, policy).allowed).toBe(true); // the other isolate wins
    }
    expect(holds).toEqual([1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
    // Each token this isolate wins halves its hold (to 5 s, then 2.5 s): the next denial is
    // held twice that.
    for (const second of [1, 2]) {
      at(t + second * 1_000);
      expect((await ask(1, policy)).allowed).toBe(true);
    }
    expect((await ask(1, policy)).retry_after_ms).toBe(5_000);
  });

  it('plain leases: after a denial, requests while its call is in flight are denied here, not called', async () => {
    const server = newServer();
    const policy = { max_tokens: 2, refill_every_seconds: 60 };
    const { ask, local, stats } = isolate(server, { shares: false }, 5);
    expect((await ask(2, policy)).allowed).toBe(true);
    expect((await ask(1, policy)).allowed).toBe(false);
    at(60_000); // the hold has passed: the next request calls, the others wait for nothing
    const answers = await Promise.all(Array.from({ length: 20 }, () => ask(1, policy)));
    expect(answers.filter((d) => d.allowed)).toHaveLength(1);
    expect(local.calls).toBe(3);
    expect(stats.maxInFlight.limit).toBe(0);
    expect(answers.slice(1).every((d) => d.retry_after_ms! >= 1)).toBe(true);
  });

  it('a cost above the capacity (retry_after_ms null) is not cached: each request asks', async () => {
    const server = newServer();
    const { ask, local } = isolate(server);
    for (let i = 0; i < 3; i++) {
      expect(await ask(51, SLOW)).toMatchObject({ allowed: false, retry_after_ms: null });
    }
    expect(local.calls).toBe(3);
  });

  it('the margin: no local answer at or after sent + ttl_ms - marginMs', async () => {
    for (const marginMs of [1000, 2500, 0]) {
      const server = newServer();
      const { ask, local, calls } = isolate(server, { marginMs });
      // Requests 1 ms apart: calls with want 0 and 1, then renewals ahead of time with want 2
      // (at 2 ms) and 4 (at 4 ms): the lease of 4 is the next one, not spent yet.
      let t = 0;
      while (calls.length < 4) {
        at(t++);
        await ask(1, BIG);
      }
      const four = calls.at(-1)!;
      expect(four.lease?.want).toBe(4);
      expect(four.granted?.tokens).toBe(4);
      const deadline = four.sent + 10_000 - marginMs;
      at(deadline - 1);
      await ask(1, BIG); // the lease of 4 takes over
      expect(local.calls).toBe(4);
      at(deadline);
      await ask(1, BIG);
      expect(local.calls).toBeGreaterThan(4);
      // That call (or a settle beside it) settled the lease of 4: 1 used, 3 back.
      const settled = calls
        .slice(4)
        .map((c) => (c.method === 'settle' ? c.settlement : c.lease?.settle))
        .find((x) => x?.id === four.granted!.id);
      expect(settled?.used).toBe(1);
    }
  });

  it('the next call settles the leases: their unused tokens go back to the bucket', async () => {
    const server = newServer();
    const { ask, calls } = isolate(server);
    let admitted = 0;
    let t = 0;
    while (calls.length < 6) {
      at(t++);
      if ((await ask(1, BIG)).allowed) admitted += 1; // leases 0, 1, 2, 4, 8, then 16 asked for
    }
    for (let i = 0; i < 5; i++) if ((await ask(1, BIG)).allowed) admitted += 1; // locally
    expect(calls).toHaveLength(6);
    const sixth = calls.at(-1)!;
    expect(sixth.granted?.tokens).toBe(16);
    // Both leases held are still being spent or waiting; at the sixth's local deadline (its
    // 10 s less the 100 ms margin) a call settles them (one in the call, the other beside it)
    // and asks for about what was used.
    at(sixth.sent + 9899);
    if ((await ask(1, BIG)).allowed) admitted += 1;
    expect(calls).toHaveLength(6);
    at(sixth.sent + 9900);
    if ((await ask(1, BIG)).allowed) admitted += 1;
    const last = calls.filter((c) => c.method === 'limitLeased').at(-1)!;
    expect(last.cost).toBe(1);
    // Nothing lost, nothing counted twice: the bucket lacks what was admitted, plus the lease
    // the last call granted.
    expect(server.getStatus('k').remaining).toBe(1_000_000 - admitted - (last.granted?.tokens ?? 0));
  });

  it('concurrent requests on one bucket: one lease call at a time, plain calls meanwhile, no double settle', async () => {
    const server = newServer();
    const { ask, calls, stats, local } = isolate(server, {}, 5);
    const answers = await Promise.all(Array.from({ length: 120 }, () => ask(1, SLOW)));
    expect(answers.filter((d) => d.allowed)).toHaveLength(50);
    expect(stats.maxInFlight.limitLeased).toBe(1);
    expect(stats.maxInFlight.limit).toBeGreaterThan(1); // the others did not wait
    const settled = calls.flatMap((c) => (c.lease?.settle ? [c.lease.settle.id] : []));
    expect(new Set(settled).size).toBe(settled.length);
    expect(local.calls + local.localAnswers).toBe(120);
    expect(server.getStatus('k').remaining).toBe(0);
  });

  it('a burst before any answer: no more plain calls in flight than the bucket can admit meanwhile', async () => {
    const server = newServer();
    const { ask, stats, local } = isolate(server, {}, 5);
    const answers = await Promise.all(Array.from({ length: 200 }, () => ask(1, SLOW)));
    expect(answers.filter((d) => d.allowed)).toHaveLength(50);
    // One lease call, then plain calls for the 50 tokens SLOW holds; the other 149 are denied
    // here, with the next token's time.
    expect(stats.maxInFlight.limit).toBe(50);
    expect(local.calls).toBe(51);
    const denied = answers.filter((d) => !d.allowed && d.retry_after_ms === 3_600_000);
    expect(denied.length).toBeGreaterThanOrEqual(149);
    // Time passes: the refills since the first plain call was sent count (one an hour).
    at(3_600_000);
    expect((await ask(1, SLOW)).allowed).toBe(true);
  });

  // A stub whose calls are answered only when the test says so, at the fake time it sets.
  function heldStub(server: RateLimiterServer) {
    const waiting: Array<() => void> = [];
    const calls: string[] = [];
    const held = <T>(method: string, answer: () => T) => {
      calls.push(method);
      return new Promise<T>((resolve) => waiting.push(() => resolve(answer())));
    };
    const stub = {
      limit: (key: string, cost?: number, policy?: RateLimiterOptions) =>
        held('limit', () => server.limit(key, cost, policy)),
      limitLeased: (key: string, cost?: number, policy?: RateLimiterOptions, lease?: RateLimitLeaseRequest) =>
        held('limitLeased', () => server.limitLeased(key, cost, policy, lease)),
      settle: (key: string, settlement: { id: number; used: number }) =>
        held('settle', () => server.settle(key, settlement)),
    };
    const answerAll = async () => {
      while (waiting.length > 0) waiting.shift()!();
      for (let i = 0; i < 8; i++) await null;
    };
    return { stub, calls, answerAll };
  }

  it.each([{ shares: false }, {}])(
    'a slow object: near the limit, no plain call joins one in flight past twice the shortest round trip plus 20 ms (%o)',
    async (options) => {
      const policy = { max_tokens: 100, refill_every_seconds: 3600 };
      const server = newServer();
      server.limit('k', 90, policy); // 10 of 100 left: the bucket runs low
      const { stub, calls, answerAll } = heldStub(server);
      const local = new LocalLimits({ clock: () => Date.now(), ...options });
      const owner = {};
      const ask = (cost = 1) => local.limit(owner, 'o', stub, 'k', cost, policy);
      // The first call comes back in 5 ms: the shortest round trip.
      const first = ask();
      at(5);
      await answerAll();
      expect((await first).allowed).toBe(true);
      // A call sent at 200 ms is in flight; requests meanwhile make plain calls until it is
      // 2 × 5 + 20 = 30 ms old.
      at(200);
      const pending = [ask()];
      at(230);
      pending.push(ask());
      expect(calls).toEqual(['limitLeased', 'limitLeased', 'limit']);
      at(231);
      const answer = ask();
      expect(calls).toHaveLength(3); // no call: denied here
      const denied = await answer;
      expect(denied.allowed).toBe(false);
      expect(denied.retry_after_ms).toBe(3_600_000); // one interval: the bound's next token
      // Once the answers came, calls go out again.
      at(240);
      await answerAll();
      for (const decision of await Promise.all(pending)) expect(decision.allowed).toBe(true);
      const next = ask();
      expect(calls.length).toBeGreaterThan(3);
      await answerAll();
      expect((await next).allowed).toBe(true);
      expect(server.getStatus('k').remaining).toBeLessThanOrEqual(7);
    },
  );

  it('a slow object far from the limit: a request still makes its plain call', async () => {
    const policy = { max_tokens: 100, refill_every_seconds: 3600 };
    const server = newServer();
    const { stub, calls, answerAll } = heldStub(server);
    const local = new LocalLimits({ clock: () => Date.now() });
    const owner = {};
    const ask = () => local.limit(owner, 'o', stub, 'k', 1, policy);
    const first = ask();
    at(5);
    await answerAll();
    expect((await first).remaining).toBe(99);
    at(100);
    const pending = [ask()];
    at(500);
    pending.push(ask());
    expect(calls).toEqual(['limitLeased', 'limitLeased', 'limit']);
    await answerAll();
    for (const decision of await Promise.all(pending)) expect(decision.allowed).toBe(true);
  });

  // An isolate that has spent leases on "k" (requests 1 ms apart: they double, and the last
  // is renewed ahead of time), over a stub whose next `method` call fails once `failNext()`:
  // before it reaches the object, or with `lose` after the object applied it (its answer lost).
  async function leasingIsolate(method: 'limitLeased' | 'settle', options: LocalLimitsOptions = {}, lose = false) {
    const policy = { max_tokens: 100, refill_every_seconds: 3600 };
    const server = newServer();
    const { stub, calls } = stubOf(server);
    let failing = false;
    const call = stub[method] as (...args: unknown[]) => Promise<unknown>;
    const flaky = {
      ...stub,
      [method]: (...args: unknown[]) => {
        if (!failing) return call(...args);
        failing = false;
        const lost = () => Promise.reject(new Error('network connection lost'));
        return lose ? call(...args).then(lost) : lost();
      },
    } as typeof stub;
    const local = new LocalLimits({ clock: () => Date.now(), ...options });
    const owner = {};
    let t = 0;
    const ask = (cost: number) => {
      at(t++);
      return local.limit(owner, 'o', flaky, 'k', cost, policy);
    };
    for (let i = 0; i < 8; i++) expect((await ask(1)).allowed).toBe(true);
    const held = calls.filter((c) => c.method === 'limitLeased' && (c.granted?.tokens ?? 0) > 0).at(-1)!.granted!;
    const failNext = () => void (failing = true);
    return { server, calls, ask, held, failNext, failed: () => !failing };
  }

  // The leases settled (in a call or by a settle of their own) by the calls from `from` on.
  const settledFrom = (calls: Call[], from: number) =>
    calls.slice(from).flatMap((c) => [c.lease?.settle?.id, c.settlement?.id]).filter((id) => id !== undefined);

  it.each([{ shares: false }, {}])(
    'a call that fails settles again, in the next call, the leases it was settling (%o)',
    async (options) => {
      const { server, calls, ask, held, failNext } = await leasingIsolate('limitLeased', options);
      expect(held.tokens).toBeGreaterThan(1);
      // A cost the lease cannot cover makes a call that settles it, and that call fails.
      failNext();
      await expect(ask(held.tokens + 1)).rejects.toThrow('network connection lost');
      // The next call settles again what the failed one was settling (the lease renewed ahead
      // of time among it, in a settle of its own): every unused token is back in the bucket.
      const before = calls.length;
      expect((await ask(1)).allowed).toBe(true);
      for (let i = 0; i < 8; i++) await null;
      expect(settledFrom(calls, before)).toContain(held.id);
      const last = calls.slice(before).find((c) => c.method === 'limitLeased')!;
      // 9 requests of cost 1 admitted; the isolate holds only what the last call leased it.
      expect(server.getStatus('k').remaining + (last.granted?.tokens ?? 0)).toBe(100 - 9);
    },
  );

  it.each([{ shares: false }, {}])(
    'a lease granted in a call whose answer was lost is settled by the next call, by the id asked for (%o)',
    async (options) => {
      const { server, calls, ask, held, failNext } = await leasingIsolate('limitLeased', options, true);
      // A cost the lease cannot cover makes a call, which the object applies; its answer is lost.
      const cost = held.tokens + 1;
      failNext();
      await expect(ask(cost)).rejects.toThrow('network connection lost');
      const lost = calls.at(-1)!;
      expect(lost.granted?.tokens).toBeGreaterThan(0);
      expect(lost.granted?.id).toBe(lost.lease?.id);
      const before = calls.length;
      expect((await ask(1)).allowed).toBe(true);
      for (let i = 0; i < 8; i++) await null;
      expect(settledFrom(calls, before)).toEqual(expect.arrayContaining([held.id, lost.granted!.id]));
      // 9 requests of cost 1 admitted, and the lost call's cost: the isolate holds only what
      // the last call leased it.
      const last = calls.slice(before).find((c) => c.method === 'limitLeased')!;
      expect(server.getStatus('k').remaining + (last.granted?.tokens ?? 0)).toBe(100 - 9 - cost);
    },
  );

  it('a settle of its own that fails is sent again by the next call', async () => {
    const { calls, ask, held, failNext, failed } = await leasingIsolate('settle');
    // A call that settles the lease and the one renewed ahead of time settles the newer with a
    // settle of its own, which fails.
    failNext();
    expect((await ask(held.tokens + 1)).allowed).toBe(true);
    for (let i = 0; i < 8; i++) await null;
    expect(failed()).toBe(true);
    // The next call (a cost no lease covers) settles it again.
    const before = calls.length;
    await ask(50);
    for (let i = 0; i < 8; i++) await null;
    expect(settledFrom(calls, before)).toContain(held.id);
  });

  it('two isolates on one bucket never admit more than it allows, and lose no token', async () => {
    const server = newServer();
    const a = isolate(server);
    const b = isolate(server);
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    let admitted = 0;
    for (let i = 0; i < 1000; i++) {
      at(i);
      const which = random() < 0.5 ? a : b;
      if ((await which.ask(1, { max_tokens: 100, refill_every_seconds: 3600 })).allowed) admitted += 1;
    }
    expect(admitted).toBeLessThanOrEqual(100);
    expect(admitted).toBeGreaterThan(90);
    // Both have been denied since, which settled their leases: nothing is held any more.
    expect(admitted + server.getStatus('k').remaining).toBe(100);
  });

  it('two isolates and refills: every window of admissions stays within the token-bucket bound', async () => {
    const server = newServer();
    const isolates = [isolate(server), isolate(server)];
    const policy = { max_tokens: 20, refill_every_seconds: 0.5 };
    let seed = 99;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const times: number[] = [];
    let t = 0;
    while (t < 30_000) {
      t += Math.floor(random() * 20);
      at(t);
      const which = isolates[random() < 0.5 ? 0 : 1]!;
      if ((await which.ask(1, policy)).allowed) times.push(t);
    }
    expect(isolates[0]!.local.localAnswers + isolates[1]!.local.localAnswers).toBeGreaterThan(0);
    expect(times.length).toBeGreaterThan(60);
    for (let i = 0; i < times.length; i++) {
      for (let j = i; j < times.length; j++) {
        const bound = 20 + Math.floor((times[j]! - times[i]!) / 500);
        if (j - i + 1 > bound) {
          throw new Error(`${j - i + 1} admitted in [${times[i]}, ${times[j]}] ms, bound ${bound}`);
        }
      }
    }
  });

  it('buckets are told apart by owner, scope, key and policy', async () => {
    const server = newServer();
    const { local, stub } = isolate(server);
    const ownerA = {};
    const ownerB = {};
    const tiny = { max_tokens: 1, refill_every_seconds: 3600 };
    expect((await local.limit(ownerA, 'o', stub, 'k', 1, tiny)).allowed).toBe(true);
    // Each of these is a bucket this isolate has not seen: it asks (and the object decides).
    await local.limit(ownerB, 'o', stub, 'k', 1, tiny);
    await local.limit(ownerA, 'p', stub, 'k', 1, tiny);
    await local.limit(ownerA, 'o', stub, 'j', 1, tiny);
    await local.limit(ownerA, 'o', stub, 'k', 1, { max_tokens: 2, refill_every_seconds: 3600 });
    expect(local.calls).toBe(5);
    expect(local.localAnswers).toBe(0);
  });

  describe('invalid input goes to the object, which throws', () => {
    it.each([
      ['cost -1', -1, SLOW, RangeError, 'cost'],
      ['cost NaN', NaN, SLOW, RangeError, 'cost'],
      ['cost Infinity', Infinity, SLOW, RangeError, 'cost'],
      ['cost a string', '1', SLOW, TypeError, 'cost'],
      ['policy with a typo', 1, { max_token: 5 }, TypeError, 'policy'],
      ['policy max_tokens 0', 1, { max_tokens: 0 }, RangeError, 'policy.max_tokens'],
      ['policy not an object', 1, 5, TypeError, 'policy'],
    ])('%s', async (_, cost, policy, kind, field) => {
      const server = newServer();
      const { ask, local, calls } = isolate(server);
      at(0);
      await ask(1, SLOW);
      const before = server.getStatus('k');
      const error = await ask(cost as number, policy as RateLimiterOptions).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error).toBeInstanceOf(kind);
      expect(error!.message).toContain(field);
      expect(local.calls).toBe(2);
      expect(calls).toHaveLength(2);
      expect(server.getStatus('k')).toEqual(before);
      // The bucket still answers.
      expect((await ask(1, SLOW)).allowed).toBe(true);
    });

    it('a key that is not a string', async () => {
      const server = newServer();
      const { local, stub } = isolate(server);
      const error = await local.limit({}, 'o', stub, 5 as never, 1, SLOW).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error).toBeInstanceOf(TypeError);
      expect(error!.message).toContain('key');
    });
  });

  it('rejects bad options', () => {
    const cases: [LocalLimitsOptions, ErrorConstructor, string][] = [
      [{ marginMs: -1 }, RangeError, 'local.marginMs'],
      [{ marginMs: 10_000 }, RangeError, 'local.marginMs'],
      [{ marginMs: NaN }, RangeError, 'local.marginMs'],
      [{ marginMs: '5' as never }, RangeError, 'local.marginMs'],
      [{ maxLease: -1 }, RangeError, 'local.maxLease'],
      [{ maxLease: 1.5 }, RangeError, 'local.maxLease'],
      [{ maxLease: Infinity }, RangeError, 'local.maxLease'],
      [{ clock: 5 as never }, TypeError, 'local.clock'],
      [{ maxHoldMs: 0 }, RangeError, 'local.maxHoldMs'],
      [{ maxHoldMs: NaN }, RangeError, 'local.maxHoldMs'],
      [{ maxHoldMs: '60000' as never }, TypeError, 'local.maxHoldMs'],
    ];
    for (const [options, kind, field] of cases) {
      let error: unknown;
      try {
        new LocalLimits(options);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(options)).toBeInstanceOf(kind);
      expect((error as Error).message).toContain(field);
    }
    expect(() => new LocalLimits({ marginMs: 0, maxLease: 0 })).not.toThrow();
    expect(() => new LocalLimits({ marginMs: 9999 })).not.toThrow();
    expect(() => new LocalLimits({ maxHoldMs: 1 })).not.toThrow();
    expect(() => new LocalLimits({ maxHoldMs: Infinity })).not.toThrow();
    expect(() => new LocalLimits()).not.toThrow();
  });

  it('the middleware checks its local option when it is made', () => {
    const base = { binding: 'LIMITER', policy: SLOW };
    expect(() => rateLimit({ ...base, local: { marginMs: -1 } })).toThrow(RangeError);
    expect(() => rateLimit({ ...base, local: { maxLeases: 5 } as never })).toThrow(/options\.local has no field "maxLeases"/);
    expect(() => rateLimit({ ...base, local: 'yes' as never })).toThrow(TypeError);
    expect(() => rateLimit({ ...base, local: null as never })).toThrow(TypeError);
    expect(() => rateLimit({ ...base, local: true })).not.toThrow();
    expect(() => rateLimit({ ...base, local: new LocalLimits() })).not.toThrow();
    expect(() => rateLimit({ ...base, local: { maxLease: 10 } })).not.toThrow();
  });
});

describe('LocalLimits.refund', () => {
  /** A refund stub over `server` that counts its calls. */
  const refunding = (server: RateLimiterServer) => {
    const refunds: number[] = [];
    return { refunds, stub: { refund: async (key: string, cost: number) => void (refunds.push(cost), server.refund(key, cost)) } };
  };
  const TEN: RateLimiterOptions = { max_tokens: 10, refill_every_seconds: 3600 };

  it('goes back to the live lease that spent it, with no call: the bucket admits one more in all', async () => {
    const server = newServer();
    // Plain leases: with shares, the call that empties the bucket puts this isolate in the
    // queue, and the token its last lease gives back waits for its turn.
    const { local, ask, owner } = isolate(server, { shares: false });
    const { refunds, stub } = refunding(server);
    const HUNDRED: RateLimiterOptions = { max_tokens: 100, refill_every_seconds: 3600 };
    for (let i = 0; i < 10; i++) {
      at(i);
      expect((await ask(1, HUNDRED)).allowed).toBe(true);
    }
    const calls = local.calls;
    await local.refund(owner, 'o', stub, 'k', 1, HUNDRED);
    expect(refunds).toEqual([]);
    expect(local.calls).toBe(calls);
    // Until the first denial (no refill meanwhile): 100 tokens and the one given back.
    let admitted = 10;
    for (let i = 10; i < 300; i++) {
      at(i);
      if (!(await ask(1, HUNDRED)).allowed) break;
      admitted += 1;
    }
    expect(admitted).toBe(101);
  });

  it('is a call when no live lease on the bucket has spent it (none yet, or after a settle)', async () => {
    const server = newServer();
    const { local, owner } = isolate(server);
    const { refunds, stub } = refunding(server);
    server.limit('k', 3, TEN);
    await local.refund(owner, 'o', stub, 'k', 2, TEN);
    expect(refunds).toEqual([2]);
    expect(local.calls).toBe(1);
    expect(server.getStatus('k').remaining).toBe(9);
  });
});
