// Types of `@delightstack/rate-limiter/middleware`. Hono's types are matched structurally:
// nothing here imports hono, and the package has no dependency on it.
import type {
  RateLimitAllDecision,
  RateLimitAllDecisionAllowed,
  RateLimitAllDecisionDenied,
  RateLimitDecision,
  RateLimitDecisionAllowed,
  RateLimitDecisionDenied,
  RateLimitLeaseDecision,
  RateLimitLeaseRequest,
  RateLimiterPolicy,
  RateLimitPermitRequest,
  RateLimitRelease,
  RateLimitRequest,
} from './index.js';

/** A limit: the limiter's policy fields plus `name`, its bucket and its name in the headers. */
export interface RateLimitPolicy extends RateLimiterPolicy {
  /** Printable ASCII. Default `"default"`; in an array `"default-1"`, `"default-2"`… */
  name?: string;
  /**
   * Put this policy on trial beside the enforced ones of an array: it counts the requests the
   * others let through and it has room for, never blocks, and is left out of the headers
   * and the 429; `onDecision` names it in `violated` when it would have denied. Every policy
   * on trial is the middleware's `shadow` mode. Default false.
   */
  shadow?: boolean;
}

/** What the middleware needs of `DurableObjectNamespace<RateLimiterServer>`. */
export interface RateLimiterNamespace<Id = any> {
  idFromName(name: string): Id;
  get(id: Id): RateLimiterStub;
}

/** What the middleware calls on a `RateLimiterServer` stub. */
export interface RateLimiterStub {
  limit(key: string, cost?: number, policy?: RateLimiterPolicy): Promise<RateLimitDecision>;
  limitAll(requests: RateLimitRequest[], permit?: RateLimitPermitRequest): Promise<RateLimitAllDecision>;
  /** Needed by `concurrency` only. */
  release?(key: string, id: number): Promise<RateLimitRelease> | RateLimitRelease;
  /** Needed by `skipSuccessfulRequests` / `skipFailedRequests` and `RateLimitCheck.refund` only. */
  refund?(key: string, tokens: number): Promise<void> | void;
  /**
   * Used by `local` mode to settle a lease it no longer spends beside a lease call (after a
   * renewal ahead of time); without it, such a lease counts as fully used at its expiry.
   */
  settle?(key: string, settlement: { id: number; used: number }): Promise<boolean> | boolean;
  /** Needed by `local` mode only. */
  limitLeased?(
    key: string,
    cost?: number,
    policy?: RateLimiterPolicy,
    lease?: RateLimitLeaseRequest,
  ): Promise<RateLimitLeaseDecision>;
}

/** Tuning of local decisions. */
export interface LocalLimitsOptions {
  /**
   * A lease or share is not spent later than this many ms before its expiry, by this
   * isolate's clock, counted from when the call went out: what the isolate's clock may lose
   * against the object's meanwhile (drift, a step back; an offset costs nothing).
   * From 0 to 9999. Default 100.
   */
  marginMs?: number;
  /** The most tokens asked for in one lease. Default 1000. */
  maxLease?: number;
  /** The time in ms. Default `Date.now`. */
  clock?: () => number;
  /**
   * Hold shares (a part of the bucket's capacity and refill, run as a bucket of this
   * isolate's own and renewed in the background) once the bucket runs low, besides plain
   * leases: the object's load then stays flat at and beyond the limit. Default true; false
   * holds plain leases only. Buckets that refill more slowly than a token a second are never
   * shared.
   */
  shares?: boolean;
  /**
   * The longest (ms) a denial is held in this isolate, answered without a call. A denial is
   * held for its whole `retry_after_ms` (a block's whole time left) by default, so an
   * isolate learns of an `unblock`, a `reset` or a refund at the object only once its hold
   * has passed; a smaller value bounds that delay at the cost of a call per hold. A number
   * >= 1. Default Infinity.
   */
  maxHoldMs?: number;
}

/** What `LocalLimits` calls on a stub. */
export type LocalStub = Required<Pick<RateLimiterStub, 'limit' | 'limitLeased'>> & Pick<RateLimiterStub, 'settle'>;

/**
 * Leases and a denial cache of one isolate (module scope: keep one for the isolate's life).
 * Most requests are decided here without a call to the Durable Object; the token-bucket
 * bound stays exact (see the README's "Local decisions").
 */
export declare class LocalLimits {
  constructor(options?: LocalLimitsOptions);
  /** Calls made to Durable Objects so far, and requests answered without one. */
  readonly calls: number;
  readonly localAnswers: number;
  /**
   * `stub.limit(key, cost, policy)`, decided locally when this isolate holds enough of a
   * lease on that bucket, or a denial whose retry time has not passed. `owner` (e.g. the
   * namespace) and `scope` (e.g. the name given to `idFromName`) name the Durable Object.
   * `stub` may be a function that makes it, so that requests decided locally make none.
   */
  limit(
    owner: object,
    scope: string,
    stub: LocalStub | (() => LocalStub),
    key: string,
    cost?: number,
    policy?: RateLimiterPolicy,
    /** The request's `ctx.waitUntil`: keeps a share's renewal running after the response. */
    waitUntil?: (promise: Promise<unknown>) => void,
  ): Promise<RateLimitDecision>;
  /**
   * `stub.refund(key, cost)`: given back to this isolate's plain lease on the bucket when it
   * holds a live one that has spent at least `cost`, or to its live share when that has room
   * for it (no call), else a call.
   */
  refund(
    owner: object,
    scope: string,
    stub: RefundStub | (() => RefundStub),
    key: string,
    cost: number,
    policy?: RateLimiterPolicy,
  ): Promise<void>;
}

/** What `LocalLimits.refund` calls on a stub. */
export type RefundStub = Required<Pick<RateLimiterStub, 'refund'>>;

/**
 * Options of `rateLimit`, `honoRateLimit` and `checkRateLimit`. `E` is the Worker's env,
 * `C` the third argument of the functions below: the `ExecutionContext` of a fetch handler,
 * or Hono's `c`.
 */
export interface RateLimitMiddlewareOptions<E = any, C = unknown> {
  /** The binding's name in env (`'LIMITER'`), the namespace itself, or a function of env. */
  binding: string | RateLimiterNamespace | ((env: E) => RateLimiterNamespace);
  /**
   * One limit, or several applied all or nothing (one `limitAll` call). Required unless
   * `concurrency` is given.
   */
  policy?: RateLimitPolicy | readonly RateLimitPolicy[];
  /**
   * The client: one Durable Object per key (`idFromName(key)`). Default `clientKey(request)`:
   * CF-Connecting-IP, IPv6 cut to its /64, `"unknown"` (one shared bucket) without it.
   */
  key?(request: Request, env: E, context: C): string | Promise<string>;
  /** Tokens this request takes from every policy. Default 1. */
  cost?: number | ((request: Request, env: E, context: C) => number | Promise<number>);
  /**
   * Requests for which this returns `true` (health checks, an allow-list) go to the handler
   * with no decision: no call, no tokens, no headers. Called before `key`; must return a
   * boolean.
   */
  skip?(request: Request, env: E, context: C): boolean | Promise<boolean>;
  /**
   * The response to a denied request, instead of the problem+json 429. The rate-limit
   * headers are added to it (headers it already has are kept; RateLimit lists are appended).
   */
  denied?(
    request: Request,
    decision: RateLimitDecisionDenied | RateLimitAllDecisionDenied,
    env: E,
    context: C,
  ): Response | Promise<Response>;
  /**
   * When the Durable Object call fails (overloaded, network, reset): `false` (default) answers
   * 503 problem+json with `Retry-After: 1`; `true` runs the handler, without rate-limit
   * headers. A `TypeError` or `RangeError` (bad policy, cost, key or binding) is a bug and is
   * always thrown.
   */
  failOpen?: boolean;
  /** Called with each limiter failure, before failOpen applies. Default: `console.error`. */
  onError?(error: unknown, request: Request): void;
  /**
   * Decide most requests in this isolate, without a call to the Durable Object: `true`
   * (one shared `LocalLimits` for the isolate's life), its options, or your own instance.
   * The bound stays exact; isolates may under-admit a little. With several policies every
   * request still makes its one `limitAll` call. Default `false`.
   */
  local?: boolean | LocalLimitsOptions | LocalLimits;
  /** `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11). Default true. */
  standardHeaders?: boolean;
  /** `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`. Default true. */
  legacyHeaders?: boolean;
  /**
   * Count only failed requests (failed logins): the cost is taken before the handler runs,
   * so concurrent attempts are limited exactly, and given back (`refund`, in the background)
   * when `requestWasSuccessful` says the request succeeded. Default false.
   */
  skipSuccessfulRequests?: boolean;
  /** Count only successful requests: failed ones (and a handler that throws) get their cost back. Default false. */
  skipFailedRequests?: boolean;
  /** Whether the request succeeded. Default: `response.status < 400`. Must return a boolean. */
  requestWasSuccessful?(request: Request, response: Response, env: E, context: C): boolean | Promise<boolean>;
  /**
   * Decide and count exactly as if enforced, but block nothing and send no rate-limit
   * headers: a denial (and a limiter failure) lets the request through, and `onDecision`
   * hears `outcome: 'denied'` with `shadow: true`. For trying a limit on real traffic. Default false.
   */
  shadow?: boolean;
  /**
   * Called with every decision (not for skipped requests), before the response: a promise it
   * returns goes to `waitUntil`, and what it throws or rejects with is logged and never
   * changes the answer.
   */
  onDecision?(event: RateLimitEvent, request: Request, env: E, context: C): void | Promise<void>;
  /**
   * A concurrency limit: each request holds a permit of the gate `name` (default
   * `"concurrency"`, in the same Durable Object as the policies) from before the handler
   * until its response has been sent (its body read to the end or cancelled) or the handler
   * threw. Decided with the policies in one call, all or nothing. Not with `local`.
   */
  concurrency?: RateLimitConcurrency;
}

/** What `analyticsEngineEvents` needs of an Analytics Engine dataset binding. */
export interface AnalyticsEngineDatasetLike {
  writeDataPoint(point: { indexes?: string[]; blobs?: string[]; doubles?: number[] }): void;
}

/**
 * An `onDecision` hook that writes one data point per decision to Workers Analytics Engine:
 * `dataset` is the binding's name in env, the binding, or a function of env. The schema (index1
 * the key; blob1 outcome, blob2 enforced or shadow, blob3 local or object, blob4 policies,
 * blob5 violated, blob6 error, blob7 the whole key, blob8 the policies on trial, blob9 those
 * of them that would have denied; double1 cost, double2 remaining, double3
 * retryAfterMs, double4 passed) is in the README, with its SQL.
 */
export declare function analyticsEngineEvents<E = any>(
  dataset: string | AnalyticsEngineDatasetLike | ((env: E) => AnalyticsEngineDatasetLike),
): (event: RateLimitEvent, request: Request, env: E) => void;

/** One decision of the middleware, for `onDecision`: `outcome` narrows the fields that depend on it. */
export type RateLimitEvent = RateLimitEventAllowed | RateLimitEventDenied | RateLimitEventFailed;

/** The fields of every `RateLimitEvent`. */
export interface RateLimitEventFields {
  /** `failed`: the limiter could not be reached (see `passed` for what happened then). */
  outcome: 'allowed' | 'denied' | 'failed';
  /** The middleware is in shadow mode: a denial was not applied. */
  shadow: boolean;
  /** The request went on to the handler. */
  passed: boolean;
  /** Decided in this isolate, without a call to the Durable Object (`local`). */
  local: boolean;
  key: string;
  /** The names of the policies, in order. */
  policies: string[];
  /** The policies on trial: all of them in shadow mode, else those marked `shadow`. */
  shadowPolicies: string[];
  /** The policies that had no room, on trial or not (only a trial's when allowed). */
  violated: string[];
  /** Tokens this request took (or asked for) from every policy. */
  cost: number;
  /** Whole tokens left in the enforced policy with the fewest; null when failed. */
  remaining: number | null;
  /** 0 when allowed; when denied, ms until a retry can pass (null: never); null when failed. */
  retryAfterMs: number | null;
  /** The failure, when failed. */
  error: unknown;
}

/** The limiter allowed the request. */
export interface RateLimitEventAllowed extends RateLimitEventFields {
  outcome: 'allowed';
  /** Whole tokens left in the enforced policy with the fewest. */
  remaining: number;
  /** Milliseconds to wait: 0, none. */
  retryAfterMs: 0;
  error: undefined;
}

/** The limiter denied the request (in shadow mode, it went on all the same). */
export interface RateLimitEventDenied extends RateLimitEventFields {
  outcome: 'denied';
  /** Whole tokens left in the enforced policy with the fewest. */
  remaining: number;
  /** Milliseconds until a retry can pass; null: never (a cost above the capacity). */
  retryAfterMs: number | null;
  error: undefined;
}

/** The limiter could not be reached. */
export interface RateLimitEventFailed extends RateLimitEventFields {
  outcome: 'failed';
  /** Decided by no one: never local. */
  local: false;
  /** No policy was found without room: there was no decision. */
  violated: [];
  remaining: null;
  retryAfterMs: null;
}

/**
 * The outcome of `checkRateLimit`: a decision (allowed or denied), a limiter failure, or a
 * request `skip` let through. `decision`, `skipped` and `response` narrow the rest.
 */
export type RateLimitCheck = RateLimitCheckAllowed | RateLimitCheckDenied | RateLimitCheckFailed | RateLimitCheckSkipped;

/** The fields of every `RateLimitCheck`. */
export interface RateLimitCheckFields {
  /** Answer this instead of running the handler (the 429, or the 503 when failing closed); null: go on. */
  response: Response | null;
  /**
   * The rate-limit headers for the handler's response (none when the limiter failed or the
   * request was skipped). `Retry-After` goes on every 429 that waiting can help, whatever
   * `standardHeaders` and `legacyHeaders` say.
   */
  headers: Record<string, string>;
  /** The limiter's decision; null when the call failed or the request was skipped. */
  decision: RateLimitDecision | RateLimitAllDecision | null;
  /** The limiter failure, when the call failed. */
  error: unknown;
  /** Whether `skip` let the request through without a decision. */
  skipped: boolean;
  /**
   * Gives an allowed request's cost back to every policy (one `refund` call each), at most
   * once: for a request that should not count. Does nothing for any other outcome.
   */
  refund(): Promise<void>;
  /**
   * Ends the request's permit (`concurrency`), at most once; does nothing when it holds none.
   * `rateLimit` and `honoRateLimit` call it when the response is finished.
   */
  release(): Promise<unknown>;
}

/** The limiter allowed the request: run the handler and add `headers` to its response. */
export interface RateLimitCheckAllowed extends RateLimitCheckFields {
  /** Go on: null. */
  response: null;
  decision: RateLimitDecisionAllowed | RateLimitAllDecisionAllowed;
  error: undefined;
  skipped: false;
}

/** The limiter denied the request. */
export interface RateLimitCheckDenied extends RateLimitCheckFields {
  /** The 429 (or the `denied` option's answer); null in shadow mode, which lets it go on. */
  response: Response | null;
  decision: RateLimitDecisionDenied | RateLimitAllDecisionDenied;
  error: undefined;
  skipped: false;
}

/** The limiter could not be reached: no decision, no headers. */
export interface RateLimitCheckFailed extends RateLimitCheckFields {
  /** The 503 when failing closed; null with `failOpen` (or in shadow mode). */
  response: Response | null;
  decision: null;
  /** The limiter failure. */
  error: unknown;
  skipped: false;
}

/** `skip` let the request through: no decision, no call, no headers. */
export interface RateLimitCheckSkipped extends RateLimitCheckFields {
  /** Go on: null. */
  response: null;
  decision: null;
  error: undefined;
  skipped: true;
}

/** The middleware's concurrency limit. */
export interface RateLimitConcurrency {
  /** The gate's name: printable ASCII, not a policy's name. Default `"concurrency"`. */
  name?: string;
  /** The most requests of one key in flight at once: a whole number from 1. */
  max_in_flight: number;
  /** Seconds a permit lives if its release never comes (an isolate that died). Default 60. */
  ttl_seconds?: number;
}

/** The body of a 429 (RFC 9457, the draft's quota-exceeded problem type). */
export interface QuotaExceededProblem {
  type: typeof QUOTA_EXCEEDED_TYPE;
  title: string;
  status: 429;
  detail: string;
  /** Names of the policies that denied the request. */
  'violated-policies': string[];
}

export declare const QUOTA_EXCEEDED_TYPE: 'https://iana.org/assignments/http-problem-types#quota-exceeded';
/** The key of requests without CF-Connecting-IP. */
export declare const UNKNOWN_CLIENT: 'unknown';

/** The default key: CF-Connecting-IP, IPv6 cut to its /64 prefix, else `"unknown"`. */
export declare function clientKey(request: Request): string;

/** One decision for a request, for frameworks this package has no adapter for. */
export declare function checkRateLimit<E, C = undefined>(
  request: Request,
  env: E,
  options: RateLimitMiddlewareOptions<E, C>,
  context?: C,
): Promise<RateLimitCheck>;

/**
 * `response` with the headers added (RateLimit lists appended, others kept): in place when
 * its headers can change, else on a copy (a response from `fetch()`, say).
 */
export declare function withHeaders(response: Response, headers: Record<string, string>): Response;

/**
 * Wraps a fetch handler: `export default { fetch: rateLimit(options)(handler) }`. Denied
 * requests get the 429 and never reach the handler; allowed ones get the headers.
 */
export declare function rateLimit<E = any>(
  options: RateLimitMiddlewareOptions<E, ExecutionContext>,
): <R extends Request, Env extends E, Ctx extends ExecutionContext>(
  handler: (request: R, env: Env, ctx: Ctx) => Response | Promise<Response>,
) => (request: R, env: Env, ctx: Ctx) => Promise<Response>;

/** The part of Hono's `Context` the middleware uses. */
export interface HonoContextLike<E = any> {
  req: { raw: Request };
  env: E;
  res: Response;
  header(name: string, value: string, options?: { append?: boolean }): void;
  /** Set by Hono when the route threw (its response is then `app.onError`'s). */
  error?: unknown;
}

/**
 * Hono middleware: `app.use('/api/*', honoRateLimit(options))`. Assignable to Hono's
 * `MiddlewareHandler`; pass your `Context<AppEnv>` as `C` to type `c` in `key`/`cost`.
 */
export declare function honoRateLimit<C extends HonoContextLike = HonoContextLike>(
  options: RateLimitMiddlewareOptions<C['env'], C>,
): (c: C, next: () => Promise<void>) => Promise<Response | void>;
