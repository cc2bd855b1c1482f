import { DurableObject } from 'cloudflare:workers';
import type { RateLimiterOptions, RateLimiterStatus } from './rate_limiter.js';

export type { RateLimiterOptions, RateLimiterStatus };

/**
 * A token-bucket rate limiter as a Durable Object. Call it over RPC:
 * `await env.LIMITER.get(env.LIMITER.idFromName(ip)).consume('api', 1)`.
 * Every method also works directly and synchronously on an instance.
 */
export declare class RateLimiterServer extends DurableObject {
  constructor(ctx: DurableObjectState, env: unknown);
  /** Updates the options of every bucket; omitted fields keep their value. All or nothing. */
  setOptions(options: RateLimiterOptions): void;
  /** Whether `consume(key, cost)` would succeed now. Consumes nothing. */
  check(key: string, cost?: number): boolean;
  /** Takes `cost` tokens (default 1) when the bucket of `key` holds that many; else nothing. */
  consume(key: string, cost?: number): boolean;
  /** The bucket of `key` now. Consumes nothing. */
  getStatus(key: string): RateLimiterStatus;
  /** Forgets the bucket of `key`: it is full at its next access. */
  reset(key: string): void;
}
