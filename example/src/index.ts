// Example Worker: a per-IP rate limiter, following the package Quickstart.
// One Durable Object per client IP; each holds that client's `api` bucket
// (default options: 10 tokens, one refilled every 10 s).
import type { RateLimiterServer } from '@delightstack/rate-limiter';

// The Durable Object class must be exported from the Worker entry.
export { RateLimiterServer } from '@delightstack/rate-limiter';

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiterServer>;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // Cloudflare sets CF-Connecting-IP on every request (`wrangler dev` too: 127.0.0.1 for
    // local clients). The fallback only serves requests that reach the handler some other
    // way (e.g. a test calling it directly); they all share one bucket.
    const ip = request.headers.get('CF-Connecting-IP') ?? '127.0.0.1';

    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    const allowed = await stub.consume('api', 1);
    const status = await stub.getStatus('api');

    const headers = new Headers({
      'X-RateLimit-Limit': String(status.limit),
      'X-RateLimit-Remaining': String(Math.floor(status.remaining)),
      // Seconds until the next token (0 when the bucket is full), rounded up: never early.
      'X-RateLimit-Reset': String(Math.ceil(status.reset_in_ms / 1000)),
    });

    if (!allowed) {
      headers.set('Retry-After', String(Math.max(1, Math.ceil(status.reset_in_ms / 1000))));
      return Response.json({ error: 'Too Many Requests' }, { status: 429, headers });
    }
    return Response.json({ ok: true, remaining: Math.floor(status.remaining) }, { headers });
  },
} satisfies ExportedHandler<Env>;
