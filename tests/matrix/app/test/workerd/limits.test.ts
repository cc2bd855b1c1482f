// test/workerd/limits.test.ts: the Worker in workerd, the Durable Objects too.
import { evictDurableObject } from 'cloudflare:test';
import { env, exports } from 'cloudflare:workers';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';

// Tests and Durable Objects share one isolate here, so a fake clock moves both.
beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
});
afterEach(() => vi.useRealTimers());

const get = (path: string, ip: string) =>
  exports.default.fetch(`https://example.com${path}`, { headers: { 'CF-Connecting-IP': ip } });

it('lets 10 requests in, answers 429 with Retry-After, and lets one more in 10 s later', async () => {
  for (let i = 0; i < 10; i++) expect((await get('/', '203.0.113.1')).status).toBe(200);

  const denied = await get('/', '203.0.113.1');
  expect(denied.status).toBe(429);
  expect(denied.headers.get('Retry-After')).toBe('10');
  expect((await get('/', '203.0.113.2')).status).toBe(200); // another client

  vi.advanceTimersByTime(10_000);
  expect((await get('/', '203.0.113.1')).status).toBe(200);
  expect((await get('/', '203.0.113.1')).status).toBe(429);
});

it('keeps login attempts through an eviction of the durable object', async () => {
  for (let i = 0; i < 5; i++) expect((await get('/login', '203.0.113.3')).status).toBe(200);
  await evictDurableObject(env.LOGIN_LIMITER.get(env.LOGIN_LIMITER.idFromName('203.0.113.3')));
  expect((await get('/login', '203.0.113.3')).status).toBe(429);
});
