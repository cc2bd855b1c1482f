// A Worker as the Quickstart writes it: re-export the classes, one limit() RPC call per client
// IP and request, and the response headers from rateLimitHeaders. `/login` uses the durable
// class, as the README advises for slow limits that must survive eviction.
import {
  rateLimitHeaders,
  type DurableRateLimiterServer,
  type RateLimiterServer,
} from '@delightstack/rate-limiter';

export { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiterServer>;
  LOGIN_LIMITER: DurableObjectNamespace<DurableRateLimiterServer>;
}

const POLICY = { max_tokens: 10, refill_every_seconds: 10 };
const LOGIN_POLICY = { max_tokens: 5, refill_every_seconds: 300 };

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const ip = request.headers.get('CF-Connecting-IP') ?? 'unknown';
    const login = new URL(request.url).pathname === '/login';
    const ns = login ? env.LOGIN_LIMITER : env.LIMITER;
    const stub = ns.get(ns.idFromName(ip));
    const decision = await stub.limit(login ? 'login' : 'api', 1, login ? LOGIN_POLICY : POLICY);
    return new Response(decision.allowed ? 'ok\n' : 'Too Many Requests\n', {
      status: decision.allowed ? 200 : 429,
      headers: rateLimitHeaders(decision, { name: login ? 'login' : 'api' }),
    });
  },
} satisfies ExportedHandler<Env>;
