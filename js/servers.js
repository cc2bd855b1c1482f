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

    block(key, seconds) {
      this.#limiter.block(key, seconds);
    }

    unblock(key) {
      return this.#limiter.unblock(key);
    }

    /** The keys blocked now, in key order (UTF-16 code units), a page at a time. */
    blocked(options = {}) {
      const { limit, after } = pageOf(options);
      const live = this.#limiter.blocks().filter((b) => after === undefined || b.key > after);
      live.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const keys = live.slice(0, limit).map(({ key, blocked_for_ms }) => ({ key, blocked_for_ms }));
      return { keys, next: live.length > limit ? keys[keys.length - 1].key : null };
    }
  }

  class DurableRateLimiterServer extends RateLimiterServer {}

  /** `blocked()`'s options, checked: `limit` 1 to 1,000 (default 100), `after` a key. */
  function pageOf(options) {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new TypeError(`options must be an object, got ${options === null ? 'null' : typeof options}`);
    }
    const { limit = 100, after, ...rest } = options;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) throw new TypeError(`options has no field "${unknown}" (the fields are limit and after)`);
    if (typeof limit !== 'number') throw new TypeError(`options.limit must be a number, got ${typeof limit}`);
    if (!(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) {
      throw new RangeError(`options.limit must be a whole number from 1 to 1000, got ${limit}`);
    }
    if (after !== undefined && typeof after !== 'string') throw new TypeError(`options.after must be a string, got ${typeof after}`);
    return { limit, after };
  }

  return { RateLimiterServer, DurableRateLimiterServer };
}
