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

  return class RateLimiterServer extends Base {
    // Held apart from `this` so the finalizer can reach the limiter after `this` is gone.
    #cell = { limiter: undefined, generation: -1, options: undefined };

    constructor(ctx, env) {
      super(ctx, env);
      limiters.register(this, this.#cell);
    }

    setOptions(options) {
      this.#run((limiter) => {
        limiter.setOptions(Date.now(), options);
        // Kept so that a replacement instance starts with the same options.
        this.#cell.options = limiter.options;
      });
    }

    check(key, cost) {
      return this.#run((limiter) => limiter.check(Date.now(), key, cost));
    }

    consume(key, cost) {
      return this.#run((limiter) => limiter.consume(Date.now(), key, cost));
    }

    getStatus(key) {
      return this.#run((limiter) => limiter.getStatus(Date.now(), key));
    }

    reset(key) {
      this.#run((limiter) => limiter.reset(key));
    }

    limit(key, cost, policy) {
      return this.#run((limiter) => limiter.limit(Date.now(), key, cost, policy));
    }

    limitAll(requests) {
      return this.#run((limiter) => limiter.limitAll(Date.now(), requests));
    }

    #run(call) {
      const cell = this.#cell;
      if (cell.generation !== generation) renew(cell);
      try {
        return call(cell.limiter);
      } catch (error) {
        // A trap leaves the instance unusable: start a fresh one for the next call.
        if (error instanceof WebAssembly.RuntimeError) {
          generation += 1;
          resetWasmInstance();
          startWasm();
        }
        throw error;
      }
    }
  };
}
