// The Worker of the wake-up benchmark (bench/e2e/wake.mjs, "wake-up cost" in bench/README.md).
// One Durable Object per row count N (`wake-<N>`), whose SQLite storage holds N saved buckets.
// A "wake-up" is a fresh DurableRateLimiterServer on the same ctx: empty memory, the storage
// still there (what the runtime gives a Durable Object after an eviction, minus reopening the
// database).
// workerd's clock stands still during compute, so nothing is timed here: the driver times each
// request from outside, and each request repeats its operation `reps` times.
import { DurableObject } from 'cloudflare:workers';
import { DurableRateLimiterServer } from '@delightstack/rate-limiter';
// Not exported by the package; by file, so that they are the modules workerd.js started.
import { initSync, RateLimiter } from '../../node_modules/@delightstack/rate-limiter/rate_limiter.js';
import { SqlBuckets } from '../../node_modules/@delightstack/rate-limiter/storage.js';

// One token per hour: a consumed bucket stays short of full (its row alive) for the run.
const POLICY = { max_tokens: 1e15, refill_every_seconds: 3600 };
const keyOf = (i) => `client-${i}:api`;
// A fixed spread of distinct keys over 0..n-1 (7919 is prime and divides no N used here).
const spread = (i, n) => (i * 7919) % n;

export class WakeBench extends DurableObject {
  #warm; // a server that has every key of `many` in memory (the no-load baseline)
  #next = 0;

  /** Saves buckets for keys from..to-1 (each one consume), returns the row count. */
  seed(from, to) {
    const server = new DurableRateLimiterServer(this.ctx, this.env);
    server.setOptions(POLICY);
    for (let i = from; i < to; i++) server.consume(keyOf(i), 1);
    return this.#rows();
  }

  /** The saved buckets: rows of the package's table (the package has no count of its own). */
  #rows() {
    return this.ctx.storage.sql.exec('SELECT count(*) AS n FROM rate_limiter_buckets').one().n;
  }

  /**
   * `reps` times: noop, nothing (the cost of the request itself); first, a wake-up and
   * check() of one key (lazy: one point SELECT; on an empty DO the SELECT finds no row);
   * full, the same after loading all rows first, as an eager wake-up would (scan + restore
   * into a limiter of its own); many / warm, check() of m distinct keys on a fresh server
   * (m point SELECTs) / on one that holds them.
   */
  run(op, n, m, reps) {
    let sink = 0;
    const key = () => keyOf(n === 0 ? this.#next++ : spread(this.#next++ % n, n));
    for (let r = 0; r < reps; r++) {
      if (op === 'noop') {
        sink += r;
      } else if (op === 'first') {
        sink += new DurableRateLimiterServer(this.ctx, this.env).check(key(), 1) ? 1 : 0;
      } else if (op === 'full') {
        const server = new DurableRateLimiterServer(this.ctx, this.env);
        const seed = crypto.getRandomValues(new Uint32Array(2));
        const limiter = new RateLimiter(seed[0], seed[1]);
        const now = Date.now();
        limiter.setOptions(now, POLICY);
        for (const [k, bytes] of new SqlBuckets(this.ctx.storage.sql).snapshots()) {
          limiter.restore(now, k, bytes);
          sink++;
        }
        sink += server.check(key(), 1) ? 1 : 0;
        limiter.free();
      } else if (op === 'many' || op === 'warm') {
        const server = op === 'many' ? new DurableRateLimiterServer(this.ctx, this.env) : this.#warmServer(n, m);
        for (let i = 0; i < m; i++) sink += server.check(keyOf(spread(i, n)), 1) ? 1 : 0;
      } else {
        throw new Error(`unknown op ${op}`);
      }
    }
    return sink;
  }

  /**
   * A full GC (workerd runs with --expose-gc here), so that the finalizers free the limiters
   * of the servers the last request dropped: each holds wasm memory that V8 does not see.
   * Returns the wasm memory size in bytes.
   */
  collect() {
    globalThis.gc();
    return initSync().memory.buffer.byteLength;
  }

  #warmServer(n, m) {
    if (this.#warm === undefined) {
      this.#warm = new DurableRateLimiterServer(this.ctx, this.env);
      for (let i = 0; i < m; i++) this.#warm.check(keyOf(spread(i, n)), 1);
    }
    return this.#warm;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name) => Number(url.searchParams.get(name) ?? 0);
    const stub = env.WAKE.get(env.WAKE.idFromName(`wake-${q('n')}`));
    if (url.pathname === '/gc') return Response.json(await stub.collect());
    if (url.pathname === '/seed') return Response.json(await stub.seed(q('from'), q('to')));
    if (url.pathname === '/run') {
      return Response.json(await stub.run(url.searchParams.get('op'), q('n'), q('m'), q('reps')));
    }
    return new Response('not found', { status: 404 });
  },
};
