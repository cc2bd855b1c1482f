// Shared by the Node behaviour suite (tests/node/*.test.ts). The fake clock itself is set up
// around every test by setup.ts; this module only names what the test files refer to.
import { expect } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimiterStatus } from '@delightstack/rate-limiter';

export type Ctx = ConstructorParameters<typeof RateLimiterServer>[0];

export const SECOND = 1000;
// 2026-05-01T00:00:00.000Z: a realistic epoch (~1.78e12 ms), where f64 time would drift.
// setup.ts sets the fake clock to it before every test.
export const T0 = Date.UTC(2026, 4, 1);

/** A fresh server with default options, constructed as a consumer's test does. */
export function newServer(): RateLimiterServer {
  return new RateLimiterServer({} as Ctx, {});
}

/** A getStatus() result, to compare with toEqual. */
export function status(remaining: number, limit: number, reset_in_ms: number): RateLimiterStatus {
  return { remaining, limit, reset_in_ms };
}

/** The error `fn` throws (synchronously); fails the test when it returns. */
export function thrown(fn: () => unknown): Error {
  let result: unknown;
  try {
    result = fn();
  } catch (error) {
    expect(error).toBeInstanceOf(Error);
    return error as Error;
  }
  throw new Error(`expected a throw, but the call returned ${JSON.stringify(result) ?? String(result)}`);
}
