// Edge-local decisions inside workerd: the middleware's `local` mode (LocalLimits) and the
// lease methods (limitLeased, settle, refund) over real RPC to LIMITER, whose class depends on
// the project (memory: RateLimiterServer; durable: DurableRateLimiterServer on SQLite).
// RPCs are counted on the object's side: the methods of its class are wrapped, from inside
// the object (runInDurableObject), for the time of a test. The object runs in the test
// isolate, so vi.setSystemTime reaches its Date.now(). Each test has its own object.
import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { DurableRateLimiterServer, type RateLimiterServer } from '@delightstack/rate-limiter';
import { LocalLimits, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { RateLimitMiddlewareOptions } from '@delightstack/rate-limiter/middleware';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection } from './support';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const ctx = createExecutionContext();
const SLOW = { max_tokens: 10, refill_every_seconds: 3600 };
const HOUR = 3_600_000;

const METHODS = ['limit', 'limitLeased', 'limitAll', 'settle', 'refund'] as const;
/** Calls per method, and `renewals`: the limitLeased calls of cost 0 (renewals ahead of time). */
type Counts = Record<(typeof METHODS)[number] | 'renewals', number>;
let unpatch: (() => void)[] = [];

/**
 * Counts the RPC methods the object behind `stub` runs, from now until the test ends: each
 * method is wrapped on the prototype of its class that defines it, inside the object.
 */
async function countCalls(stub: ReturnType<typeof limiter>): Promise<Counts> {
  const counts: Counts = { limit: 0, limitLeased: 0, limitAll: 0, settle: 0, refund: 0, renewals: 0 };
  await runInDurableObject(stub, (instance: RateLimiterServer) => {
    for (const name of METHODS) {
      let proto = Object.getPrototypeOf(instance) as Record<string, unknown> | null;
      while (proto !== null && !Object.hasOwn(proto, name)) proto = Object.getPrototypeOf(proto);
      if (proto === null) throw new Error(`no method ${name}`);
      const owner = proto;
      const original = owner[name] as (...args: unknown[]) => unknown;
      owner[name] = function (this: unknown, ...args: unknown[]) {
        counts[name] += 1;
        if (name === 'limitLeased' && args[1] === 0) counts.renewals += 1;
        return original.apply(this, args);
      };
      unpatch.push(() => {
        owner[name] = original;
      });
    }
  });
  return counts;
}

/** The middleware on a handler that answers 200, for the client `client`. */
function limited(client: string, options: Partial<RateLimitMiddlewareOptions>) {
  const handler = rateLimit({ binding: 'LIMITER', key: () => client, ...options } as RateLimitMiddlewareOptions)(
    async () => new Response('ok'),
  );
  return () => handler(new Request('https://example.com/api'), env, ctx);
}

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});

afterEach(async () => {
  // Renewals ahead of time run in the background (waitUntil): none may reach the next test.
  await waitOnExecutionContext(ctx);
  for (const undo of unpatch.reverse()) undo();
  unpatch = [];
  vi.useRealTimers();
});

describe('the middleware with local decisions', () => {
  it('200 requests on max_tokens 50 admit exactly 50', async () => {
    const local = new LocalLimits();
    const counts = await countCalls(limiter('local-exact'));
    const request = limited('local-exact', {
      policy: { name: 'api', max_tokens: 50, refill_every_seconds: 3600 },
      local,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++) {
      at(i * 5);
      statuses.push((await request()).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(50);
    expect(statuses.filter((s) => s === 429)).toHaveLength(150);
    expect(statuses.slice(0, 50).every((s) => s === 200)).toBe(true);
    // Most were answered in the isolate; every call the isolate made reached the object.
    await waitOnExecutionContext(ctx);
    expect(local.localAnswers).toBeGreaterThan(100);
    expect(counts.limitLeased + counts.limit + counts.settle).toBe(local.calls);
    // The denial settled the last lease: nothing is left out.
    expect(await limiter('local-exact').getStatus('api')).toMatchObject({ remaining: 0 });
  });

  it('local: true also admits exactly the bucket', async () => {
    const request = limited('local-true', {
      policy: { name: 'api-true', max_tokens: 20, refill_every_seconds: 3600 },
      local: true,
    });
    let admitted = 0;
    for (let i = 0; i < 60; i++) {
      at(i);
      if ((await request()).status === 200) admitted += 1;
    }
    expect(admitted).toBe(20);
  });

  it('2,000 requests at a high limit make at most 100 calls, counted by the object', async () => {
    const local = new LocalLimits();
    const counts = await countCalls(limiter('local-rare'));
    const request = limited('local-rare', {
      policy: { name: 'api', max_tokens: 1_000_000, refill_every_seconds: 3600 },
      local,
    });
    for (let i = 0; i < 2000; i++) {
      at(Math.floor(i / 4));
      expect((await request()).status).toBe(200);
    }
    await waitOnExecutionContext(ctx);
    const rpcs = counts.limit + counts.limitLeased + counts.settle;
    console.log(
      `local mode, 2,000 requests: ${rpcs} RPCs counted by the object (limitLeased ${counts.limitLeased}, of which ${counts.renewals} renewals ahead of time; limit ${counts.limit}; settle ${counts.settle}); the isolate counted ${local.calls} calls and ${local.localAnswers} local answers`,
    );
    expect(rpcs).toBeGreaterThan(0);
    expect(rpcs).toBeLessThanOrEqual(100);
    expect(rpcs).toBe(local.calls);
    expect(counts.renewals).toBeGreaterThan(0);
    // Every request was answered here or by its own call; renewals and settles answer none.
    expect(local.localAnswers).toBe(2000 - (local.calls - counts.renewals - counts.settle));
  });

  it('the counter sees every call: without local mode, 50 requests are 50 limit() calls', async () => {
    const counts = await countCalls(limiter('local-off'));
    const request = limited('local-off', { policy: { name: 'api', max_tokens: 1000 } });
    for (let i = 0; i < 50; i++) await request();
    expect(counts).toMatchObject({ limit: 50, limitLeased: 0 });
  });

  it('several policies (limitAll): one call per request, local or not', async () => {
    const local = new LocalLimits();
    const counts = await countCalls(limiter('local-all'));
    const request = limited('local-all', {
      policy: [
        { name: 'second', max_tokens: 1000, refill_every_seconds: 1 },
        { name: 'hour', max_tokens: 5, refill_every_seconds: 3600 },
      ],
      local,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      at(i);
      statuses.push((await request()).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(counts).toMatchObject({ limitAll: 40, limit: 0, limitLeased: 0 });
    expect(local.calls + local.localAnswers).toBe(0);
  });
});

describe('lease methods over RPC', () => {
  it('a grant is at most half of what is left; settle returns the unused tokens', async () => {
    const stub = limiter('lease-rpc');
    const first = await stub.limitLeased('k', 2, SLOW, { want: 100 });
    expect(first).toMatchObject({ allowed: true, remaining: 4, limit: 10, retry_after_ms: 0 });
    expect(first.lease).toEqual({ id: expect.any(Number), tokens: 4, ttl_ms: 10_000 });
    expect(await stub.getStatus('k')).toEqual({ remaining: 4, limit: 10, reset_in_ms: HOUR });
    const second = await stub.limitLeased('k', 1, SLOW, { want: 100 });
    expect(second.lease?.tokens).toBe(1.5);
    at(1000);
    expect(await stub.settle('k', { id: first.lease!.id, used: 1 })).toBe(true);
    expect((await stub.getStatus('k')).remaining).toBe(4.5);
    expect(await stub.settle('k', { id: first.lease!.id, used: 1 })).toBe(false);
    // Settling with the next limitLeased: unused back first, then the cost.
    const third = await stub.limitLeased('k', 1, SLOW, { settle: { id: second.lease!.id, used: 0.5 } });
    expect(third).toMatchObject({ allowed: true, remaining: 4.5, lease: null });
  });

  it('refund gives tokens back up to capacity', async () => {
    const stub = limiter('lease-refund');
    await stub.limit('k', 8, SLOW);
    await stub.refund('k', 3);
    expect((await stub.getStatus('k')).remaining).toBe(5);
    await stub.refund('k', 100);
    expect(await stub.getStatus('k')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('an expired lease counts as fully used', async () => {
    const stub = limiter('lease-expiry');
    const a = (await stub.limitLeased('a', 1, SLOW, { want: 4 })).lease!;
    const b = (await stub.limitLeased('b', 1, SLOW, { want: 4 })).lease!;
    at(9_999);
    expect(await stub.settle('a', { id: a.id, used: 0 })).toBe(true);
    expect((await stub.getStatus('a')).remaining).toBe(9);
    at(10_000);
    expect(await stub.settle('b', { id: b.id, used: 0 })).toBe(false);
    expect((await stub.getStatus('b')).remaining).toBe(5);
  });

  it('bad input rejects with the error naming the field, state untouched', async () => {
    const stub = limiter('lease-validation');
    const held = (await stub.limitLeased('k', 1, SLOW, { want: 4 })).lease!;
    const before = await stub.getStatus('k');
    const cases: [() => Promise<unknown>, 'TypeError' | 'RangeError', RegExp][] = [
      [() => stub.limitLeased('k', 1, SLOW, { want: -1 }), 'RangeError', /^lease\.want /],
      [() => stub.limitLeased('k', 1, SLOW, { want: '2' as never }), 'TypeError', /^lease\.want /],
      [() => stub.limitLeased('k', 1, SLOW, { wants: 2 } as never), 'TypeError', /^lease has no field "wants"/],
      [
        () => stub.limitLeased('k', 1, SLOW, { settle: { id: 'x' as never, used: 0 } }),
        'TypeError',
        /^lease\.settle\.id /,
      ],
      [
        () => stub.limitLeased('k', 1, SLOW, { want: 1, settle: { id: held.id, used: -1 } }),
        'RangeError',
        /^lease\.settle\.used /,
      ],
      [() => stub.limitLeased('k', 1, { max_token: 1 } as never, { settle: { id: held.id, used: 0 } }), 'TypeError', /policy/],
      [() => stub.limitLeased('k', -1, SLOW, { settle: { id: held.id, used: 0 } }), 'RangeError', /cost/],
      [() => stub.settle('k', { id: held.id } as never), 'TypeError', /^lease\.used /],
      [() => stub.settle('k', { id: held.id, used: 0, more: 1 } as never), 'TypeError', /^lease has no field "more"/],
      [() => stub.refund('k', undefined as never), 'TypeError', /^tokens /],
      [() => stub.refund('k', -1), 'RangeError', /^tokens /],
      [() => stub.refund('k', NaN), 'RangeError', /^tokens /],
    ];
    for (const [call, name, message] of cases) {
      const error = await rejection(call());
      expect(error, String(message)).toBeInstanceOf(name === 'TypeError' ? TypeError : RangeError);
      expect(error?.name).toBe(name);
      expect(error?.message).toMatch(message);
      expect(await stub.getStatus('k')).toEqual(before);
    }
    // The lease is still live.
    expect(await stub.settle('k', { id: held.id, used: 0 })).toBe(true);
    expect((await stub.getStatus('k')).remaining).toBe(9);
  });
});

describe('the durable class keeps leases when its memory is discarded', () => {
  const isDurable = (stub: ReturnType<typeof limiter>) =>
    runInDurableObject(stub, (instance: RateLimiterServer) => instance instanceof DurableRateLimiterServer);

  it('a fresh instance on the same state: the leased tokens are still out', async (test) => {
    const stub = limiter('lease-fresh');
    if (!(await isDurable(stub))) return test.skip();
    const { lease } = await stub.limitLeased('k', 1, SLOW, { want: 4 });
    at(2000);
    await runInDurableObject(stub, (_: unknown, state: DurableObjectState) => {
      const fresh = new DurableRateLimiterServer(state, env);
      expect(fresh.getStatus('k')).toEqual({ remaining: 5, limit: 10, reset_in_ms: HOUR - 2000 });
      expect(fresh.limit('k', 6, SLOW).allowed).toBe(false);
      expect(fresh.settle('k', { id: lease!.id, used: 2 })).toBe(true);
      expect(fresh.getStatus('k').remaining).toBe(7);
    });
  });

  it('ctx.abort(): the next object finds the leased tokens out, and the lease settles', async (test) => {
    const name = 'lease-abort';
    if (!(await isDurable(limiter(name)))) return test.skip();
    const { lease } = await limiter(name).limitLeased('k', 1, SLOW, { want: 4 });
    const aborted = await rejection(
      runInDurableObject(limiter(name), (_: unknown, state: DurableObjectState) => {
        state.abort('test: discard the memory');
      }),
    );
    expect(aborted).toBeInstanceOf(Error);
    at(1000);
    expect(await limiter(name).getStatus('k')).toEqual({ remaining: 5, limit: 10, reset_in_ms: HOUR - 1000 });
    expect((await limiter(name).limit('k', 6, SLOW)).allowed).toBe(false);
    expect(await limiter(name).settle('k', { id: lease!.id, used: 0 })).toBe(true);
    expect((await limiter(name).getStatus('k')).remaining).toBe(9);
  });

  // Restored with its leases, the bucket is kept even when it would be full without them:
  // otherwise the fresh instance would read 10 while 3 tokens are out, 13 on a bucket of 10.
  it('a bucket at capacity with its lease: a fresh instance mints nothing', async (test) => {
    const stub = limiter('lease-fresh-capacity');
    if (!(await isDurable(stub))) return test.skip();
    const fast = { max_tokens: 10, refill_every_seconds: 1 };
    const { lease } = await stub.limitLeased('k', 1, fast, { want: 3 });
    expect(lease?.tokens).toBe(3);
    at(5000); // 6 + 5 refills, stopped at 7 by the 3 leased
    expect((await stub.getStatus('k')).remaining).toBe(7);
    await runInDurableObject(stub, (_: unknown, state: DurableObjectState) => {
      const fresh = new DurableRateLimiterServer(state, env);
      expect(fresh.getStatus('k').remaining).toBe(7);
      expect(fresh.limit('k', 8, fast).allowed).toBe(false);
    });
  });

  it('after ctx.abort() the in-memory class has forgotten the lease (the difference)', async (test) => {
    const name = 'lease-abort-memory';
    if (await isDurable(limiter(name))) return test.skip();
    const { lease } = await limiter(name).limitLeased('k', 1, SLOW, { want: 4 });
    await rejection(
      runInDurableObject(limiter(name), (_: unknown, state: DurableObjectState) => {
        state.abort('test: discard the memory');
      }),
    );
    expect(await limiter(name).getStatus('k')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
    expect(await limiter(name).settle('k', { id: lease!.id, used: 0 })).toBe(false);
  });
});
