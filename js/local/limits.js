// Edge-local decisions: a Worker isolate takes tokens from a bucket in batches (leases) and
// spends them on later requests without a round trip, and after a denial answers the same
// bucket locally until the denial's retry time has passed. The bound stays the bucket's:
// leased tokens count as still in the bucket until settled, and a lease this isolate never
// settles (it was evicted) counts as fully used at its expiry. This file is LocalLimits, its
// entries and its calls to the object; the rest of local decisions is in this folder: entry.js
// (one bucket as this isolate sees it), answers.js (the requests it answers without a call),
// share.js (a share as its holder runs it), demand.js (the demand a call reports, and the
// thresholds local decisions go by) and renewal.js (renewal ahead of time).

import { deniedInFlight, deniedInQueue, localAnswer, overBound, sharedNow } from './answers.js';
import { BUSY_MS, leaseWouldIdle, reportedRate, restartDemand, scarce, worthAShare } from './demand.js';
import {
  aboveCapacity,
  BILLION,
  bucketOf,
  Entry,
  entryName,
  leaseOf,
  leasing,
  NONE,
  noteDenial,
  plain,
  remember,
  settleAll,
  settleInCall,
} from './entry.js';
import { inBackground } from './renewal.js';
import { HeldShare } from './share.js';

// Entries kept at most: the oldest idle ones go first (a lease dropped here just expires).
const MAX_ENTRIES = 10_000;

/**
 * `limits.limit(owner, scope, stub, key, cost, policy)` when it would decide in this isolate at
 * once (a live lease or a held denial), without a promise; else null, and nothing changed.
 */
export let localDecision;

/**
 * Whether the decision `localDecision` just made is due to start the renewal of its lease
 * ahead of time; `renewLease(limits, stub, waitUntil)` starts it (`stub` a function that
 * makes the stub, `waitUntil` the request's). Two steps, so that the requests that need no
 * renewal (nearly all) make no closure.
 */
export let renewalDue;
export let renewLease;

export class LocalLimits {
  #owners = new WeakMap(); // a namespace → its number in entry names
  #nextOwner = 0;
  #entries = new Map(); // entry name → Entry, oldest first
  #marginMs;
  #maxLease;
  #clock;
  #shares;
  #maxHoldMs;
  /** The entry, key and policy of the local decision that made a renewal due (renewLease). */
  #due = null;
  #dueKey = '';
  #duePolicy = undefined;
  /** Calls made to the Durable Object, and requests answered without one. */
  calls = 0;
  localAnswers = 0;

  /**
   * `marginMs`: a lease is not spent later than this before its expiry, by this isolate's
   * clock, counted from when the call went out: what this isolate's clock may lose against
   * the object's over a lease (drift, a step back). An offset between the clocks costs
   * nothing: only durations cross.
   * `maxLease`: the most tokens asked for at once. `clock`: the time in ms (tests pass a
   * fake one; Workers' `Date.now()` by default). `shares` (default true): once a bucket
   * runs low, hold shares (a part of the bucket's refill, renewed in the background); false
   * holds plain leases only. `maxHoldMs`: the
   * longest a denial is held here (a block's whole time by default): how late this isolate
   * may learn of an `unblock`, `reset` or refund at the object.
   */
  constructor({ marginMs = 100, maxLease = 1_000, clock = Date.now, shares = true, maxHoldMs = Infinity } = {}) {
    if (!(Number.isFinite(marginMs) && marginMs >= 0 && marginMs < 10_000)) {
      throw new RangeError(`local.marginMs must be a number from 0 to 9999, got ${marginMs}`);
    }
    if (!(Number.isInteger(maxLease) && maxLease >= 0)) {
      throw new RangeError(`local.maxLease must be a whole number >= 0, got ${maxLease}`);
    }
    if (typeof clock !== 'function') throw new TypeError('local.clock must be a function');
    if (typeof shares !== 'boolean') throw new TypeError(`local.shares must be a boolean, got ${typeof shares}`);
    if (typeof maxHoldMs !== 'number') throw new TypeError(`local.maxHoldMs must be a number, got ${typeof maxHoldMs}`);
    if (!(maxHoldMs >= 1)) {
      throw new RangeError(`local.maxHoldMs must be a number >= 1 (Infinity for no limit), got ${maxHoldMs}`);
    }
    this.#maxHoldMs = maxHoldMs;
    this.#shares = shares;
    this.#marginMs = marginMs;
    this.#maxLease = maxLease;
    this.#clock = clock;
  }

  /**
   * `stub.limit(key, cost, policy)`, decided here when this isolate holds enough of a lease
   * on that bucket or a denial that still holds. `scope` names the Durable Object (with
   * `owner`, its namespace, it tells buckets of different objects apart). `stub` may be a
   * function that makes the stub: then a request decided here never makes one
   * (`idFromName` hashes the name). `waitUntil` (the request's `ctx.waitUntil`) keeps a
   * share's renewal running after the response.
   */
  async limit(owner, scope, stub, key, cost = 1, policy = undefined, waitUntil = undefined) {
    // Anything unusual goes to the object, which validates it (and throws).
    if (typeof key !== 'string' || typeof cost !== 'number' || !(cost >= 0 && cost < Infinity) || !plain(policy)) {
      this.calls += 1;
      return stubOf(stub).limit(key, cost, policy);
    }
    const entry = this.#entry(owner, scope, key, policy);
    const local = this.#decide(entry, cost, policy);
    if (local !== null) {
      if (entry.renewDue) this.#renew(entry, stub, key, policy, waitUntil);
      return this.#here(entry, local);
    }
    if (this.#shares) return this.#sharedCall(entry, stub, key, cost, policy, waitUntil);
    return this.#leasedCall(entry, stub, key, cost, policy, waitUntil);
  }

  /**
   * The decision on `entry` when this isolate makes it at once, without a call; else null.
   * Sets `entry.renewDue` when the lease or share that made it is due for renewal.
   */
  #decide(entry, cost, policy) {
    return this.#shares ? sharedNow(entry, cost, policy, this.#clock) : localAnswer(entry, cost, this.#clock);
  }

  /** Starts the renewal of the share or lease held on `entry` in the background. */
  #renew(entry, stub, key, policy, waitUntil) {
    if (entry.leasing) return;
    // (A renewal that fails leaves the share to end with its term, the lease it settled to
    // expire: fully used.)
    if (entry.share !== null) {
      inBackground(entry, () => this.#shareCall(entry, stubOf(stub), key, 0, policy, true), waitUntil);
    } else if (entry.next === null) {
      inBackground(entry, () => this.#renewal(entry, stubOf(stub), key, policy), waitUntil);
    }
  }

  /**
   * `stub.refund(key, cost)`, given back to this isolate's plain lease on that bucket when
   * the lease is live and has spent at least `cost` (the object counts the lease as taken and
   * gets its unused part when it is settled: the same as a refund there, without a call), or
   * to its live share when that has room for the whole cost (the share stays within its
   * capacity, so the shares' bound holds as for a refund at the object); otherwise a call.
   */
  async refund(owner, scope, stub, key, cost, policy = undefined) {
    const number = this.#owners.get(owner);
    const entry = number === undefined ? undefined : this.#entries.get(entryName(number, scope, key, policy));
    const lease = entry?.lease ?? null;
    const units = Math.ceil(cost * BILLION);
    const now = this.#clock();
    if (
      typeof cost === 'number' && cost > 0 && units < Infinity &&
      lease !== null && now < lease.deadline && lease.used >= units
    ) {
      lease.used -= units;
      return;
    }
    const share = entry?.share ?? null;
    if (
      share !== null && Number.isInteger(cost) && cost > 0 &&
      share.advance(now) && share.tokens + cost <= share.capacityAt(now)
    ) {
      share.add(cost, now);
      return;
    }
    this.calls += 1;
    await stubOf(stub).refund(key, cost);
  }

  /**
   * The decision of `limit()` when this isolate's live lease or held denial makes it without a
   * call and without waiting; else null (nothing changed: `limit()` decides). For the
   * middleware, which knows the decision is local: not marked for decidedHere.
   */
  #decideNow(owner, scope, key, cost, policy) {
    this.#due = null;
    if (typeof key !== 'string' || typeof cost !== 'number' || !(cost >= 0 && cost < Infinity)) return null;
    const number = this.#owners.get(owner);
    if (number === undefined || !plain(policy)) return null;
    const entry = this.#entries.get(entryName(number, scope, key, policy));
    if (entry === undefined) return null;
    // The request counts towards the demand once: here only when decided here.
    const { demand, demandSince } = entry;
    const local = this.#decide(entry, cost, policy);
    if (local === null) {
      entry.demand = demand;
      entry.demandSince = demandSince;
      return null;
    }
    this.localAnswers += 1;
    if (!local.allowed) noteDenial(entry, this.#clock());
    if (entry.renewDue) {
      this.#due = entry;
      this.#dueKey = key;
      this.#duePolicy = policy;
    }
    return local;
  }

  static {
    localDecision = (limits, owner, scope, key, cost, policy) => limits.#decideNow(owner, scope, key, cost, policy);
    renewalDue = (limits) => limits.#due !== null;
    renewLease = (limits, stub, waitUntil) => {
      const entry = limits.#due;
      limits.#due = null;
      if (entry !== null) limits.#renew(entry, stub, limits.#dueKey, limits.#duePolicy, waitUntil);
    };
  }

  /** `decision` on `entry`, made in this isolate without a call: counted, and marked (decidedHere). */
  #here(entry, decision) {
    this.localAnswers += 1;
    if (!decision.allowed) noteDenial(entry, this.#clock());
    DECIDED_HERE.add(decision);
    return decision;
  }

  /** A request plain leases and the denial cache did not decide here: a call. */
  async #leasedCall(entry, stub, key, cost, policy, waitUntil) {
    if (entry.leasing) return this.#whileInFlight(entry, stub, key, cost, policy);
    return leasing(entry, () => this.#call(entry, stubOf(stub), key, cost, policy, waitUntil));
  }

  /** A request while this isolate's call on `entry` is in flight: denied here, or a plain call. */
  #whileInFlight(entry, stub, key, cost, policy) {
    const denied = deniedInFlight(entry, cost, this.#clock) ?? deniedInQueue(entry, cost, policy);
    if (denied !== null) return this.#here(entry, denied);
    return this.#plainCall(entry, stubOf(stub), key, cost, policy);
  }

  /**
   * One call for this request only: no lease settled or taken. Denied here instead when the
   * costs of this isolate's plain calls in flight already reach what the bucket can admit
   * since the first of them was sent (its capacity plus its refills since): a burst before
   * any answer, or while a lease call is out, does not become a call per request.
   */
  async #plainCall(entry, stub, key, cost, policy) {
    const now = this.#clock();
    // A request all the same: while a lease call is in flight (a round trip may take longer
    // than BUSY_MS), the requests keep the bucket busy.
    entry.previousAt = now;
    if (entry.plainCalls === 0) entry.plainSince = now;
    const bucket = bucketOf(policy, entry.last);
    if (cost > 0 && bucket !== null && cost <= bucket.maxTokens) {
      const admissible = bucket.maxTokens + Math.floor((now - entry.plainSince) / bucket.intervalMs);
      if (entry.plainCost + cost > admissible) return this.#here(entry, overBound(entry.last, bucket));
    }
    entry.plainCalls += 1;
    entry.plainCost += cost;
    this.calls += 1;
    try {
      return remember(entry, await stub.limit(key, cost, policy), this.#clock(), this.#maxHoldMs);
    } finally {
      entry.plainCalls -= 1;
      entry.plainCost -= cost;
    }
  }

  async #call(entry, stub, key, cost, policy, waitUntil) {
    const lease = entry.lease;
    const sent = this.#clock();
    // Requests keep coming: ask for twice as much as last time (from the cost up). A lease
    // that expired partly used: about what was used. Requests far apart, or a lease that
    // would wait idle while others are denied: no lease at all.
    if (sent - entry.previousAt > BUSY_MS || (this.#shares && leaseWouldIdle(entry, policy, sent))) {
      entry.want = 0;
    } else if (lease !== null && sent >= lease.deadline) {
      entry.want = Math.floor(lease.used / BILLION);
    } else {
      entry.want = Math.min(this.#maxLease, Math.max(cost, entry.want * 2));
    }
    entry.previousAt = sent;
    // With shares, a plain call also asks for appointments (docs/SPEC.md, 11.11).
    const request = this.#shares ? { want: entry.want, queue: true } : { want: entry.want };
    const next = entry.next;
    const unsettled = [...entry.unsettled];
    // The leases held now are replaced by this call's, which settles them.
    const others = settleInCall(entry, request, sent);
    let answer;
    try {
      answer = await this.#leaseCall(stub, key, cost, policy, request, others, waitUntil);
    } catch (error) {
      // Bad input is rejected before anything is settled: the leases are still ours.
      if (error?.name === 'TypeError' || error?.name === 'RangeError') {
        entry.lease = lease;
        entry.next = next;
        entry.unsettled = unsettled;
      }
      // (Else the lease it settled is left to expire: fully used.)
      throw error;
    }
    const { lease: granted, call_after_ms: turn, ...answered } = answer;
    const received = this.#clock();
    entry.turnAt = turn === undefined ? 0 : received + turn;
    entry.longQueue = turn > received - sent;
    // A denial until the turn is held that long exactly, not backed off beyond it.
    if (turn !== undefined) entry.hold = 0;
    const decision = remember(entry, answered, received, this.#maxHoldMs, true);
    if (granted !== null && granted.tokens > 0) entry.lease = leaseOf(granted, sent, this.#marginMs);
    // This isolate's view, as in local answers: the bucket and what is left of its lease.
    return granted === null ? decision : { ...decision, remaining: decision.remaining + granted.tokens };
  }

  /**
   * `stub.limitLeased(key, cost, policy, request)`, with the `others` settles (settleAll) as
   * `stub.settle` calls of their own beside it, when the stub has that method. The answer does
   * not wait for them: `waitUntil` keeps them alive (or `await` does, when `waitUntil` is
   * `true`: in a renewal, which no request awaits).
   */
  async #leaseCall(stub, key, cost, policy, request, others, waitUntil) {
    this.calls += 1;
    if (others.length === 0 || typeof stub.settle !== 'function') return stub.limitLeased(key, cost, policy, request);
    this.calls += others.length;
    // A settle that fails leaves its lease to expire: fully used.
    const settles = Promise.all(others.map((settlement) => Promise.resolve(stub.settle(key, settlement)).catch(() => false)));
    if (waitUntil === true) return (await Promise.all([stub.limitLeased(key, cost, policy, request), settles]))[0];
    if (typeof waitUntil === 'function') waitUntil(settles);
    return stub.limitLeased(key, cost, policy, request);
  }

  /**
   * The renewal ahead of time (docs/SPEC.md, 10.5): a call of cost 0 that settles the leases
   * this isolate no longer spends and asks for the next lease, which waits until the current
   * one cannot cover a request. In the background (#renew): no request awaits it.
   */
  async #renewal(entry, stub, key, policy) {
    const sent = this.#clock();
    entry.want = Math.min(this.#maxLease, Math.max(1, entry.want * 2));
    const request = { want: entry.want };
    const others = settleAll(entry, request, sent);
    const { lease: granted, ...answered } = await this.#leaseCall(stub, key, 0, policy, request, others, true);
    remember(entry, answered, this.#clock(), this.#maxHoldMs, true);
    if (granted !== null && granted.tokens > 0) entry.next = leaseOf(granted, sent, this.#marginMs);
  }

  /**
   * A request on a bucket with shares that was not decided here: a call that asks for (or
   * tops up) a share when the bucket is short for this isolate and it has the demand for
   * one, else one of plain leases.
   */
  async #sharedCall(entry, stub, key, cost, policy, waitUntil) {
    const now = this.#clock();
    const share = entry.share;
    // While the bucket has room, plain leases serve as well and split nothing: a share is
    // asked for only once the bucket runs low and is short for this isolate (scarce), and only
    // by an isolate with the demand for one (SHARE_TOKENS; with less, plain leases and held
    // denials do better), for a whole cost (a share holds whole tokens: a fractional cost is
    // the main bucket's).
    if (
      (share === null && (!Number.isInteger(cost) || !scarce(entry, policy, now) || !worthAShare(entry, policy, now))) ||
      aboveCapacity(cost, policy, entry)
    ) {
      return this.#leasedCall(entry, stub, key, cost, policy, waitUntil);
    }
    // Before anything is known, a request made while a call is in flight makes its own.
    if (entry.leasing) return this.#whileInFlight(entry, stub, key, cost, policy);
    // Asks for a share only once requests keep coming; the first one makes a plain call.
    const busy = now - entry.previousAt <= BUSY_MS;
    entry.previousAt = now;
    if (!busy && share === null) return this.#plainCall(entry, stubOf(stub), key, cost, policy);
    return leasing(entry, () => this.#shareCall(entry, stubOf(stub), key, cost, policy, waitUntil));
  }

  /** One call that decides `cost` and asks for a share, or renews and tops up the one held. */
  async #shareCall(entry, stub, key, cost, policy, waitUntil) {
    const sent = this.#clock();
    const share = entry.share;
    const rate = reportedRate(entry, sent);
    // A top-up asks for twice the last one while the share keeps running out between calls.
    entry.want = cost === 0 ? entry.want : Math.min(this.#maxLease, Math.max(1, cost, entry.want * 2));
    // A renewal (cost 0) reports the demand and gets the next term; a top-up of a share held
    // only asks for tokens; a call without a share asks for one.
    const request = cost === 0 ? {} : { want: entry.want };
    if (share === null || cost === 0) {
      request.rate = Math.max(rate, Number.MIN_VALUE);
      entry.reportedRate = rate;
      restartDemand(entry, sent);
    }
    if (share !== null) request.renew = share.id;
    // The plain leases held until now are replaced by the share: the call that asks for it
    // settles them.
    const others = share === null ? settleInCall(entry, request, sent) : NONE;
    const answer = await this.#leaseCall(stub, key, cost, policy, request, others, waitUntil);
    const received = this.#clock();
    const { lease: granted, ...answered } = answer;
    const decision = remember(entry, answered, received, this.#maxHoldMs, true);
    if (granted?.share !== undefined) {
      // (The object grants no share without a whole token: 11.7.)
      if (share === null) entry.share = new HeldShare(granted, sent, received, this.#marginMs);
      else if (entry.share === share && share.id === granted.id) share.renewed(granted, sent, received, cost === 0);
    } else if (share === null && granted !== null && granted.tokens > 0) {
      entry.lease = leaseOf(granted, sent, this.#marginMs);
    } else if (share === null && granted !== null) {
      // The ask is on record at the object until then, instead of a share: plain leases and
      // held denials serve meanwhile.
      entry.noShareUntil = received + granted.ttl_ms;
    }
    // The answer's remaining counts what this isolate now holds: the share's tokens, or the
    // plain lease an ask for a share got instead.
    let held = 0;
    if (entry.share?.advance(received)) held = entry.share.tokens;
    else if (share === null && entry.lease !== null) held = granted?.tokens ?? 0;
    return { ...decision, remaining: decision.remaining + held };
  }

  /** The entry of bucket `key` under `policy` of the object `scope` of namespace `owner`. */
  #entry(owner, scope, key, policy) {
    let number = this.#owners.get(owner);
    if (number === undefined) {
      number = this.#nextOwner++;
      this.#owners.set(owner, number);
    }
    const name = entryName(number, scope, key, policy);
    let entry = this.#entries.get(name);
    if (entry === undefined) {
      if (this.#entries.size >= MAX_ENTRIES) this.#forgetOldest();
      entry = new Entry();
      this.#entries.set(name, entry);
    }
    return entry;
  }

  #forgetOldest() {
    for (const [name, entry] of this.#entries) {
      if (entry.leasing) continue;
      this.#entries.delete(name);
      return;
    }
  }
}

/** The decisions LocalLimits made without a call (for the middleware's decision events). */
const DECIDED_HERE = new WeakSet();

/** Whether `decision` (from LocalLimits.limit) was made in this isolate, without a call. */
export function decidedHere(decision) {
  return DECIDED_HERE.has(decision);
}

/** The stub, made now if `stub` is a function that makes it. */
const stubOf = (stub) => (typeof stub === 'function' ? stub() : stub);
