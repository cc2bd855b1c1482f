// Compiled by `tsc --noEmit`, never bundled: the `/middleware` subpath's types as a consumer
// sees them. Each @ts-expect-error must be needed.
import { analyticsEngineEvents, checkRateLimit, clientKey, honoRateLimit, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { RateLimitCheck, RateLimitEvent } from '@delightstack/rate-limiter/middleware';
import type { Env } from './index';

const policy = { name: 'api', max_tokens: 10, refill_every_seconds: 10 };

export const worker = {
  fetch: rateLimit<Env>({ binding: 'LIMITER', policy })(async (request, env) =>
    new Response(`${clientKey(request)} ${String(env.LIMITER)}`),
  ),
} satisfies ExportedHandler<Env>;

export const several = rateLimit<Env>({
  binding: (env) => env.LIMITER,
  policy: [policy, { name: 'hour', max_tokens: 1000, refill_every_seconds: 3.6 }],
  key: async (request) => request.headers.get('Authorization') ?? clientKey(request),
  cost: (request) => (request.method === 'POST' ? 5 : 1),
  failOpen: true,
  onError: (error) => console.warn(error),
});

// Rolling out and watching: a policy on trial beside an enforced one, events to Analytics
// Engine, failed logins only, a health check skipped, the standard headers alone.
export const watched = rateLimit<Env>({
  binding: 'LIMITER',
  policy: [policy, { name: 'daily', max_tokens: 1000, refill_every_seconds: 86.4, shadow: true }],
  skip: (request) => new URL(request.url).pathname === '/health',
  skipSuccessfulRequests: true,
  requestWasSuccessful: (_request, response) => response.status !== 401,
  legacyHeaders: false,
  onDecision: analyticsEngineEvents((env: Env) => ({ writeDataPoint: () => void env })),
});

export const shadowed = rateLimit<Env>({
  binding: 'LIMITER',
  policy,
  shadow: true,
  onDecision: (event: RateLimitEvent) => {
    const trial: string[] = event.shadowPolicies;
    if (event.outcome === 'denied' && trial.length > 0) console.log(event.key, event.violated, event.retryAfterMs);
  },
});

// At most 4 generations of one client in flight, decided with its rate in one call.
export const generations = rateLimit<Env>({
  binding: 'LIMITER',
  policy,
  concurrency: { name: 'generate', max_in_flight: 4, ttl_seconds: 120 },
});

// A penalty box each isolate holds for the whole block, hearing of an unblock within a minute.
export const penalized = rateLimit<Env>({
  binding: 'LIMITER',
  policy: { name: 'login', max_tokens: 5, refill_every_seconds: 60, block_seconds: 900 },
  local: { maxHoldMs: 60_000 },
});

export async function core(request: Request, env: Env): Promise<Response> {
  const result: RateLimitCheck = await checkRateLimit(request, env, { binding: env.LIMITER, policy });
  if (result.response === null && result.skipped === false) await Promise.all([result.refund(), result.release()]);
  return result.response ?? new Response('ok', { headers: result.headers });
}

// RateLimitCheck, the `denied` hook's decision and RateLimitEvent are unions: checking
// `decision`, `skipped` or `outcome` narrows the rest.
export async function narrowedCore(request: Request, env: Env): Promise<Response> {
  const result = await checkRateLimit(request, env, { binding: 'LIMITER', policy });
  if (result.skipped) {
    const none: [null, null, undefined] = [result.response, result.decision, result.error];
    void none;
  } else if (result.decision === null) {
    const failure: unknown = result.error;
    void failure;
  } else if (result.decision.allowed) {
    const none: 0 = result.decision.retry_after_ms;
    void none;
  } else {
    const wait: number | null = result.decision.retry_after_ms;
    void wait;
  }
  // @ts-expect-error a skipped or failed request has no decision
  const always: boolean = result.decision.allowed;
  void always;
  if (result.response) return result.response;
  return new Response('ok', { headers: result.headers });
}

export const deniedHook = rateLimit<Env>({
  binding: 'LIMITER',
  policy,
  denied: (_request, decision) => {
    // Only denied decisions reach it.
    const notAllowed: false = decision.allowed;
    const wait: number | null = decision.retry_after_ms;
    void notAllowed;
    return new Response(`retry after ${wait ?? 'never'} ms`, { status: 429 });
  },
  onDecision: (event) => {
    if (event.outcome === 'failed') {
      const none: [null, null] = [event.remaining, event.retryAfterMs];
      void none;
    } else {
      const left: number = event.remaining;
      void left;
    }
    if (event.outcome === 'allowed') {
      const none: 0 = event.retryAfterMs;
      void none;
    }
    // @ts-expect-error a failed event has no remaining count
    const always: number = event.remaining;
    void always;
  },
});

// A structural stand-in for Hono's Context is enough: the package does not depend on hono.
export const honoMiddleware = honoRateLimit({ binding: 'LIMITER', policy });

export function wrongUses(): void {
  // @ts-expect-error a policy field must be a number
  rateLimit({ binding: 'LIMITER', policy: { max_tokens: '10' } });
  // @ts-expect-error an unknown policy field (a typo of max_tokens) is rejected
  rateLimit({ binding: 'LIMITER', policy: { max_token: 10 } });
  // @ts-expect-error the handler must return a Response
  rateLimit({ binding: 'LIMITER', policy })(() => 'ok');
  // @ts-expect-error failOpen is a boolean
  rateLimit({ binding: 'LIMITER', policy, failOpen: 'yes' });
  // @ts-expect-error a policy's shadow is a boolean
  rateLimit({ binding: 'LIMITER', policy: [policy, { name: 'daily', shadow: 'yes' }] });
  // @ts-expect-error a concurrency limit needs max_in_flight
  rateLimit({ binding: 'LIMITER', concurrency: { ttl_seconds: 60 } });
  // @ts-expect-error skip returns a boolean
  rateLimit({ binding: 'LIMITER', policy, skip: () => 'yes' });
  // @ts-expect-error maxHoldMs is a number of milliseconds
  rateLimit({ binding: 'LIMITER', policy, local: { maxHoldMs: '60000' } });
}

// The durable class works with the middleware alike: slow login limits survive eviction.
export const login = rateLimit<Env>({
  binding: (env) => env.LOGIN_LIMITER,
  policy: { name: 'login', max_tokens: 5, refill_every_seconds: 300 },
});
