// The two Durable Object classes: thin RPC facades over a limiter. RateLimiterServer keeps
// its buckets in memory (LocalLimiter); DurableRateLimiterServer is the same class whose
// limiter also keeps a snapshot of every bucket in Durable Object storage (DurableLimiter).
import { DurableLimiter } from './durable.js';
import { LocalLimiter } from './limiter.js';
import { openBuckets } from './storage.js';

/**
 * Defines both classes on `Base` (DurableObject, or a stand-in outside workerd), with their
 * buckets in `instance` (a WasmInstance). `storageStandIn`: where `ctx.storage` does not
 * exist (plain Node), the durable class keeps its snapshots in memory, per `ctx` object.
 */
export function defineRateLimiterServers(Base, instance, { storageStandIn = false } = {}) {
  class RateLimiterServer extends Base {
    #limiter;

    constructor(ctx, env) {
      super(ctx, env);
      const local = new LocalLimiter(instance);
      this.#limiter =
        this instanceof DurableRateLimiterServer
          ? new DurableLimiter(local, openBuckets(ctx, { standIn: storageStandIn }))
          : local;
    }

    setOptions(options) {
      this.#limiter.setOptions(options);
    }

    check(key, cost = 1) {
      return this.#limiter.check(key, cost);
    }

    consume(key, cost = 1) {
      return this.#limiter.consume(key, cost);
    }

    getStatus(key) {
      return this.#limiter.getStatus(key);
    }

    reset(key) {
      this.#limiter.reset(key);
    }

    limit(key, cost = 1, policy = undefined) {
      return this.#limiter.limit(key, cost, policy);
    }

    limitAll(requests, permit = undefined) {
      if (permit === undefined) return this.#limiter.limitAll(requests);
      return this.#limiter.limitAllWithPermit(requests, permit);
    }

    limitLeased(key, cost = 1, policy = undefined, lease = undefined) {
      return this.#limiter.limitLeased(key, cost, policy, lease);
    }

    settle(key, lease) {
      return this.#limiter.settle(key, lease);
    }

    refund(key, tokens) {
      this.#limiter.refund(key, tokens);
    }

    acquire(key, cost = 1, policy = undefined) {
      return this.#limiter.acquire(key, cost, policy);
    }

    release(key, id) {
      return this.#limiter.release(key, id);
    }

    gateStatus(key) {
      return this.#limiter.gateStatus(key);
    }
  }

  class DurableRateLimiterServer extends RateLimiterServer {}

  return { RateLimiterServer, DurableRateLimiterServer };
}
