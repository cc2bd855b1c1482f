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
//
// `class` is 'memory' (the default) or 'durable'. A TypeError or RangeError from the limiter
// (bad key, cost, options) or about the body answers 400 with its name and message, so the page
// can show it.
import { DurableRateLimiterServer, RateLimiterServer, rateLimitHeaders } from '@delightstack/rate-limiter';
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

/** The "playground" object of the class a body names (both classes answer the same RPC API). */
function stubOf(env: Env, name: unknown): DurableObjectStub<PlaygroundMemory> {
  if (name === undefined || name === 'memory') return env.PLAYGROUND.get(env.PLAYGROUND.idFromName(PLAYGROUND_OBJECT));
  if (name === 'durable') {
    return env.PLAYGROUND_DURABLE.get(env.PLAYGROUND_DURABLE.idFromName(PLAYGROUND_OBJECT));
  }
  throw new TypeError(`class must be "memory" or "durable", got ${JSON.stringify(name)}`);
}

const ENDPOINTS = ['/api/limit', '/api/status', '/api/options', '/api/reset', '/api/evict'];

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
