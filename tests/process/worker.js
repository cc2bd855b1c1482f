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
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';

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

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const params = url.searchParams;
    if (url.pathname === '/health') return new Response('ok');
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
