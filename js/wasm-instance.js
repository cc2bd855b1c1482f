// The wasm instance's life: started once, and started afresh after a trap. A trap
// (WebAssembly.RuntimeError) leaves an instance unusable: its memory may be inconsistent and
// the trapped call never released its borrow of the limiter, so every later call on it would
// fail with wasm-bindgen's "recursive use of an object" error.
import { resetWasmInstance } from './rate_limiter.js';

export class WasmInstance {
  #start;
  /** Bumped when a trap replaced the instance: limiters of older generations are gone. */
  generation = 0;

  /** `start` instantiates the module synchronously (the glue's `initSync`). */
  constructor(start) {
    this.#start = start;
    start();
  }

  /**
   * `call(limiter, a, b, c, d)`, with a fresh instance for the next call if it trapped. Plain
   * arguments rather than a closure, so the hot path allocates nothing.
   */
  guard(call, limiter, a, b, c, d) {
    try {
      return call(limiter, a, b, c, d);
    } catch (error) {
      if (error instanceof WebAssembly.RuntimeError) {
        this.generation += 1;
        resetWasmInstance();
        this.#start();
      }
      throw error;
    }
  }
}
