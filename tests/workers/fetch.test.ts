// The Quickstart flow end to end: HTTP requests into the example Worker, which calls the
// per-IP RateLimiterServer over RPC. Each test uses its own client IP, so its own object.
import { env, exports } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';

const get = (ip?: string) =>
  exports.default.fetch('https://example.com/', {
    headers: ip === undefined ? {} : { 'CF-Connecting-IP': ip },
  });

const header = (response: Response, name: string) => response.headers.get(name);

afterEach(() => {
  vi.useRealTimers();
});

describe('example Worker', () => {
  it('allows 10 requests per IP, then answers 429 with Retry-After', async () => {
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
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    await denied.body?.cancel();

    // The Worker's Durable Object for that IP agrees.
    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    expect((await stub.getStatus('api')).remaining).toBe(0);
  });

  it('keeps a separate bucket per IP', async () => {
    for (let i = 0; i < 10; i++) await (await get('203.0.113.2')).arrayBuffer();
    expect((await get('203.0.113.2')).status).toBe(429);
    const other = await get('203.0.113.3');
    expect(other.status).toBe(200);
    expect(header(other, 'X-RateLimit-Remaining')).toBe('9');
  });

  it('falls back to 127.0.0.1 without a CF-Connecting-IP header', async () => {
    const response = await get();
    expect(response.status).toBe(200);
    expect(header(response, 'X-RateLimit-Remaining')).toBe('9');
    const stub = env.LIMITER.get(env.LIMITER.idFromName('127.0.0.1'));
    expect((await stub.getStatus('api')).remaining).toBe(9);
  });

  it('rounds Reset and Retry-After up to whole seconds, and lets a client back in after it', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-04-01T00:00:00Z'));
    const t0 = Date.now();
    const ip = '203.0.113.4';

    const first = await get(ip);
    expect(header(first, 'X-RateLimit-Reset')).toBe('10');
    for (let i = 0; i < 9; i++) expect((await get(ip)).status).toBe(200);

    vi.setSystemTime(t0 + 8_001); // 1999 ms to the next token: rounds up to 2 s
    const denied = await get(ip);
    expect(denied.status).toBe(429);
    expect(header(denied, 'X-RateLimit-Reset')).toBe('2');
    expect(header(denied, 'Retry-After')).toBe('2');

    vi.setSystemTime(t0 + 10_000);
    const again = await get(ip);
    expect(again.status).toBe(200);
    expect(header(again, 'X-RateLimit-Remaining')).toBe('0');
    expect(header(again, 'X-RateLimit-Reset')).toBe('10');
    expect((await get(ip)).status).toBe(429);
  });
});
