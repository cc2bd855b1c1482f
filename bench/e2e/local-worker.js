// The Worker of the local-decisions benchmark (bench/e2e/local.mjs). One Worker, one handler
// that answers at once, every variant on its own path, so that all variants share the same
// bundle, isolate, request parsing and response:
//   /none         the handler alone: no limiter at all (the baseline)
//   /headers      the handler, then only what the middleware does to an allowed request besides
//                 deciding: rateLimitHeaders() of a fixed decision and withHeaders() (a copy of
//                 the response with the headers added); no limiter (diagnostic, no goal)
//   /rpc-far      rateLimit({ binding, policy: FAR, key }) around it: one limit() RPC per request
//   /local-far    the same with `local`: leases spent in the isolate (a LocalLimits of its own)
//   /rpc-limit    rateLimit({ binding, policy: AT, key }): a bucket whose limit binds
//   /local-limit  the same with `local: true` (a LocalLimits with the default options: shares
//                 once the bucket runs low)
//   /leases-limit the same with `local: { shares: false }` (plain leases only)
//   /noheaders-far local-far with `standardHeaders: false, legacyHeaders: false`
//   /shadow-far   local-far with `shadow: true` (decides and counts, blocks nothing, no headers)
//   /events-far   local-far with `onDecision: analyticsEngineEvents(dataset)`, the dataset a
//                 stand-in whose writeDataPoint keeps nothing (what the local binding does)
//   /stats?v=<path>&t=<tag>  JSON: what the Worker saw of that variant and tag (below)
// FAR (max_tokens 1e9) is never reached: every request is allowed. AT (max_tokens AT_MAX_TOKENS,
// one token per AT_REFILL_SECONDS, text bindings from local.mjs) is far below the offered load.
// A request carries its run tag as `&t=<tag>` (`?c=<n>` from bench/e2e/load.lua is ignored):
// each (variant, tag) gets its own middleware, its own key (so its own Durable Object and
// bucket, full at its first request) and, for the local variants, its own `new LocalLimits()`,
// whose counters `calls` (RPCs made) and `localAnswers` /stats reports. Per (variant, tag) the
// Worker counts requests, admitted (200) and denied (429) answers, the isolate's clock at the
// first request's arrival and after the last decision; workerd's clock only moves on I/O, so
// these are the times of the surrounding network events.
import { RateLimiterServer, rateLimitHeaders } from '@delightstack/rate-limiter';
import { analyticsEngineEvents, LocalLimits, rateLimit, withHeaders } from '@delightstack/rate-limiter/middleware';

export { RateLimiterServer };

const FAR = { name: 'far', max_tokens: 1e9, refill_every_seconds: 1 };

const handler = () => new Response('ok');

// A decision as the far bucket answers it (allowed), for /headers.
const DECISION = { allowed: true, remaining: 999_999_000, limit: 1e9, reset_in_ms: 1000, retry_after_ms: 0, window_ms: 1e12 };
const headersOnly = async (request, env, ctx) => withHeaders(await handler(request, env, ctx), rateLimitHeaders(DECISION, { name: 'far' }));

/** The options local-far takes on in the variants of the middleware's own options. */
const OPTIONS_OF = {
  'noheaders-far': { standardHeaders: false, legacyHeaders: false },
  'shadow-far': { shadow: true },
  'events-far': { onDecision: analyticsEngineEvents({ writeDataPoint() {} }) },
};

/** (variant, tag) → { fetch, limits, requests, admitted, denied, other, samples, first_ms, last_ms }. */
const runs = new Map();

function runOf(variant, tag, env) {
  const name = `${variant}|${tag}`;
  let run = runs.get(name);
  if (run !== undefined) return run;
  const at = {
    name: 'at',
    max_tokens: Number(env.AT_MAX_TOKENS ?? 100),
    refill_every_seconds: Number(env.AT_REFILL_SECONDS ?? 0.01),
  };
  const policy = variant.endsWith('-far') ? FAR : at;
  const limits = variant.startsWith('local-') || variant in OPTIONS_OF
    ? new LocalLimits()
    : variant.startsWith('leases-')
      ? new LocalLimits({ shares: false })
      : null;
  const key = `${variant}-${tag}`;
  const fetch =
    variant === 'none'
      ? handler
      : variant === 'headers'
        ? headersOnly
        : rateLimit({ binding: 'LIMITER', policy, key: () => key, local: limits ?? false, ...OPTIONS_OF[variant] })(handler);
  run = { fetch, limits, policy, requests: 0, admitted: 0, denied: 0, other: 0, samples: [], first_ms: null, last_ms: null };
  runs.set(name, run);
  return run;
}

const VARIANTS = new Set(['none', 'headers', 'rpc-far', 'local-far', 'rpc-limit', 'local-limit', 'leases-limit', ...Object.keys(OPTIONS_OF)]);

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const variant = url.pathname.slice(1);
    const tag = url.searchParams.get('t') ?? '';
    if (variant === 'stats') {
      const run = runs.get(`${url.searchParams.get('v')}|${tag}`);
      if (run === undefined) return Response.json(null);
      const { fetch: _f, limits, ...counts } = run;
      return Response.json({
        ...counts,
        calls: limits === null ? null : limits.calls,
        local_answers: limits === null ? null : limits.localAnswers,
      });
    }
    if (!VARIANTS.has(variant)) return new Response('unknown variant', { status: 404 });
    const run = runOf(variant, tag, env);
    const t0 = Date.now();
    if (run.first_ms === null) run.first_ms = t0;
    run.requests += 1;
    let response;
    try {
      response = await run.fetch(request, env, ctx);
    } catch (error) {
      // counted, and answered 500 as workerd would
      response = new Response(`${error?.name}: ${error?.message}`, { status: 500 });
    }
    run.last_ms = Date.now();
    if (response.status === 200) run.admitted += 1;
    else if (response.status === 429) run.denied += 1;
    else {
      run.other += 1;
      // what the first few other answers were, for the log
      if (run.samples.length < 3) {
        const sample = { status: response.status, body: null };
        run.samples.push(sample);
        sample.body = (await response.clone().text()).slice(0, 300);
      }
    }
    return response;
  },
};
