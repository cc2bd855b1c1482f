// The playground of the example Worker (example/src/playground.ts) inside workerd: its page
// at `/` and the JSON endpoints the page calls, which drive the real RateLimiterServer (class
// 'memory', the default) or DurableRateLimiterServer (class 'durable'). The page itself is
// tested in Chromium by tests/browser/playground.mjs.
// Every test uses its own keys; all of them live in the one "playground" object of each class.
import { env, exports } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';

const T0 = Date.UTC(2026, 3, 1);
const POLICY = { max_tokens: 3, refill_every_seconds: 1 };
const DEFAULTS = { max_tokens: 10, refill_every_seconds: 10 };

const playgroundObject = () => env.PLAYGROUND.get(env.PLAYGROUND.idFromName('playground'));
const durablePlaygroundObject = () => env.PLAYGROUND_DURABLE.get(env.PLAYGROUND_DURABLE.idFromName('playground'));

const call = (method: string, path: string, body?: unknown) =>
  exports.default.fetch(`https://example.com${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });

const post = (path: string, body: unknown) => call('POST', path, body);

/** The headers of a response that rateLimitHeaders() sets, as a plain object. */
function rateLimitFields(response: Response): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (/^(x-)?ratelimit|^retry-after$/.test(name)) fields[name] = value;
  }
  return fields;
}

async function status(key: string, policy?: object) {
  const response = await post('/api/status', { key, policy });
  expect(response.status).toBe(200);
  return ((await response.json()) as { status: unknown }).status;
}

async function error(response: Response) {
  expect(response.headers.get('Content-Type')).toMatch(/^application\/json/);
  return ((await response.json()) as { error: { name: string; message: string } }).error;
}

afterEach(async () => {
  vi.useRealTimers();
  await playgroundObject().setOptions(DEFAULTS);
  await durablePlaygroundObject().setOptions(DEFAULTS);
});

describe('GET /: the page', () => {
  it('is one self-contained HTML document, readable on a phone', async () => {
    const response = await call('GET', '/');
    expect(response.status).toBe(200);
    expect(response.headers.get('Content-Type')).toBe('text/html; charset=utf-8');
    const html = await response.text();
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<title>Rate limiter playground</title>');
    expect(html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    // Offline: no absolute URL, no external script, stylesheet, font or image.
    expect(html).not.toMatch(/https?:|\/\/[a-z]/i);
    expect(html).not.toMatch(/@import|url\(|<script[^>]+src|<img/i);
    const links = [...html.matchAll(/\b(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
    expect(links).toEqual(['data:,']);
    // The page calls the endpoints tested below.
    for (const path of ['/api/limit', '/api/status', '/api/options', '/api/reset', '/api/evict',
      '/api/acquire', '/api/release', '/api/gate', '/api/block', '/api/unblock', '/api/blocked']) {
      expect(html).toContain(`'${path}'`);
    }
  });

  it('answers other methods on / with 405', async () => {
    const response = await call('POST', '/', {});
    expect(response.status).toBe(405);
    expect(response.headers.get('Allow')).toBe('GET');
    expect((await error(response)).name).toBe('MethodNotAllowed');
  });
});

describe('POST /api/limit', () => {
  it('answers 200 with the decision and its rate-limit headers, then 429 with Retry-After', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    const key = 'pg-limit';
    for (const remaining of [2, 1, 0]) {
      const response = await post('/api/limit', { key, cost: 1, policy: POLICY });
      expect(response.status).toBe(200);
      expect(rateLimitFields(response)).toEqual({
        'ratelimit-policy': '"playground";q=3;w=3',
        ratelimit: `"playground";r=${remaining};t=1`,
        'x-ratelimit-limit': '3',
        'x-ratelimit-remaining': String(remaining),
        'x-ratelimit-reset': '1',
      });
      expect(await response.json()).toEqual({
        decision: { allowed: true, remaining, limit: 3, reset_in_ms: 1000, retry_after_ms: 0, window_ms: 3000 },
      });
    }
    vi.setSystemTime(T0 + 400);
    const denied = await post('/api/limit', { key, cost: 1, policy: POLICY });
    expect(denied.status).toBe(429);
    expect(rateLimitFields(denied)).toEqual({
      'ratelimit-policy': '"playground";q=3;w=3',
      ratelimit: '"playground";r=0;t=1',
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '1',
      'retry-after': '1',
    });
    expect(await denied.json()).toEqual({
      decision: { allowed: false, remaining: 0, limit: 3, reset_in_ms: 600, retry_after_ms: 600, window_ms: 3000 },
    });
    // The playground's Durable Object holds that bucket: the denied call took nothing.
    expect(await playgroundObject().getStatus(key)).toEqual({ remaining: 0, limit: 3, reset_in_ms: 600 });
  });

  it('takes the cost (default 1) and denies a cost above the capacity with no Retry-After', async () => {
    const key = 'pg-cost';
    const first = await post('/api/limit', { key, policy: POLICY });
    expect(((await first.json()) as { decision: { remaining: number } }).decision.remaining).toBe(2);
    const half = await post('/api/limit', { key, cost: 0.5, policy: POLICY });
    expect(((await half.json()) as { decision: { remaining: number } }).decision.remaining).toBe(1.5);
    const never = await post('/api/limit', { key, cost: 4, policy: POLICY });
    expect(never.status).toBe(429);
    expect(never.headers.get('Retry-After')).toBeNull();
    expect(((await never.json()) as { decision: { retry_after_ms: null } }).decision.retry_after_ms).toBeNull();
  });

  it('answers 400 with the limiter\'s own error for bad input, and changes nothing', async () => {
    const key = 'pg-errors';
    const cases: [unknown, string, string][] = [
      [{ key, cost: 1, policy: { max_tokens: 0, refill_every_seconds: 1 } }, 'RangeError',
        'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0'],
      [{ key, cost: 1, policy: { max_token: 5 } }, 'TypeError',
        'policy has no field "max_token" (the fields are max_tokens, refill_every_seconds and block_seconds)'],
      [{ key, cost: -1 }, 'RangeError', 'cost must be a finite number >= 0, got -1'],
      [{ key, cost: null }, 'TypeError', 'cost must be a number, got null'],
      [{ key: 5 }, 'TypeError', 'key must be a string, got number 5'],
      [{ cost: 1 }, 'TypeError', 'key must be a string, got undefined'],
      ['{"key": "pg-errors",', 'TypeError', 'the request body must be JSON'],
      [[key], 'TypeError', 'the request body must be a JSON object'],
    ];
    for (const [body, name, message] of cases) {
      const response = await post('/api/limit', body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(await error(response)).toEqual({ name, message });
    }
    expect(await playgroundObject().getStatus(key)).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });
});

describe('POST /api/status', () => {
  it('reads the bucket without consuming: getStatus, or under the page\'s policy', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    const key = 'pg-status';
    expect(await status(key)).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
    expect(await status(key, POLICY)).toEqual({ remaining: 3, limit: 3, reset_in_ms: 0 });
    await post('/api/limit', { key, cost: 2, policy: POLICY }).then((r) => r.arrayBuffer());
    vi.setSystemTime(T0 + 250);
    for (let i = 0; i < 3; i++) {
      expect(await status(key, POLICY)).toEqual({ remaining: 1, limit: 3, reset_in_ms: 750 });
      expect(await status(key)).toEqual({ remaining: 1, limit: 3, reset_in_ms: 750 });
    }
    vi.setSystemTime(T0 + 1000);
    expect(await status(key, POLICY)).toEqual({ remaining: 2, limit: 3, reset_in_ms: 1000 });
    // Full again: the bucket forgets its policy, so getStatus falls back to the instance
    // options, while the page's read under its policy still shows that policy's bucket.
    vi.setSystemTime(T0 + 2000);
    expect(await status(key, POLICY)).toEqual({ remaining: 3, limit: 3, reset_in_ms: 0 });
    expect(await status(key)).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('answers 400 for a bad policy', async () => {
    const response = await post('/api/status', { key: 'pg-status-bad', policy: { refill_every_seconds: 0 } });
    expect(response.status).toBe(400);
    expect(await error(response)).toEqual({
      name: 'RangeError',
      message: 'policy.refill_every_seconds must be a finite number > 0, got 0',
    });
  });
});

describe('POST /api/options and /api/reset', () => {
  it('setOptions applies to calls without a policy; bad options answer 400 and change nothing', async () => {
    const key = 'pg-options';
    const ok = await post('/api/options', { max_tokens: 2, refill_every_seconds: 60 });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true });
    const first = await post('/api/limit', { key, cost: 1 });
    expect(first.headers.get('RateLimit-Policy')).toBe('"playground";q=2;w=120');
    await first.arrayBuffer();

    const bad = await post('/api/options', { max_tokens: 5, refill_every_seconds: -1 });
    expect(bad.status).toBe(400);
    expect(await error(bad)).toEqual({
      name: 'RangeError',
      message: 'refill_every_seconds must be a finite number > 0, got -1',
    });
    const typo = await post('/api/options', { max_token: 5 });
    expect(typo.status).toBe(400);
    expect((await error(typo)).name).toBe('TypeError');
    // All or nothing: max_tokens is still 2.
    expect(await status(key)).toMatchObject({ remaining: 1, limit: 2 });
  });

  it('reset forgets the bucket', async () => {
    const key = 'pg-reset';
    await post('/api/limit', { key, cost: 3, policy: POLICY }).then((r) => r.arrayBuffer());
    expect(await status(key, POLICY)).toMatchObject({ remaining: 0 });
    const response = await post('/api/reset', { key });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
    expect(await playgroundObject().getStatus(key)).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });
});

describe('class and POST /api/evict', () => {
  it("class 'durable' drives the durable object: its own buckets and options", async () => {
    const key = 'pg-class';
    await post('/api/limit', { class: 'durable', key, cost: 2, policy: POLICY }).then((r) => r.arrayBuffer());
    expect(await durablePlaygroundObject().getStatus(key)).toMatchObject({ remaining: 1, limit: 3 });
    expect(await playgroundObject().getStatus(key)).toMatchObject({ remaining: 10, limit: 10 });
    const options = await post('/api/options', { class: 'durable', max_tokens: 4, refill_every_seconds: 60 });
    expect(options.status).toBe(200);
    await options.arrayBuffer();
    expect(await status('pg-class-options')).toMatchObject({ remaining: 10, limit: 10 });
    const durable = await post('/api/status', { class: 'durable', key: 'pg-class-options' });
    expect(await durable.json()).toEqual({ status: { remaining: 4, limit: 4, reset_in_ms: 0 } });
    // 'memory' is the default, named or not.
    const memory = await post('/api/status', { class: 'memory', key });
    expect(await memory.json()).toEqual({ status: { remaining: 10, limit: 10, reset_in_ms: 0 } });
  });

  it('answers 400 for an unknown class', async () => {
    for (const path of ['/api/limit', '/api/evict']) {
      const response = await post(path, { class: 'disk', key: 'pg-class-bad' });
      expect(response.status).toBe(400);
      expect(await error(response)).toEqual({ name: 'TypeError', message: 'class must be "memory" or "durable", got "disk"' });
    }
  });

  const drainThenEvict = async (cls: 'memory' | 'durable', key: string) => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    for (let i = 0; i < 2; i++) {
      const response = await post('/api/limit', { class: cls, key, cost: 1, policy: POLICY });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    vi.setSystemTime(T0 + 250);
    const before = await post('/api/status', { class: cls, key, policy: POLICY });
    expect(await before.json()).toEqual({ status: { remaining: 1, limit: 3, reset_in_ms: 750 } });
    const evicted = await post('/api/evict', { class: cls });
    expect(evicted.status).toBe(200);
    expect(await evicted.json()).toEqual({ evicted: true });
    const after = await post('/api/status', { class: cls, key, policy: POLICY });
    expect(after.status).toBe(200);
    return ((await after.json()) as { status: unknown }).status;
  };

  it('evicting the in-memory object: the next call reaches a new one, whose buckets are full', async () => {
    expect(await drainThenEvict('memory', 'pg-evict-memory')).toEqual({ remaining: 3, limit: 3, reset_in_ms: 0 });
  });

  it('evicting the durable object: the next call reaches a new one, whose buckets are as they were', async () => {
    expect(await drainThenEvict('durable', 'pg-evict-durable')).toEqual({ remaining: 1, limit: 3, reset_in_ms: 750 });
    // Also without the page's policy: the bucket's own policy was saved with it.
    expect(await durablePlaygroundObject().getStatus('pg-evict-durable')).toEqual({ remaining: 1, limit: 3, reset_in_ms: 750 });
  });
});

type Permit = { allowed: boolean; id: number | null; in_flight: number; limit: number; ttl_ms: number; retry_after_ms: number | null };

const acquire = (body: object) => post('/api/acquire', body);

async function permitOf(response: Response) {
  return ((await response.json()) as { permit: Permit }).permit;
}

async function gate(key: string, cls?: string) {
  const response = await post('/api/gate', { class: cls, key });
  expect(response.status).toBe(200);
  return ((await response.json()) as { gate: unknown }).gate;
}

describe('POST /api/acquire, /api/release, /api/gate: a concurrency limit', () => {
  it('grants max_in_flight permits with the middleware\'s headers, then 429 in the concurrent-requests unit', async () => {
    const key = 'pg-gate';
    const ids: number[] = [];
    for (const free of [1, 0]) {
      const response = await acquire({ key, max_in_flight: 2 });
      expect(response.status).toBe(200);
      // A gate alone: no token bucket, so no X-RateLimit-* fields and no wait.
      expect(rateLimitFields(response)).toEqual({
        'ratelimit-policy': '"pg-gate";q=2;qu="concurrent-requests"',
        ratelimit: `"pg-gate";r=${free}`,
      });
      const permit = await permitOf(response);
      expect(permit).toMatchObject({ allowed: true, in_flight: 2 - free, limit: 2, ttl_ms: 60_000, retry_after_ms: 0 });
      expect(Number.isSafeInteger(permit.id)).toBe(true);
      ids.push(permit.id as number);
    }
    expect(await gate(key)).toEqual({ in_flight: 2, permits: 2 });

    const denied = await acquire({ key, max_in_flight: 2 });
    expect(denied.status).toBe(429);
    expect(rateLimitFields(denied)).toEqual({
      'ratelimit-policy': '"pg-gate";q=2;qu="concurrent-requests"',
      ratelimit: '"pg-gate";r=0;t=1',
      'retry-after': '1',
    });
    expect(await denied.json()).toEqual({
      permit: { allowed: false, id: null, in_flight: 2, limit: 2, ttl_ms: 0, retry_after_ms: expect.any(Number) },
      problem: {
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: 429,
        detail: 'Quota exceeded for policy "pg-gate"; retry after 1 second.',
        'violated-policies': ['pg-gate'],
      },
    });
    expect(await gate(key)).toEqual({ in_flight: 2, permits: 2 });

    // Finishing one frees its slot, once.
    const release = await post('/api/release', { key, id: ids[0] });
    expect(release.status).toBe(200);
    expect(await release.json()).toEqual({ release: { released: true, in_flight: 1 } });
    const again = await post('/api/release', { key, id: ids[0] });
    expect(await again.json()).toEqual({ release: { released: false, in_flight: 1 } });
    const next = await acquire({ key, max_in_flight: 2 });
    expect(next.status).toBe(200);
    const last = await permitOf(next);
    expect(last).toMatchObject({ allowed: true, in_flight: 2 });
    for (const id of [ids[1], last.id]) await post('/api/release', { key, id }).then((r) => r.arrayBuffer());
    expect(await gate(key)).toEqual({ in_flight: 0, permits: 0 });
  });

  it('a permit never finished frees its slot at ttl_seconds; the gates of the two classes are apart', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    const key = 'pg-gate-ttl';
    const held = await acquire({ class: 'durable', key, max_in_flight: 1, ttl_seconds: 2 });
    expect(await permitOf(held)).toMatchObject({ allowed: true, ttl_ms: 2000 });
    expect(await gate(key, 'durable')).toEqual({ in_flight: 1, permits: 1 });
    expect(await gate(key)).toEqual({ in_flight: 0, permits: 0 });
    expect(await durablePlaygroundObject().gateStatus(key)).toEqual({ in_flight: 1, permits: 1 });
    vi.setSystemTime(T0 + 1999);
    expect((await acquire({ class: 'durable', key, max_in_flight: 1, ttl_seconds: 2 })).status).toBe(429);
    vi.setSystemTime(T0 + 2000);
    expect(await gate(key, 'durable')).toEqual({ in_flight: 0, permits: 0 });
    const after = await acquire({ class: 'durable', key, max_in_flight: 1, ttl_seconds: 2 });
    expect(after.status).toBe(200);
    await post('/api/release', { class: 'durable', key, id: (await permitOf(after)).id }).then((r) => r.arrayBuffer());
  });

  it('answers 400 for bad input, from the middleware or the limiter, and takes no permit', async () => {
    const key = 'pg-gate-errors';
    const cases: [string, unknown, string, string][] = [
      ['/api/acquire', { key, max_in_flight: 0 }, 'RangeError',
        'permit.policy.max_in_flight must be a whole number from 1 to 9007199254740991, got 0'],
      ['/api/acquire', { key, max_in_flight: 2, ttl_seconds: 0 }, 'RangeError',
        'permit.policy.ttl_seconds must be a finite number > 0 and at most 86400, got 0'],
      ['/api/acquire', { max_in_flight: 2 }, 'TypeError', 'key must be a string, got undefined'],
      ['/api/acquire', { key: 'pg-gate-é', max_in_flight: 2 }, 'TypeError',
        'options.concurrency.name must be non-empty printable ASCII text, got string "pg-gate-é"'],
      ['/api/acquire', { class: 'disk', key, max_in_flight: 2 }, 'TypeError', 'class must be "memory" or "durable", got "disk"'],
      ['/api/release', { key, id: -1 }, 'RangeError', 'id must be a whole number from 0 to 9007199254740991, got -1'],
      ['/api/gate', { key: 5 }, 'TypeError', 'key must be a string, got number 5'],
    ];
    for (const [path, body, name, message] of cases) {
      const response = await post(path, body);
      expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(await error(response)).toEqual({ name, message });
    }
    expect(await gate(key)).toEqual({ in_flight: 0, permits: 0 });
  });
});

type BlockedList = { keys: { key: string; blocked_for_ms: number }[]; next: string | null; block?: unknown };

async function blocked(body: object): Promise<BlockedList> {
  const response = await post('/api/blocked', body);
  expect(response.status).toBe(200);
  return (await response.json()) as BlockedList;
}

describe('POST /api/block, /api/unblock, /api/blocked', () => {
  it('a blocked key is denied by /api/limit with the time left, listed, and allowed again after unblock', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    const key = 'pg-block';
    const block = await post('/api/block', { key, seconds: 30 });
    expect(block.status).toBe(200);
    expect(await block.json()).toEqual({ ok: true });

    vi.setSystemTime(T0 + 10_000);
    const denied = await post('/api/limit', { key, cost: 1, policy: POLICY });
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBe('20');
    expect(await denied.json()).toMatchObject({ decision: { allowed: false, remaining: 3, retry_after_ms: 20_000 } });
    const list = await blocked({ key, after: 'pg-blocj', limit: 1 });
    expect(list).toEqual({ keys: [{ key, blocked_for_ms: 20_000 }], next: null, block: { key, blocked_for_ms: 20_000 } });
    // reset() refills the bucket but does not lift the block.
    await post('/api/reset', { key }).then((r) => r.arrayBuffer());
    expect((await blocked({ key })).block).toEqual({ key, blocked_for_ms: 20_000 });

    const unblock = await post('/api/unblock', { key });
    expect(await unblock.json()).toEqual({ unblocked: true });
    expect(await (await post('/api/unblock', { key })).json()).toEqual({ unblocked: false });
    expect((await blocked({ key })).block).toBeNull();
    expect((await blocked({ after: 'pg-blocj' })).keys.map((b) => b.key)).not.toContain(key);
    expect((await post('/api/limit', { key, cost: 1, policy: POLICY })).status).toBe(200);
  });

  it('lists blocks in key order, a page at a time; the durable class keeps a block through an eviction', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    const keys = ['pg-list/a', 'pg-list/b', 'pg-list/c'];
    for (const key of [...keys].reverse()) await post('/api/block', { class: 'durable', key, seconds: 60 }).then((r) => r.arrayBuffer());
    const first = await blocked({ class: 'durable', after: 'pg-list/', limit: 2 });
    expect(first).toEqual({ keys: keys.slice(0, 2).map((key) => ({ key, blocked_for_ms: 60_000 })), next: 'pg-list/b' });
    const evicted = await post('/api/evict', { class: 'durable' });
    expect(await evicted.json()).toEqual({ evicted: true });
    vi.setSystemTime(T0 + 1000);
    const second = await blocked({ class: 'durable', key: 'pg-list/c', after: first.next!, limit: 2 });
    expect(second).toEqual({
      keys: [{ key: 'pg-list/c', blocked_for_ms: 59_000 }],
      next: null,
      block: { key: 'pg-list/c', blocked_for_ms: 59_000 },
    });
    // The in-memory object has blocks of its own: none of these.
    expect((await blocked({ key: 'pg-list/c', after: 'pg-list/' })).keys).toEqual([]);
    for (const key of keys) await post('/api/unblock', { class: 'durable', key }).then((r) => r.arrayBuffer());
    expect((await blocked({ class: 'durable', after: 'pg-list/' })).keys).toEqual([]);
  });

  it('answers 400 for bad input and changes nothing', async () => {
    const key = 'pg-block-errors';
    const cases: [string, unknown, string, string][] = [
      ['/api/block', { key, seconds: 0 }, 'RangeError', expect.stringMatching(/^seconds must be/) as never],
      ['/api/block', { key, seconds: '30' }, 'TypeError', expect.stringMatching(/^seconds must be a number/) as never],
      ['/api/block', { key: 5, seconds: 30 }, 'TypeError', 'key must be a string, got number 5'],
      ['/api/blocked', { limit: 0 }, 'RangeError', 'options.limit must be a whole number from 1 to 1000, got 0'],
      ['/api/blocked', { after: 5 }, 'TypeError', 'options.after must be a string, got number'],
    ];
    for (const [path, body, name, message] of cases) {
      const response = await post(path, body);
      expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(await error(response)).toEqual({ name, message });
    }
    expect((await blocked({ key })).block).toBeNull();
  });
});

describe('routing', () => {
  it('answers unknown /api/ paths with 404 and GET on an endpoint with 405', async () => {
    const missing = await post('/api/nope', {});
    expect(missing.status).toBe(404);
    expect(await error(missing)).toEqual({ name: 'NotFound', message: 'no endpoint /api/nope' });
    const get = await call('GET', '/api/limit');
    expect(get.status).toBe(405);
    expect(get.headers.get('Allow')).toBe('POST');
    await get.arrayBuffer();
  });
});
