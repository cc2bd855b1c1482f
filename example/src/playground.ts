// The playground of `npm start`: the page at `/` (playground.html, imported as text by
// wrangler's default module rules) and the JSON endpoints it calls, which drive the real
// limiter classes over RPC: RateLimiterServer (buckets in memory) or DurableRateLimiterServer
// (buckets also in the object's SQLite storage), chosen by `class` in every body.
//
//   POST /api/limit   {class?, key, cost?, policy?} -> limit(); the response carries the status
//                     (200 or 429) and the headers of rateLimitHeaders(), as a limited endpoint would
//   POST /api/status  {class?, key, policy?}        -> the bucket now: {remaining, limit, reset_in_ms}
//   POST /api/options {class?, max_tokens?, refill_every_seconds?} -> setOptions()
//   POST /api/reset   {class?, key}                 -> reset()
//   POST /api/evict   {class?}                      -> the object discards its memory, as an
//                     eviction does: {evicted: true}
//   POST /api/acquire {class?, key, max_in_flight, ttl_seconds?} -> a permit of the gate `key`,
//                     decided by the middleware's `concurrency` option (checkRateLimit): 200 with
//                     {permit}, or 429 with {permit, problem}; the status and headers are the
//                     middleware's own (RateLimit-Policy ...;qu="concurrent-requests", Retry-After: 1)
//   POST /api/release {class?, key, id}             -> release(): {release: {released, in_flight}}
//   POST /api/gate    {class?, key}                 -> gateStatus(): {gate: {in_flight, permits}}
//   POST /api/block   {class?, key, seconds}        -> block(): {ok: true}
//   POST /api/unblock {class?, key}                 -> unblock(): {unblocked: whether a block was in force}
//   POST /api/blocked {class?, key?, limit?, after?} -> blocked({limit, after}): {keys, next}; with
//                     `key`, also that key's block: {block: {key, blocked_for_ms} or null}
//
// `class` is 'memory' (the default) or 'durable'. A TypeError or RangeError from the limiter
// (bad key, cost, options) or about the body answers 400 with its name and message, so the page
// can show it.
//
// Concurrency: a "slow request" of the page is a permit it holds. /api/acquire takes it as a
// request through the middleware's `concurrency` option would, from the same code (so the 429
// and its headers are exactly the middleware's), and answers at once; the page keeps the permit
// until its "finish" button (or its own timer) calls /api/release, which is what the middleware
// does when a response is finished. The alternative, a real slow response whose streamed body
// the page cancels, was not taken: a browser holds at most 6 connections to one host (the 7th
// request would wait in the browser, not at the gate), and when a cancellation through
// `wrangler dev` reaches the Worker is up to the proxy, so neither the page nor its test could
// say when the slot is free. A permit's id is all it takes to finish it: deterministic, and
// the gate the page shows is the one the object holds.
import {
  DurableRateLimiterServer,
  RateLimiterServer,
  rateLimitHeaders,
  type RateLimitAllDecision,
} from '@delightstack/rate-limiter';
import { checkRateLimit } from '@delightstack/rate-limiter/middleware';
import page from './playground.html';
import type { Env } from './index';

/** Every playground bucket lives in this one object; the page's key is the bucket key. */
export const PLAYGROUND_OBJECT = 'playground';

/** The policy name in the RateLimit-Policy / RateLimit headers of /api/limit. */
export const PLAYGROUND_NAME = 'playground';

const EVICTED = 'playground: evicted';

// The playground's two classes: the package's, plus evict(). ctx.abort() resets the object the
// way Cloudflare's eviction does: its memory is gone, the next call reaches a new instance
// (storage, for the durable class, stays). The RPC call to evict() rejects: the object aborted.

/** RateLimiterServer (env.PLAYGROUND): after an eviction every bucket is full again. */
export class PlaygroundMemory extends RateLimiterServer {
  evict(): void {
    this.ctx.abort(EVICTED);
  }
}

/** DurableRateLimiterServer (env.PLAYGROUND_DURABLE): after an eviction the buckets are as they were. */
export class PlaygroundDurable extends DurableRateLimiterServer {
  evict(): void {
    this.ctx.abort(EVICTED);
  }
}

type Body = { class?: unknown; key?: unknown; cost?: unknown; policy?: unknown; [field: string]: unknown };

/** The binding of the class a body names. */
function bindingOf(name: unknown): 'PLAYGROUND' | 'PLAYGROUND_DURABLE' {
  if (name === undefined || name === 'memory') return 'PLAYGROUND';
  if (name === 'durable') return 'PLAYGROUND_DURABLE';
  throw new TypeError(`class must be "memory" or "durable", got ${JSON.stringify(name)}`);
}

/** The "playground" object of the class a body names (both classes answer the same RPC API). */
function stubOf(env: Env, name: unknown): DurableObjectStub<PlaygroundMemory> {
  const namespace = env[bindingOf(name)] as DurableObjectNamespace<PlaygroundMemory>;
  return namespace.get(namespace.idFromName(PLAYGROUND_OBJECT));
}

const ENDPOINTS = [
  '/api/limit', '/api/status', '/api/options', '/api/reset', '/api/evict',
  '/api/acquire', '/api/release', '/api/gate', '/api/block', '/api/unblock', '/api/blocked',
];

export async function playground(request: Request, env: Env): Promise<Response> {
  const { pathname } = new URL(request.url);
  try {
    if (pathname === '/') {
      if (request.method !== 'GET' && request.method !== 'HEAD') return notAllowed('GET');
      return new Response(page, {
        headers: { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' },
      });
    }
    if (!ENDPOINTS.includes(pathname)) {
      return Response.json({ error: { name: 'NotFound', message: `no endpoint ${pathname}` } }, { status: 404 });
    }
    if (request.method !== 'POST') return notAllowed('POST');
    const { class: name, ...body } = await readBody(request);
    if (pathname === '/api/acquire') return await acquire(request, env, bindingOf(name), body);
    const stub = stubOf(env, name);
    // The limiter validates every value itself (key, cost, policy): its errors are the ones shown.
    // Values are passed as the page sent them (typed `never`: the limiter checks them at run time).
    const key = body.key as never;
    const policy = body.policy as never;

    switch (pathname) {
      case '/api/limit': {
        const decision = await stub.limit(key, body.cost as never, policy);
        return Response.json(
          { decision },
          {
            status: decision.allowed ? 200 : 429,
            headers: rateLimitHeaders(decision, { name: PLAYGROUND_NAME }),
          },
        );
      }
      case '/api/status': {
        // getStatus uses the key's remembered policy, which a bucket forgets when it refills to
        // full; the page's gauge wants the bucket under the policy it sends, so with a policy
        // the read is a cost-0 limit(), which consumes nothing.
        const now =
          body.policy === undefined ? await stub.getStatus(key) : await stub.limit(key, 0, policy);
        const { remaining, limit, reset_in_ms } = now;
        return Response.json({ status: { remaining, limit, reset_in_ms } });
      }
      case '/api/options': {
        await stub.setOptions(body as never);
        return Response.json({ ok: true });
      }
      case '/api/reset': {
        await stub.reset(key);
        return Response.json({ ok: true });
      }
      case '/api/release': {
        return Response.json({ release: await stub.release(key, body.id as never) });
      }
      case '/api/gate': {
        return Response.json({ gate: await stub.gateStatus(key) });
      }
      case '/api/block': {
        await stub.block(key, body.seconds as never);
        return Response.json({ ok: true });
      }
      case '/api/unblock': {
        return Response.json({ unblocked: await stub.unblock(key) });
      }
      case '/api/blocked': {
        const page = await stub.blocked(definedFields({ limit: body.limit, after: body.after }) as never);
        if (body.key === undefined) return Response.json(page);
        return Response.json({ ...page, block: await blockOf(stub, key) });
      }
      default: {
        try {
          await stub.evict();
        } catch (error) {
          // The object aborted, as asked: that is the rejection expected.
          if (!String(error).includes(EVICTED)) throw error;
          return Response.json({ evicted: true });
        }
        throw new Error('evict() returned: the object was not reset');
      }
    }
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) {
      return Response.json({ error: { name: error.name, message: error.message } }, { status: 400 });
    }
    throw error;
  }
}

/**
 * /api/acquire: one request through the middleware's `concurrency` option, on the gate `key` of
 * the "playground" object. The options are made per request because the page picks
 * max_in_flight; the middleware checks the name, the limiter the rest. The permit is not
 * released here: the page holds it until it finishes the request (/api/release).
 */
async function acquire(request: Request, env: Env, binding: 'PLAYGROUND' | 'PLAYGROUND_DURABLE', body: Body) {
  // (The middleware would take a missing name for its default gate, "concurrency".)
  if (body.key === undefined) throw new TypeError('key must be a string, got undefined');
  const concurrency = definedFields({ name: body.key, max_in_flight: body.max_in_flight, ttl_seconds: body.ttl_seconds });
  const result = await checkRateLimit(request, env, {
    binding,
    key: () => PLAYGROUND_OBJECT,
    concurrency: concurrency as never,
  });
  // No decision: the limiter failed, and the middleware's 503 says so.
  if (result.decision === null) return result.response ?? new Response(null, { status: 503 });
  const { permit } = result.decision as RateLimitAllDecision;
  if (result.response === null) return Response.json({ permit }, { headers: result.headers });
  // The middleware's 429, with its problem+json as a field beside the permit's answer.
  const problem: unknown = await result.response.json();
  return Response.json({ permit, problem }, { status: result.response.status, headers: result.headers });
}

/**
 * The block of `key`, or null: `check(key, 0)` is a read that only a block denies (a cost of 0
 * always fits), and then a cost-0 `limit()`, denied too (a read as well), has the block's time
 * left as its retry. The blocked() list alone may not reach `key`: it is a page in key order.
 */
async function blockOf(stub: DurableObjectStub<PlaygroundMemory>, key: never) {
  if (await stub.check(key, 0)) return null;
  const { allowed, retry_after_ms } = await stub.limit(key, 0);
  // (The block ended between the two calls.)
  if (allowed || retry_after_ms === null) return null;
  return { key: key as string, blocked_for_ms: retry_after_ms };
}

/** `fields` without the undefined ones: a field the page left out takes the limiter's default. */
function definedFields(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

async function readBody(request: Request): Promise<Body> {
  let body: unknown;
  try {
    body = await request.json();
  } catch {
    throw new TypeError('the request body must be JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new TypeError('the request body must be a JSON object');
  }
  return body as Body;
}

function notAllowed(allow: string): Response {
  return Response.json(
    { error: { name: 'MethodNotAllowed', message: `use ${allow}` } },
    { status: 405, headers: { Allow: allow } },
  );
}
