// Compiled by `tsc --noEmit`, never bundled: the `/middleware` subpath's types as a consumer
// sees them. Each @ts-expect-error must be needed.
import { checkRateLimit, clientKey, honoRateLimit, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { RateLimitCheck } from '@delightstack/rate-limiter/middleware';
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

export async function core(request: Request, env: Env): Promise<Response> {
  const result: RateLimitCheck = await checkRateLimit(request, env, { binding: env.LIMITER, policy });
  return result.response ?? new Response('ok', { headers: result.headers });
}

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
}

// The durable class works with the middleware alike: slow login limits survive eviction.
export const login = rateLimit<Env>({
  binding: (env) => env.LOGIN_LIMITER,
  policy: { name: 'login', max_tokens: 5, refill_every_seconds: 300 },
});
