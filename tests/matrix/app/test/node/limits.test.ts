// test/node/limits.test.ts: the Worker in plain Node, where the package's `node` entry runs
// the same engine. A small namespace stands in for each binding: one object per name.
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import worker, { type Env } from '../../src/index';

function namespace(Server: typeof RateLimiterServer) {
  const objects = new Map<string, RateLimiterServer>();
  return {
    idFromName: (name: string) => name,
    get(name: string) {
      if (!objects.has(name)) objects.set(name, new Server({} as DurableObjectState, {}));
      return objects.get(name)!;
    },
  };
}

let env: Env;
beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
  env = { LIMITER: namespace(RateLimiterServer), LOGIN_LIMITER: namespace(DurableRateLimiterServer) } as unknown as Env;
});
afterEach(() => vi.useRealTimers());

const get = (path: string, ip: string) =>
  worker.fetch(
    new Request(`https://example.com${path}`, { headers: { 'CF-Connecting-IP': ip } }),
    env,
    {} as ExecutionContext,
  );

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

it('allows 5 login attempts, then one every 300 s', async () => {
  for (let i = 0; i < 5; i++) expect((await get('/login', '203.0.113.3')).status).toBe(200);
  expect((await get('/login', '203.0.113.3')).status).toBe(429);

  vi.advanceTimersByTime(299_999);
  expect((await get('/login', '203.0.113.3')).status).toBe(429);
  vi.advanceTimersByTime(1);
  expect((await get('/login', '203.0.113.3')).status).toBe(200);
});
