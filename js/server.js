// The two Durable Object classes, shared by the workerd and the Node entry. RateLimiterServer
// reads the clock once per call and hands everything else to the wasm RateLimiter, which
// validates and decides. DurableRateLimiterServer is the same class plus a copy of every
// bucket in Durable Object storage, read back after an eviction.
import { RateLimiter, resetWasmInstance } from './rate_limiter.js';
import { MemoryBuckets, SqlBuckets } from './storage.js';

/**
 * Defines RateLimiterServer and DurableRateLimiterServer on `Base` (DurableObject, or a
 * stand-in outside workerd). `startWasm` instantiates the wasm module: once now, and again
 * after a trap. `storageStandIn`: where `ctx.storage` does not exist (plain Node), the
 * durable class keeps its copy in memory, per `ctx` object, instead of failing.
 */
export function defineRateLimiterServers(Base, startWasm, { storageStandIn = false } = {}) {
  startWasm();
  // Bumped when a trap replaced the wasm instance; limiters of older generations are gone.
  let generation = 0;

  // A limiter lives in wasm memory: free it with its server, unless its instance is gone.
  const limiters = new FinalizationRegistry(release);

  function release(cell) {
    if (cell.limiter === undefined) return;
    if (cell.generation === generation) cell.limiter.free();
    // Disarm its own finalizer, which would free the pointer in the new instance.
    else cell.limiter.__destroy_into_raw();
  }

  function renew(cell) {
    release(cell);
    const seed = crypto.getRandomValues(new Uint32Array(2));
    cell.limiter = new RateLimiter(seed[0], seed[1]);
    cell.generation = generation;
    cell.complete = false;
    if (cell.options !== undefined) cell.limiter.setOptions(Date.now(), cell.options);
  }

  // A trap leaves the instance unusable: start a fresh one for the next call.
  function recover(error) {
    if (error instanceof WebAssembly.RuntimeError) {
      generation += 1;
      resetWasmInstance();
      startWasm();
    }
    return error;
  }

  // The common case goes through the *Text methods, which take the key as a string and the
  // cost as a number; anything else (or a string with lone surrogates, which UTF-8 cannot
  // carry) takes the general path, where the binding checks every value.
  const fast = (key, cost) =>
    typeof key === 'string' && typeof cost === 'number' && key.isWellFormed();

  // A policy for the fast path: a plain object whose own fields are max_tokens and/or
  // refill_every_seconds, each undefined or a number other than NaN (NaN then means
  // "absent"). Anything else returns false and takes the general path, which reports it.
  const policyNumbers = [NaN, NaN];
  function readPolicy(policy) {
    policyNumbers[0] = policyNumbers[1] = NaN;
    if (policy === undefined) return true;
    if (typeof policy !== 'object' || policy === null) return false;
    try {
      if (Array.isArray(policy)) return false; // throws for a revoked Proxy
      for (const name of Object.keys(policy)) {
        if (name !== 'max_tokens' && name !== 'refill_every_seconds') return false;
      }
      const max = policy.max_tokens;
      const every = policy.refill_every_seconds;
      if (max !== undefined && (typeof max !== 'number' || max !== max)) return false;
      if (every !== undefined && (typeof every !== 'number' || every !== every)) return false;
      policyNumbers[0] = max ?? NaN;
      policyNumbers[1] = every ?? NaN;
      return true;
    } catch {
      return false; // a getter that throws: the general path reads it again and reports
    }
  }

  // For the durable subclass: the cell and the current limiter of a server.
  let cellOf, limiterOf;

  class RateLimiterServer extends Base {
    // Held apart from `this` so the finalizer can reach the limiter after `this` is gone.
    // `complete` (durable class): every saved bucket is in memory, so a key the limiter
    // does not hold has no saved bucket either.
    #cell = { limiter: undefined, generation: -1, options: undefined, complete: false };

    static {
      cellOf = (server) => server.#cell;
      limiterOf = (server) => server.#limiter();
    }

    constructor(ctx, env) {
      super(ctx, env);
      limiters.register(this, this.#cell);
    }

    setOptions(options) {
      const limiter = this.#limiter();
      try {
        limiter.setOptions(Date.now(), options);
      } catch (error) {
        throw recover(error);
      }
      // Kept so that a replacement instance starts with the same options.
      this.#cell.options = limiter.options;
    }

    check(key, cost = 1) {
      const limiter = this.#limiter();
      try {
        // 0 denied, 1 allowed, 2: a cost out of range, which the general path reports.
        const answer = fast(key, cost) ? limiter.checkText(Date.now(), key, cost) : 2;
        return answer < 2 ? answer === 1 : limiter.check(Date.now(), key, cost);
      } catch (error) {
        throw recover(error);
      }
    }

    consume(key, cost = 1) {
      const limiter = this.#limiter();
      try {
        // 0 denied, 1 allowed, 2: a cost out of range, which the general path reports.
        const answer = fast(key, cost) ? limiter.consumeText(Date.now(), key, cost) : 2;
        return answer < 2 ? answer === 1 : limiter.consume(Date.now(), key, cost);
      } catch (error) {
        throw recover(error);
      }
    }

    getStatus(key) {
      const limiter = this.#limiter();
      try {
        return typeof key === 'string' && key.isWellFormed()
          ? limiter.getStatusText(Date.now(), key)
          : limiter.getStatus(Date.now(), key);
      } catch (error) {
        throw recover(error);
      }
    }

    reset(key) {
      const limiter = this.#limiter();
      try {
        limiter.reset(key);
      } catch (error) {
        throw recover(error);
      }
    }

    limit(key, cost = 1, policy = undefined) {
      const limiter = this.#limiter();
      try {
        if (fast(key, cost) && readPolicy(policy)) {
          const [max, every] = policyNumbers;
          return limiter.limitText(Date.now(), key, cost, policy !== undefined, max, every);
        }
        return limiter.limit(Date.now(), key, cost, policy);
      } catch (error) {
        throw recover(error);
      }
    }

    limitAll(requests) {
      const limiter = this.#limiter();
      try {
        return limiter.limitAll(Date.now(), requests);
      } catch (error) {
        throw recover(error);
      }
    }

    #limiter() {
      const cell = this.#cell;
      if (cell.generation !== generation) renew(cell);
      return cell.limiter;
    }
  }

  // Where the durable class keeps its copy without `ctx.storage` (Node): one per ctx, so a
  // new server on the same ctx finds what an evicted one saved.
  const standIns = new WeakMap();

  function openBuckets(ctx) {
    const storage = ctx?.storage;
    if (storage === undefined || storage === null) {
      if (!storageStandIn) {
        throw new Error('DurableRateLimiterServer needs the Durable Object storage (ctx.storage)');
      }
      if (typeof ctx !== 'object' || ctx === null) return new MemoryBuckets();
      if (!standIns.has(ctx)) standIns.set(ctx, new MemoryBuckets());
      return standIns.get(ctx);
    }
    let sql;
    try {
      sql = storage.sql;
    } catch {
      // workerd throws here for a class whose storage is not SQLite-backed.
    }
    if (sql === undefined) {
      throw new Error(
        'DurableRateLimiterServer needs SQLite storage: declare its class in a migration ' +
          'under new_sqlite_classes (not new_classes)',
      );
    }
    return new SqlBuckets(sql);
  }

  // A writing call also drops the rows of buckets that have become full, at most this often.
  const DROP_FULL_EVERY_MS = 10_000;

  class DurableRateLimiterServer extends RateLimiterServer {
    #buckets;
    #droppedAt = -Infinity;

    constructor(ctx, env) {
      super(ctx, env);
      this.#buckets = openBuckets(ctx);
      const options = this.#buckets.options();
      if (options !== undefined) super.setOptions(options);
    }

    setOptions(options) {
      const limiter = limiterOf(this);
      const cell = cellOf(this);
      const before = cell.options ?? limiter.options;
      let rewrites;
      try {
        rewrites = limiter.prepareOptions(options);
        if (rewrites && !cell.complete) {
          const now = Date.now();
          for (const [key, state] of this.#buckets.all()) limiter.restore(now, key, state);
          cell.complete = true;
        }
        limiter.applyPreparedOptions(Date.now());
      } catch (error) {
        throw recover(error);
      }
      const after = (cell.options = limiter.options);
      if (after.max_tokens !== before.max_tokens || after.refill_every_seconds !== before.refill_every_seconds) {
        this.#buckets.saveOptions(after);
      }
      if (rewrites) this.#buckets.replaceDefaults(limiter.defaultBuckets());
    }

    check(key, cost = 1) {
      this.#load(key);
      return super.check(key, cost);
    }

    consume(key, cost = 1) {
      this.#load(key);
      const allowed = super.consume(key, cost);
      if (allowed) this.#save(key);
      return allowed;
    }

    getStatus(key) {
      this.#load(key);
      return super.getStatus(key);
    }

    reset(key) {
      super.reset(key);
      this.#buckets.put(key, undefined);
    }

    limit(key, cost = 1, policy = undefined) {
      this.#load(key);
      const decision = super.limit(key, cost, policy);
      // A denied call without a policy changes nothing that needs saving.
      if (decision.allowed || policy !== undefined) this.#save(key);
      return decision;
    }

    limitAll(requests) {
      const limiter = limiterOf(this);
      const complete = cellOf(this).complete;
      const keys = [];
      let decision;
      try {
        decision = limiter.limitAll(Date.now(), requests, (key, held) => {
          keys.push(key);
          return held || complete ? undefined : this.#buckets.get(key);
        });
      } catch (error) {
        throw recover(error);
      }
      for (const key of keys) this.#save(key);
      return decision;
    }

    /** Puts the saved bucket of `key` back into memory if the limiter does not hold it. */
    #load(key) {
      // Anything but a string goes to the engine, which rejects it.
      if (typeof key !== 'string') return;
      // First the limiter: after a trap it is a new one, which holds nothing yet.
      const limiter = limiterOf(this);
      if (cellOf(this).complete) return;
      try {
        if (key.isWellFormed() ? limiter.holdsText(key) : limiter.holds(key)) return;
        const state = this.#buckets.get(key);
        if (state !== undefined) limiter.restore(Date.now(), key, state);
      } catch (error) {
        throw recover(error);
      }
    }

    /** Saves the bucket of `key` as the last call left it (a full bucket: no row). */
    #save(key) {
      let saved;
      try {
        saved = limiterOf(this).saved(key);
      } catch (error) {
        throw recover(error);
      }
      this.#buckets.put(key, saved);
      const now = Date.now();
      if (now - this.#droppedAt >= DROP_FULL_EVERY_MS) {
        this.#droppedAt = now;
        this.#buckets.dropFull(now);
      }
    }
  }

  return { RateLimiterServer, DurableRateLimiterServer };
}
