// One wasm RateLimiter behind a JavaScript object that outlives traps: after the instance
// is replaced, the next call makes a new RateLimiter in it with the same options. Reads the
// clock once per call, and sends the common arguments down the binding's fast paths.
import { FastAnswer, RateLimiter, wasmMemory } from './rate_limiter.js';

const { Allowed, UseGeneralPath } = FastAnswer;

function release(cell) {
  if (cell.limiter === undefined) return;
  if (cell.generation === cell.instance.generation) cell.limiter.free();
  // Disarm its own finalizer, which would free the pointer in the new instance.
  else cell.limiter.__destroy_into_raw();
}

/**
 * The cells whose RateLimiter is alive, for runtimes without finalizers. Each RateLimiter
 * made inspects the next two, round-robin, and frees one that holds nothing at this moment
 * (every bucket full, no block, permit or lease in force): its owner, if it is still in use,
 * makes a new one with the same options at its next call, and cannot tell the difference.
 */
class IdleSweep {
  #cells = [];
  #next = 0;

  add(cell) {
    for (let i = 0; i < 2 && this.#cells.length > 0; i++) {
      if (this.#next >= this.#cells.length) this.#next = 0;
      const other = this.#cells[this.#next];
      const current = other.generation === other.instance.generation;
      if (other === cell || (current && !other.limiter.holdsNothing(Date.now()))) {
        this.#next += 1;
        continue;
      }
      // Held nothing, or lived in an instance a trap replaced: its owner makes a new one.
      release(other);
      other.limiter = undefined;
      other.generation = -1;
      other.listed = false;
      this.#cells[this.#next] = this.#cells[this.#cells.length - 1];
      this.#cells.pop();
    }
    if (cell.listed) return; // made anew after a trap, still listed from before
    cell.listed = true;
    this.#cells.push(cell);
  }

  /** RateLimiters alive in wasm memory. */
  get size() {
    return this.#cells.length;
  }
}

/** How many RateLimiters are alive, where runtimes have no finalizers (else undefined). */
export const liveLimiters = () => idle?.size;

// A RateLimiter lives in wasm memory: free it with its owner, unless its instance is gone.
// Compatibility dates before 2025-05-05 have no FinalizationRegistry: there, each new
// RateLimiter instead frees those of others that hold nothing (docs/SPEC.md, section 5).
const owners = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry(release) : undefined;
const idle = owners === undefined ? new IdleSweep() : undefined;

export class LocalLimiter {
  // Held apart from `this` so the finalizer can reach the RateLimiter after `this` is gone.
  #cell;

  /** `instance`: the WasmInstance the RateLimiter lives in. */
  constructor(instance) {
    this.#cell = { instance, limiter: undefined, generation: -1, options: undefined, incarnation: 0, listed: false };
    owners?.register(this, this.#cell);
  }

  /**
   * Changes whenever a new RateLimiter replaces the previous one (after a trap, or after the
   * idle sweep freed one that held nothing). A new one holds no bucket yet.
   */
  get incarnation() {
    this.#current();
    return this.#cell.incarnation;
  }

  /** The instance options, all fields filled in. */
  get options() {
    return this.#current().options;
  }

  /** Returns whether the options changed; `load` as the binding's `setOptions` takes it. */
  setOptions(options, load = undefined) {
    const changed = this.#guard(setOptionsNow, options, load);
    // Kept so that a replacement RateLimiter starts with the same options.
    this.#cell.options = this.#cell.limiter.options;
    return changed;
  }

  check(key, cost) {
    return this.#guard(checkNow, key, cost);
  }

  consume(key, cost) {
    return this.#guard(consumeNow, key, cost);
  }

  getStatus(key) {
    return this.#guard(getStatusNow, key);
  }

  reset(key) {
    this.#guard(resetNow, key);
  }

  limit(key, cost, policy) {
    return this.#guard(limitNow, key, cost, policy);
  }

  /** `load` as the binding's `limitAll` takes it. */
  limitAll(requests, load = undefined) {
    return this.#guard(limitAllNow, requests, load);
  }

  /** `limitAll` with a permit `{ key, cost?, policy }`; `load` and `loadGate` as the binding takes them. */
  limitAllWithPermit(requests, permit, load = undefined, loadGate = undefined) {
    return this.#guard(limitAllWithPermitNow, requests, permit, load, loadGate);
  }

  /** `limit`, settling `lease.settle` first and granting up to `lease.want` for later. */
  limitLeased(key, cost, policy, lease) {
    return this.#guard(limitLeasedNow, key, cost, policy, lease);
  }

  /** Ends the lease `{ id, used }` of `key`; false when it had ended already. */
  settle(key, lease) {
    return this.#guard(settleNow, key, lease);
  }

  refund(key, tokens) {
    this.#guard(refundNow, key, tokens);
  }

  /** Whether the string `key` has a bucket in memory. */
  holds(key) {
    return this.#guard(holdsNow, key);
  }

  /** `{ bytes, full_at_ms, has_policy }`, or undefined when the bucket is full. */
  snapshot(key) {
    return this.#guard(snapshotNow, key);
  }

  restore(key, bytes) {
    this.#guard(restoreNow, key, bytes);
  }

  /** A permit of `cost` on `key`'s gate under `policy` (`{ max_in_flight, ttl_seconds? }`). */
  acquire(key, cost, policy) {
    return this.#guard(acquireNow, key, cost, policy);
  }

  /** Ends the live permit `id` of `key`: `{ released, in_flight }`. */
  release(key, id) {
    return this.#guard(releaseNow, key, id);
  }

  gateStatus(key) {
    return this.#guard(gateStatusNow, key);
  }

  /** `{ bytes, ends_at_ms }` of `key`'s live permits, or undefined when it has none. */
  gateSnapshot(key) {
    return this.#guard(gateSnapshotNow, key);
  }

  /** Replaces `key`'s gate by the permits of `bytes` (undefined: none). */
  restoreGate(key, bytes) {
    this.#guard(restoreGateNow, key, bytes);
  }

  /** Blocks `key` for `seconds`; returns when the block ends (epoch ms). */
  block(key, seconds) {
    return this.#guard(blockNow, key, seconds);
  }

  /** Ends the block of `key`; whether one was in force. */
  unblock(key) {
    return this.#guard(unblockNow, key);
  }

  /** `{ key, blocked_until_ms, blocked_for_ms }` of every block in force, in no order. */
  blocks() {
    return this.#guard(blocksNow);
  }

  /** When the block of `key` in force ends (epoch ms), or undefined. */
  blockedUntil(key) {
    return this.#guard(blockedUntilNow, key);
  }

  /** Puts back a block of `key` that ends at `untilMs` (epoch ms). */
  restoreBlock(key, untilMs) {
    this.#guard(restoreBlockNow, key, untilMs);
  }

  /** `{ key, bytes, full_at_ms }` of every bucket without a policy of its own. */
  snapshotsWithoutPolicy() {
    return this.#guard(snapshotsWithoutPolicyNow);
  }

  #guard(call, a, b, c, d) {
    const cell = this.#cell;
    return cell.instance.guard(call, this.#current(), a, b, c, d);
  }

  #current() {
    const cell = this.#cell;
    if (cell.generation !== cell.instance.generation) {
      release(cell);
      const seed = crypto.getRandomValues(new Uint32Array(2));
      cell.limiter = new RateLimiter(seed[0], seed[1]);
      cell.generation = cell.instance.generation;
      cell.incarnation += 1;
      // Where its limitInto decisions are read.
      cell.limiter.slots = slotsOf(cell.limiter);
      // The key of its last *Text call (consumeNow): none yet.
      cell.limiter.textKey = null;
      if (cell.options !== undefined) cell.limiter.setOptions(Date.now(), cell.options);
      idle?.add(cell);
    }
    return cell.limiter;
  }
}

// The common case goes through the *Text methods, which take the key as a string and the
// cost as a number; anything else (or a string with lone surrogates, which UTF-8 cannot
// carry) takes the general path, where the binding checks every value.
const isFast = (key, cost) => typeof key === 'string' && typeof cost === 'number' && key.isWellFormed();

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

// Each call as a plain function of the RateLimiter and its arguments (see WasmInstance.guard).

function setOptionsNow(limiter, options, load) {
  return limiter.setOptions(Date.now(), options, load);
}

// The *Same methods decide on the key of the limiter's last *Text call, which `textKey`
// records: the same string again (a Durable Object per client mostly sees one key) does not
// cross into wasm a second time.
function checkNow(limiter, key, cost) {
  let answer = UseGeneralPath;
  if (key === limiter.textKey && typeof cost === 'number') {
    answer = limiter.checkSame(Date.now(), cost);
  } else if (isFast(key, cost)) {
    answer = limiter.checkText(Date.now(), key, cost);
    limiter.textKey = key;
  }
  return answer === UseGeneralPath ? limiter.check(Date.now(), key, cost) : answer === Allowed;
}

function consumeNow(limiter, key, cost) {
  let answer = UseGeneralPath;
  if (key === limiter.textKey && typeof cost === 'number') {
    answer = limiter.consumeSame(Date.now(), cost);
  } else if (isFast(key, cost)) {
    answer = limiter.consumeText(Date.now(), key, cost);
    limiter.textKey = key;
  }
  return answer === UseGeneralPath ? limiter.consume(Date.now(), key, cost) : answer === Allowed;
}

function getStatusNow(limiter, key) {
  return typeof key === 'string' && key.isWellFormed()
    ? limiter.getStatusText(Date.now(), key)
    : limiter.getStatus(Date.now(), key);
}

function resetNow(limiter, key) {
  limiter.reset(key);
}

function limitNow(limiter, key, cost, policy) {
  if (isFast(key, cost) && readPolicy(policy)) {
    const [max, every] = policyNumbers;
    const answer = limiter.limitInto(Date.now(), key, cost, policy !== undefined, max, every);
    if (answer !== UseGeneralPath) return decisionFromSlots(limiter, answer === Allowed);
  }
  return limiter.limit(Date.now(), key, cost, policy);
}

// The limiter's decision slots as a view of wasm memory. Growing the memory detaches the
// buffer under a view, whose length is then 0: the view is made anew (a trap's new instance
// makes a new limiter, with its own view).
function slotsOf(limiter) {
  return new Float64Array(wasmMemory().buffer, limiter.decisionSlots(), 5);
}

/** The decision `limitInto` left in the limiter's slots, as the general path builds it. */
function decisionFromSlots(limiter, allowed) {
  let slots = limiter.slots;
  if (slots.length === 0) slots = limiter.slots = slotsOf(limiter);
  const retry = slots[3];
  return {
    allowed,
    remaining: slots[0],
    limit: slots[1],
    reset_in_ms: slots[2],
    retry_after_ms: retry < 0 ? null : retry,
    window_ms: slots[4],
  };
}

function limitLeasedNow(limiter, key, cost, policy, lease) {
  return limiter.limitLeased(Date.now(), key, cost, policy, lease);
}

function settleNow(limiter, key, lease) {
  return limiter.settle(Date.now(), key, lease);
}

function refundNow(limiter, key, tokens) {
  limiter.refund(Date.now(), key, tokens);
}

function limitAllNow(limiter, requests, load) {
  return limiter.limitAll(Date.now(), requests, load);
}

function holdsNow(limiter, key) {
  return key.isWellFormed() ? limiter.holdsText(key) : limiter.holds(key);
}

function snapshotNow(limiter, key) {
  return limiter.snapshot(key);
}

function restoreNow(limiter, key, bytes) {
  limiter.restore(Date.now(), key, bytes);
}

function limitAllWithPermitNow(limiter, requests, permit, load, loadGate) {
  return limiter.limitAllWithPermit(Date.now(), requests, permit, load, loadGate);
}

function acquireNow(limiter, key, cost, policy) {
  return limiter.acquire(Date.now(), key, cost, policy);
}

function releaseNow(limiter, key, id) {
  return limiter.release(Date.now(), key, id);
}

function gateStatusNow(limiter, key) {
  return limiter.gateStatus(Date.now(), key);
}

function gateSnapshotNow(limiter, key) {
  return limiter.gateSnapshot(Date.now(), key);
}

function restoreGateNow(limiter, key, bytes) {
  limiter.restoreGate(Date.now(), key, bytes);
}

function blockNow(limiter, key, seconds) {
  return limiter.block(Date.now(), key, seconds);
}

function unblockNow(limiter, key) {
  return limiter.unblock(Date.now(), key);
}

function blocksNow(limiter) {
  return limiter.blocks(Date.now());
}

function blockedUntilNow(limiter, key) {
  return limiter.blockedUntil(Date.now(), key);
}

function restoreBlockNow(limiter, key, untilMs) {
  limiter.restoreBlock(Date.now(), key, untilMs);
}

function snapshotsWithoutPolicyNow(limiter) {
  return limiter.snapshotsWithoutPolicy();
}
