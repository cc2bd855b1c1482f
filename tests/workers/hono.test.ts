// honoRateLimit inside a real Hono app, in workerd, on the real RateLimiterServer behind
// env.LIMITER (fake timers reach its Date.now(): it runs in the test isolate). Each test has
// its own client address (198.51.100.1xx) or policy name, so its own bucket. The type tests
// at the end are compiled by the root `tsc --noEmit`.
import { env } from 'cloudflare:workers';
import { honoRateLimit } from '@delightstack/rate-limiter/middleware';
import type { RateLimiterNamespace } from '@delightstack/rate-limiter/middleware';
import { Hono } from 'hono';
import type { Context, MiddlewareHandler } from 'hono';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

type AppEnv = { Bindings: Cloudflare.Env; Variables: { user: string } };

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const stub = (key: string) => env.LIMITER.get(env.LIMITER.idFromName(key));
const policy = { name: 'api', max_tokens: 2, refill_every_seconds: 10 };

/** app.request with a client address, into `bindings` (the real env unless given). */
const call = (app: Hono<any>, path: string, ip: string, bindings: object = env, headers: Record<string, string> = {}) =>
  app.request(path, { headers: { 'CF-Connecting-IP': ip, ...headers } }, bindings);

async function problem(response: Response) {
  expect(response.headers.get('Content-Type')).toBe('application/problem+json');
  return (await response.json()) as Record<string, unknown>;
}

/** An app limiting /api/* (the handler counts its runs), with an unlimited /public. */
function app(options: Parameters<typeof honoRateLimit>[0] = { binding: 'LIMITER', policy }) {
  const runs = { count: 0 };
  const hono = new Hono<AppEnv>();
  hono.use('/api/*', honoRateLimit(options));
  hono.get('/api/hello', (c) => {
    runs.count += 1;
    c.header('X-Handler', 'yes');
    return c.json({ hello: 'world' }, 201);
  });
  hono.get('/public', (c) => c.text('public'));
  return { hono, runs };
}

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('honoRateLimit in a Hono app', () => {
  it('adds the headers to allowed responses and answers 429 problem+json without running the route', async () => {
    const { hono, runs } = app();
    const ip = '198.51.100.101';
    for (const left of [1, 0]) {
      const response = await call(hono, '/api/hello', ip);
      expect(response.status).toBe(201);
      expect(response.headers.get('X-Handler')).toBe('yes');
      expect(await response.json()).toEqual({ hello: 'world' });
      expect(response.headers.get('RateLimit-Policy')).toBe('"api";q=2;w=20');
      expect(response.headers.get('RateLimit')).toBe(`"api";r=${left};t=10`);
      expect(response.headers.get('X-RateLimit-Remaining')).toBe(String(left));
      expect(response.headers.get('Retry-After')).toBeNull();
    }
    at(4_000);
    const denied = await call(hono, '/api/hello', ip);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBe('6');
    expect(denied.headers.get('RateLimit')).toBe('"api";r=0;t=6');
    expect(denied.headers.get('X-Handler')).toBeNull();
    expect(await problem(denied)).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Quota exceeded for policy "api"; retry after 6 seconds.',
      'violated-policies': ['api'],
    });
    expect(runs.count).toBe(2);

    // Routes outside the middleware's path are neither limited nor counted.
    const open = await call(hono, '/public', ip);
    expect(open.status).toBe(200);
    expect(open.headers.get('RateLimit')).toBeNull();
    expect(await stub(ip).getStatus('api')).toEqual({ remaining: 0, limit: 2, reset_in_ms: 6_000 });

    at(10_000);
    expect((await call(hono, '/api/hello', ip)).status).toBe(201);
  });

  it('keys by CF-Connecting-IP by default: another address has its own bucket', async () => {
    const { hono } = app();
    await call(hono, '/api/hello', '198.51.100.102');
    await call(hono, '/api/hello', '198.51.100.102');
    expect((await call(hono, '/api/hello', '198.51.100.102')).status).toBe(429);
    expect((await call(hono, '/api/hello', '198.51.100.103')).status).toBe(201);
  });

  it('adds the headers to a handler response whose headers are immutable', async () => {
    const hono = new Hono<AppEnv>();
    hono.use(honoRateLimit({ binding: 'LIMITER', policy }));
    hono.get('/go', () => Response.redirect('https://example.com/there', 307));
    const response = await call(hono, '/go', '198.51.100.104');
    expect(response.status).toBe(307);
    expect(response.headers.get('Location')).toBe('https://example.com/there');
    expect(response.headers.get('RateLimit')).toBe('"api";r=1;t=10');
  });

  it('gives key, cost and denied Hono\'s c, typed as the app\'s Context', async () => {
    const hono = new Hono<AppEnv>();
    hono.use(async (c, next) => {
      c.set('user', c.req.header('X-User') ?? 'anonymous');
      await next();
    });
    hono.use(
      '/api/*',
      honoRateLimit<Context<AppEnv>>({
        binding: (e) => e.LIMITER,
        policy: { name: 'per-user', max_tokens: 3, refill_every_seconds: 60 },
        key: (_request, _env, c) => `user:${c.get('user')}`,
        cost: (request, _env, c) => (c.req.method === 'GET' && request.url.endsWith('/big') ? 3 : 1),
        denied: (_request, decision, _env, c) =>
          c.json({ error: 'slow down', user: c.get('user'), retry_after_ms: decision.retry_after_ms }, 429),
      }),
    );
    hono.get('/api/*', (c) => c.text(`hi ${c.get('user')}`));

    const ada = { 'X-User': 'ada' };
    expect(await (await call(hono, '/api/small', '198.51.100.105', env, ada)).text()).toBe('hi ada');
    expect((await stub('user:ada').getStatus('per-user')).remaining).toBe(2);
    // Another address, same user: same bucket; the big request costs 3.
    const denied = await call(hono, '/api/big', '198.51.100.106', env, ada);
    expect(denied.status).toBe(429);
    expect(await denied.json()).toEqual({ error: 'slow down', user: 'ada', retry_after_ms: 60_000 });
    expect(denied.headers.get('RateLimit')).toBe('"per-user";r=0;t=60');
    expect(denied.headers.get('Retry-After')).toBe('60');
    // Another user from the first address is not affected.
    expect((await call(hono, '/api/big', '198.51.100.105', env, { 'X-User': 'bob' })).status).toBe(200);
  });

  it('applies several policies at once and names the violated ones', async () => {
    const { hono, runs } = app({
      binding: 'LIMITER',
      policy: [
        { name: 'burst', max_tokens: 1, refill_every_seconds: 1 },
        { name: 'daily', max_tokens: 100, refill_every_seconds: 864 },
      ],
    });
    const ok = await call(hono, '/api/hello', '198.51.100.107');
    expect(ok.headers.get('RateLimit')).toBe('"burst";r=0;t=1, "daily";r=99;t=864');
    const denied = await call(hono, '/api/hello', '198.51.100.107');
    expect(denied.status).toBe(429);
    expect(await problem(denied)).toMatchObject({ 'violated-policies': ['burst'] });
    expect((await stub('198.51.100.107').getStatus('daily')).remaining).toBe(99);
    expect(runs.count).toBe(1);
  });

  it('stacks with another limit on a route: both show in the RateLimit lists', async () => {
    const hono = new Hono<AppEnv>();
    hono.use(honoRateLimit({ binding: 'LIMITER', policy: { name: 'global', max_tokens: 100, refill_every_seconds: 1 } }));
    hono.post('/login', honoRateLimit({ binding: 'LIMITER', policy: { name: 'login', max_tokens: 1, refill_every_seconds: 300 } }), (c) =>
      c.text('welcome'),
    );
    const login = (ip: string) =>
      hono.request('/login', { method: 'POST', headers: { 'CF-Connecting-IP': ip } }, env);
    const ok = await login('198.51.100.108');
    expect(ok.headers.get('RateLimit-Policy')).toBe('"login";q=1;w=300, "global";q=100;w=100');
    expect(ok.headers.get('RateLimit')).toBe('"login";r=0;t=300, "global";r=99;t=1');
    const denied = await login('198.51.100.108');
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBe('300');
    expect(denied.headers.get('X-RateLimit-Limit')).toBe('1');
    expect(denied.headers.get('RateLimit')).toBe('"login";r=0;t=300, "global";r=98;t=1');
  });

  it('adds the headers to the response of app.onError when the route throws (the request was counted)', async () => {
    const hono = new Hono<AppEnv>();
    hono.use(honoRateLimit({ binding: 'LIMITER', policy }));
    hono.get('/boom', () => {
      throw new Error('route broke');
    });
    hono.onError((err, c) => c.text(`handled: ${err.message}`, 500));
    const response = await call(hono, '/boom', '198.51.100.109');
    expect(response.status).toBe(500);
    expect(await response.text()).toBe('handled: route broke');
    expect(response.headers.get('RateLimit')).toBe('"api";r=1;t=10');
  });
});

describe('honoRateLimit: skip and a choice of headers', () => {
  it('skip lets a request through untouched and uncounted; only the standard headers when legacyHeaders is false', async () => {
    const { hono, runs } = app({
      binding: 'LIMITER',
      policy: { name: 'choice', max_tokens: 1, refill_every_seconds: 10 },
      skip: (request) => request.headers.get('X-Monitor') === 'yes',
      legacyHeaders: false,
    });
    const ip = '198.51.100.140';
    for (let i = 0; i < 3; i++) {
      const skipped = await call(hono, '/api/hello', ip, env, { 'X-Monitor': 'yes' });
      expect(skipped.status).toBe(201);
      expect(skipped.headers.get('RateLimit')).toBeNull();
    }
    const allowed = await call(hono, '/api/hello', ip);
    expect(allowed.status).toBe(201);
    expect(allowed.headers.get('RateLimit')).toBe('"choice";r=0;t=10');
    expect(allowed.headers.get('X-RateLimit-Remaining')).toBeNull();
    const denied = await call(hono, '/api/hello', ip);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBe('10');
    expect(denied.headers.get('X-RateLimit-Limit')).toBeNull();
    expect(runs.count).toBe(4);
  });
});

describe('honoRateLimit: counting only failures', () => {
  it('gives back the cost of successful requests; a 4xx and a route that threw count', async () => {
    const policy = { name: 'login', max_tokens: 3, refill_every_seconds: 300 };
    const pending: Promise<unknown>[] = [];
    const executionCtx = { waitUntil: (p: Promise<unknown>) => void pending.push(p), passThroughOnException: () => {}, props: {} };
    const hono = new Hono<AppEnv>();
    hono.use('/login/*', honoRateLimit({ binding: 'LIMITER', policy, skipSuccessfulRequests: true }));
    hono.post('/login/ok', (c) => c.text('welcome'));
    hono.post('/login/wrong', (c) => c.text('no', 401));
    hono.post('/login/broken', () => {
      throw new Error('broken');
    });
    hono.onError((_error, c) => c.text('error', 500));
    const post = async (path: string) => {
      const response = await hono.request(path, { method: 'POST', headers: { 'CF-Connecting-IP': '198.51.100.141' } }, env, executionCtx as never);
      await Promise.all(pending.splice(0));
      return response.status;
    };
    for (let i = 0; i < 5; i++) expect(await post('/login/ok')).toBe(200);
    expect(await post('/login/wrong')).toBe(401);
    expect(await post('/login/broken')).toBe(500);
    expect(await post('/login/ok')).toBe(200);
    expect(await post('/login/wrong')).toBe(401);
    expect(await post('/login/wrong')).toBe(429);
  });
});

describe('honoRateLimit when the Durable Object call fails', () => {
  const error = Object.assign(new Error('Durable Object is overloaded. Too many requests queued.'), { overloaded: true });
  const failing = {
    idFromName: (name: string) => name,
    get: () => ({ limit: () => Promise.reject(error), limitAll: () => Promise.reject(error) }),
  } satisfies RateLimiterNamespace<string>;
  const bindings = { ...env, LIMITER: failing };

  it('fails closed by default: 503 problem+json, the route does not run', async () => {
    const onError = vi.fn();
    const { hono, runs } = app({ binding: 'LIMITER', policy, onError });
    const response = await call(hono, '/api/hello', '198.51.100.110', bindings);
    expect(response.status).toBe(503);
    expect(response.headers.get('Retry-After')).toBe('1');
    expect(response.headers.get('RateLimit')).toBeNull();
    expect(await problem(response)).toMatchObject({ type: 'about:blank', status: 503 });
    expect(runs.count).toBe(0);
    expect(onError).toHaveBeenCalledExactlyOnceWith(error, expect.any(Request));
  });

  it('fails open with failOpen: the route runs, without rate-limit headers', async () => {
    const onError = vi.fn();
    const { hono, runs } = app({ binding: 'LIMITER', policy, onError, failOpen: true });
    const response = await call(hono, '/api/hello', '198.51.100.111', bindings);
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ hello: 'world' });
    expect(response.headers.get('RateLimit')).toBeNull();
    expect(response.headers.get('X-RateLimit-Limit')).toBeNull();
    expect(runs.count).toBe(1);
    expect(onError).toHaveBeenCalledOnce();
  });

  it('passes a bug (an invalid policy, from the real limiter) to app.onError, even with failOpen', async () => {
    const onError = vi.fn();
    const { hono, runs } = app({ binding: 'LIMITER', policy: { name: 'bad', refill_every_seconds: 0 }, failOpen: true, onError });
    const seen: Error[] = [];
    hono.onError((err, c) => (seen.push(err), c.text('bug', 500)));
    const response = await call(hono, '/api/hello', '198.51.100.112');
    expect(response.status).toBe(500);
    expect(seen.map((e) => [e.name, e.message])).toEqual([
      ['RangeError', 'policy.refill_every_seconds must be a finite number > 0, got 0'],
    ]);
    expect(onError).not.toHaveBeenCalled();
    expect(runs.count).toBe(0);
  });
});

// Type tests: the middleware is a Hono MiddlewareHandler without importing hono's types.
export const plain: MiddlewareHandler = honoRateLimit({ binding: 'LIMITER', policy });
export const typed: MiddlewareHandler<AppEnv> = honoRateLimit<Context<AppEnv>>({
  binding: (e) => e.LIMITER,
  policy,
  key: (_request, _env, c) => c.get('user'),
});
export const inApp = new Hono<AppEnv>().use('/api/*', honoRateLimit({ binding: 'LIMITER', policy }));

export function honoTypeErrors(): void {
  honoRateLimit<Context<AppEnv>>({
    // @ts-expect-error env is the app's Bindings: no such binding
    binding: (e) => e.NO_SUCH_BINDING,
    policy,
  });
  honoRateLimit<Context<AppEnv>>({
    binding: 'LIMITER',
    policy,
    // @ts-expect-error c.get knows the app's variables
    key: (_request, _env, c) => c.get('nope'),
  });
  // @ts-expect-error a policy name is a string
  honoRateLimit({ binding: 'LIMITER', policy: { name: 1 } });
}
