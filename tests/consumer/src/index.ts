// A Worker as the Quickstart writes it: re-export the class, call it over RPC per client IP.
import type { RateLimiterServer } from '@delightstack/rate-limiter';

export { RateLimiterServer } from '@delightstack/rate-limiter';

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiterServer>;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const ip = request.headers.get('CF-Connecting-IP') ?? 'unknown';
    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    const ok = await stub.consume('api', 1);
    const status = await stub.getStatus('api');
    const headers = new Headers({
      'X-RateLimit-Limit': String(status.limit),
      'X-RateLimit-Remaining': String(Math.floor(status.remaining)),
      'X-RateLimit-Reset': String(Math.ceil(status.reset_in_ms / 1000)),
    });
    if (!ok) {
      headers.set('Retry-After', String(Math.max(1, Math.ceil(status.reset_in_ms / 1000))));
      return new Response('Too Many Requests\n', { status: 429, headers });
    }
    return new Response('ok\n', { status: 200, headers });
  },
} satisfies ExportedHandler<Env>;
