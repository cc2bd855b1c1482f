// What makes DurableRateLimiterServer durable: a LocalLimiter plus a snapshot of every bucket
// in storage. Nothing is loaded at wake-up; a call on a key that memory does not hold first
// restores that key's snapshot, and every call that changes a bucket saves its snapshot
// (a full bucket: none), inside the call, so it commits with the call's output.

// A writing call also drops the snapshots of buckets that have become full, at most this often.
const DROP_FULL_EVERY_MS = 10_000;

export class DurableLimiter {
  #local;
  #buckets;
  #droppedAt = -Infinity;
  /** The incarnation of the local limiter into which every snapshot was loaded, if any. */
  #loadedAllInto = -1;
  /** The incarnation of the local limiter into which the blocks were loaded. */
  #blocksLoadedInto = -1;

  /** `local`: a LocalLimiter; `buckets`: its storage (storage.js). */
  constructor(local, buckets) {
    this.#local = local;
    this.#buckets = buckets;
    const options = buckets.options();
    if (options !== undefined) local.setOptions(options);
  }

  setOptions(options) {
    let loaded = false;
    // Called only when the options change: how a bucket meets new options depends on when
    // it was last refilled, which memory knows once every snapshot is in it.
    const loadAll = () => {
      if (this.#holdsAll()) return [];
      loaded = true;
      return Array.from(this.#buckets.snapshots());
    };
    const changed = this.#local.setOptions(options, loadAll);
    if (loaded) this.#loadedAllInto = this.#local.incarnation;
    if (changed) {
      this.#buckets.saveOptions(this.#local.options);
      this.#buckets.replaceSnapshotsWithoutPolicy(this.#local.snapshotsWithoutPolicy());
    }
  }

  check(key, cost) {
    this.#loadBlocks();
    this.#load(key);
    return this.#local.check(key, cost);
  }

  consume(key, cost) {
    this.#loadBlocks();
    this.#load(key);
    const allowed = this.#local.consume(key, cost);
    if (allowed) this.#save(key);
    return allowed;
  }

  getStatus(key) {
    this.#load(key);
    return this.#local.getStatus(key);
  }

  reset(key) {
    this.#local.reset(key);
    this.#buckets.deleteSnapshot(key);
  }

  limit(key, cost, policy) {
    this.#loadBlocks();
    this.#load(key);
    const decision = this.#local.limit(key, cost, policy);
    // A denied call without a policy changes nothing that needs saving.
    if (decision.allowed || policy !== undefined) this.#save(key);
    if (!decision.allowed) this.#savePenalty(key);
    return decision;
  }

  limitLeased(key, cost, policy, lease) {
    this.#loadBlocks();
    this.#load(key);
    const decision = this.#local.limitLeased(key, cost, policy, lease);
    // As for limit: a denied call without a policy or a lease request changes nothing. (The
    // lease request is not read here: the binding read it once.)
    if (decision.allowed || policy !== undefined || lease !== undefined) this.#save(key);
    if (!decision.allowed) this.#savePenalty(key);
    return decision;
  }

  settle(key, lease) {
    this.#load(key);
    const settled = this.#local.settle(key, lease);
    if (settled) this.#save(key);
    return settled;
  }

  refund(key, tokens) {
    this.#load(key);
    this.#local.refund(key, tokens);
    this.#save(key);
  }

  limitAll(requests) {
    return this.#allOrNothing((load) => this.#local.limitAll(requests, load));
  }

  limitAllWithPermit(requests, permit) {
    let gateKey;
    const loadGate = (key) => {
      gateKey = key;
      return this.#buckets.gate(key);
    };
    const decision = this.#allOrNothing((load) => this.#local.limitAllWithPermit(requests, permit, load, loadGate));
    if (decision.permit.id !== null) this.#saveGate(gateKey);
    return decision;
  }

  /**
   * A limitAll call (`call(load)`): the binding reads the requests once and names their keys
   * to `load`, which restores those memory lacks; each is saved after, and a denial's
   * penalties too.
   */
  #allOrNothing(call) {
    this.#loadBlocks();
    const holdsAll = this.#holdsAll();
    const keys = [];
    const load = (key, held) => {
      keys.push(key);
      return held || holdsAll ? undefined : this.#buckets.snapshot(key);
    };
    const decision = call(load);
    for (const key of keys) this.#save(key);
    if (!decision.allowed) for (const key of keys) this.#savePenalty(key);
    return decision;
  }

  #holdsAll() {
    // The incarnation first: after a trap, memory is a new limiter that holds nothing yet.
    return this.#local.incarnation === this.#loadedAllInto;
  }

  // Blocks are few and every call must see them: all of them are read into memory at the
  // first call of each incarnation of the limiter, and each change is written at once.
  block(key, seconds) {
    this.#loadBlocks();
    const until = this.#local.block(key, seconds);
    this.#buckets.saveBlock(key, until);
    this.#buckets.dropEndedBlocks(Date.now());
    return until;
  }

  unblock(key) {
    this.#loadBlocks();
    const was = this.#local.unblock(key);
    this.#buckets.deleteBlock(key);
    return was;
  }

  blocks() {
    this.#loadBlocks();
    return this.#local.blocks();
  }

  /** After a denial: a block of `key` in force (a penalty may have begun one) is saved. */
  #savePenalty(key) {
    if (typeof key !== 'string') return;
    const until = this.#local.blockedUntil(key);
    if (until !== undefined) this.#buckets.saveBlock(key, until);
  }

  #loadBlocks() {
    const incarnation = this.#local.incarnation;
    if (this.#blocksLoadedInto === incarnation) return;
    this.#blocksLoadedInto = incarnation;
    for (const [key, until] of this.#buckets.blocks(Date.now())) this.#local.restoreBlock(key, until);
  }

  // A gate is read from storage before every call on it (its row is the truth: memory may
  // have swept it, or be a new limiter after a trap) and written after every change.
  acquire(key, cost, policy) {
    this.#loadGate(key);
    const permit = this.#local.acquire(key, cost, policy);
    if (permit.allowed) this.#saveGate(key);
    return permit;
  }

  release(key, id) {
    this.#loadGate(key);
    const released = this.#local.release(key, id);
    if (released.released) this.#saveGate(key);
    return released;
  }

  gateStatus(key) {
    this.#loadGate(key);
    return this.#local.gateStatus(key);
  }

  #loadGate(key) {
    // Anything but a string goes to the engine, which rejects it.
    if (typeof key === 'string') this.#local.restoreGate(key, this.#buckets.gate(key));
  }

  #saveGate(key) {
    const gate = this.#local.gateSnapshot(key);
    if (gate === undefined) this.#buckets.deleteGate(key);
    else this.#buckets.saveGate(key, gate);
    this.#buckets.dropEndedGates(Date.now());
  }

  /** Restores the snapshot of `key` if memory does not hold its bucket. */
  #load(key) {
    // Anything but a string goes to the engine, which rejects it.
    if (typeof key !== 'string' || this.#holdsAll() || this.#local.holds(key)) return;
    const bytes = this.#buckets.snapshot(key);
    if (bytes !== undefined) this.#local.restore(key, bytes);
  }

  /** Saves the snapshot of `key` as the last call left it. */
  #save(key) {
    const snapshot = this.#local.snapshot(key);
    if (snapshot === undefined) this.#buckets.deleteSnapshot(key);
    else this.#buckets.saveSnapshot(key, snapshot);
    const now = Date.now();
    if (now - this.#droppedAt >= DROP_FULL_EVERY_MS) {
      this.#droppedAt = now;
      this.#buckets.dropFull(now);
    }
  }
}
