// The example Worker's `/login` (example/src/login.ts): the package's middleware counting only
// failed logins, with every decision written to the real RATE_LIMIT_EVENTS Analytics Engine
// binding of wrangler.toml. The local binding keeps nothing, so its writes are watched with a
// spy on that binding (the env the Worker gets is this one: checked below).
// Requests go through the Worker's own entry (`exports.default.fetch`); the refund tests call
// its handler with an execution context whose waitUntil they await, since a success's refund
// runs after the response. Time is set with fake timers (the Durable Object runs in this
// isolate). Each test has its own client IP (203.0.113.200-220), so its own bucket.
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env, exports } from 'cloudflare:workers';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import worker from '../../example/src/index';
import { DEMO_PASSWORD, LOGIN_POLICY } from '../../example/src/login';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);

const loginRequest = (ip: string, password: string, method = 'POST') =>
  new Request('https://example.com/login', {
    method,
    headers: { 'CF-Connecting-IP': ip, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: method === 'POST' ? new URLSearchParams({ password }) : undefined,
  });

/** Through the Worker's entry, as a client's request arrives. */
const viaEntry = (ip: string, password: string, method?: string) =>
  exports.default.fetch(loginRequest(ip, password, method));

/** Through the exported handler, awaiting what it left to waitUntil (the refund of a success). */
async function settled(ip: string, password: string): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await worker.fetch(loginRequest(ip, password), env, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

/** The login bucket of `ip` now (a cost of 0 reads it under the policy, taking nothing). */
async function loginTokens(ip: string): Promise<number> {
  const { name, ...limits } = LOGIN_POLICY;
  return (await env.LIMITER.get(env.LIMITER.idFromName(ip)).limit(name, 0, limits)).remaining;
}

const wrong = 'not-the-password';

/**
 * A written data point, as far as the schema goes: index1, blob1-blob7 (outcome, mode, where,
 * policies, violated, error, key), double1-double4 (cost, remaining, retryAfterMs, passed).
 * Columns added after these are not this file's concern.
 */
const documented = (point?: AnalyticsEngineDataPoint) => ({
  indexes: point?.indexes,
  blobs: point?.blobs?.slice(0, 7),
  doubles: point?.doubles,
});

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe('example /login: failed logins are limited', () => {
  it('counts failures: 5 wrong passwords get 401, the 6th in the window 429 with Retry-After', async () => {
    const ip = '203.0.113.200';
    for (let i = 4; i >= 0; i--) {
      const response = await viaEntry(ip, wrong);
      expect(response.status).toBe(401);
      expect(response.headers.get('RateLimit-Policy')).toBe('"login";q=5;w=300');
      expect(response.headers.get('X-RateLimit-Remaining')).toBe(String(i));
    }
    const denied = await viaEntry(ip, wrong);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('Retry-After')).toBe('60');
    expect(denied.headers.get('Content-Type')).toBe('application/problem+json');
    expect(await denied.json()).toMatchObject({ status: 429, 'violated-policies': ['login'] });
    // Denied even with the right password: the handler does not run.
    expect((await viaEntry(ip, DEMO_PASSWORD)).status).toBe(429);
    // One token back after 60 s: one more attempt.
    at(60_000);
    expect((await viaEntry(ip, wrong)).status).toBe(401);
    expect((await viaEntry(ip, wrong)).status).toBe(429);
  });

  it('refunds successes: 20 right passwords in a row are never limited, and leave the bucket full', async () => {
    const ip = '203.0.113.201';
    for (let i = 0; i < 20; i++) {
      const response = await settled(ip, DEMO_PASSWORD);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ ok: true });
      // The headers are the decision's, before the refund: its own token was taken then.
      expect(response.headers.get('X-RateLimit-Remaining')).toBe('4');
    }
    expect(await loginTokens(ip)).toBe(5);
  });

  it('between failures, successes do not count: the 6th failure is still the one denied', async () => {
    const ip = '203.0.113.202';
    for (let i = 0; i < 4; i++) expect((await settled(ip, wrong)).status).toBe(401);
    for (let i = 0; i < 10; i++) expect((await settled(ip, DEMO_PASSWORD)).status).toBe(200);
    expect(await loginTokens(ip)).toBe(1);
    expect((await settled(ip, wrong)).status).toBe(401);
    expect((await settled(ip, wrong)).status).toBe(429);
  });

  it('a method other than POST is answered 405 before the limit: no token, no event', async () => {
    const ip = '203.0.113.203';
    const write = vi.spyOn(env.RATE_LIMIT_EVENTS, 'writeDataPoint');
    const response = await viaEntry(ip, wrong, 'GET');
    expect(response.status).toBe(405);
    expect(response.headers.get('Allow')).toBe('POST');
    expect(write).not.toHaveBeenCalled();
    expect(await loginTokens(ip)).toBe(5);
  });
});

describe('example /login: decision events reach the Analytics Engine binding', () => {
  it('the Worker writes to the binding of this env: one data point per decision, in the documented schema', async () => {
    const ip = '203.0.113.210';
    const write = vi.spyOn(env.RATE_LIMIT_EVENTS, 'writeDataPoint');
    for (let i = 0; i < 5; i++) await viaEntry(ip, wrong);
    expect((await viaEntry(ip, wrong)).status).toBe(429);
    expect(write).toHaveBeenCalledTimes(6);
    expect(documented(write.mock.calls[0]![0])).toEqual({
      indexes: [ip],
      blobs: ['allowed', 'enforced', 'object', 'login', '', '', ip],
      doubles: [1, 4, 0, 1],
    });
    expect(documented(write.mock.calls[4]![0])).toEqual({
      indexes: [ip],
      blobs: ['allowed', 'enforced', 'object', 'login', '', '', ip],
      doubles: [1, 0, 0, 1],
    });
    expect(documented(write.mock.calls[5]![0])).toEqual({
      indexes: [ip],
      blobs: ['denied', 'enforced', 'object', 'login', 'login', '', ip],
      doubles: [1, 0, 60_000, 0],
    });
  });

  it('a success is one allowed event (its refund is no decision)', async () => {
    const ip = '203.0.113.211';
    const write = vi.spyOn(env.RATE_LIMIT_EVENTS, 'writeDataPoint');
    expect((await settled(ip, DEMO_PASSWORD)).status).toBe(200);
    expect(write).toHaveBeenCalledTimes(1);
    expect(documented(write.mock.calls[0]![0])).toEqual({
      indexes: [ip],
      blobs: ['allowed', 'enforced', 'object', 'login', '', '', ip],
      doubles: [1, 4, 0, 1],
    });
  });

  it('the Quickstart paths write no events', async () => {
    const write = vi.spyOn(env.RATE_LIMIT_EVENTS, 'writeDataPoint');
    const response = await exports.default.fetch('https://example.com/hello', { headers: { 'CF-Connecting-IP': '203.0.113.212' } });
    expect(response.status).toBe(200);
    expect(write).not.toHaveBeenCalled();
  });
});
