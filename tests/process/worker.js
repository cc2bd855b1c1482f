// The Worker of the `process` test layer (tests/process/*.test.mjs): bundled by wrangler and run
// by the real workerd binary, driven over loopback. Routes (all GET):
//   /health                                   200 "ok" (readiness probe)
//   /consume?class=&do=&key=&cost=            consume(key, cost): 200 "allowed" / 429 "denied"
//   /setup?class=&do=&max=&every=             setOptions({max_tokens, refill_every_seconds})
//   /status?class=&do=&key=                   getStatus(key) as JSON
//   /limit?class=&do=&key=&cost=&max=&every=  limit(key, cost, policy?) as JSON: 200 / 429
// class=memory → LIMITER (RateLimiterServer), class=durable → DURABLE (DurableRateLimiterServer);
// do=<name> names the Durable Object. The key is `key=` (URL-encoded UTF-8), or `kj=` a JSON
// string literal: UTF-8 cannot carry a lone surrogate, a JSON `\ud800` escape can.
// A thrown error answers 500 with its stack, so a test shows it instead of a bare failure.
// For local decisions (tests/process/local.test.mjs), through the middleware:
//   /mw?class=&do=&name=&max=&every=&local=   rateLimit({ binding, policy: { name, max_tokens,
//                                             refill_every_seconds }, key: do, local }): 200
//                                             "allowed" / its 429 / its 503; local=1 uses this
//                                             isolate's one LocalLimits (`local: true`),
//                                             local=2 its one with plain leases only
//                                             (`local: { shares: false }`), else per-request RPC
//   /local-stats                              { calls, local_answers, leases_calls,
//                                             leases_local_answers } of those LocalLimits
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import { LocalLimits, rateLimit } from '@delightstack/rate-limiter/middleware';

export { DurableRateLimiterServer, RateLimiterServer };

function keyOf(params) {
  const json = params.get('kj');
  return json === null ? params.get('key') ?? '' : JSON.parse(json);
}

function numberOf(params, name, fallback) {
  const value = params.get(name);
  return value === null ? fallback : Number(value);
}

/** The policy in `max` / `every`, or undefined when neither is given. */
function policyOf(params) {
  const max = numberOf(params, 'max', undefined);
  const every = numberOf(params, 'every', undefined);
  if (max === undefined && every === undefined) return undefined;
  const policy = {};
  if (max !== undefined) policy.max_tokens = max;
  if (every !== undefined) policy.refill_every_seconds = every;
  return policy;
}

const json = (value, status = 200) =>
  new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } });

// What `local: true` makes (one LocalLimits with the default options for the isolate's life),
// and what `local: { shares: false }` makes, held here so that /local-stats can read their
// counters.
const local = new LocalLimits();
const leasing = new LocalLimits({ shares: false });
const limited = new Map(); // options → the wrapped handler: the middleware compiles options once

function limitedHandler(params) {
  const cls = params.get('class');
  const binding = cls === 'memory' ? 'LIMITER' : cls === 'durable' ? 'DURABLE' : `no binding for class ${cls}`;
  const policy = { name: params.get('name') ?? 'default' };
  const max = numberOf(params, 'max', undefined);
  const every = numberOf(params, 'every', undefined);
  if (max !== undefined) policy.max_tokens = max;
  if (every !== undefined) policy.refill_every_seconds = every;
  const mode = params.get('local');
  const useLocal = mode === '1' ? local : mode === '2' ? leasing : false;
  const id = JSON.stringify([binding, policy, mode]);
  let handler = limited.get(id);
  if (handler === undefined) {
    handler = rateLimit({
      binding,
      policy,
      key: (request) => new URL(request.url).searchParams.get('do') ?? 'default',
      local: useLocal,
    })(() => new Response('allowed'));
    limited.set(id, handler);
  }
  return handler;
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const params = url.searchParams;
    if (url.pathname === '/health') return new Response('ok');
    if (url.pathname === '/local-stats') {
      return json({
        calls: local.calls,
        local_answers: local.localAnswers,
        leases_calls: leasing.calls,
        leases_local_answers: leasing.localAnswers,
      });
    }
    if (url.pathname === '/mw') {
      try {
        return await limitedHandler(params)(request, env, ctx);
      } catch (error) {
        return new Response(String(error?.stack ?? error), { status: 500 });
      }
    }
    const cls = params.get('class');
    const ns = cls === 'memory' ? env.LIMITER : cls === 'durable' ? env.DURABLE : undefined;
    if (ns === undefined) return new Response('class must be memory or durable', { status: 400 });
    const stub = ns.get(ns.idFromName(params.get('do') ?? 'default'));
    try {
      switch (url.pathname) {
        case '/consume': {
          const allowed = await stub.consume(keyOf(params), numberOf(params, 'cost', 1));
          return new Response(allowed ? 'allowed' : 'denied', { status: allowed ? 200 : 429 });
        }
        case '/setup':
          await stub.setOptions(policyOf(params) ?? {});
          return json({ ok: true });
        case '/status':
          return json(await stub.getStatus(keyOf(params)));
        case '/limit': {
          const decision = await stub.limit(keyOf(params), numberOf(params, 'cost', 1), policyOf(params));
          return json(decision, decision.allowed ? 200 : 429);
        }
        default:
          return new Response('not found', { status: 404 });
      }
    } catch (error) {
      return new Response(String(error?.stack ?? error), { status: 500 });
    }
  },
};
