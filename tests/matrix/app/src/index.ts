// src/index.ts: the Quickstart's middleware, with /login limited on the durable class.
import type { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import { rateLimit } from '@delightstack/rate-limiter/middleware';

export { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiterServer>;
  LOGIN_LIMITER: DurableObjectNamespace<DurableRateLimiterServer>;
}

const api = rateLimit({ binding: 'LIMITER', policy: { name: 'api', max_tokens: 10, refill_every_seconds: 10 } });
const login = rateLimit({
  binding: 'LOGIN_LIMITER',
  policy: { name: 'login', max_tokens: 5, refill_every_seconds: 300 },
});

async function hello(): Promise<Response> {
  return new Response('Hello');
}

const apiHandler = api(hello);
const loginHandler = login(hello);

export default {
  fetch(request, env, ctx) {
    const handler = new URL(request.url).pathname === '/login' ? loginHandler : apiHandler;
    return handler(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
