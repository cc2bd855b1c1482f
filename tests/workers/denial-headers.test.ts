// Every 429 of the middleware agrees that waiting Retry-After is what helps (docs/SPEC.md 8.3,
// 12.8, 13.1): a block, the concurrency gate, a rate denial of a cost above one, a penalty,
// several policies, local answers and `denied` responses, on the real RateLimiterServer behind
// env.LIMITER inside workerd, with a fake clock. Each test has its own client address
// (192.0.2.1xx).
import { env } from 'cloudflare:workers';
import { rateLimitHeaders } from '@delightstack/rate-limiter';
import { LocalLimits, rateLimit } from '@delightstack/rate-limiter/middleware';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { collectingContext, limiter } from './support';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const request = (ip: string) => new Request('https://example.com/api', { headers: { 'CF-Connecting-IP': ip } });
const ok = async () => new Response('ok');
/** One request from `ip` through `handler` (a middleware-wrapped fetch), with a fresh context. */
const send = (handler: ReturnType<ReturnType<typeof rateLimit>>, ip: string) =>
  handler(request(ip), env, collectingContext().context);

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});
afterEach(() => {
  vi.useRealTimers();
});

/** The members of a RateLimit or RateLimit-Policy list: name → parameters (as written). */
function members(field: string | null): Map<string, Record<string, string>> {
  const found = new Map<string, Record<string, string>>();
  if (field === null) return found;
  for (const m of field.matchAll(/"((?:[^"\\]|\\.)*)"((?:;[a-z]+=(?:"[^"]*"|-?\d+))*)/g)) {
    const params: Record<string, string> = {};
    for (const p of m[2].matchAll(/;([a-z]+)=("[^"]*"|-?\d+)/g)) params[p[1]] = p[2];
    found.set(m[1], params);
  }
  return found;
}

/**
 * Asserts that no header of the 429 `response` says that a request of `cost` could pass before
 * Retry-After: every limit that denied it (its problem's `violated-policies`, or `violated` for
 * a response of options.denied) has fewer than its cost left in `RateLimit` (a gate's cost is
 * one permit), with 1 <= t <= Retry-After, the longest t equal to it; the X-RateLimit-* limit
 * is one that denied, with less than the cost left and Retry-After as its reset.
 */
async function expectNoHeaderSaysRetryNow(response: Response, cost: number, violated?: string[]) {
  expect(response.status).toBe(429);
  const h = (name: string) => response.headers.get(name);
  const retryAfter = Number(h('Retry-After'));
  expect(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${h('Retry-After')}`).toBe(true);
  let names = violated;
  if (names === undefined) {
    const body = (await response.clone().json()) as { 'violated-policies': string[]; detail: string };
    names = body['violated-policies'];
    expect(body.detail).toContain(`retry after ${retryAfter} second`);
  }
  expect(names.length).toBeGreaterThan(0);
  const policies = members(h('RateLimit-Policy'));
  const limits = members(h('RateLimit'));
  const costOf = (name: string) => (policies.get(name)?.qu === '"concurrent-requests"' ? 1 : cost);
  if (h('RateLimit') !== null) {
    const waits = names.map((name) => {
      const m = limits.get(name);
      expect(m, `RateLimit member "${name}" in ${h('RateLimit')}`).toBeDefined();
      expect(Number(m!.r), `r of "${name}" in ${h('RateLimit')}`).toBeLessThan(costOf(name));
      const t = Number(m!.t);
      expect(t >= 1 && t <= retryAfter, `t of "${name}" in ${h('RateLimit')}, Retry-After ${retryAfter}`).toBe(true);
      return t;
    });
    expect(Math.max(...waits), `the longest t in ${h('RateLimit')}`).toBe(retryAfter);
  }
  if (h('X-RateLimit-Remaining') !== null) {
    const limit = h('X-RateLimit-Limit');
    const deniers = names.filter((name) => policies.size === 0 || policies.get(name)?.q === limit);
    expect(deniers.length, `X-RateLimit-Limit ${limit} is a limit that denied`).toBeGreaterThan(0);
    expect(Number(h('X-RateLimit-Remaining'))).toBeLessThan(Math.min(...deniers.map(costOf)));
    expect(Number(h('X-RateLimit-Reset')), 'X-RateLimit-Reset').toBe(retryAfter);
  }
}

describe('a block', () => {
  const policy = { name: 'login', max_tokens: 5, refill_every_seconds: 60 };

  it('stub.block: the 429 reports the block, not the bucket it leaves full', async () => {
    const ip = '192.0.2.101';
    await limiter(ip).block('login', 900);
    const fetch = rateLimit({ binding: 'LIMITER', policy })(ok);
    const denied = await send(fetch, ip);
    expect(denied.headers.get('Retry-After')).toBe('900');
    expect(denied.headers.get('RateLimit')).toBe('"login";r=0;t=900');
    await expectNoHeaderSaysRetryNow(denied, 1);
    at(100_000);
    const later = await send(fetch, ip);
    expect(later.headers.get('RateLimit')).toBe('"login";r=0;t=800');
    await expectNoHeaderSaysRetryNow(later, 1);
  });

  it('with local: the held denial carries the time left of the block in every header', async () => {
    const ip = '192.0.2.102';
    await limiter(ip).block('login', 900);
    const local = new LocalLimits();
    const fetch = rateLimit({ binding: 'LIMITER', policy, local })(ok);
    await expectNoHeaderSaysRetryNow(await send(fetch, ip), 1);
    const answers = local.localAnswers;
    at(300_000);
    const held = await send(fetch, ip);
    expect(local.localAnswers).toBe(answers + 1);
    expect(held.headers.get('X-RateLimit-Reset')).toBe('600');
    await expectNoHeaderSaysRetryNow(held, 1);
  });

  it('with local: true, a cost of 2 and only the standard headers', async () => {
    const ip = '192.0.2.103';
    await limiter(ip).block('login', 120);
    const fetch = rateLimit({ binding: 'LIMITER', policy, local: true, cost: 2, legacyHeaders: false })(ok);
    for (const ms of [0, 1_000, 119_001]) {
      at(ms);
      const denied = await send(fetch, ip);
      expect(denied.headers.get('X-RateLimit-Remaining')).toBeNull();
      await expectNoHeaderSaysRetryNow(denied, 2);
    }
  });

  it('among several policies: the blocked one binds, the one with room keeps its tokens', async () => {
    const ip = '192.0.2.104';
    await limiter(ip).block('login', 900);
    const global = { name: 'global', max_tokens: 100, refill_every_seconds: 1 };
    const fetch = rateLimit({ binding: 'LIMITER', policy: [policy, global] })(ok);
    const denied = await send(fetch, ip);
    expect(denied.headers.get('RateLimit')).toBe('"login";r=0;t=900, "global";r=100;t=0');
    expect(denied.headers.get('X-RateLimit-Limit')).toBe('5');
    await expectNoHeaderSaysRetryNow(denied, 1);
  });

  it('a denied response of options.denied gets the same headers', async () => {
    const ip = '192.0.2.105';
    await limiter(ip).block('login', 900);
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy,
      denied: () => new Response('go away', { status: 429 }),
    })(ok);
    await expectNoHeaderSaysRetryNow(await send(fetch, ip), 1, ['login']);
  });

  it('rateLimitHeaders on the decision of a blocked key, made directly', async () => {
    const ip = '192.0.2.106';
    const stub = limiter(ip);
    await stub.block('login', 900);
    const decision = await stub.limit('login', 1, { max_tokens: 5, refill_every_seconds: 60 });
    // The decision keeps the bucket's state; the headers derive from the wait.
    expect(decision).toMatchObject({ allowed: false, remaining: 5, retry_after_ms: 900_000 });
    const headers = rateLimitHeaders(decision, { name: 'login' });
    await expectNoHeaderSaysRetryNow(new Response(null, { status: 429, headers }), 1, ['login']);
  });
});

describe('the concurrency gate', () => {
  /** A handler whose responses wait until `letGo`. */
  function held() {
    const waiting: (() => void)[] = [];
    const handler = () => new Promise<Response>((resolve) => waiting.push(() => resolve(new Response('done'))));
    const letGo = async () => {
      while (waiting.length > 0) waiting.shift()!();
    };
    return { handler, letGo, inFlight: () => waiting.length };
  }

  it('a full gate beside a bucket with room: the gate binds, the bucket keeps its tokens', async () => {
    const ip = '192.0.2.111';
    const { handler, letGo, inFlight } = held();
    const { context, settled } = collectingContext();
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'api', max_tokens: 100, refill_every_seconds: 1 },
      concurrency: { max_in_flight: 2 },
    })(handler);
    const running = [fetch(request(ip), env, context), fetch(request(ip), env, context)];
    await vi.waitUntil(() => inFlight() === 2);
    const denied = await fetch(request(ip), env, context);
    expect(denied.headers.get('RateLimit')).toBe('"api";r=98;t=1, "concurrency";r=0;t=1');
    expect(denied.headers.get('X-RateLimit-Limit')).toBe('2');
    expect(denied.headers.get('X-RateLimit-Remaining')).toBe('0');
    await expectNoHeaderSaysRetryNow(denied, 1);
    await letGo();
    for (const response of await Promise.all(running)) await response.text();
    await settled();
  });

  it('a gate alone', async () => {
    const ip = '192.0.2.112';
    const { handler, letGo, inFlight } = held();
    const { context, settled } = collectingContext();
    const fetch = rateLimit({ binding: 'LIMITER', concurrency: { max_in_flight: 1 } })(handler);
    const running = fetch(request(ip), env, context);
    await vi.waitUntil(() => inFlight() === 1);
    await expectNoHeaderSaysRetryNow(await fetch(request(ip), env, context), 1);
    await letGo();
    await (await running).text();
    await settled();
  });

  it('a full gate and an empty bucket: the longer wait, the bucket, binds', async () => {
    const ip = '192.0.2.113';
    const { handler, letGo, inFlight } = held();
    const { context, settled } = collectingContext();
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: { name: 'api', max_tokens: 1, refill_every_seconds: 30 },
      concurrency: { max_in_flight: 1 },
    })(handler);
    const running = fetch(request(ip), env, context);
    await vi.waitUntil(() => inFlight() === 1);
    const denied = await fetch(request(ip), env, context);
    expect(denied.headers.get('Retry-After')).toBe('30');
    expect(denied.headers.get('X-RateLimit-Limit')).toBe('1');
    await expectNoHeaderSaysRetryNow(denied, 1);
    await letGo();
    await (await running).text();
    await settled();
  });
});

describe('a rate denial', () => {
  it('a cost above the tokens left waits for all it needs, and t says so', async () => {
    const ip = '192.0.2.121';
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'api', max_tokens: 5, refill_every_seconds: 60 }, cost: 4 })(ok);
    expect((await send(fetch, ip)).status).toBe(200);
    const denied = await send(fetch, ip);
    // One token left; three more come in 180 s, the next one in 60 s.
    expect(denied.headers.get('Retry-After')).toBe('180');
    await expectNoHeaderSaysRetryNow(denied, 4);
  });

  it('with local, the denial held in the isolate too', async () => {
    const ip = '192.0.2.122';
    const local = new LocalLimits();
    const fetch = rateLimit({ binding: 'LIMITER', policy: { name: 'api', max_tokens: 5, refill_every_seconds: 60 }, cost: 4, local })(ok);
    expect((await send(fetch, ip)).status).toBe(200);
    await expectNoHeaderSaysRetryNow(await send(fetch, ip), 4);
    const answers = local.localAnswers;
    at(50_000);
    const held = await send(fetch, ip);
    expect(local.localAnswers).toBe(answers + 1);
    expect(held.headers.get('Retry-After')).toBe('130');
    await expectNoHeaderSaysRetryNow(held, 4);
  });

  it('of one policy among several', async () => {
    const ip = '192.0.2.123';
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: [
        { name: 'burst', max_tokens: 3, refill_every_seconds: 10 },
        { name: 'daily', max_tokens: 100, refill_every_seconds: 864 },
      ],
      cost: 2,
    })(ok);
    expect((await send(fetch, ip)).status).toBe(200);
    const denied = await send(fetch, ip);
    expect(denied.headers.get('RateLimit')).toBe('"burst";r=0;t=10, "daily";r=98;t=864');
    await expectNoHeaderSaysRetryNow(denied, 2);
  });
});

describe('a penalty', () => {
  const policy = { name: 'login', max_tokens: 2, refill_every_seconds: 60, block_seconds: 300 };

  it('the request that goes over is told the whole block, and so is every one after it', async () => {
    const ip = '192.0.2.131';
    const fetch = rateLimit({ binding: 'LIMITER', policy })(ok);
    for (let i = 0; i < 2; i++) expect((await send(fetch, ip)).status).toBe(200);
    const over = await send(fetch, ip);
    expect(over.headers.get('RateLimit')).toBe('"login";r=0;t=300');
    await expectNoHeaderSaysRetryNow(over, 1);
    // Both tokens are back, the block is not over.
    at(120_000);
    await expectNoHeaderSaysRetryNow(await send(fetch, ip), 1);
  });

  it('with local, the request that goes over and the held ones after it', async () => {
    const ip = '192.0.2.132';
    const local = new LocalLimits();
    const fetch = rateLimit({ binding: 'LIMITER', policy, local })(ok);
    for (let i = 0; i < 2; i++) expect((await send(fetch, ip)).status).toBe(200);
    await expectNoHeaderSaysRetryNow(await send(fetch, ip), 1);
    const answers = local.localAnswers;
    at(120_000);
    const held = await send(fetch, ip);
    expect(local.localAnswers).toBe(answers + 1);
    expect(held.headers.get('Retry-After')).toBe('180');
    await expectNoHeaderSaysRetryNow(held, 1);
  });

  it('among several policies, and the policy on trial stays out of the headers', async () => {
    const ip = '192.0.2.133';
    const fetch = rateLimit({
      binding: 'LIMITER',
      policy: [
        policy,
        { name: 'global', max_tokens: 100, refill_every_seconds: 1 },
        { name: 'trial', max_tokens: 1, refill_every_seconds: 3_600, shadow: true },
      ],
    })(ok);
    for (let i = 0; i < 2; i++) expect((await send(fetch, ip)).status).toBe(200);
    const over = await send(fetch, ip);
    expect(over.headers.get('RateLimit')).toBe('"login";r=0;t=300, "global";r=98;t=1');
    await expectNoHeaderSaysRetryNow(over, 1);
  });

  it('in shadow mode, the would-be penalty sends no headers at all', async () => {
    const ip = '192.0.2.134';
    const fetch = rateLimit({ binding: 'LIMITER', policy, shadow: true })(ok);
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const response = await send(fetch, ip);
      statuses.push(response.status);
      expect([...response.headers.keys()].filter((name) => /ratelimit|retry-after/i.test(name))).toEqual([]);
    }
    expect(statuses).toEqual([200, 200, 200]);
    // It did block the key: the same policy enforced is denied for the block's time left.
    at(60_000);
    const enforced = await send(rateLimit({ binding: 'LIMITER', policy })(ok), ip);
    expect(enforced.headers.get('Retry-After')).toBe('240');
    await expectNoHeaderSaysRetryNow(enforced, 1);
  });
});
