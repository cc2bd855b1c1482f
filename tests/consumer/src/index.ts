// A Worker as the Quickstart writes it: re-export the class, one limit() RPC call per client
// IP and request, and the response headers from rateLimitHeaders.
import { rateLimitHeaders, type RateLimiterServer } from '@delightstack/rate-limiter';

export { RateLimiterServer } from '@delightstack/rate-limiter';

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiterServer>;
}

const POLICY = { max_tokens: 10, refill_every_seconds: 10 };

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const ip = request.headers.get('CF-Connecting-IP') ?? 'unknown';
    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    const decision = await stub.limit('api', 1, POLICY);
    return new Response(decision.allowed ? 'ok\n' : 'Too Many Requests\n', {
      status: decision.allowed ? 200 : 429,
      headers: rateLimitHeaders(decision, { name: 'api' }),
    });
  },
} satisfies ExportedHandler<Env>;
