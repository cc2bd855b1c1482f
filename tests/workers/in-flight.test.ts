// The middleware's concurrency limit (docs/SPEC.md, 12.8) inside workerd, on the real
// RateLimiterServer behind env.LIMITER: a request holds a permit from before the handler until
// its response has been sent (a body read to the end or cancelled, a streamed one included),
// or the handler threw; with rate policies, one call decides both, all or nothing. Handlers
// wait on promises the test resolves; waitUntil work is collected and awaited. Each test has
// its own client address (198.51.100.18x).
import { env } from 'cloudflare:workers';
import { checkRateLimit, honoRateLimit, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { RateLimiterNamespace, RateLimitMiddlewareOptions } from '@delightstack/rate-limiter/middleware';
import { Hono } from 'hono';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { collectingContext } from './support';

const T0 = Date.UTC(2026, 3, 1);
const stub = (key: string) => env.LIMITER.get(env.LIMITER.idFromName(key));
const request = (ip: string) => new Request('https://example.com/generate', { headers: { 'CF-Connecting-IP': ip } });
const GATE = { max_in_flight: 2, ttl_seconds: 120 };

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** A handler whose responses wait until the test lets each one go. */
function held() {
  const gates: (() => void)[] = [];
  const handler = () =>
    new Promise<Response>((resolve) => gates.push(() => resolve(new Response('done'))));
  // Polls (vi.waitUntil lets I/O run between checks): a handler is called only once its
  // limiter call has answered, which a loop of microtasks alone would never let in.
  const letGo = async () => {
    await vi.waitUntil(() => gates.length > 0);
    gates.shift()!();
  };
  return { handler, letGo };
}

describe('concurrency: requests in flight', () => {
  it('admits max_in_flight at once; the next gets the concurrent-requests 429; a finished response frees its slot', async () => {
    const { context, settled } = collectingContext();
    const { handler, letGo } = held();
    const fetch = rateLimit({ binding: 'LIMITER', concurrency: GATE })(handler);
    const ip = '198.51.100.180';
    const first = fetch(request(ip), env, context);
    const second = fetch(request(ip), env, context);
    // Both hold their permits while their handlers run.
    await vi.waitUntil(async () => (await stub(ip).gateStatus('concurrency')).in_flight === 2);
    const third = await fetch(request(ip), env, context);
    expect(third.status).toBe(429);
    expect(third.headers.get('RateLimit-Policy')).toBe('"concurrency";q=2;qu="concurrent-requests"');
    expect(third.headers.get('RateLimit')).toBe('"concurrency";r=0;t=1');
    expect(third.headers.get('Retry-After')).toBe('1');
    expect(((await third.json()) as Record<string, unknown>)['violated-policies']).toEqual(['concurrency']);

    // The handler let go is the one called first: either request's, as their answers came.
    await letGo();
    const firstDone = await Promise.race([first.then(() => true), second.then(() => false)]);
    const done = await (firstDone ? first : second);
    const other = firstDone ? second : first;
    // (Its headers are its decision's: one or no slot was left then.)
    expect(done.headers.get('RateLimit')).toMatch(/^"concurrency";r=[01]$/);
    // Held until the body has been read.
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(2);
    expect(await done.text()).toBe('done');
    await settled();
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(1);
    const fourth = fetch(request(ip), env, context);
    await vi.waitUntil(async () => (await stub(ip).gateStatus('concurrency')).in_flight === 2);
    await letGo();
    await letGo();
    for (const response of [await other, await fourth]) await response.text();
    await settled();
    expect(await stub(ip).gateStatus('concurrency')).toEqual({ in_flight: 0, permits: 0 });
  });

  it('a streamed body holds its permit until it ends, or until the client cancels it', async () => {
    const { context, settled } = collectingContext();
    const ip = '198.51.100.181';
    let push: ReadableStreamDefaultController<Uint8Array>;
    const fetch = rateLimit({ binding: 'LIMITER', concurrency: { max_in_flight: 1 } })(
      async () => new Response(new ReadableStream<Uint8Array>({ start: (c) => void (push = c) })),
    );
    const streamed = await fetch(request(ip), env, context);
    const reader = streamed.body!.getReader();
    push!.enqueue(new TextEncoder().encode('part'));
    expect((await reader.read()).done).toBe(false);
    expect((await fetch(request(ip), env, context)).status).toBe(429);
    push!.close();
    expect((await reader.read()).done).toBe(true);
    await settled();
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(0);

    const cancelled = await fetch(request(ip), env, context);
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(1);
    await cancelled.body!.cancel('client went away');
    await settled();
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(0);
  });

  it('a handler that throws releases its permit; a response without a body releases at once', async () => {
    const { context, settled } = collectingContext();
    const ip = '198.51.100.182';
    const failing = rateLimit({ binding: 'LIMITER', concurrency: { max_in_flight: 1 } })(async () => {
      throw new Error('handler broke');
    });
    await expect(failing(request(ip), env, context)).rejects.toThrow('handler broke');
    await settled();
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(0);
    const empty = rateLimit({ binding: 'LIMITER', concurrency: { max_in_flight: 1 } })(async () => new Response(null, { status: 204 }));
    expect((await empty(request(ip), env, context)).status).toBe(204);
    await settled();
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(0);
  });

  it('with a rate policy: one call per request, all or nothing', async () => {
    const { context, settled } = collectingContext();
    const ip = '198.51.100.183';
    let calls = 0;
    const counting = {
      idFromName: (name: string) => env.LIMITER.idFromName(name),
      get: (id: DurableObjectId) => {
        const real = env.LIMITER.get(id);
        return {
          limit: (...args: Parameters<typeof real.limit>) => (calls++, real.limit(...args)),
          limitAll: (...args: Parameters<typeof real.limitAll>) => (calls++, real.limitAll(...args)),
          release: (...args: Parameters<typeof real.release>) => real.release(...args),
        };
      },
    } satisfies RateLimiterNamespace<DurableObjectId>;
    const policy = { name: 'api', max_tokens: 2, refill_every_seconds: 60 };
    const fetch = rateLimit({ binding: counting, policy, concurrency: { max_in_flight: 5 } })(async () => new Response('ok'));
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const response = await fetch(request(ip), env, context);
      statuses.push(response.status);
      expect(response.headers.get('RateLimit-Policy')).toBe('"api";q=2;w=120, "concurrency";q=5;qu="concurrent-requests"');
      await response.text();
      await settled();
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(calls).toBe(3);
    // The rate denied the third: it took no permit.
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(0);
  });

  it('checkRateLimit gives release() for other frameworks; Hono releases when the response is finished', async () => {
    const ip = '198.51.100.184';
    const options: RateLimitMiddlewareOptions = { binding: 'LIMITER', concurrency: { max_in_flight: 1 } };
    const result = await checkRateLimit(request(ip), env, options);
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(1);
    expect((await checkRateLimit(request(ip), env, options)).response?.status).toBe(429);
    await result.release();
    await result.release();
    expect((await stub(ip).gateStatus('concurrency')).in_flight).toBe(0);

    const { context, settled } = collectingContext();
    const app = new Hono<{ Bindings: Cloudflare.Env }>();
    app.use('/generate', honoRateLimit({ binding: 'LIMITER', concurrency: { max_in_flight: 1 } }));
    app.get('/generate', (c) => c.text('generated'));
    const response = await app.request('/generate', { headers: { 'CF-Connecting-IP': '198.51.100.185' } }, env, context);
    expect((await stub('198.51.100.185').gateStatus('concurrency')).in_flight).toBe(1);
    expect(await response.text()).toBe('generated');
    await settled();
    expect((await stub('198.51.100.185').gateStatus('concurrency')).in_flight).toBe(0);
  });

  it('bad options are TypeErrors at startup', () => {
    const cases: [unknown, string][] = [
      [{ binding: 'LIMITER', concurrency: 4 }, 'options.concurrency must be an object, got number 4'],
      [{ binding: 'LIMITER', concurrency: { name: '', max_in_flight: 1 } }, 'options.concurrency.name must be non-empty printable ASCII text, got string ""'],
      [{ binding: 'LIMITER', policy: { name: 'api' }, concurrency: { name: 'api', max_in_flight: 1 } }, 'options.concurrency.name "api" is a policy\'s name too: the headers need each once'],
      [{ binding: 'LIMITER', concurrency: { max_in_flight: 1 }, local: true }, 'options.local and options.concurrency do not go together: a permit is held by the Durable Object, so every request calls it anyway'],
      [{ binding: 'LIMITER' }, 'options.policy must be an object, got undefined'],
    ];
    for (const [options, message] of cases) {
      expect(() => rateLimit(options as RateLimitMiddlewareOptions), message).toThrow(new TypeError(message));
    }
  });
});
