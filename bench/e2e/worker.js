// The Worker of the end-to-end benchmark (bench/e2e/run.mjs). One Worker, every variant on its
// own path, so that all variants share the same bundle, isolate, request parsing and response:
//   /none     answers without calling any Durable Object (the no-limiter baseline)
//   /floor    one RPC to a DO whose method returns `true` at once (the floor)
//   /plain    one RPC to a DO running the same token bucket in plain JS over a Map
//   /consume  one RPC: RateLimiterServer.consume(key, 1)
//   /three    three RPCs, the original pattern: setOptions(policy) + consume + getStatus
//   /limit    one RPC: RateLimiterServer.limit(key, 1, policy)
//   /dconsume one RPC: DurableRateLimiterServer.consume(key, 1) (every allowed call writes a row)
//   /dlimit   one RPC: DurableRateLimiterServer.limit(key, 1, policy)
//   /dconsume-disk, /dlimit-disk  the same on DURABLE_DISK, whose storage run.mjs puts on the disk
// A request names its simulated client as `?c=<n>` and a run tag as `&t=<tag>`; the client's
// key is `client-<n>` and its Durable Object is one of SHARDS per variant and tag
// (`<variant>-<tag>-<n % SHARDS>`). Each round of run.mjs (and its smoke check) uses its own tag,
// so every measured DO is created in that round's warm-up and stays busy until it ends: workerd
// evicts a DO left idle for a few seconds, and an evicted DO would come back with default
// options (10 tokens) while the Worker still counts it as configured. A denied request answers
// 429, so a misconfigured limiter shows up as non-2xx responses in the results.
import { DurableObject } from 'cloudflare:workers';
import { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';
import { PlainJsLimiter } from '../plain-limiter.mjs';

export { DurableRateLimiterServer, RateLimiterServer };

// Large enough that no bucket runs dry during a run: every request is allowed.
const POLICY = { max_tokens: 1e15, refill_every_seconds: 3600 };

/** The floor: an RPC method that returns at once. */
export class FloorServer extends DurableObject {
  setOptions(_options) {}
  consume(_key, _cost) {
    return true;
  }
}

/** The plain-JS baseline: the token bucket of bench/plain-limiter.mjs, as in bench/consume.mjs. */
export class PlainJsServer extends DurableObject {
  #limiter = new PlainJsLimiter();

  setOptions(options) {
    this.#limiter.setOptions(options);
  }

  consume(key, cost) {
    return this.#limiter.consume(key, cost);
  }
}

// DO names whose options were set already (once per DO for floor / plain / consume / dconsume).
const configured = new Set();

async function configureOnce(stub, name) {
  if (configured.has(name)) return;
  await stub.setOptions(POLICY);
  configured.add(name);
}

function answer(allowed, headers) {
  return new Response(allowed ? 'ok' : 'denied', { status: allowed ? 200 : 429, headers });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const variant = url.pathname.slice(1);
    const c = Number(url.searchParams.get('c') ?? 0) | 0;
    const key = `client-${c}`;
    const name = `${variant}-${url.searchParams.get('t') ?? ''}-${c % Number(env.SHARDS ?? 16)}`;

    switch (variant) {
      case 'none':
        return answer(true);
      case 'floor':
      case 'plain':
      case 'consume':
      case 'dconsume':
      case 'dconsume-disk': {
        const ns =
          variant === 'floor' ? env.FLOOR
          : variant === 'plain' ? env.PLAIN
          : variant === 'consume' ? env.LIMITER
          : variant === 'dconsume' ? env.DURABLE
          : env.DURABLE_DISK;
        const stub = ns.get(ns.idFromName(name));
        await configureOnce(stub, name);
        return answer(await stub.consume(key, 1));
      }
      case 'three': {
        const stub = env.LIMITER.get(env.LIMITER.idFromName(name));
        await stub.setOptions(POLICY);
        const allowed = await stub.consume(key, 1);
        const status = await stub.getStatus(key);
        return answer(allowed, { 'x-ratelimit-remaining': String(Math.floor(status.remaining)) });
      }
      case 'limit':
      case 'dlimit':
      case 'dlimit-disk': {
        const ns = variant === 'limit' ? env.LIMITER : variant === 'dlimit' ? env.DURABLE : env.DURABLE_DISK;
        const stub = ns.get(ns.idFromName(name));
        const decision = await stub.limit(key, 1, POLICY);
        return answer(decision.allowed, {
          'x-ratelimit-remaining': String(Math.floor(decision.remaining)),
        });
      }
      default:
        return new Response('unknown variant', { status: 404 });
    }
  },
};
