import { DurableObject } from 'cloudflare:workers';
import type {
  RateLimitAllDecision,
  RateLimitDecision,
  RateLimitGatePolicy,
  RateLimitGateStatus,
  RateLimitPermit,
  RateLimitPermitRequest,
  RateLimitRelease,
  RateLimitLease,
  RateLimitLeaseDecision,
  RateLimitLeaseRequest,
  RateLimiterOptions,
  RateLimiterPolicy,
  RateLimiterStatus,
  RateLimitRequest,
  RateLimitSettlement,
} from './rate_limiter.js';

export type {
  RateLimitAllDecision,
  RateLimitDecision,
  RateLimitGatePolicy,
  RateLimitGateStatus,
  RateLimitPermit,
  RateLimitPermitRequest,
  RateLimitRelease,
  RateLimitLease,
  RateLimitLeaseDecision,
  RateLimitLeaseRequest,
  RateLimiterOptions,
  RateLimiterPolicy,
  RateLimiterStatus,
  RateLimitRequest,
  RateLimitSettlement,
};

/**
 * A token-bucket rate limiter as a Durable Object. Call it over RPC:
 * `await env.LIMITER.get(env.LIMITER.idFromName(ip)).limit('api', 1)`.
 * Every method also works directly and synchronously on an instance.
 */
export declare class RateLimiterServer extends DurableObject {
  constructor(ctx: DurableObjectState, env: unknown);
  /** Updates the instance options; omitted fields keep their value. All or nothing. */
  setOptions(options: RateLimiterOptions): void;
  /** Whether `consume(key, cost)` would succeed now. Consumes nothing. */
  check(key: string, cost?: number): boolean;
  /** Takes `cost` tokens (default 1) when the bucket of `key` holds that many; else nothing. */
  consume(key: string, cost?: number): boolean;
  /** The bucket of `key` now. Consumes nothing. */
  getStatus(key: string): RateLimiterStatus;
  /** Forgets the bucket of `key` and its policy: it is full at its next access. */
  reset(key: string): void;
  /**
   * One call that decides and reports: applies `policy` to the key (remembered by its
   * bucket; missing fields come from the instance options), consumes `cost` (default 1)
   * and returns the decision with the bucket's state and the exact retry time.
   */
  limit(key: string, cost?: number, policy?: RateLimiterPolicy): RateLimitDecision;
  /**
   * `limit` over several keys, all or nothing: every enforced bucket consumes, or none does.
   * With `permit` (a concurrency limit), the permit too: it is granted and they consume, or
   * neither; the answer's `permit` says whether the gate had room (an id only when granted).
   */
  limitAll(requests: RateLimitRequest[], permit?: RateLimitPermitRequest): RateLimitAllDecision;
  /**
   * `limit` for a caller that spends tokens on its own (the middleware's `local` mode, or
   * `LocalLimits`): settles the caller's previous lease on `key` first (`lease.settle`), then
   * decides `cost`, and when allowed may grant a lease of up to `lease.want` more tokens
   * (at most half of what the bucket has left), valid for `lease.ttl_ms`. Leased tokens
   * count as still in the bucket until settled; a lease never settled counts as fully used.
   * With `lease.rate` (tokens per second) it grants a share instead: a part of the bucket's
   * capacity and refill for a term (`lease.share`), renewed with `lease.renew`.
   */
  limitLeased(
    key: string,
    cost?: number,
    policy?: RateLimiterPolicy,
    lease?: RateLimitLeaseRequest,
  ): RateLimitLeaseDecision;
  /** Ends a lease of `key`: its unused tokens go back. False when it had ended already. */
  settle(key: string, lease: RateLimitSettlement): boolean;
  /**
   * Gives `tokens` back to the bucket of `key` (a request that should not count, say one
   * that failed), up to its capacity. Same validation as a cost.
   */
  refund(key: string, tokens: number): void;
  /**
   * A concurrency limit: a permit of `cost` (default 1, a whole number) on the gate of `key`
   * when its live permits leave room under `policy.max_in_flight`. Release it with
   * `release(key, id)` when the work is done; one never released frees its slot after
   * `policy.ttl_seconds` (default 60). Gates and buckets of one key never touch.
   */
  acquire(key: string, cost: number | undefined, policy: RateLimitGatePolicy): RateLimitPermit;
  /** Ends the live permit `id` of `key`; `released: false` (nothing changed) for any other id. */
  release(key: string, id: number): RateLimitRelease;
  /** The live permits of `key`. Changes nothing. */
  gateStatus(key: string): RateLimitGateStatus;
  /**
   * Blocks `key` for `seconds` (finite, > 0, at most a year), replacing a block in force:
   * every call on it is denied until then, with the time left as `retry_after_ms`.
   */
  block(key: string, seconds: number): void;
  /** Ends the block of `key`; whether one was in force. */
  unblock(key: string): boolean;
  /**
   * The keys blocked now, in key order, at most `limit` (1 to 1,000, default 100) after the
   * key `after`; `next` is the `after` of the next page, or null.
   */
  blocked(options?: { limit?: number; after?: string }): { keys: { key: string; blocked_for_ms: number }[]; next: string | null };
}

/**
 * `RateLimiterServer` whose buckets and options survive eviction, restarts and deploys:
 * every call that changes a bucket also writes it to the Durable Object's SQLite storage
 * (declare the class under `new_sqlite_classes`), and a bucket that memory no longer holds
 * is read back from there. Same methods, same results.
 */
export declare class DurableRateLimiterServer extends RateLimiterServer {}

/** Options of `rateLimitHeaders`. */
export interface RateLimitHeadersOptions {
  /**
   * The policy name in `RateLimit-Policy` / `RateLimit` (printable ASCII). Default
   * `"default"`; for a `limitAll` decision `name-1`, `name-2`…, or one name per limit.
   */
  name?: string | string[];
  /** `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11). Default true. */
  standardHeaders?: boolean;
  /** `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`. Default true. */
  legacyHeaders?: boolean;
}

/**
 * Response headers for a decision: IETF `RateLimit-Policy` and `RateLimit`
 * (draft-ietf-httpapi-ratelimit-headers-11), `X-RateLimit-Limit`, `X-RateLimit-Remaining`,
 * `X-RateLimit-Reset` (each group unless turned off), and `Retry-After` on a denied
 * decision that waiting can satisfy (always).
 */
export declare function rateLimitHeaders(
  decision: RateLimitDecision | RateLimitAllDecision,
  options?: RateLimitHeadersOptions,
): Record<string, string>;
