// Example Worker: a per-IP rate limiter, following the package Quickstart.
// One Durable Object per client IP; each holds that client's `api` bucket, and one
// `limit()` call per request decides, consumes and reports.
// `/` and `/api/*` are the playground (playground.ts); `/login` is the middleware with its
// decisions sent to Analytics Engine (login.ts); every other path is the Quickstart.
import { rateLimitHeaders, type RateLimiterServer } from '@delightstack/rate-limiter';
import { login } from './login';
import { playground, type PlaygroundDurable, type PlaygroundMemory } from './playground';

// The Durable Object class must be exported from the Worker entry.
export { RateLimiterServer } from '@delightstack/rate-limiter';
// The playground's own classes (the package's two, plus an evict() button): not the Quickstart.
export { PlaygroundDurable, PlaygroundMemory } from './playground';

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiterServer>;
  // The playground's (wrangler.toml): in memory and durable.
  PLAYGROUND: DurableObjectNamespace<PlaygroundMemory>;
  PLAYGROUND_DURABLE: DurableObjectNamespace<PlaygroundDurable>;
  // /login's decision events (wrangler.toml).
  RATE_LIMIT_EVENTS: AnalyticsEngineDataset;
}

// 10 tokens, one refilled every 10 s (the Quickstart defaults, spelled out).
const POLICY = { max_tokens: 10, refill_every_seconds: 10 };

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === '/' || pathname.startsWith('/api/')) return playground(request, env);
    if (pathname === '/login') return login(request, env, ctx);

    // Cloudflare sets CF-Connecting-IP on every request (`wrangler dev` too: 127.0.0.1 for
    // local clients). The fallback only serves requests that reach the handler some other
    // way (e.g. a test calling it directly); they all share one bucket.
    const ip = request.headers.get('CF-Connecting-IP') ?? '127.0.0.1';

    const stub = env.LIMITER.get(env.LIMITER.idFromName(ip));
    const decision = await stub.limit('api', 1, POLICY);

    const body = decision.allowed
      ? { ok: true, remaining: Math.floor(decision.remaining) }
      : { error: 'Too Many Requests' };
    return Response.json(body, {
      status: decision.allowed ? 200 : 429,
      // RateLimit-Policy, RateLimit, X-RateLimit-*, and Retry-After when denied.
      headers: rateLimitHeaders(decision, { name: 'api' }),
    });
  },
} satisfies ExportedHandler<Env>;
