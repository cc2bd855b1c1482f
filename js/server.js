// The RateLimiterServer class, shared by the workerd and the Node entry. It reads the clock
// once per call and hands everything else to the wasm RateLimiter, which validates and decides.
import { RateLimiter, resetWasmInstance } from './rate_limiter.js';

/**
 * Defines RateLimiterServer on `Base` (DurableObject, or a stand-in outside workerd).
 * `startWasm` instantiates the wasm module: once now, and again after a trap.
 */
export function defineRateLimiterServer(Base, startWasm) {
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

  return class RateLimiterServer extends Base {
    // Held apart from `this` so the finalizer can reach the limiter after `this` is gone.
    #cell = { limiter: undefined, generation: -1, options: undefined };

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
  };
}
