// The fetch-handler middleware (`@delightstack/rate-limiter/middleware`) inside workerd, on
// the real RateLimiterServer behind env.LIMITER, with fake timers (the Durable Object runs in
// the test isolate, so vi.setSystemTime reaches its Date.now()). Each test has its own client
// key (TEST-NET-2 addresses, 198.51.100.x) or its own policy name, so its own bucket.
import { createExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import {
  analyticsEngineEvents,
  checkRateLimit,
  clientKey,
  LocalLimits,
  QUOTA_EXCEEDED_TYPE,
  rateLimit,
  UNKNOWN_CLIENT,
  withHeaders,
} from '@delightstack/rate-limiter/middleware';
import type {
  QuotaExceededProblem,
  RateLimiterNamespace,
  RateLimitEvent,
  RateLimitMiddlewareOptions,
  RateLimitPolicy,
} from '@delightstack/rate-limiter/middleware';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { collectingContext, rejection } from './support';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const ctx = createExecutionContext();
const stub = (key: string) => env.LIMITER.get(env.LIMITER.idFromName(key));

/** A request from `ip` (no CF-Connecting-IP when undefined), with extra headers. */
const request = (ip: string | undefined, init: { method?: string; headers?: Record<string, string> } = {}) =>
  new Request('https://example.com/api', {
    method: init.method ?? 'GET',
    headers: { ...(ip === undefined ? {} : { 'CF-Connecting-IP': ip }), ...init.headers },
  });

/** A handler that counts its calls and answers 201 with a header of its own. */
function counting() {
  const handler = Object.assign(
    async () => {
      handler.calls += 1;
      return new Response('made', { status: 201, headers: { 'X-Handler': 'yes' } });
    },
    { calls: 0 },
  );
  return handler;
}

const RATE_HEADERS = ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After'];
const rateHeaders = (response: Response) =>
  Object.fromEntries(RATE_HEADERS.flatMap((h) => (response.headers.has(h) ? [[h, response.headers.get(h)]] : [])));

/** Reads a 429/503 body after checking its media type. */
async function problem(response: Response) {
  expect(response.headers.get('Content-Type')).toBe('application/problem+json');
  return (await response.json()) as Record<string, unknown>;
}

/** A stand-in for a Durable Object namespace whose RPC call fails the way `fail` does. */
function failingBinding(fail: () => Promise<never>) {
  const calls: string[] = [];
  const binding = {
    idFromName: (name: string) => name,
    get: (id: string) => ({
      limit: () => (calls.push(`limit ${id}`), fail()),
      limitAll: () => (calls.push(`limitAll ${id}`), fail()),
    }),
  } satisfies RateLimiterNamespace<string>;
  return { binding, calls };
}
const overloaded = () =>
  Object.assign(new Error('Durable Object is overloaded. Too many requests queued.'), { overloaded: true });

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('rateLimit(options)(handler): allowed and denied requests', () => {
  const policy = { name: 'api', max_tokens: 3, refill_every_seconds: 10 };

  it('adds the headers to allowed responses, then answers 429 problem+json without calling the handler', async () => {
    const handler = counting();
    const fetch = rateLimit({ binding: 'LIMITER', policy })(handler);
    const ip = '198.51.100.1';

    for (let left = 2; left >= 0; left--) {
      const response = await fetch(request(ip), env, ctx);
      expect(response.status).toBe(201);
      expect(response.headers.get('X-Handler')).toBe('yes');
      expect(await response.text()).toBe('made');
      expect(rateHeaders(response)).toEqual({
        'RateLimit-Policy': '"api";q=3;w=30',
        'RateLimit': `"api";r=${left};t=10`,
        'X-RateLimit-Limit': '3',
        'X-RateLimit-Remaining': String(left),
        'X-RateLimit-Reset': '10',
      });
    }
    expect(handler.calls).toBe(3);

    at(2_500);
    const denied = await fetch(request(ip), env, ctx);
    expect(denied.status).toBe(429);
    expect(handler.calls).toBe(3);
    expect(rateHeaders(denied)).toEqual({
      'RateLimit-Policy': '"api";q=3;w=30',
      'RateLimit': '"api";r=0;t=8',
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '8',
      'Retry-After': '8',
    });
    const body: QuotaExceededProblem = (await problem(denied)) as unknown as QuotaExceededProblem;
    expect(body).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Quota exceeded for policy "api"; retry after 8 seconds.',
      'violated-policies': ['api'],
    });
    expect(body.type).toBe(QUOTA_EXCEEDED_TYPE);

    // Retry-After is exact: 1 ms early is still denied, on time is allowed.
    at(9_999);
    const early = await fetch(request(ip), env, ctx);
    expect(early.status).toBe(429);
    expect((await problem(early)).detail).toBe('Quota exceeded for policy "api"; retry after 1 second.');
    at(10_000);
    expect((await fetch(request(ip), env, ctx)).status).toBe(201);
    expect(handler.calls).toBe(4);
  });

  it('uses one Durable Object per client key, with the policy name as the bucket', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy })(counting());
    await fetch(request('198.51.100.2'), env, ctx);
    await fetch(request('198.51.100.2'), env, ctx);
    expect(await stub('198.51.100.2').getStatus('api')).toEqual({ remaining: 1, limit: 3, reset_in_ms: 10_000 });
    // Nothing else was touched: another key, another bucket name in the same object.
    expect((await stub('198.51.100.2').getStatus('default')).remaining).toBe(10);
    expect(await stub('198.51.100.3').getStatus('api')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('names a single unnamed policy "default"', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy: { max_tokens: 5, refill_every_seconds: 1 } })(counting());
    const response = await fetch(request('198.51.100.4'), env, ctx);
    expect(response.headers.get('RateLimit')).toBe('"default";r=4;t=1');
    expect((await stub('198.51.100.4').getStatus('default')).remaining).toBe(4);
  });

  it('adds the headers to a response whose headers are immutable', async () => {
    const redirect = Response.redirect('https://example.com/elsewhere', 302);
    expect(() => redirect.headers.set('X-Probe', '1')).toThrow(TypeError);
    const fetch = rateLimit({ binding: 'LIMITER', policy })(() => redirect);
    const response = await fetch(request('198.51.100.5'), env, ctx);
    expect(response.status).toBe(302);
    expect(response.headers.get('Location')).toBe('https://example.com/elsewhere');
    expect(response.headers.get('RateLimit')).toBe('"api";r=2;t=10');
  });

  it('keeps a WebSocket upgrade a WebSocket upgrade', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy })(() => {
      const [client, server] = Object.values(new WebSocketPair());
      server!.accept();
      return new Response(null, { status: 101, webSocket: client });
    });
    const response = await fetch(request('198.51.100.6'), env, ctx);
    expect(response.status).toBe(101);
    expect(response.webSocket).not.toBeNull();
    expect(response.headers.get('RateLimit')).toBe('"api";r=2;t=10');
    response.webSocket!.accept();
    response.webSocket!.close();
  });

  it('passes request, env, ctx and `this` through to the handler', async () => {
    const seen: unknown[] = [];
    const worker = {
      name: 'worker',
      fetch: rateLimit({ binding: 'LIMITER', policy })(function (this: { name: string }, request, env, ctx) {
        seen.push(this.name, request, env, ctx);
        return new Response('ok');
      }),
    };
    const r = request('198.51.100.7');
    await worker.fetch(r, env, ctx);
    expect(seen).toEqual(['worker', r, env, ctx]);
    expect(seen[1]).toBe(r);
  });

  it('lets errors of the handler through, and does not count them as limiter failures', async () => {
    const onError = vi.fn();
    const fetch = rateLimit({ binding: 'LIMITER', policy, failOpen: true, onError })(() => {
      throw new Error('handler broke');
    });
    const e = await rejection(fetch(request('198.51.100.8'), env, ctx));
    expect(e?.message).toBe('handler broke');
    expect(onError).not.toHaveBeenCalled();
  });

  it('throws a TypeError when the handler returns no Response', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy })((() => 'ok') as never);
    const e = await rejection(fetch(request('198.51.100.10'), env, ctx));
    expect(e?.name).toBe('TypeError');
    expect(e?.message).toBe('the handler must return a Response, got string "ok"');
    expect(() => withHeaders(null as never, {})).toThrow('withHeaders needs a Response, got null');
  });

  it('stacks: RateLimit lists gain a member per limit, other headers of the inner limit are kept', async () => {
    const inner = rateLimit({ binding: 'LIMITER', policy: { name: 'inner', max_tokens: 2, refill_every_seconds: 1 } });
    const outer = rateLimit({ binding: 'LIMITER', policy: { name: 'outer', max_tokens: 50, refill_every_seconds: 1 } });
    const fetch = outer(inner(counting()));
    const response = await fetch(request('198.51.100.9'), env, ctx);
    expect(response.headers.get('RateLimit-Policy')).toBe('"inner";q=2;w=2, "outer";q=50;w=50');
    expect(response.headers.get('RateLimit')).toBe('"inner";r=1;t=1, "outer";r=49;t=1');
    expect(response.headers.get('X-RateLimit-Limit')).toBe('2');
    await fetch(request('198.51.100.9'), env, ctx);
    const denied = await fetch(request('198.51.100.9'), env, ctx);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('RateLimit')).toBe('"inner";r=0;t=1, "outer";r=47;t=1');
    expect(denied.headers.get('Retry-After')).toBe('1');
    expect((await problem(denied))['violated-policies']).toEqual(['inner']);
  });
});

describe('the client key', () => {
  it('is CF-Connecting-IP: one bucket per address', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'ip', max_tokens: 1, refill_every_seconds: 60 } })(
      counting(),
    );
    expect((await fetch(request('198.51.100.20'), env, ctx)).status).toBe(201);
    expect((await fetch(request('198.51.100.20'), env, ctx)).status).toBe(429);
    expect((await fetch(request('198.51.100.21'), env, ctx)).status).toBe(201);
  });

  it('without CF-Connecting-IP is the shared key "unknown": headers a client sets do not split it', async () => {
    const policy = { name: 'no-ip', max_tokens: 2, refill_every_seconds: 60 };
    const fetch = rateLimit({ binding: 'LIMITER', policy })(counting());
    const spoofed = (ip: string) =>
      request(undefined, { headers: { 'X-Forwarded-For': ip, 'X-Real-IP': ip, 'True-Client-IP': ip } });
    expect((await fetch(spoofed('192.0.2.1'), env, ctx)).status).toBe(201);
    expect((await fetch(spoofed('192.0.2.2'), env, ctx)).status).toBe(201);
    expect((await fetch(spoofed('192.0.2.3'), env, ctx)).status).toBe(429);
    expect((await fetch(request(undefined), env, ctx)).status).toBe(429);
    expect(UNKNOWN_CLIENT).toBe('unknown');
    expect((await stub('unknown').getStatus('no-ip')).remaining).toBe(0);
  });

  it('groups IPv6 clients by /64: rotating addresses inside one network does not escape', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'v6', max_tokens: 2, refill_every_seconds: 60 } })(
      counting(),
    );
    expect((await fetch(request('2001:db8:1:2::1'), env, ctx)).status).toBe(201);
    expect((await fetch(request('2001:DB8:1:2:ffff:ffff:ffff:ffff'), env, ctx)).status).toBe(201);
    expect((await fetch(request('2001:0db8:0001:0002:abcd::9'), env, ctx)).status).toBe(429);
    expect((await fetch(request('2001:db8:1:3::1'), env, ctx)).status).toBe(201);
    expect((await stub('2001:db8:1:2::/64').getStatus('v6')).remaining).toBe(0);
    expect((await stub('2001:db8:1:3::/64').getStatus('v6')).remaining).toBe(1);
  });

  it('clientKey: IPv4 as is, IPv6 as its canonical /64, IPv4-mapped as IPv4, other text as is', () => {
    const key = (ip?: string) => clientKey(request(ip));
    expect(key('198.51.100.30')).toBe('198.51.100.30');
    expect(key(' 198.51.100.30 ')).toBe('198.51.100.30');
    expect(key(undefined)).toBe('unknown');
    expect(key('')).toBe('unknown');
    expect(key('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(key('2001:0DB8:0000:0000:0000:0000:0000:0001')).toBe('2001:db8:0:0::/64');
    expect(key('2001:db8:a:b:c:d:e:f')).toBe('2001:db8:a:b::/64');
    expect(key('2001:db8:a:b:c::')).toBe('2001:db8:a:b::/64');
    expect(key('2001:db8:a:b:c:d:e::')).toBe('2001:db8:a:b::/64');
    expect(key('::1')).toBe('0:0:0:0::/64');
    expect(key('::')).toBe('0:0:0:0::/64');
    expect(key('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(key('[2001:db8::1]')).toBe('2001:db8:0:0::/64');
    expect(key('::ffff:198.51.100.31')).toBe('198.51.100.31');
    expect(key('::FFFF:c633:641f')).toBe('198.51.100.31');
    expect(key('64:ff9b::198.51.100.31')).toBe('64:ff9b:0:0::/64');
    // Not IPv6: kept verbatim rather than guessed at.
    for (const text of ['1:2:3', '1::2::3', '1:2:3:4:5:6:7:8:9', '1::2:3:4:5:6:7:8', 'g::1', '::ffff:1.2.3.256', 'a:b']) {
      expect(key(text), text).toBe(text);
    }
  });

  it('can be any function of the request, env and ctx, sync or async', async () => {
    const policy = { name: 'by-user', max_tokens: 1, refill_every_seconds: 60 };
    const args: unknown[] = [];
    const byUser = rateLimit({
      binding: 'LIMITER',
      policy,
      key: (request, e, c) => (args.push(e, c), `user:${request.headers.get('X-User')}`),
    })(counting());
    const r = request('198.51.100.40', { headers: { 'X-User': 'ada' } });
    expect((await byUser(r, env, ctx)).status).toBe(201);
    expect(args).toEqual([env, ctx]);
    expect((await byUser(request('198.51.100.41', { headers: { 'X-User': 'ada' } }), env, ctx)).status).toBe(429);
    expect((await stub('user:ada').getStatus('by-user')).remaining).toBe(0);

    const asyncKey = rateLimit({ binding: 'LIMITER', policy, key: async () => 'async-key' })(counting());
    expect((await asyncKey(request('198.51.100.42'), env, ctx)).status).toBe(201);
    expect((await stub('async-key').getStatus('by-user')).remaining).toBe(0);
  });

  it('must be a string: anything else throws a TypeError before the handler runs', async () => {
    const handler = counting();
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'k' },
      failOpen: true,
      key: () => 42 as unknown as string,
    })(handler);
    const e = await rejection(fetch(request('198.51.100.43'), env, ctx));
    expect(e?.name).toBe('TypeError');
    expect(e?.message).toBe('options.key must return a string, got number 42');
    expect(handler.calls).toBe(0);
  });
});

describe('cost', () => {
  it('takes a fixed number of tokens per request', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'c', max_tokens: 5, refill_every_seconds: 1 }, cost: 2 })(
      counting(),
    );
    expect((await fetch(request('198.51.100.50'), env, ctx)).headers.get('RateLimit')).toBe('"c";r=3;t=1');
    expect((await fetch(request('198.51.100.50'), env, ctx)).headers.get('RateLimit')).toBe('"c";r=1;t=1');
    const denied = await fetch(request('198.51.100.50'), env, ctx);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBe('1');
  });

  it('can be a function of the request (async too)', async () => {
    const seen: unknown[] = [];
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'c', max_tokens: 10, refill_every_seconds: 1 },
      cost: async (request, e, c) => (seen.push(e, c), request.method === 'POST' ? 4 : 0.5),
    })(counting());
    expect((await fetch(request('198.51.100.51', { method: 'POST' }), env, ctx)).headers.get('RateLimit')).toBe(
      '"c";r=6;t=1',
    );
    expect((await fetch(request('198.51.100.51'), env, ctx)).headers.get('RateLimit')).toBe('"c";r=5;t=1');
    expect(seen).toEqual([env, ctx, env, ctx]);
    expect((await stub('198.51.100.51').getStatus('c')).remaining).toBe(5.5);
  });

  it('above the capacity is denied with no Retry-After, since no wait can help', async () => {
    const handler = counting();
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'c', max_tokens: 3 }, cost: 4 })(handler);
    const denied = await fetch(request('198.51.100.52'), env, ctx);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBeNull();
    expect(denied.headers.get('RateLimit')).toBe('"c";r=3;t=0');
    expect(await problem(denied)).toMatchObject({
      status: 429,
      detail: 'This request costs more than policy "c" can ever allow; retrying will not help.',
      'violated-policies': ['c'],
    });
    expect(handler.calls).toBe(0);
  });

  it('of 0 is always allowed and takes nothing', async () => {
    const policy = { name: 'c', max_tokens: 1, refill_every_seconds: 60 };
    const one = rateLimit({ binding: 'LIMITER', policy })(counting());
    const free = rateLimit({ binding: 'LIMITER', policy, cost: 0 })(counting());
    await one(request('198.51.100.53'), env, ctx);
    expect((await one(request('198.51.100.53'), env, ctx)).status).toBe(429);
    const response = await free(request('198.51.100.53'), env, ctx);
    expect(response.status).toBe(201);
    expect(response.headers.get('RateLimit')).toBe('"c";r=0;t=60');
  });

  it('invalid is a bug: the limiter error is thrown even with failOpen, and onError is not called', async () => {
    for (const [cost, name, message] of [
      [-1, 'RangeError', 'cost must be a finite number >= 0, got -1'],
      ['1', 'TypeError', 'cost must be a number, got string "1"'],
    ] as const) {
      const onError = vi.fn();
      const handler = counting();
      const fetch = rateLimit({
        binding: 'LIMITER',
        policy: { name: 'c' },
        cost: () => cost as number,
        failOpen: true,
        onError,
      })(handler);
      const e = await rejection(fetch(request('198.51.100.54'), env, ctx));
      expect(e?.name).toBe(name);
      expect(e?.message).toBe(message);
      expect(onError).not.toHaveBeenCalled();
      expect(handler.calls).toBe(0);
    }
  });
});

describe('several policies (limitAll: all or nothing)', () => {
  const policy = [
    { name: 'second', max_tokens: 2, refill_every_seconds: 1 },
    { name: 'hour', max_tokens: 5, refill_every_seconds: 720 },
  ];

  it('reports every limit, denies with the violated ones, and a denial takes from none', async () => {
    const handler = counting();
    const fetch = rateLimit({ binding: 'LIMITER', policy })(handler);
    const ip = '198.51.100.60';
    const first = await fetch(request(ip), env, ctx);
    expect(rateHeaders(first)).toEqual({
      'RateLimit-Policy': '"second";q=2;w=2, "hour";q=5;w=3600',
      'RateLimit': '"second";r=1;t=1, "hour";r=4;t=720',
      'X-RateLimit-Limit': '2',
      'X-RateLimit-Remaining': '1',
      'X-RateLimit-Reset': '1',
    });
    await fetch(request(ip), env, ctx);

    const bySecond = await fetch(request(ip), env, ctx);
    expect(bySecond.status).toBe(429);
    expect(bySecond.headers.get('Retry-After')).toBe('1');
    expect(await problem(bySecond)).toMatchObject({
      detail: 'Quota exceeded for policy "second"; retry after 1 second.',
      'violated-policies': ['second'],
    });
    expect((await stub(ip).getStatus('hour')).remaining).toBe(3);

    for (const t of [1_000, 2_000, 3_000]) {
      at(t);
      expect((await fetch(request(ip), env, ctx)).status).toBe(201);
    }
    at(4_000);
    const byHour = await fetch(request(ip), env, ctx);
    expect(byHour.status).toBe(429);
    // The hour's next token comes 720 s after the first request.
    expect(byHour.headers.get('Retry-After')).toBe('716');
    expect(byHour.headers.get('X-RateLimit-Limit')).toBe('5');
    expect(await problem(byHour)).toMatchObject({ 'violated-policies': ['hour'] });
    expect((await stub(ip).getStatus('second')).remaining).toBe(1);
    expect(handler.calls).toBe(5);
  });

  it('names both policies when both are exhausted', async () => {
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: [
        { name: 'a', max_tokens: 1, refill_every_seconds: 10 },
        { name: 'b', max_tokens: 1, refill_every_seconds: 20 },
      ],
    })(counting());
    await fetch(request('198.51.100.61'), env, ctx);
    const denied = await fetch(request('198.51.100.61'), env, ctx);
    expect(denied.headers.get('Retry-After')).toBe('20');
    expect(await problem(denied)).toMatchObject({
      detail: 'Quota exceeded for policies "a", "b"; retry after 20 seconds.',
      'violated-policies': ['a', 'b'],
    });
  });

  it('names unnamed policies default-1, default-2…', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy: [{ max_tokens: 3 }, { max_tokens: 4 }] })(counting());
    const response = await fetch(request('198.51.100.62'), env, ctx);
    expect(response.headers.get('RateLimit-Policy')).toBe('"default-1";q=3;w=30, "default-2";q=4;w=40');
    expect((await stub('198.51.100.62').getStatus('default-2')).remaining).toBe(3);
  });

  it('applies the cost to every policy', async () => {
    const fetch = rateLimit({ binding: 'LIMITER', policy, cost: 2 })(counting());
    expect((await fetch(request('198.51.100.63'), env, ctx)).headers.get('RateLimit')).toBe(
      '"second";r=0;t=1, "hour";r=3;t=720',
    );
  });
});

describe('a custom denied response', () => {
  it('replaces the 429 body; the rate-limit headers are still added', async () => {
    const seen: unknown[] = [];
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'd', max_tokens: 1, refill_every_seconds: 30 },
      denied: (request, decision, e, c) => {
        seen.push(request, decision, e, c);
        return new Response('slow down', { status: 429, headers: { 'Content-Type': 'text/plain' } });
      },
    })(counting());
    await fetch(request('198.51.100.70'), env, ctx);
    const r = request('198.51.100.70');
    const denied = await fetch(r, env, ctx);
    expect(denied.status).toBe(429);
    expect(await denied.text()).toBe('slow down');
    expect(denied.headers.get('Content-Type')).toBe('text/plain');
    expect(rateHeaders(denied)).toEqual({
      'RateLimit-Policy': '"d";q=1;w=30',
      'RateLimit': '"d";r=0;t=30',
      'X-RateLimit-Limit': '1',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '30',
      'Retry-After': '30',
    });
    expect(seen).toEqual([
      r,
      { allowed: false, remaining: 0, limit: 1, reset_in_ms: 30_000, retry_after_ms: 30_000, window_ms: 30_000 },
      env,
      ctx,
    ]);
  });

  it('keeps a header it sets itself (its own Retry-After), and may be async', async () => {
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'd', max_tokens: 1, refill_every_seconds: 30 },
      denied: async () => new Response(null, { status: 503, headers: { 'Retry-After': '3600' } }),
    })(counting());
    await fetch(request('198.51.100.71'), env, ctx);
    const denied = await fetch(request('198.51.100.71'), env, ctx);
    expect(denied.status).toBe(503);
    expect(denied.headers.get('Retry-After')).toBe('3600');
    expect(denied.headers.get('RateLimit')).toBe('"d";r=0;t=30');
  });

  it('must return a Response', async () => {
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'd', max_tokens: 1 },
      denied: () => 'nope' as unknown as Response,
    })(counting());
    await fetch(request('198.51.100.72'), env, ctx);
    const e = await rejection(fetch(request('198.51.100.72'), env, ctx));
    expect(e?.name).toBe('TypeError');
    expect(e?.message).toBe('options.denied must return a Response, got string "nope"');
  });
});

describe('when the Durable Object call fails', () => {
  const policy = { name: 'f', max_tokens: 5, refill_every_seconds: 1 };

  it('fails closed by default: 503 problem+json with Retry-After 1, no handler, onError told', async () => {
    const error = overloaded();
    const { binding, calls } = failingBinding(() => Promise.reject(error));
    const onError = vi.fn();
    const handler = counting();
    const fetch = rateLimit({ binding, policy, onError })(handler);
    const r = request('198.51.100.80');
    const response = await fetch(r, env, ctx);
    expect(calls).toEqual(['limit 198.51.100.80']);
    expect(response.status).toBe(503);
    expect(rateHeaders(response)).toEqual({ 'Retry-After': '1' });
    expect(await problem(response)).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The rate limiter could not be reached; retry shortly.',
    });
    expect(handler.calls).toBe(0);
    expect(onError).toHaveBeenCalledExactlyOnceWith(error, r);
  });

  it('fails open with failOpen: the handler runs, its response gets no rate-limit headers', async () => {
    const error = new Error('Network connection lost.');
    const { binding } = failingBinding(() => Promise.reject(error));
    const onError = vi.fn();
    const handler = counting();
    const fetch = rateLimit({ binding, policy, failOpen: true, onError })(handler);
    const response = await fetch(request('198.51.100.81'), env, ctx);
    expect(response.status).toBe(201);
    expect(await response.text()).toBe('made');
    expect(rateHeaders(response)).toEqual({});
    expect(handler.calls).toBe(1);
    expect(onError).toHaveBeenCalledExactlyOnceWith(error, expect.any(Request));
  });

  it('handles several policies (limitAll) and a stub that throws instead of rejecting the same way', async () => {
    const throwing = {
      idFromName: (name: string) => name,
      get: () => ({
        limit: () => {
          throw overloaded();
        },
        limitAll: () => {
          throw overloaded();
        },
      }),
    };
    for (const p of [policy, [policy, { name: 'g' }]]) {
      const closed = rateLimit({ binding: throwing, policy: p, onError: () => {} })(counting());
      expect((await closed(request('198.51.100.82'), env, ctx)).status).toBe(503);
      const open = rateLimit({ binding: throwing, policy: p, onError: () => {}, failOpen: true })(counting());
      expect((await open(request('198.51.100.82'), env, ctx)).status).toBe(201);
    }
    const { binding, calls } = failingBinding(() => Promise.reject(overloaded()));
    await rateLimit({ binding, policy: [policy, { name: 'g' }], onError: () => {} })(counting())(
      request('198.51.100.83'),
      env,
      ctx,
    );
    expect(calls).toEqual(['limitAll 198.51.100.83']);
  });

  it('logs with console.error when no onError is given', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const error = overloaded();
    const { binding } = failingBinding(() => Promise.reject(error));
    await rateLimit({ binding, policy, failOpen: true })(counting())(request('198.51.100.84'), env, ctx);
    expect(log).toHaveBeenCalledExactlyOnceWith('rate limiter unavailable for GET https://example.com/api:', error);
  });

  it('never swallows a bug: an invalid policy rejected by the real limiter is thrown, even with failOpen', async () => {
    const onError = vi.fn();
    const handler = counting();
    for (const [p, name, message] of [
      [{ name: 'bad', max_tokens: 0 }, 'RangeError', 'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0'],
      [{ name: 'bad', max_token: 5 }, 'TypeError', 'policy has no field "max_token" (the fields are max_tokens, refill_every_seconds and block_seconds)'],
      [[{ name: 'bad' }, { name: 'worse', refill_every_seconds: -1 }], 'RangeError', 'requests[1].policy.refill_every_seconds must be a finite number > 0, got -1'],
    ] as const) {
      const fetch = rateLimit({ binding: 'LIMITER', policy: p as never, failOpen: true, onError })(handler);
      const e = await rejection(fetch(request('198.51.100.85'), env, ctx));
      expect(e?.name).toBe(name);
      expect(e?.message).toBe(message);
    }
    expect(onError).not.toHaveBeenCalled();
    expect(handler.calls).toBe(0);
  });

  it('never swallows a bug: a binding that is not in env throws a TypeError, even with failOpen', async () => {
    const onError = vi.fn();
    for (const [binding, message] of [
      ['LIMITTER', 'env.LIMITTER is not a Durable Object namespace, got undefined'],
      [() => ({}) as RateLimiterNamespace, 'options.binding(env) is not a Durable Object namespace, got an object'],
    ] as const) {
      const fetch = rateLimit({ binding, policy, failOpen: true, onError })(counting());
      const e = await rejection(fetch(request('198.51.100.86'), env, ctx));
      expect(e?.name).toBe('TypeError');
      expect(e?.message).toBe(message);
    }
    expect(onError).not.toHaveBeenCalled();
  });
});

describe('options', () => {
  it('binding may be the name in env, the namespace itself, or a function of env', async () => {
    const policy = { name: 'b', max_tokens: 9 };
    for (const binding of ['LIMITER', env.LIMITER, (e: typeof env) => e.LIMITER]) {
      const response = await rateLimit({ binding, policy })(counting())(request('198.51.100.90'), env, ctx);
      expect(response.status).toBe(201);
    }
    expect((await stub('198.51.100.90').getStatus('b')).remaining).toBe(6);
  });

  it('are checked when the middleware is made: a mistake throws a TypeError at startup', () => {
    const policy = { max_tokens: 1 };
    const cases: [unknown, string][] = [
      [undefined, 'rate limit options must be an object, got undefined'],
      [{ binding: 'LIMITER', polciy: policy }, 'rate limit options have no field "polciy" (the fields are binding, policy, key, cost, skip, denied, failOpen, onError, local, standardHeaders, legacyHeaders, skipSuccessfulRequests, skipFailedRequests, requestWasSuccessful, shadow, onDecision, concurrency)'],
      [{ policy }, 'options.binding must be the name of a Durable Object binding, the namespace or a function of env, got undefined'],
      [{ binding: {}, policy }, 'options.binding must be the name of a Durable Object binding, the namespace or a function of env, got an object'],
      [{ binding: 'LIMITER' }, 'options.policy must be an object, got undefined'],
      [{ binding: 'LIMITER', policy: [] }, 'options.policy must name at least one policy'],
      [{ binding: 'LIMITER', policy: [policy, null] }, 'options.policy[1] must be an object, got null'],
      [{ binding: 'LIMITER', policy: { name: '' } }, 'options.policy.name must be non-empty printable ASCII text, got string ""'],
      [{ binding: 'LIMITER', policy: { name: 'ü' } }, 'options.policy.name must be non-empty printable ASCII text, got string "ü"'],
      [{ binding: 'LIMITER', policy: [{ name: 'a' }, { name: 'b', shadow: 'yes' }] }, 'options.policy[1].shadow must be a boolean, got string "yes"'],
      [{ binding: 'LIMITER', policy: [{ name: 'a' }, { name: 'a' }] }, 'options.policy names "a" twice: each policy needs its own name (its bucket)'],
      [{ binding: 'LIMITER', policy: [{ name: 'default-2' }, {}] }, 'options.policy names "default-2" twice: each policy needs its own name (its bucket)'],
      [{ binding: 'LIMITER', policy, cost: '1' }, 'options.cost must be a number or a function, got string "1"'],
      [{ binding: 'LIMITER', policy, key: 'ip' }, 'options.key must be a function, got string "ip"'],
      [{ binding: 'LIMITER', policy, denied: new Response() }, 'options.denied must be a function, got an object'],
      [{ binding: 'LIMITER', policy, onError: true }, 'options.onError must be a function, got boolean true'],
      [{ binding: 'LIMITER', policy, failOpen: 'yes' }, 'options.failOpen must be a boolean, got string "yes"'],
      [{ binding: 'LIMITER', policy, skip: true }, 'options.skip must be a function, got boolean true'],
      [{ binding: 'LIMITER', policy, standardHeaders: 'draft-11' }, 'options.standardHeaders must be a boolean, got string "draft-11"'],
      [{ binding: 'LIMITER', policy, legacyHeaders: 0 }, 'options.legacyHeaders must be a boolean, got number 0'],
      [{ binding: 'LIMITER', policy, skipFailedRequests: 'yes' }, 'options.skipFailedRequests must be a boolean, got string "yes"'],
      [{ binding: 'LIMITER', policy, shadow: 1 }, 'options.shadow must be a boolean, got number 1'],
      [{ binding: 'LIMITER', policy, onDecision: 'log' }, 'options.onDecision must be a function, got string "log"'],
      [{ binding: 'LIMITER', policy, skipSuccessfulRequests: true, skipFailedRequests: true }, 'options.skipSuccessfulRequests and options.skipFailedRequests together would count no request'],
      [{ binding: 'LIMITER', policy, requestWasSuccessful: () => true }, 'options.requestWasSuccessful needs skipSuccessfulRequests or skipFailedRequests'],
      [{ binding: 'LIMITER', policy, skipFailedRequests: true, requestWasSuccessful: 200 }, 'options.requestWasSuccessful must be a function, got number 200'],
      [{ binding: 'LIMITER', policy, local: 'yes' }, 'options.local must be a boolean, a LocalLimits or its options, got string "yes"'],
      [{ binding: 'LIMITER', policy, local: { margin: 5 } }, 'options.local has no field "margin" (the fields are marginMs, maxLease, clock, shares, maxHoldMs)'],
    ];
    for (const [options, message] of cases) {
      let error: Error | undefined;
      try {
        rateLimit(options as RateLimitMiddlewareOptions);
      } catch (e) {
        error = e as Error;
      }
      expect(error?.name, message).toBe('TypeError');
      expect(error?.message).toBe(message);
    }
    expect(() => rateLimit({ binding: 'LIMITER', policy })('handler' as never)).toThrow(
      'rateLimit(options) wraps a fetch handler function, got string "handler"',
    );
  });
});

describe('skip', () => {
  const policy = { name: 'skip', max_tokens: 1, refill_every_seconds: 60 };

  it('lets a request through with no call, no tokens and no headers; the others are limited', async () => {
    const { binding, calls } = failingBinding(() => Promise.reject(overloaded()));
    const handler = counting();
    const skip = vi.fn(async (r: Request, _env: unknown, _ctx: unknown) => new URL(r.url).searchParams.has('health'));
    const fetch = rateLimit({ binding, policy, skip })(handler);
    const health = new Request('https://example.com/api?health', { headers: { 'CF-Connecting-IP': '198.51.100.11' } });
    for (let i = 0; i < 3; i++) {
      const response = await fetch(health, env, ctx);
      expect(response.status).toBe(201);
      expect(rateHeaders(response)).toEqual({});
    }
    expect(handler.calls).toBe(3);
    expect(calls).toEqual([]);
    expect(skip).toHaveBeenCalledTimes(3);
    expect(skip.mock.calls[0][1]).toBe(env);
    expect(skip.mock.calls[0][2]).toBe(ctx);
    // Not skipped: decided as always (here by a failing limiter: closed).
    expect((await fetch(request('198.51.100.11'), env, ctx)).status).toBe(503);
    expect(calls).toEqual(['limit 198.51.100.11']);
  });

  it('takes nothing from the bucket, and checkRateLimit says the request was skipped', async () => {
    const options = { binding: 'LIMITER', policy, skip: (r: Request) => r.method === 'HEAD' };
    const head = await checkRateLimit(request('198.51.100.12', { method: 'HEAD' }), env, options, ctx);
    expect(head).toEqual({ response: null, headers: {}, decision: null, error: undefined, skipped: true, refund: expect.any(Function), release: expect.any(Function) });
    const get = await checkRateLimit(request('198.51.100.12'), env, options, ctx);
    expect(get.skipped).toBe(false);
    expect(get.decision?.allowed).toBe(true);
    expect((await stub('198.51.100.12').getStatus('skip')).remaining).toBe(0);
  });

  it('runs before key; one that returns no boolean or throws is a bug and is thrown', async () => {
    const key = vi.fn(() => 'k');
    const undecided = rateLimit({ binding: 'LIMITER', policy, key, skip: (() => undefined) as never })(counting());
    await expect(undecided(request('198.51.100.13'), env, ctx)).rejects.toThrow(
      new TypeError('options.skip must return a boolean, got undefined'),
    );
    const throwing = rateLimit({ binding: 'LIMITER', policy, key, failOpen: true, skip: () => { throw new RangeError('no'); } })(counting());
    await expect(throwing(request('198.51.100.13'), env, ctx)).rejects.toThrow(RangeError);
    expect(key).not.toHaveBeenCalled();
  });
});

describe('standardHeaders and legacyHeaders', () => {
  const policy = { name: 'h', max_tokens: 1, refill_every_seconds: 60 };

  it('each choice puts exactly its headers on allowed responses and 429s; Retry-After stays on 429s', async () => {
    const cases: [boolean, boolean, string[]][] = [
      [true, true, ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']],
      [true, false, ['RateLimit-Policy', 'RateLimit']],
      [false, true, ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']],
      [false, false, []],
    ];
    for (const [i, [standardHeaders, legacyHeaders, names]] of cases.entries()) {
      const ip = `198.51.100.${14 + i}`;
      const fetch = rateLimit({ binding: 'LIMITER', policy, standardHeaders, legacyHeaders })(counting());
      const allowed = await fetch(request(ip), env, ctx);
      expect(allowed.status).toBe(201);
      expect(Object.keys(rateHeaders(allowed)).sort()).toEqual([...names].sort());
      const denied = await fetch(request(ip), env, ctx);
      expect(denied.status).toBe(429);
      expect(Object.keys(rateHeaders(denied)).sort()).toEqual([...names, 'Retry-After'].sort());
      expect(denied.headers.get('Retry-After')).toBe('60');
      expect((await problem(denied)).detail).toBe('Quota exceeded for policy "h"; retry after 60 seconds.');
    }
  });
});

/** env.LIMITER with its stubs' refund replaced by `refund` (given the real stub). */
function withRefund(refund: (real: ReturnType<typeof env.LIMITER.get>, key: string, tokens: number) => Promise<void>) {
  return {
    idFromName: (name: string) => env.LIMITER.idFromName(name),
    get: (id: DurableObjectId) => {
      const real = env.LIMITER.get(id);
      return {
        limit: (key: string, cost?: number, p?: RateLimitPolicy) => real.limit(key, cost, p),
        limitAll: (requests: Parameters<typeof real.limitAll>[0]) => real.limitAll(requests),
        limitLeased: (...args: Parameters<typeof real.limitLeased>) => real.limitLeased(...args),
        refund: (key: string, tokens: number) => refund(real, key, tokens),
      };
    },
  } satisfies RateLimiterNamespace<DurableObjectId>;
}

describe('counting only failures or only successes', () => {
  it('skipSuccessfulRequests: 20 concurrent failed logins on a limit of 5 reach the handler 5 times; successes are given back', async () => {
    const policy = { name: 'login', max_tokens: 5, refill_every_seconds: 300 };
    const handler = Object.assign(
      async (r: Request) => {
        handler.calls += 1;
        return new Response(null, { status: r.headers.get('X-Password') === 'right' ? 200 : 401 });
      },
      { calls: 0 },
    );
    const fetch = rateLimit({ binding: 'LIMITER', policy, skipSuccessfulRequests: true })(handler);
    const { context, settled } = collectingContext();
    const wrong = () => fetch(request('198.51.100.20', { headers: { 'X-Password': 'wrong' } }), env, context);
    const statuses = (await Promise.all(Array.from({ length: 20 }, wrong))).map((r) => r.status);
    await settled();
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    expect(handler.calls).toBe(5);
    // Successful logins take a token each while they run and get it back after.
    for (let i = 0; i < 10; i++) {
      const ok = await fetch(request('198.51.100.21', { headers: { 'X-Password': 'right' } }), env, context);
      expect(ok.status).toBe(200);
      expect(ok.headers.get('RateLimit')).toBe('"login";r=4;t=300');
      await settled();
    }
    // (A cost of 0 reads the bucket under the policy without taking anything.)
    const { name, ...limits } = policy;
    expect((await stub('198.51.100.21').limit(name, 0, limits)).remaining).toBe(5);
  });

  it('skipFailedRequests: a 500 and a handler that throws are given back, a 200 counts', async () => {
    const policy = { name: 'work', max_tokens: 3, refill_every_seconds: 300 };
    const fetch = rateLimit({ binding: 'LIMITER', policy, skipFailedRequests: true })(async (r) => {
      const path = new URL(r.url).pathname;
      if (path === '/throw') throw new Error('handler broke');
      return new Response(null, { status: path === '/fail' ? 500 : 200 });
    });
    const { context, settled } = collectingContext();
    const at = (path: string) => new Request(`https://example.com${path}`, { headers: { 'CF-Connecting-IP': '198.51.100.22' } });
    expect((await fetch(at('/fail'), env, context)).status).toBe(500);
    await expect(fetch(at('/throw'), env, context)).rejects.toThrow('handler broke');
    expect((await fetch(at('/ok'), env, context)).status).toBe(200);
    await settled();
    expect((await stub('198.51.100.22').getStatus('work')).remaining).toBe(2);
  });

  it('requestWasSuccessful decides what succeeded, and must return a boolean', async () => {
    const policy = { name: 'pred', max_tokens: 2, refill_every_seconds: 300 };
    const { context, settled } = collectingContext();
    const byHeader = rateLimit({
      binding: 'LIMITER',
      policy,
      skipSuccessfulRequests: true,
      requestWasSuccessful: async (_request, response) => response.headers.get('X-Outcome') === 'ok',
    })(async () => new Response('fine', { status: 200, headers: { 'X-Outcome': 'not-ok' } }));
    for (let i = 0; i < 2; i++) expect((await byHeader(request('198.51.100.23'), env, context)).status).toBe(200);
    await settled();
    // Both counted (a 200 that the predicate calls a failure): the third is denied.
    expect((await byHeader(request('198.51.100.23'), env, context)).status).toBe(429);
    const broken = rateLimit({
      binding: 'LIMITER',
      policy,
      skipFailedRequests: true,
      requestWasSuccessful: (() => 'yes') as never,
    })(counting());
    await expect(broken(request('198.51.100.24'), env, context)).rejects.toThrow(
      new TypeError('options.requestWasSuccessful must return a boolean, got string "yes"'),
    );
  });

  it('a refund that fails goes to onError, and the request stays counted', async () => {
    const policy = { name: 'lost', max_tokens: 3, refill_every_seconds: 300 };
    const error = overloaded();
    const binding = withRefund(() => Promise.reject(error));
    const onError = vi.fn();
    const { context, settled } = collectingContext();
    const fetch = rateLimit({ binding, policy, skipSuccessfulRequests: true, onError })(counting());
    expect((await fetch(request('198.51.100.25'), env, context)).status).toBe(201);
    await settled();
    expect(onError).toHaveBeenCalledWith(error, expect.any(Request));
    expect((await stub('198.51.100.25').getStatus('lost')).remaining).toBe(2);
  });

  it('with local, a refund goes back to the isolate\'s lease where it can: no call for those', async () => {
    const refunds: string[] = [];
    const binding = withRefund((real, key, tokens) => (refunds.push(key), real.refund(key, tokens)));
    const local = new LocalLimits();
    const policy = { name: 'login', max_tokens: 5, refill_every_seconds: 300 };
    const fetch = rateLimit({ binding, policy, local, skipSuccessfulRequests: true })(counting());
    const { context, settled } = collectingContext();
    for (let i = 0; i < 20; i++) {
      at(i);
      expect((await fetch(request('198.51.100.27'), env, context)).status).toBe(201);
      await settled();
    }
    // Every success was given back, so a bucket of 5 served 20; most refunds made no call.
    expect(refunds.length).toBeLessThan(5);
  });

  it('checkRateLimit: refund() gives the cost back to every policy, once; a denial has nothing to give', async () => {
    const options = {
      binding: 'LIMITER',
      policy: [
        { name: 'r1', max_tokens: 4, refill_every_seconds: 300 },
        { name: 'r2', max_tokens: 1, refill_every_seconds: 300 },
      ],
      cost: 1,
    };
    const allowed = await checkRateLimit(request('198.51.100.26'), env, options);
    const denied = await checkRateLimit(request('198.51.100.26'), env, options);
    expect(denied.decision?.allowed).toBe(false);
    await denied.refund();
    await allowed.refund();
    await allowed.refund();
    const [r1, r2] = options.policy.map(({ name, ...limits }) => stub('198.51.100.26').limit(name, 0, limits));
    expect((await r1).remaining).toBe(4);
    expect((await r2).remaining).toBe(1);
  });
});

describe('shadow mode and decision events', () => {
  it('shadow: decides and counts as enforced, blocks nothing, sends no headers; events say what it would have done', async () => {
    const policy = { name: 'trial', max_tokens: 1, refill_every_seconds: 60 };
    const events: RateLimitEvent[] = [];
    const handler = counting();
    const fetch = rateLimit({ binding: 'LIMITER', policy, shadow: true, onDecision: (e) => void events.push(e) })(handler);
    for (let i = 0; i < 3; i++) {
      const response = await fetch(request('198.51.100.150'), env, ctx);
      expect(response.status).toBe(201);
      expect(rateHeaders(response)).toEqual({});
    }
    expect(handler.calls).toBe(3);
    expect(events.map((e) => [e.outcome, e.shadow, e.passed])).toEqual([
      ['allowed', true, true],
      ['denied', true, true],
      ['denied', true, true],
    ]);
    expect(events[1]).toEqual({
      outcome: 'denied',
      shadow: true,
      passed: true,
      local: false,
      key: '198.51.100.150',
      policies: ['trial'],
      shadowPolicies: ['trial'],
      violated: ['trial'],
      cost: 1,
      remaining: 0,
      retryAfterMs: 60_000,
      error: undefined,
    });
    // The bucket is exactly where enforcing would have left it: one token taken.
    expect((await stub('198.51.100.150').getStatus('trial')).remaining).toBe(0);
  });

  it('shadow: a limiter that fails blocks nothing either; the event says failed and passed', async () => {
    const error = overloaded();
    const { binding } = failingBinding(() => Promise.reject(error));
    const events: RateLimitEvent[] = [];
    const fetch = rateLimit({ binding, policy: { name: 'trial' }, shadow: true, onError: () => {}, onDecision: (e) => void events.push(e) })(counting());
    expect((await fetch(request('198.51.100.151'), env, ctx)).status).toBe(201);
    expect(events).toEqual([
      { outcome: 'failed', shadow: true, passed: true, local: false, key: '198.51.100.151', policies: ['trial'], shadowPolicies: ['trial'], violated: [], cost: 1, remaining: null, retryAfterMs: null, error },
    ]);
    const closed: RateLimitEvent[] = [];
    const enforced = rateLimit({ binding, policy: { name: 'trial' }, onError: () => {}, onDecision: (e) => void closed.push(e) })(counting());
    expect((await enforced(request('198.51.100.151'), env, ctx)).status).toBe(503);
    expect(closed.map((e) => [e.outcome, e.shadow, e.passed])).toEqual([['failed', false, false]]);
  });

  it('events of several policies name the violated ones; local decisions say local', async () => {
    const events: RateLimitEvent[] = [];
    const onDecision = (e: RateLimitEvent) => void events.push(e);
    const policy = [
      { name: 'burst', max_tokens: 2, refill_every_seconds: 60 },
      { name: 'daily', max_tokens: 100, refill_every_seconds: 864 },
    ];
    const fetch = rateLimit({ binding: 'LIMITER', policy, cost: 1, onDecision })(counting());
    for (let i = 0; i < 3; i++) await fetch(request('198.51.100.152'), env, ctx);
    expect(events.map((e) => [e.outcome, e.violated, e.remaining, e.passed])).toEqual([
      ['allowed', [], 1, true],
      ['allowed', [], 0, true],
      ['denied', ['burst'], 0, false],
    ]);
    const local = new LocalLimits();
    const localEvents: RateLimitEvent[] = [];
    const leased = rateLimit({ binding: 'LIMITER', policy: { name: 'far', max_tokens: 1000, refill_every_seconds: 1 }, local, onDecision: (e) => void localEvents.push(e) })(counting());
    for (let i = 0; i < 20; i++) await leased(request('198.51.100.153'), env, ctx);
    expect(localEvents.every((e) => e.outcome === 'allowed')).toBe(true);
    // Each request's event says whether this isolate decided it; the isolate's calls include
    // renewals ahead of time, which answer no request.
    expect(localEvents).toHaveLength(20);
    expect(localEvents.filter((e) => e.local)).toHaveLength(local.localAnswers);
    expect(localEvents.filter((e) => !e.local).length).toBeLessThanOrEqual(local.calls);
    expect(local.localAnswers).toBeGreaterThan(10);
  });

  it('a shadow policy beside an enforced one never blocks, counts what got through, and is left out of headers and the 429', async () => {
    const events: RateLimitEvent[] = [];
    const policy = [
      { name: 'second', max_tokens: 4, refill_every_seconds: 60 },
      { name: 'daily', max_tokens: 2, refill_every_seconds: 3600, shadow: true },
    ];
    const handler = counting();
    const fetch = rateLimit({ binding: 'LIMITER', policy, onDecision: (e) => void events.push(e) })(handler);
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await fetch(request('198.51.100.163'), env, ctx)).status);
    // The enforced limit alone decides: 4 through, then 429; the trial's 2 never block.
    expect(statuses).toEqual([201, 201, 201, 201, 429, 429]);
    expect(handler.calls).toBe(4);
    expect(events.map((e) => [e.outcome, e.passed, e.violated, e.remaining])).toEqual([
      ['allowed', true, [], 3],
      ['allowed', true, [], 2],
      ['allowed', true, ['daily'], 1],
      ['allowed', true, ['daily'], 0],
      ['denied', false, ['second', 'daily'], 0],
      ['denied', false, ['second', 'daily'], 0],
    ]);
    expect(events.every((e) => !e.shadow && e.shadowPolicies.join() === 'daily')).toBe(true);
    // The trial took from the first two requests only: the state enforcing it would leave.
    expect((await stub('198.51.100.163').getStatus('daily')).remaining).toBe(0);
    expect((await stub('198.51.100.163').getStatus('second')).remaining).toBe(0);

    const denied = await fetch(request('198.51.100.163'), env, ctx);
    expect(rateHeaders(denied)).toEqual({
      'RateLimit-Policy': '"second";q=4;w=240',
      RateLimit: '"second";r=0;t=60',
      'X-RateLimit-Limit': '4',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '60',
      'Retry-After': '60',
    });
    expect((await problem(denied))['violated-policies']).toEqual(['second']);
  });

  it('a shadow policy takes nothing from requests the enforced ones deny, and a refund gives back only what was taken', async () => {
    const policy = [
      { name: 'tight', max_tokens: 1, refill_every_seconds: 60 },
      { name: 'trial', max_tokens: 10, refill_every_seconds: 60, shadow: true },
    ];
    const full = [
      { name: 'open', max_tokens: 10, refill_every_seconds: 60 },
      { name: 'shut', max_tokens: 1, refill_every_seconds: 60, shadow: true },
    ];
    const options = { binding: 'LIMITER', policy };
    const first = await checkRateLimit(request('198.51.100.164'), env, options);
    expect(first.decision?.allowed).toBe(true);
    for (let i = 0; i < 3; i++) expect((await checkRateLimit(request('198.51.100.164'), env, options)).decision?.allowed).toBe(false);
    const left = (ip: string, name: string) => {
      const { name: _, shadow: __, ...limits } = [...policy, ...full].find((p) => p.name === name)!;
      return stub(ip).limit(name, 0, limits).then((d) => d.remaining);
    };
    expect(await left('198.51.100.164', 'trial')).toBe(9);
    await first.refund();
    expect(await left('198.51.100.164', 'trial')).toBe(10);
    expect(await left('198.51.100.164', 'tight')).toBe(1);

    // A trial with no room took nothing: its refund gives nothing back to it.

    const fullOptions = { binding: 'LIMITER', policy: full };
    await checkRateLimit(request('198.51.100.165'), env, fullOptions);
    const over = await checkRateLimit(request('198.51.100.165'), env, fullOptions);
    expect(over.decision?.allowed).toBe(true);
    await over.refund();
    expect(await left('198.51.100.165', 'open')).toBe(9);
    expect(await left('198.51.100.165', 'shut')).toBe(0);
  });

  it('every policy on trial is shadow mode: all or nothing as if enforced, nothing blocked, no headers', async () => {
    const events: RateLimitEvent[] = [];
    const policy = [
      { name: 'a', max_tokens: 1, refill_every_seconds: 60, shadow: true },
      { name: 'b', max_tokens: 5, refill_every_seconds: 60, shadow: true },
    ];
    const fetch = rateLimit({ binding: 'LIMITER', policy, onDecision: (e) => void events.push(e) })(counting());
    for (let i = 0; i < 3; i++) {
      const response = await fetch(request('198.51.100.166'), env, ctx);
      expect(response.status).toBe(201);
      expect(rateHeaders(response)).toEqual({});
    }
    expect(events.map((e) => [e.outcome, e.shadow, e.passed, e.violated])).toEqual([
      ['allowed', true, true, []],
      ['denied', true, true, ['a']],
      ['denied', true, true, ['a']],
    ]);
    // As enforced: the would-be denials took nothing from b either.
    expect((await stub('198.51.100.166').getStatus('b')).remaining).toBe(4);
  });

  it('an async hook goes to waitUntil; one that throws or rejects never changes the answer', async () => {
    const policy = { name: 'hooked', max_tokens: 5, refill_every_seconds: 60 };
    const { context, settled } = collectingContext();
    const written: string[] = [];
    const asyncHook = rateLimit({
      binding: 'LIMITER',
      policy,
      onDecision: async (e) => {
        await Promise.resolve();
        written.push(e.outcome);
      },
    })(counting());
    expect((await asyncHook(request('198.51.100.154'), env, context)).status).toBe(201);
    await settled();
    expect(written).toEqual(['allowed']);
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    for (const onDecision of [
      () => {
        throw new Error('hook broke');
      },
      async () => {
        throw new Error('hook rejected');
      },
    ]) {
      const fetch = rateLimit({ binding: 'LIMITER', policy, onDecision })(counting());
      const response = await fetch(request('198.51.100.154'), env, context);
      await settled();
      expect(response.status).toBe(201);
      expect(response.headers.get('RateLimit-Policy')).toBe('"hooked";q=5;w=300');
    }
    expect(logged).toHaveBeenCalledTimes(2);
    expect(String(logged.mock.calls[0][0])).toMatch(/^options\.onDecision failed for GET /);
  });
});

describe('analyticsEngineEvents', () => {
  /** A dataset that keeps what is written (the local binding keeps nothing to read back). */
  function keeping() {
    const points: { indexes?: string[]; blobs?: string[]; doubles?: number[] }[] = [];
    return { points, dataset: { writeDataPoint: (point: (typeof points)[number]) => void points.push(point) } };
  }

  it('writes one data point per decision, in the documented schema', async () => {
    const { points, dataset } = keeping();
    const policy = { name: 'ae', max_tokens: 1, refill_every_seconds: 60 };
    const fetch = rateLimit({ binding: 'LIMITER', policy, onDecision: analyticsEngineEvents(dataset) })(counting());
    await fetch(request('198.51.100.160'), env, ctx);
    await fetch(request('198.51.100.160'), env, ctx);
    expect(points).toEqual([
      { indexes: ['198.51.100.160'], blobs: ['allowed', 'enforced', 'object', 'ae', '', '', '198.51.100.160', '', ''], doubles: [1, 0, 0, 1] },
      { indexes: ['198.51.100.160'], blobs: ['denied', 'enforced', 'object', 'ae', 'ae', '', '198.51.100.160', '', ''], doubles: [1, 0, 60_000, 0] },
    ]);
    const error = overloaded();
    const { binding } = failingBinding(() => Promise.reject(error));
    const shadow = rateLimit({ binding, policy, shadow: true, onError: () => {}, onDecision: analyticsEngineEvents(() => dataset) })(counting());
    await shadow(request('198.51.100.160'), env, ctx);
    expect(points[2]).toEqual({
      indexes: ['198.51.100.160'],
      blobs: ['failed', 'shadow', 'object', 'ae', '', error.message, '198.51.100.160', 'ae', ''],
      doubles: [1, -1, -1, 1],
    });
  });

  it('blob8 and blob9 name the policies on trial and those of them that would have denied', async () => {
    const { points, dataset } = keeping();
    const policy = [
      { name: 'second', max_tokens: 10, refill_every_seconds: 60 },
      { name: 'daily', max_tokens: 1, refill_every_seconds: 3600, shadow: true },
    ];
    const fetch = rateLimit({ binding: 'LIMITER', policy, onDecision: analyticsEngineEvents(dataset) })(counting());
    await fetch(request('198.51.100.167'), env, ctx);
    await fetch(request('198.51.100.167'), env, ctx);
    expect(points.map((p) => p.blobs?.slice(0, 2).concat(p.blobs.slice(3, 5), p.blobs.slice(7)))).toEqual([
      ['allowed', 'enforced', 'second,daily', '', 'daily', ''],
      ['allowed', 'enforced', 'second,daily', 'daily', 'daily', 'daily'],
    ]);
  });

  it('cuts the index to 96 bytes at a character boundary; blob7 keeps the whole key', async () => {
    const { points, dataset } = keeping();
    const key = 'ü'.repeat(60); // 120 bytes
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'long' }, key: () => key, onDecision: analyticsEngineEvents(dataset) })(counting());
    await fetch(request('198.51.100.161'), env, ctx);
    expect(points[0].indexes).toEqual(['ü'.repeat(48)]);
    expect(points[0].blobs?.[6]).toBe(key);
  });

  it('writes to the real binding by its name in env; a missing binding is logged, never changing the answer', async () => {
    const write = vi.spyOn(env.RATE_LIMIT_EVENTS, 'writeDataPoint');
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'real' }, onDecision: analyticsEngineEvents('RATE_LIMIT_EVENTS') })(counting());
    expect((await fetch(request('198.51.100.162'), env, ctx)).status).toBe(201);
    expect(write).toHaveBeenCalledTimes(1);
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    const missing = rateLimit({ binding: 'LIMITER', policy: { name: 'real' }, onDecision: analyticsEngineEvents('NO_SUCH_DATASET') })(counting());
    expect((await missing(request('198.51.100.162'), env, ctx)).status).toBe(201);
    expect(String(logged.mock.calls[0]?.[1])).toMatch(/env\.NO_SUCH_DATASET is not an Analytics Engine dataset/);
    expect(() => analyticsEngineEvents(42 as never)).toThrow(TypeError);
  });
});

describe('checkRateLimit and withHeaders (for other frameworks)', () => {
  it('returns the decision and headers, and the response to send instead when denied', async () => {
    const options = { binding: 'LIMITER', policy: { name: 'core', max_tokens: 1, refill_every_seconds: 5 } };
    const allowed = await checkRateLimit(request('198.51.100.95'), env, options);
    expect(allowed).toEqual({
      response: null,
      headers: {
        'RateLimit-Policy': '"core";q=1;w=5',
        'RateLimit': '"core";r=0;t=5',
        'X-RateLimit-Limit': '1',
        'X-RateLimit-Remaining': '0',
        'X-RateLimit-Reset': '5',
      },
      decision: { allowed: true, remaining: 0, limit: 1, reset_in_ms: 5_000, retry_after_ms: 0, window_ms: 5_000 },
      error: undefined,
      skipped: false,
      refund: expect.any(Function),
      release: expect.any(Function),
    });
    const denied = await checkRateLimit(request('198.51.100.95'), env, options);
    expect(denied.decision?.allowed).toBe(false);
    expect(denied.headers['Retry-After']).toBe('5');
    expect(denied.response?.status).toBe(429);
    expect(denied.response?.headers.get('Retry-After')).toBe('5');

    const error = overloaded();
    const failed = await checkRateLimit(request('198.51.100.95'), env, {
      ...options,
      binding: failingBinding(() => Promise.reject(error)).binding,
      onError: () => {},
    });
    expect(failed).toMatchObject({ headers: {}, decision: null, error, skipped: false });
    expect(failed.response?.status).toBe(503);
  });

  it('withHeaders appends RateLimit lists and keeps other headers the response has', async () => {
    const response = withHeaders(
      new Response('body', { status: 202, headers: { 'RateLimit': '"mine";r=1;t=1', 'X-RateLimit-Limit': '7' } }),
      { 'RateLimit': '"yours";r=2;t=2', 'X-RateLimit-Limit': '9', 'X-RateLimit-Remaining': '2' },
    );
    expect(response.status).toBe(202);
    expect(await response.text()).toBe('body');
    expect(response.headers.get('RateLimit')).toBe('"mine";r=1;t=1, "yours";r=2;t=2');
    expect(response.headers.get('X-RateLimit-Limit')).toBe('7');
    expect(response.headers.get('X-RateLimit-Remaining')).toBe('2');
    const untouched = new Response('x');
    expect(withHeaders(untouched, {})).toBe(untouched);
  });
});

// Compiled by the root `tsc --noEmit`: the wrapper fits ExportedHandler, and wrong options
// do not type-check (each @ts-expect-error must be needed).
export const typedWorker = {
  fetch: rateLimit<Cloudflare.Env>({ binding: 'LIMITER', policy: { max_tokens: 10 } })(async (request, env) => {
    const ip: string | null = request.headers.get('CF-Connecting-IP');
    // @ts-expect-error env is the Worker's Env (inferred from ExportedHandler), not any
    const missing = env.NO_SUCH_BINDING;
    return new Response(`${ip} ${String(env.LIMITER)} ${missing}`);
  }),
} satisfies ExportedHandler<Cloudflare.Env>;

export function typeErrors(): void {
  // @ts-expect-error a policy field must be a number
  rateLimit({ binding: 'LIMITER', policy: { max_tokens: '10' } });
  // @ts-expect-error the binding is required
  rateLimit({ policy: { max_tokens: 10 } });
  // @ts-expect-error a key is a string
  rateLimit({ binding: 'LIMITER', policy: {}, key: () => 1 });
  // @ts-expect-error failOpen is a boolean
  rateLimit({ binding: 'LIMITER', policy: {}, failOpen: 'yes' });
  // @ts-expect-error the handler must return a Response
  rateLimit({ binding: 'LIMITER', policy: {} })(() => 'ok');
}
