// `POST /login`: the package's middleware on a toy login, with its decisions sent to Workers
// Analytics Engine. Only failed attempts count (skipSuccessfulRequests): 5 wrong passwords per
// client IP, one more every 60 s; a right one takes its token while it runs and gets it back
// after. Every decision becomes one data point in RATE_LIMIT_EVENTS (wrangler.toml), in the
// schema of the package README, whose SQL then works on it.
//
//   curl -X POST -d password=wrong localhost:8787/login   -> 401, then 429 from the 6th in 60 s
//   curl -X POST -d password=letmein localhost:8787/login -> 200, never counted
//
// It runs on the Quickstart's LIMITER, in the same per-IP object; the policy name is the bucket
// name, so `login` and the Quickstart's `api` never share tokens. LIMITER is the in-memory
// class, whose buckets come back full after an eviction; a real login limit belongs on
// DurableRateLimiterServer (package README, "Durable mode").
import { analyticsEngineEvents, rateLimit } from '@delightstack/rate-limiter/middleware';
import type { Env } from './index';

/** The one password the toy login accepts. */
export const DEMO_PASSWORD = 'letmein';

export const LOGIN_POLICY = { name: 'login', max_tokens: 5, refill_every_seconds: 60 };

/** Answers 200 for the demo password, else 401 (a failure, so it stays counted). */
async function checkPassword(request: Request): Promise<Response> {
  // A form body (`curl -d password=…`) or, failing that, the query string.
  const form = await request.formData().catch(() => null);
  const password = form?.get('password') ?? new URL(request.url).searchParams.get('password');
  return password === DEMO_PASSWORD
    ? Response.json({ ok: true })
    : Response.json({ error: 'wrong password' }, { status: 401 });
}

// Made once per isolate: the options are checked here, at startup, not on every request.
const limitedLogin = rateLimit<Env>({
  binding: 'LIMITER',
  policy: LOGIN_POLICY,
  skipSuccessfulRequests: true,
  onDecision: analyticsEngineEvents<Env>('RATE_LIMIT_EVENTS'),
})(checkPassword);

export function login(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  // Checked before the limit: a wrong method is no login attempt, so it takes no token.
  if (request.method !== 'POST') {
    return Promise.resolve(
      Response.json({ error: 'use POST' }, { status: 405, headers: { Allow: 'POST' } }),
    );
  }
  return limitedLogin(request, env, ctx);
}
