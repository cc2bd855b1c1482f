import { DurableObject } from 'cloudflare:workers';
import type {
  RateLimitAllDecision as RateLimitAllDecisionFields,
  RateLimitDecision as RateLimitDecisionFields,
  RateLimitGatePolicy,
  RateLimitGateStatus,
  RateLimitPermit as RateLimitPermitFields,
  RateLimitPermitRequest,
  RateLimitRelease,
  RateLimitLease,
  RateLimitLeaseDecision as RateLimitLeaseDecisionFields,
  RateLimitLeaseRequest,
  RateLimiterOptions,
  RateLimiterPolicy,
  RateLimiterStatus,
  RateLimitRequest,
  RateLimitSettlement,
} from './rate_limiter.js';

export type {
  RateLimitGatePolicy,
  RateLimitGateStatus,
  RateLimitPermitRequest,
  RateLimitRelease,
  RateLimitLease,
  RateLimitLeaseRequest,
  RateLimiterOptions,
  RateLimiterPolicy,
  RateLimiterStatus,
  RateLimitRequest,
  RateLimitSettlement,
};

// The decisions callers branch on are unions on `allowed`, so that a check of `allowed`
// narrows the fields that depend on it (`if (!permit.allowed) return` leaves `id: number`).
// The other fields, with their docs, are the generated structs'.

/**
 * What `limit` decided for one key, and the state of its bucket after the call: `allowed`
 * narrows `retry_after_ms`.
 */
export type RateLimitDecision = RateLimitDecisionAllowed | RateLimitDecisionDenied;

/** A `limit` decision that consumed its cost. */
export interface RateLimitDecisionAllowed extends Omit<RateLimitDecisionFields, 'allowed' | 'retry_after_ms'> {
  /** The call consumed its cost. */
  allowed: true;
  /** Milliseconds to wait: 0, none. */
  retry_after_ms: 0;
}

/** A `limit` decision that consumed nothing. */
export interface RateLimitDecisionDenied extends Omit<RateLimitDecisionFields, 'allowed' | 'retry_after_ms'> {
  /** The call consumed nothing. */
  allowed: false;
  /**
   * Whole milliseconds, rounded up, after which the same call succeeds if nothing else
   * consumes; `null` when no wait can help (cost above capacity).
   */
  retry_after_ms: number | null;
}

/**
 * What `limitAll` decided: every enforced bucket consumed, or none did. `allowed` narrows
 * `retry_after_ms` and `permit`.
 */
export type RateLimitAllDecision = RateLimitAllDecisionAllowed | RateLimitAllDecisionDenied;

/** A `limitAll` decision in which every enforced request (and the permit) took its cost. */
export interface RateLimitAllDecisionAllowed
  extends Omit<RateLimitAllDecisionFields, 'allowed' | 'retry_after_ms' | 'results' | 'permit'> {
  /** Every enforced request consumed its cost; shadow requests never change it. */
  allowed: true;
  /** One decision per request, in order (a shadow request's says whether it had room). */
  results: RateLimitDecision[];
  /** Milliseconds to wait: 0, none. */
  retry_after_ms: 0;
  /** Only when the call asked for a permit: granted, with its id. */
  permit?: RateLimitPermitGranted | undefined;
}

/** A `limitAll` decision that took nothing: no tokens, no permit. */
export interface RateLimitAllDecisionDenied
  extends Omit<RateLimitAllDecisionFields, 'allowed' | 'retry_after_ms' | 'results' | 'permit'> {
  /** No request consumed its cost, and no permit was taken. */
  allowed: false;
  /** One decision per request, in order: its `allowed` tells whether that limit had room. */
  results: RateLimitDecision[];
  /**
   * The largest wait among the enforced results (and the permit), in whole milliseconds;
   * `null` when some enforced request can never pass (cost above its capacity).
   */
  retry_after_ms: number | null;
  /**
   * Only when the call asked for a permit: none was taken (`id` null); `allowed` tells
   * whether the gate had room.
   */
  permit?: RateLimitPermitUntaken | undefined;
}

/** What `acquire` decided: `allowed` narrows `id`, `ttl_ms` and `retry_after_ms`. */
export type RateLimitPermit = RateLimitPermitGranted | RateLimitPermitDenied;

/** A permit that was granted: release it with its `id`. */
export interface RateLimitPermitGranted
  extends Omit<RateLimitPermitFields, 'allowed' | 'id' | 'retry_after_ms'> {
  /** The permit was granted. */
  allowed: true;
  /** The permit's id, for `release`. */
  id: number;
  /** Milliseconds to wait: 0, none. */
  retry_after_ms: 0;
}

/** A permit that was denied: the key's live permits leave no room for its cost. */
export interface RateLimitPermitDenied
  extends Omit<RateLimitPermitFields, 'allowed' | 'id' | 'ttl_ms' | 'retry_after_ms'> {
  /** The permit was denied. */
  allowed: false;
  /** No permit, no id. */
  id: null;
  /** Milliseconds the permit stays live: 0, there is none. */
  ttl_ms: 0;
  /**
   * Whole milliseconds until expiries alone make room (the longest wait if nobody
   * releases); `null` when the cost is above `max_in_flight`.
   */
  retry_after_ms: number | null;
}

/**
 * The permit of a denied `limitAll` call: none was taken. `allowed: true` says that the gate
 * had room (the call was denied by a rate limit), `allowed: false` that it had none.
 */
export type RateLimitPermitUntaken = RateLimitPermitDenied | RateLimitPermitRoom;

/** The permit of a `limitAll` call that a rate limit denied, on a gate that had room. */
export interface RateLimitPermitRoom extends Omit<RateLimitPermitDenied, 'allowed' | 'retry_after_ms'> {
  /** The gate had room for the permit (nothing was taken: the call was denied). */
  allowed: true;
  /** Milliseconds the gate makes the caller wait: 0, none. */
  retry_after_ms: 0;
}

/**
 * A `limit` decision with the lease granted for later requests, if any (a share may be
 * granted to a denied call too).
 */
export type RateLimitLeaseDecision = RateLimitDecision & Pick<RateLimitLeaseDecisionFields, 'lease' | 'call_after_ms'>;

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
