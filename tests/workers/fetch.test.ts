// The Quickstart flow end to end: HTTP requests into the example Worker, which makes one
// `limit()` RPC call per request to the per-IP RateLimiterServer and answers with
// `rateLimitHeaders`, on every path but the playground's (`/`, `/api/*`: playground.test.ts).
// Each test uses its own client IP, so its own object.
import { env, exports } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';

const get = (ip?: string, path = '/hello') =>
  exports.default.fetch(`https://example.com${path}`, {
    headers: ip === undefined ? {} : { 'CF-Connecting-IP': ip },
  });

const header = (response: Response, name: string) => response.headers.get(name);

/**
 * Parses a `RateLimit-Policy` / `RateLimit` field value of
 * draft-ietf-httpapi-ratelimit-headers-11: a Structured Fields list of string items with
 * integer parameters, e.g. `"api";q=10;w=100`. Throws on anything else.
 */
function parseRateLimitField(value: string | null): { name: string; params: Record<string, number> }[] {
  if (value === null) throw new Error('header missing');
  const member = /^"((?:[\x20-\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"((?:;[a-z*][a-z0-9_.*-]*=-?\d{1,15})*)$/;
  return value.split(/,[ \t]*/).map((text) => {
    const m = member.exec(text);
    if (m === null) throw new Error(`not an SF string item with integer parameters: ${text}`);
    const params: Record<string, number> = {};
    for (const p of m[2]!.split(';').slice(1)) {
      const [k, v] = p.split('=') as [string, string];
      if (k in params) throw new Error(`parameter ${k} repeats in ${text}`);
      params[k] = Number(v);
    }
    return { name: m[1]!.replace(/\\(.)/g, '$1'), params };
  });
}

/** The single member of a RateLimit(-Policy) field, checked to be named "api". */
function apiMember(response: Response, field: 'RateLimit' | 'RateLimit-Policy') {
  const members = parseRateLimitField(header(response, field));
  expect(members).toHaveLength(1);
  expect(members[0]!.name).toBe('api');
  return members[0]!.params;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('example Worker', () => {
  it('allows 10 requests per IP, then answers 429 with Retry-After, X-RateLimit-* and RateLimit fields', async () => {
    const ip = '203.0.113.1';
    for (let i = 9; i >= 0; i--) {
      const response = await get(ip);
      expect(response.status).toBe(200);
      expect(header(response, 'X-RateLimit-Limit')).toBe('10');
      expect(header(response, 'X-RateLimit-Remaining')).toBe(String(i));
      const reset = Number(header(response, 'X-RateLimit-Reset'));
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(10);
      expect(header(response, 'Retry-After')).toBeNull();
      expect(header(response, 'RateLimit-Policy')).toBe('"api";q=10;w=100');
      expect(apiMember(response, 'RateLimit-Policy')).toEqual({ q: 10, w: 100 });
      const rl = apiMember(response, 'RateLimit');
      expect(Object.keys(rl)).toEqual(['r', 't']);
      expect(rl.r).toBe(i);
      expect(rl.t).toBe(reset);
      expect(header(response, 'RateLimit')).toBe(`"api";r=${i};t=${reset}`);
      expect(await response.json()).toEqual({ ok: true, remaining: i });
    }

    const denied = await get(ip);
    expect(denied.status).toBe(429);
    expect(header(denied, 'X-RateLimit-Limit')).toBe('10');
    expect(header(denied, 'X-RateLimit-Remaining')).toBe('0');
    const reset = Number(header(denied, 'X-RateLimit-Reset'));
    expect(reset).toBeGreaterThanOrEqual(1);
    expect(reset).toBeLessThanOrEqual(10);
    const retryAfter = Number(header(denied, 'Retry-After'));
    expect(header(denied, 'Retry-After')).toMatch(/^\d+$/);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    // Cost 1: the wait for the request is the wait for the next token.
    expect(retryAfter).toBe(reset);
    expect(header(denied, 'RateLimit-Policy')).toBe('"api";q=10;w=100');
    expect(apiMember(denied, 'RateLimit-Policy')).toEqual({ q: 10, w: 100 });
    expect(apiMember(denied, 'RateLimit')).toEqual({ r: 0, t: reset });
    expect(await denied.json()).toEqual({ error: 'Too Many Requests' });

    // The Worker's Durable Object for that IP agrees: the denied request took nothing.
    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    const status = await stub.getStatus('api');
    expect(status.remaining).toBe(0);
    expect(status.limit).toBe(10);
  });

  it('keeps a separate bucket per IP', async () => {
    for (let i = 0; i < 10; i++) await (await get('203.0.113.2')).arrayBuffer();
    const denied = await get('203.0.113.2');
    expect(denied.status).toBe(429);
    await denied.arrayBuffer();
    const other = await get('203.0.113.3');
    expect(other.status).toBe(200);
    expect(header(other, 'X-RateLimit-Remaining')).toBe('9');
    expect(apiMember(other, 'RateLimit').r).toBe(9);
    await other.arrayBuffer();
  });

  it('falls back to 127.0.0.1 without a CF-Connecting-IP header', async () => {
    const response = await get();
    expect(response.status).toBe(200);
    expect(header(response, 'X-RateLimit-Remaining')).toBe('9');
    await response.arrayBuffer();
    const stub = env.LIMITER.get(env.LIMITER.idFromName('127.0.0.1'));
    expect((await stub.getStatus('api')).remaining).toBe(9);
  });

  it("limits every path but the playground's with one per-IP bucket; `/` and `/api/*` do not count", async () => {
    const ip = '203.0.113.5';
    const paths = ['/hello', '/some/other/path?x=1', '/api', '/favicon.ico'];
    for (const [i, path] of paths.entries()) {
      const response = await get(ip, path);
      expect(response.status, path).toBe(200);
      expect(header(response, 'X-RateLimit-Remaining'), path).toBe(String(9 - i));
      await response.arrayBuffer();
    }
    const page = await get(ip, '/');
    expect(page.headers.get('Content-Type')).toMatch(/^text\/html/);
    await page.arrayBuffer();
    const playground = await exports.default.fetch('https://example.com/api/status', {
      method: 'POST',
      headers: { 'CF-Connecting-IP': ip },
      body: JSON.stringify({ key: 'api' }),
    });
    expect(playground.status).toBe(200);
    await playground.arrayBuffer();
    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    expect((await stub.getStatus('api')).remaining).toBe(6);
  });

  it('rounds Reset, t and Retry-After up to whole seconds, and lets a client back in after it', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-04-01T00:00:00Z'));
    const t0 = Date.now();
    const ip = '203.0.113.4';

    const first = await get(ip);
    expect(header(first, 'X-RateLimit-Reset')).toBe('10');
    expect(header(first, 'RateLimit')).toBe('"api";r=9;t=10');
    await first.arrayBuffer();
    for (let i = 0; i < 9; i++) expect((await get(ip)).status).toBe(200);

    // [ms since t0, whole seconds a client must wait]: ceil((10_000 - ms) / 1000), at least 1.
    for (const [at, seconds] of [
      [0, 10],
      [1, 10], // 9999 ms
      [8_001, 2], // 1999 ms
      [9_000, 1], // 1000 ms exactly
      [9_001, 1], // 999 ms
      [9_999, 1], // 1 ms
    ] as const) {
      vi.setSystemTime(t0 + at);
      const denied = await get(ip);
      expect(denied.status, `at +${at} ms`).toBe(429);
      expect(header(denied, 'Retry-After'), `at +${at} ms`).toBe(String(seconds));
      expect(header(denied, 'X-RateLimit-Reset'), `at +${at} ms`).toBe(String(seconds));
      expect(header(denied, 'X-RateLimit-Remaining')).toBe('0');
      expect(header(denied, 'RateLimit'), `at +${at} ms`).toBe(`"api";r=0;t=${seconds}`);
      expect(header(denied, 'RateLimit-Policy')).toBe('"api";q=10;w=100');
      await denied.arrayBuffer();
    }

    vi.setSystemTime(t0 + 10_000);
    const again = await get(ip);
    expect(again.status).toBe(200);
    expect(header(again, 'X-RateLimit-Remaining')).toBe('0');
    expect(header(again, 'X-RateLimit-Reset')).toBe('10');
    expect(header(again, 'RateLimit')).toBe('"api";r=0;t=10');
    expect(header(again, 'Retry-After')).toBeNull();
    await again.arrayBuffer();
    const next = await get(ip);
    expect(next.status).toBe(429);
    expect(header(next, 'Retry-After')).toBe('10');
    await next.arrayBuffer();
  });
});
