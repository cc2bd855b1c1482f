// Edge-local decisions: a Worker isolate takes tokens from a bucket in batches (leases) and
// spends them on later requests without a round trip, and after a denial answers the same
// bucket locally until the denial's retry time has passed. The bound stays the bucket's:
// leased tokens count as still in the bucket until settled, and a lease this isolate never
// settles (it was evicted) counts as fully used at its expiry.

import { HeldShare } from './share.js';

const BILLION = 1e9;

// Entries kept at most: the oldest idle ones go first (a lease dropped here just expires).
const MAX_ENTRIES = 10_000;

// A lease is asked for only when requests on a bucket come at least this often: at lower
// rates every request makes its own call, exactly as without local decisions (a leased token
// waits for the isolate's next request, and no other isolate can use it meanwhile).
const BUSY_MS = 100;

// The longest a denial of this isolate's own lease call is held beyond its retry time
// (Entry.hold): how stale this isolate's view of a bucket it keeps losing can get.
const MAX_HOLD_MS = 10_000;

/** One bucket as this isolate sees it. */
class Entry {
  /**
   * The lease being spent: `{ id, billionths, used, deadline, expires }` (used in billionths;
   * `expires`: the object's expiry as this isolate's clock sees it, sent + ttl_ms).
   */
  lease = null;
  /** The next lease, granted by a renewal ahead of time and not spent yet. */
  next = null;
  /** Leases this isolate no longer spends and has not settled, oldest first. */
  unsettled = [];
  /** Whether the local answer just made is due to start the renewal ahead of time. */
  renewDue = false;
  /** Tokens to ask for at the next call: 0 at first (exactly one call per request). */
  want = 0;
  /**
   * Until when (isolate clock, ms) requests are denied locally, the denial, and when its own
   * wait ends (later than the hold when maxHoldMs cut the hold short).
   */
  deniedUntil = 0;
  denial = null;
  denialEnds = 0;
  /**
   * How long (ms) a denial of this isolate's own lease call is held: its retry time at first,
   * twice the last hold each time the call after a hold is denied again, half on each allowed.
   */
  hold = 0;
  /** Plain calls in flight, their costs, and when the first of them was sent. */
  plainCalls = 0;
  plainCost = 0;
  plainSince = 0;
  /** The last decision the bucket made, for the fields of local answers, and when it came. */
  last = null;
  lastAt = 0;
  /** When the previous request on the bucket came (isolate clock, ms). */
  previousAt = -Infinity;
  /** With shares: the share held (a HeldShare), and the demand since it was last reported. */
  share = null;
  demand = 0;
  demandSince = null;
  /** The rate last reported: it stands in for the part of a second before a short measure. */
  reportedRate = 0;
  /**
   * Whether a call that settles or takes a lease is in flight. Requests on the bucket meanwhile
   * make plain calls: awaiting another request's call is not allowed in Workers (the wait
   * would continue in that request's context, and its I/O is not ours).
   */
  leasing = false;
}

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
      return this.#here(local);
    }
    if (this.#shares) return this.#sharedCall(entry, stub, key, cost, policy, waitUntil);
    return this.#leasedCall(entry, stub, key, cost, policy, waitUntil);
  }

  /**
   * The decision on `entry` when this isolate makes it at once, without a call; else null.
   * Sets `entry.renewDue` when the lease or share that made it is due for renewal.
   */
  #decide(entry, cost, policy) {
    return this.#shares ? this.#sharedNow(entry, cost, policy) : this.#localAnswer(entry, cost);
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

  /** `decision`, made in this isolate without a call: counted, and marked (decidedHere). */
  #here(decision) {
    this.localAnswers += 1;
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
    const denied = this.#deniedInFlight(entry, cost);
    if (denied !== null) return denied;
    return this.#plainCall(entry, stubOf(stub), key, cost, policy);
  }

  /**
   * While this isolate's call is in flight after the object denied it: the request is denied
   * here too (that call is already asking again), with the denial's retry time from when it
   * came; null when the last answer was not such a denial.
   */
  #deniedInFlight(entry, cost) {
    const last = entry.last;
    if (cost === 0 || last === null || last.allowed || !(last.retry_after_ms > 0)) return null;
    const retry = Math.max(1, Math.ceil(entry.lastAt + last.retry_after_ms - this.#clock()));
    return this.#here({ ...last, retry_after_ms: retry });
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
      if (entry.plainCost + cost > admissible) return this.#here(overBound(entry.last, bucket));
    }
    entry.plainCalls += 1;
    entry.plainCost += cost;
    this.calls += 1;
    try {
      return this.#remember(entry, await stub.limit(key, cost, policy), this.#clock());
    } finally {
      entry.plainCalls -= 1;
      entry.plainCost -= cost;
    }
  }

  #localAnswer(entry, cost) {
    const now = this.#clock();
    entry.renewDue = false;
    // (A cost of 0 always passes at the object: never denied here.)
    if (now < entry.deniedUntil && cost > 0) return heldDenial(entry, now);
    let lease = entry.lease;
    const units = Math.ceil(cost * BILLION);
    if (!covers(lease, units, now)) {
      const next = entry.next;
      if (!covers(next, units, now)) return null;
      // The lease renewed ahead of time takes over; the next call settles the one it replaces.
      if (lease !== null) retire(entry, lease);
      entry.lease = lease = next;
      entry.next = null;
    }
    lease.used += units;
    // Far from the limit, a busy bucket's next lease is asked for once half of this one is
    // spent, in the background: no request then waits for a lease call or makes a plain call.
    entry.renewDue =
      now - entry.previousAt <= BUSY_MS && entry.next === null && !entry.leasing &&
      2 * lease.used > lease.billionths && farFromTheLimit(entry);
    entry.previousAt = now;
    const last = entry.last;
    const nextLeft = entry.next === null ? 0 : entry.next.billionths - entry.next.used;
    return {
      allowed: true,
      remaining: last.remaining + (lease.billionths - lease.used + nextLeft) / BILLION,
      limit: last.limit,
      reset_in_ms: last.reset_in_ms,
      retry_after_ms: 0,
      window_ms: last.window_ms,
    };
  }

  async #call(entry, stub, key, cost, policy, waitUntil) {
    const lease = entry.lease;
    const sent = this.#clock();
    // Requests keep coming: ask for twice as much as last time (from the cost up). A lease
    // that expired partly used: about what was used. Requests far apart: no lease at all.
    if (sent - entry.previousAt > BUSY_MS) {
      entry.want = 0;
    } else if (lease !== null && sent >= lease.deadline) {
      entry.want = Math.floor(lease.used / BILLION);
    } else {
      entry.want = Math.min(this.#maxLease, Math.max(cost, entry.want * 2));
    }
    entry.previousAt = sent;
    const request = { want: entry.want };
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
    const { lease: granted, ...answered } = answer;
    const decision = this.#remember(entry, answered, this.#clock(), true);
    if (granted !== null && granted.tokens > 0) entry.lease = this.#leaseOf(granted, sent);
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

  /** A granted lease as this isolate spends it: until `marginMs` before its expiry. */
  #leaseOf(granted, sent) {
    // From when the call was sent: the lease began later at the object.
    const expires = sent + granted.ttl_ms;
    return { id: granted.id, billionths: Math.round(granted.tokens * BILLION), used: 0, deadline: expires - this.#marginMs, expires };
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
    this.#remember(entry, answered, this.#clock(), true);
    if (granted !== null && granted.tokens > 0) entry.next = this.#leaseOf(granted, sent);
  }

  /**
   * A request on a bucket with shares, decided here: by the share while it holds the cost,
   * denied when it does not and the object had no room either when it last answered, or while
   * this isolate's call is in flight (renewals run in the background, and requests meanwhile
   * decide against the share still held); without a share, by a plain lease or a held denial.
   */
  #sharedNow(entry, cost, policy) {
    const now = this.#clock();
    countDemand(entry, cost, now);
    entry.renewDue = false;
    const share = entry.share;
    if (share !== null && !share.advance(now)) entry.share = null;
    if (entry.share === null) return this.#localAnswer(entry, cost);
    // A cost the bucket can never admit is the object's to answer (retry_after_ms null).
    if (aboveCapacity(cost, policy, entry)) return null;
    const whole = Number.isInteger(cost);
    let allowed = true;
    if (!(whole && share.take(cost, now))) {
      if (now < entry.deniedUntil && cost > 0) return heldDenial(entry, now);
      // (A token the object reported as coming has come by now.)
      const last = entry.last;
      const noRoom = last === null || (last.remaining < cost && now < entry.lastAt + last.reset_in_ms);
      if (!(whole && cost > 0 && (noRoom || entry.leasing))) return null;
      allowed = false;
    }
    // Once the bucket has room again, or its holder's demand no longer is worth a share, the
    // share is left to end with its term.
    entry.renewDue =
      !entry.leasing && share.dueAt(now) && underPressure(entry) && worthAShare(entry, policy, now, KEEP_SHARE);
    return this.#shareAnswer(entry, allowed, cost, now);
  }

  /**
   * A request on a bucket with shares that was not decided here: a call that asks for (or
   * tops up) a share when the bucket runs low and this isolate has the demand for one, else
   * one of plain leases.
   */
  async #sharedCall(entry, stub, key, cost, policy, waitUntil) {
    const now = this.#clock();
    const share = entry.share;
    // While the bucket has room, plain leases serve as well and split nothing: a share is
    // asked for only once the bucket runs low, and only by an isolate with the demand for one
    // (SHARE_TOKENS; with less, plain leases and held denials do better), for a whole cost (a
    // share holds whole tokens: a fractional cost is the main bucket's).
    if (
      (share === null && (!Number.isInteger(cost) || !underPressure(entry) || !worthAShare(entry, policy, now))) ||
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
      entry.demand = 0;
      entry.demandSince = sent;
    }
    if (share !== null) request.renew = share.id;
    // The plain leases held until now are replaced by the share: the call that asks for it
    // settles them.
    const others = share === null ? settleInCall(entry, request, sent) : NONE;
    const answer = await this.#leaseCall(stub, key, cost, policy, request, others, waitUntil);
    const received = this.#clock();
    const { lease: granted, ...answered } = answer;
    const decision = this.#remember(entry, answered, received, true);
    if (granted?.share !== undefined) {
      // (The object grants no share without a whole token: 11.7.)
      if (share === null) entry.share = new HeldShare(granted, sent, received, this.#marginMs);
      else if (entry.share === share && share.id === granted.id) share.renewed(granted, sent, received, cost === 0);
    } else if (share === null && granted !== null && granted.tokens > 0) {
      entry.lease = this.#leaseOf(granted, sent);
    }
    // The answer's remaining counts what this isolate now holds: the share's tokens, or the
    // plain lease an ask for a share got instead.
    let held = 0;
    if (entry.share?.advance(received)) held = entry.share.tokens;
    else if (share === null && entry.lease !== null) held = granted?.tokens ?? 0;
    return { ...decision, remaining: decision.remaining + held };
  }

  /** A decision made by the share: the bucket as last reported, plus the share's tokens. */
  #shareAnswer(entry, allowed, cost, now) {
    const last = entry.last;
    const share = entry.share;
    const wait = allowed ? 0 : share.waitMs(cost, now);
    return {
      allowed,
      remaining: Math.max(0, last.remaining) + share.tokens,
      limit: last.limit,
      reset_in_ms: share.tokens >= share.capacityAt(now) ? 0 : share.waitMs(share.tokens + 1, now),
      retry_after_ms: wait,
      window_ms: last.window_ms,
    };
  }

  /**
   * The decision's fields for local answers, and a denial to repeat until its retry time, or
   * longer when it answered this isolate's `own` lease call (see Entry.hold): when many
   * isolates wait for the same tokens, each asks again only as often as it wins one, so the
   * calls the object gets follow its refill, not the request rate. Returns the decision as
   * this isolate answers it: a denial's retry time is when this isolate asks again.
   */
  #remember(entry, decision, now, own = false) {
    entry.last = decision;
    entry.lastAt = now;
    if (!decision.allowed && decision.retry_after_ms !== null && decision.retry_after_ms > 0) {
      const retry = decision.retry_after_ms;
      if (own) entry.hold = Math.min(MAX_HOLD_MS, Math.max(retry, 2 * entry.hold));
      // The whole wait the object named (the time left of a block, a slow bucket's next
      // token), or longer for a bucket this isolate keeps losing; at most maxHoldMs.
      const hold = Math.min(this.#maxHoldMs, own ? Math.max(retry, entry.hold) : retry);
      // From now, not from when the object decided: locally it can only be stricter.
      entry.deniedUntil = Math.max(entry.deniedUntil, now + hold);
      entry.denial = decision;
      entry.denialEnds = now + retry;
      return { ...decision, retry_after_ms: Math.max(retry, Math.ceil(entry.deniedUntil - now)) };
    }
    if (decision.allowed && own) entry.hold = entry.hold < 1 ? 0 : entry.hold / 2;
    return decision;
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

/** Whether `lease` (or null) can spend `units` more billionths at `now`. */
function covers(lease, units, now) {
  return lease !== null && now < lease.deadline && lease.used + units <= lease.billionths;
}

/** `lease` is no longer spent: the next call settles it. */
function retire(entry, lease) {
  entry.unsettled.push(lease);
}

/**
 * Retires the leases held (a call replaces them) and settles them: see settleAll.
 */
function settleInCall(entry, request, now) {
  if (entry.lease !== null) retire(entry, entry.lease);
  if (entry.next !== null) retire(entry, entry.next);
  entry.lease = entry.next = null;
  return settleAll(entry, request, now);
}

/**
 * Every lease not settled yet, settled now: the oldest by the call's `request`, the others (when
 * a switch to the next lease and the end of a renewal left more than one) as the settles this
 * returns, `{ id, used }` for `stub.settle`. A lease past its expiry by this isolate's clock
 * (the object counts it as fully used, or will in a moment) is settled only by the call, and
 * only when no other is.
 */
function settleAll(entry, request, now) {
  let others = NONE;
  let ended = null;
  for (const lease of entry.unsettled) {
    if (now >= lease.expires) {
      ended = lease;
      continue;
    }
    const settlement = { id: lease.id, used: lease.used / BILLION };
    if (request.settle === undefined) request.settle = settlement;
    else (others === NONE ? (others = []) : others).push(settlement);
  }
  if (request.settle === undefined && ended !== null) request.settle = { id: ended.id, used: ended.used / BILLION };
  entry.unsettled = [];
  return others;
}

const NONE = Object.freeze([]);

/** The name of a bucket's entry: its owner's number, scope, key and policy. */
function entryName(number, scope, key, policy) {
  return `${number}\u0000${scope}\u0000${key}\u0000${policyName(policy)}`;
}

/** The decisions LocalLimits made without a call (for the middleware's decision events). */
const DECIDED_HERE = new WeakSet();

/** Whether `decision` (from LocalLimits.limit) was made in this isolate, without a call. */
export function decidedHere(decision) {
  return DECIDED_HERE.has(decision);
}

/** A bucket counts as running low below this share of its capacity (as last reported). */
const PRESSURE = 0.25;

/** Demand is measured over at most this long without a share (ms), and at least a second. */
const DEMAND_MS = 10_000;

/**
 * Counts a request of `cost` towards the demand on `entry`: since the last report, or over at
 * most DEMAND_MS without a share (the requests after the one that starts the measure).
 */
function countDemand(entry, cost, now) {
  if (entry.demandSince === null || (entry.share === null && now - entry.demandSince > DEMAND_MS)) {
    entry.demand = 0;
    entry.demandSince = now;
  } else {
    entry.demand += cost;
  }
}

/**
 * The tokens per second a call reports for `entry` at `now`: its demand since the last report
 * (demandRate). A first report is measured over what has passed, at least FIRST_REPORT_MS: the
 * object judges from the reports whether the key is overloaded, and an isolate's first calls
 * come in its first moments under pressure.
 */
function reportedRate(entry, now) {
  if (entry.reportedRate !== 0) return demandRate(entry, now);
  return entry.demand / (Math.max(FIRST_REPORT_MS, now - entry.demandSince) / 1_000);
}

/** The shortest time a first report of demand is measured over. */
const FIRST_REPORT_MS = 100;

/**
 * The tokens per second asked for on `entry` since its demand was last reset, over at least a
 * second: when less has passed since the share held was granted or renewed, the rate reported
 * then fills the rest of the second (its first renewal comes half a second after its grant,
 * and counting that half second as a whole one reported half the demand). Without a share,
 * a short measure counts as a second: an isolate asks only with the demand of a whole one.
 */
function demandRate(entry, now) {
  const elapsed = now - entry.demandSince;
  const rest = elapsed < 1_000 ? 1_000 - elapsed : 0;
  const before = (entry.reportedRate * rest) / 1_000;
  return (entry.demand + before) / (Math.max(1_000, elapsed) / 1_000);
}

/**
 * A share is asked for only by an isolate whose demand is at least the refill that comes with
 * this many tokens of capacity (the bucket's rate over its capacity, times this): a smaller
 * sub-bucket fills up while its holder is idle and others wait, and a partition of the bucket
 * loses most there (docs/SPEC.md, 11.9).
 */
const SHARE_TOKENS = 8;

/**
 * A share held is renewed while its holder's demand is at least this part of what asking for
 * one takes: a share granted on a moment's demand ends when the demand was not there, and one
 * whose holder's demand wavers around the threshold is kept (docs/SPEC.md, 11.9).
 */
const KEEP_SHARE = 0.5;

/**
 * Buckets that refill more slowly than a token this often are not shared: a share's term
 * (1 s) would bring its holder less than a token, so it would only hold capacity away from the
 * object, and held denials already keep the calls to about one per token given out.
 */
const SLOWEST_SHARED_INTERVAL_MS = 1_000;

/** Whether the demand on `entry` is enough for a share (`part` of SHARE_TOKENS' refill). */
function worthAShare(entry, policy, now, part = 1) {
  const bucket = bucketOf(policy, entry.last);
  if (bucket === null) return true;
  if (bucket.intervalMs > SLOWEST_SHARED_INTERVAL_MS) return false;
  const refillOfAToken = 1_000 / (bucket.intervalMs * bucket.maxTokens);
  return demandRate(entry, now) >= part * SHARE_TOKENS * refillOfAToken;
}

/**
 * The denial held on `entry`, answered at `now`: its retry time is what is left of the hold, or
 * of the denial's own wait when that is longer (a hold cut short by maxHoldMs).
 */
function heldDenial(entry, now) {
  return { ...entry.denial, retry_after_ms: Math.ceil(Math.max(entry.deniedUntil, entry.denialEnds) - now) };
}

/**
 * Whether the bucket had at least half its capacity left when it last answered, and the next
 * lease would take at most a twentieth of that: two leases held by one isolate then keep
 * little of the bucket from the others.
 */
function farFromTheLimit(entry) {
  const last = entry.last;
  return last !== null && last.allowed && last.remaining >= Math.max(last.limit / 2, 2 * RENEW_SHARE * entry.want);
}

/** The next lease asked for ahead of time is at most 1 / (2 × this) of what the bucket has left. */
const RENEW_SHARE = 10;

/** Whether the bucket ran low, or denied, when it last answered. */
function underPressure(entry) {
  const last = entry.last;
  return last !== null && (!last.allowed || last.remaining < last.limit * PRESSURE);
}

/** `call()` as the one call in flight that settles or takes a lease or share on `entry`. */
async function leasing(entry, call) {
  entry.leasing = true;
  try {
    return await call();
  } finally {
    entry.leasing = false;
  }
}

/**
 * `call()` as the one call in flight on `entry`, in the background: `waitUntil` keeps it alive,
 * no request awaits it, and its failure is nobody's (what it did not do is left to expire).
 */
function inBackground(entry, call, waitUntil) {
  const done = leasing(entry, call).then(
    () => {},
    () => {},
  );
  if (typeof waitUntil === 'function') waitUntil(done);
}

/**
 * `{ maxTokens, intervalMs }` of a bucket: from the policy of the call when it gives both, else
 * from the bucket's last decision; null when neither tells.
 */
function bucketOf(policy, last) {
  const max = policy?.max_tokens;
  const every = policy?.refill_every_seconds;
  if (typeof max === 'number' && max > 0 && typeof every === 'number' && every > 0) {
    return { maxTokens: max, intervalMs: every * 1_000 };
  }
  if (last !== null && last.limit > 0 && last.window_ms > 0) {
    return { maxTokens: last.limit, intervalMs: last.window_ms / last.limit };
  }
  return null;
}

/** Whether `cost` is more than the bucket's capacity (as far as this isolate knows it). */
function aboveCapacity(cost, policy, entry) {
  const bucket = bucketOf(policy, entry.last);
  return bucket !== null && cost > bucket.maxTokens;
}

/** A denial for a request beyond what the bucket can admit: the next token at the earliest. */
function overBound(last, { maxTokens, intervalMs }) {
  const retry = Math.max(1, Math.ceil(intervalMs));
  const window = Math.ceil(maxTokens * intervalMs);
  const fields = last ?? { limit: maxTokens, reset_in_ms: window, window_ms: window };
  return { ...fields, allowed: false, remaining: 0, retry_after_ms: retry };
}

/** The stub, made now if `stub` is a function that makes it. */
const stubOf = (stub) => (typeof stub === 'function' ? stub() : stub);

/** Whether `policy` is undefined or an object with no fields but those of a policy. */
function plain(policy) {
  if (policy === undefined) return true;
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) return false;
  for (const name of Object.keys(policy)) {
    if (name !== 'max_tokens' && name !== 'refill_every_seconds' && name !== 'block_seconds') return false;
  }
  return true;
}

/** A policy as part of an entry's name: its two numbers, or nothing. */
function policyName(policy) {
  if (policy === undefined) return '';
  return `${policy?.max_tokens}/${policy?.refill_every_seconds}`;
}
