// Per-call cost inside workerd, without RPC or HTTP: one Durable Object runs n consume()
// calls in a loop, through the package's RateLimiterServer or a plain-JS Map of the same
// algorithm. Keys are built per call, as a request handler builds them.
import { DurableObject } from 'cloudflare:workers';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import { PlainJsLimiter } from '../../plain-limiter.mjs';

export { RateLimiterServer };

const OPTIONS = { max_tokens: 1e15, refill_every_seconds: 3600 };

export class Loop extends DurableObject {
  run(n, which) {
    const limiter = which === 'plain' ? new PlainJsLimiter() : new RateLimiterServer(this.ctx, this.env);
    limiter.setOptions(OPTIONS);
    let allowed = 0;
    for (let i = 0; i < n; i++) if (limiter.consume(`client-${i % 1000}:api`, 1)) allowed++;
    return allowed;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const stub = env.LOOP.get(env.LOOP.idFromName('loop'));
    return new Response(String(await stub.run(Number(url.searchParams.get('n')), url.searchParams.get('w'))));
  },
};
