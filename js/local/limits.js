// LocalLimits (docs/SPEC.md, 10.5 and 11.9): an isolate spends a bucket's tokens in batches (leases or a
// share) and repeats a denial until its retry time, without a round trip. Leased tokens count as still
// in the bucket until settled, or fully used at expiry, so the bound stays the bucket's.

import { deniedInFlight, localAnswer, overBound, sharedNow } from './answers.js';
import { BUSY_MS, leaseWouldIdle, reportedRate, restartDemand, scarce, underPressure, worthAShare } from './demand.js';
import {
  aboveCapacity, backOffTopUps, BILLION, bucketOf, Entry, entryName, leaseOf, leasing, NONE, noteDenial, noteRoundTrip,
  remember, settleAll, settleInCall, settlement, slowObject, unheard,
} from './entry.js';
import { inBackground, topUpRenews } from './renewal.js';
import { HeldShare } from './share.js';

// Entries kept at most: the oldest idle ones go first (a lease dropped here just expires).
const MAX_ENTRIES = 10_000;

/** `limits.limit(owner, scope, stub, key, cost, policy)` if decided here at once; else null, unchanged. */
export let localDecision;

/** Whether `localDecision`'s decision starts a renewal; `renewLease(limits, stub, waitUntil)` starts it. */
export let renewalDue, renewLease;

export class LocalLimits {
  #owners = new WeakMap(); // a namespace → its number in entry names
  #nextOwner = 0;
  #entries = new Map(); // entry name → Entry, oldest first
  #marginMs;
  #maxLease;
  #clock;
  #shares;
  #maxHoldMs;
  #due = null; // { entry, key, policy } of the local decision that made a renewal due (renewLease)
  #nextId = null; // the id the next new lease or share is asked for as (from a random point below 2^53)
  /** Calls made to the Durable Object, and requests answered without one. */
  calls = 0;
  localAnswers = 0;

  /**
   * `marginMs`: leases stop this long before their expiry (docs/SPEC.md, 10.4); `maxLease`: the most tokens
   * asked for at once; `clock`: ms; `shares`: false holds plain leases only; `maxHoldMs`: the longest hold.
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

  /** `stub.limit(key, cost, policy)`, decided here if it can be; `stub` may be a function making the stub. */
  async limit(owner, scope, stub, key, cost = 1, policy = undefined, waitUntil = undefined) {
    if (!usual(key, cost, policy)) {
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

  #decide(entry, cost, policy) {
    return this.#shares ? sharedNow(entry, cost, policy, this.#clock) : localAnswer(entry, cost, this.#clock);
  }

  // In the background: a renewal that fails leaves the share to end with its term, the lease to expire.
  #renew(entry, stub, key, policy, waitUntil) {
    if (entry.leasing) return;
    if (entry.share !== null) {
      inBackground(entry, () => this.#shareCall(entry, stubOf(stub), key, 0, policy, true), waitUntil);
    } else if (entry.next === null) {
      inBackground(entry, () => this.#renewal(entry, stubOf(stub), key, policy), waitUntil);
    }
  }

  /** `stub.refund(key, cost)`, given back to a live lease that spent `cost`, or a share with room for it. */
  async refund(owner, scope, stub, key, cost, policy = undefined) {
    const entry = this.#find(owner, scope, key, policy);
    const lease = entry?.lease ?? null;
    const units = Math.ceil(cost * BILLION);
    const now = this.#clock();
    const live = lease !== null && now < lease.deadline;
    if (typeof cost === 'number' && cost > 0 && units < Infinity && live && lease.used >= units) {
      lease.used -= units;
      return;
    }
    const share = entry?.share ?? null;
    const liveShare = share !== null && Number.isInteger(cost) && cost > 0 && share.advance(now);
    if (liveShare && share.tokens + cost <= share.capacityAt(now)) {
      share.add(cost, now);
      return;
    }
    this.calls += 1;
    await stubOf(stub).refund(key, cost);
  }

  // localDecision: the middleware knows the decision is local, so it is not marked for decidedHere.
  #decideNow(owner, scope, key, cost, policy) {
    this.#due = null;
    const entry = usual(key, cost, policy) ? this.#find(owner, scope, key, policy) : undefined;
    if (entry === undefined) return null;
    // The request counts towards the demand once: here only when decided here.
    const { demand, demandSince } = entry;
    const local = this.#decide(entry, cost, policy);
    if (local === null) {
      entry.demand = demand;
      entry.demandSince = demandSince;
      return null;
    }
    this.#here(entry, local, false);
    if (entry.renewDue) this.#due = { entry, key, policy };
    return local;
  }

  static {
    localDecision = (limits, owner, scope, key, cost, policy) => limits.#decideNow(owner, scope, key, cost, policy);
    renewalDue = (limits) => limits.#due !== null;
    renewLease = (limits, stub, waitUntil) => {
      const due = limits.#due;
      limits.#due = null;
      if (due !== null) limits.#renew(due.entry, stub, due.key, due.policy, waitUntil);
    };
  }

  // `decision` on `entry`, made here without a call: counted, and marked for decidedHere.
  #here(entry, decision, mark = true) {
    this.localAnswers += 1;
    if (!decision.allowed) noteDenial(entry, this.#clock());
    if (mark) DECIDED_HERE.add(decision);
    return decision;
  }

  async #leasedCall(entry, stub, key, cost, policy, waitUntil) {
    if (entry.leasing) return this.#whileInFlight(entry, stub, key, cost, policy);
    return leasing(entry, () => this.#call(entry, stubOf(stub), key, cost, policy, waitUntil));
  }

  // A request while this isolate's call on `entry` is in flight: denied here, or a plain call.
  #whileInFlight(entry, stub, key, cost, policy) {
    const denied = deniedInFlight(entry, cost, policy, this.#clock);
    if (denied !== null) return this.#here(entry, denied);
    return this.#plainCall(entry, stubOf(stub), key, cost, policy);
  }

  // A call for this request only, unless the plain calls in flight fill the bucket (docs/SPEC.md, 10.5).
  async #plainCall(entry, stub, key, cost, policy) {
    const now = this.#clock();
    // A request all the same: while a lease call is in flight, requests keep the bucket busy.
    entry.previousAt = now;
    if (entry.plainSent.length === 0) entry.plainSince = now;
    const bucket = bucketOf(policy, entry.last);
    if (cost > 0 && bucket !== null && cost <= bucket.maxTokens) {
      const admissible = bucket.maxTokens + Math.floor((now - entry.plainSince) / bucket.intervalMs);
      // Near the limit, a call behind others that are late would only lengthen the object's queue.
      const behind = underPressure(entry) && slowObject(entry, now);
      if (entry.plainCost + cost > admissible || behind) return this.#here(entry, overBound(entry.last, bucket));
    }
    entry.plainCost += cost;
    entry.plainSent.push(now);
    this.calls += 1;
    try {
      const answer = await stub.limit(key, cost, policy);
      const received = this.#clock();
      noteRoundTrip(entry, now, received);
      return remember(entry, answer, received, this.#maxHoldMs);
    } finally {
      entry.plainCost -= cost;
      entry.plainSent.splice(entry.plainSent.indexOf(now), 1);
    }
  }

  // Now, as the time the one lease call in flight on `entry` went out (slowObject reads it).
  #sendsLeaseCall(entry) {
    entry.leaseSent = this.#clock();
    return entry.leaseSent;
  }

  // The call that settles the leases held and asks for the next one.
  async #call(entry, stub, key, cost, policy, waitUntil) {
    const lease = entry.lease;
    const sent = this.#sendsLeaseCall(entry);
    // Requests keep coming: twice as much as last time (from the cost up); after a lease that expired
    // partly used, what was used; requests far apart, or a lease that would wait idle: none.
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
    if (entry.want > 0) request.id = this.#leaseId();
    const next = entry.next;
    const unsettled = [...entry.unsettled];
    const { others, settled } = settleInCall(entry, request, sent);
    let answer;
    let received;
    try {
      [answer, received] = await this.#exchange(entry, settled, request, sent, () =>
        this.#leaseCall(entry, stub, key, cost, policy, request, others, waitUntil));
    } catch (error) {
      // Bad input is rejected before anything is settled: the leases are still ours.
      if (error?.name === 'TypeError' || error?.name === 'RangeError') {
        entry.lease = lease;
        entry.next = next;
        entry.unsettled = unsettled;
      }
      throw error;
    }
    const { lease: granted, call_after_ms: turn, ...answered } = answer;
    entry.turnAt = turn === undefined ? 0 : received + turn;
    entry.longQueue = turn > received - sent;
    // A denial until the turn is held that long exactly, not backed off beyond it.
    if (turn !== undefined) entry.hold = 0;
    const decision = remember(entry, answered, received, this.#maxHoldMs, true);
    if (granted !== null && granted.tokens > 0) entry.lease = leaseOf(granted, sent, this.#marginMs);
    // As in local answers, `remaining` counts what is left of the lease.
    return granted === null ? decision : { ...decision, remaining: decision.remaining + granted.tokens };
  }

  // `stub.limitLeased(...)` and the settles of the `others` leases beside it, awaited only in a renewal
  // (`waitUntil` true). A settle that fails is sent again by the next call (docs/SPEC.md, 10.5).
  async #leaseCall(entry, stub, key, cost, policy, request, others, waitUntil) {
    this.calls += 1;
    if (others.length === 0 || typeof stub.settle !== 'function') return stub.limitLeased(key, cost, policy, request);
    this.calls += others.length;
    const settle = (lease) => Promise.resolve(stub.settle(key, settlement(lease))).catch(() => void entry.unsettled.push(lease));
    const settles = Promise.all(others.map(settle));
    if (waitUntil === true) return (await Promise.all([stub.limitLeased(key, cost, policy, request), settles]))[0];
    if (typeof waitUntil === 'function') waitUntil(settles);
    return stub.limitLeased(key, cost, policy, request);
  }

  // The renewal ahead of time (docs/SPEC.md, 10.5): a call of cost 0 that asks for the next lease.
  async #renewal(entry, stub, key, policy) {
    const sent = this.#sendsLeaseCall(entry);
    entry.want = Math.min(this.#maxLease, Math.max(1, entry.want * 2));
    const request = { want: entry.want, id: this.#leaseId() };
    const { others, settled } = settleAll(entry, request, sent);
    const [{ lease: granted, ...answered }, received] = await this.#exchange(entry, settled, request, sent, () =>
      this.#leaseCall(entry, stub, key, 0, policy, request, others, true));
    remember(entry, answered, received, this.#maxHoldMs, true);
    if (granted !== null && granted.tokens > 0) entry.next = leaseOf(granted, sent, this.#marginMs);
  }

  // A call for a share (or a top-up) once the bucket is scarce and the demand worth one (docs/SPEC.md, 11.9).
  async #sharedCall(entry, stub, key, cost, policy, waitUntil) {
    const now = this.#clock();
    const share = entry.share;
    if (
      (share === null && (!Number.isInteger(cost) || !scarce(entry, policy, now) || !worthAShare(entry, policy, now))) ||
      aboveCapacity(cost, policy, entry)
    ) {
      return this.#leasedCall(entry, stub, key, cost, policy, waitUntil);
    }
    if (entry.leasing) return this.#whileInFlight(entry, stub, key, cost, policy);
    // Asks for a share only once requests keep coming; the first one makes a plain call.
    const busy = now - entry.previousAt <= BUSY_MS;
    entry.previousAt = now;
    if (!busy && share === null) return this.#plainCall(entry, stubOf(stub), key, cost, policy);
    return leasing(entry, () => this.#shareCall(entry, stubOf(stub), key, cost, policy, waitUntil));
  }

  // A call that decides `cost` and asks for a share, or renews (cost 0) or tops up the one held.
  async #shareCall(entry, stub, key, cost, policy, waitUntil) {
    const sent = this.#sendsLeaseCall(entry);
    const share = entry.share;
    const rate = reportedRate(entry, sent);
    // A top-up asks for twice the last one while the share keeps running out between calls.
    entry.want = cost === 0 ? entry.want : Math.min(this.#maxLease, Math.max(1, cost, entry.want * 2));
    // A renewal or an ask for a share reports the demand; a top-up only asks for tokens, unless
    // it renews the share too.
    const request = cost === 0 ? {} : { want: entry.want };
    const renewing = share !== null && (cost === 0 || topUpRenews(entry, share, policy, sent));
    if (share === null || renewing) {
      request.rate = Math.max(rate, Number.MIN_VALUE);
      entry.reportedRate = rate;
      restartDemand(entry, sent);
    }
    if (share !== null) request.renew = share.id;
    else request.id = this.#leaseId();
    // The plain leases held are replaced by the share: the call that asks for it settles them (again
    // at the next call if it fails).
    const { others, settled } = share === null ? settleInCall(entry, request, sent) : { others: NONE, settled: NONE };
    const [{ lease: granted, ...answered }, received] = await this.#exchange(entry, settled, request, sent, () =>
      this.#leaseCall(entry, stub, key, cost, policy, request, others, waitUntil));
    const decision = remember(entry, answered, received, this.#maxHoldMs, true);
    if (share !== null && cost > 0) backOffTopUps(entry, answered, received);
    if (granted?.share !== undefined) {
      if (share === null) entry.share = new HeldShare(granted, sent, received, this.#marginMs);
      else if (entry.share === share && share.id === granted.id) share.renewed(granted, sent, received, renewing);
    } else if (share === null && granted !== null && granted.tokens > 0) {
      entry.lease = leaseOf(granted, sent, this.#marginMs);
    } else if (share === null && granted !== null) {
      // The ask is on record at the object until then, instead of a share (docs/SPEC.md, 11.7).
      entry.noShareUntil = received + granted.ttl_ms;
    }
    // `remaining` counts what this isolate now holds: the share's tokens, or the lease got instead.
    let held = 0;
    if (entry.share?.advance(received)) held = entry.share.tokens;
    else if (share === null && entry.lease !== null) held = granted?.tokens ?? 0;
    return { ...decision, remaining: decision.remaining + held };
  }

  // `[answer, received]` of `call()`, a lease call sent at `sent` with `request` that settles `settled`. If it
  // fails, the next call settles them again, and the one it asked for as `request.id` as unused (docs/SPEC.md,
  // 10.5).
  async #exchange(entry, settled, request, sent, call) {
    let answer;
    try {
      answer = await call();
    } catch (error) {
      entry.unsettled.unshift(...settled);
      if (request.id !== undefined) entry.unsettled.push(unheard(request.id, sent));
      throw error;
    }
    const received = this.#clock();
    noteRoundTrip(entry, sent, received);
    return [answer, received];
  }

  // The id a call asks its new lease or share to have, so that the next call can settle it if the answer
  // never comes (docs/SPEC.md, 10.5). Counted up from a random point, chosen at the first call.
  #leaseId() {
    if (this.#nextId === null) this.#nextId = Math.floor(Math.random() * 2 ** 53);
    const id = this.#nextId;
    this.#nextId = (this.#nextId + 1) % 2 ** 53;
    return id;
  }

  #entry(owner, scope, key, policy) {
    if (!this.#owners.has(owner)) this.#owners.set(owner, this.#nextOwner++);
    const name = entryName(this.#owners.get(owner), scope, key, policy);
    let entry = this.#entries.get(name);
    if (entry === undefined) {
      if (this.#entries.size >= MAX_ENTRIES) this.#forgetOldest();
      entry = new Entry();
      this.#entries.set(name, entry);
    }
    return entry;
  }

  #find(owner, scope, key, policy) {
    const number = this.#owners.get(owner);
    return number === undefined ? undefined : this.#entries.get(entryName(number, scope, key, policy));
  }

  #forgetOldest() {
    for (const [name, entry] of this.#entries) {
      if (entry.leasing) continue;
      this.#entries.delete(name);
      return;
    }
  }
}


const DECIDED_HERE = new WeakSet();

/** Whether `decision` (from LocalLimits.limit) was made in this isolate, without a call. */
export function decidedHere(decision) {
  return DECIDED_HERE.has(decision);
}

const stubOf = (stub) => (typeof stub === 'function' ? stub() : stub);

// Whether to decide here: anything unusual goes to the object, which validates it (and throws).
function usual(key, cost, policy) {
  if (typeof key !== 'string' || typeof cost !== 'number' || !(cost >= 0 && cost < Infinity)) return false;
  if (policy === undefined) return true;
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) return false;
  return Object.keys(policy).every((name) => POLICY_FIELDS.includes(name));
}

const POLICY_FIELDS = ['max_tokens', 'refill_every_seconds', 'block_seconds'];
