// One bucket as this isolate sees it (docs/SPEC.md, 10.5): its last answer and the denial it
// holds, the leases it spends and those it has still to settle, and what it knows of the
// bucket's options. The decisions made from it are in answers.js, the calls in limits.js.

/** Leases count in billionths of a token: fractional costs add up exactly. */
export const BILLION = 1e9;

// The longest a denial of this isolate's own lease call is held beyond its retry time
// (Entry.hold): how stale this isolate's view of a bucket it keeps losing can get.
const MAX_HOLD_MS = 10_000;

/** One bucket as this isolate sees it. */
export class Entry {
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
  /**
   * This isolate's turn in the object's queue (isolate clock, ms; 0: none): until then, once
   * its leases are spent, its requests are denied here (docs/SPEC.md, 11.11). `longQueue`:
   * the turn was further off than the call's round trip.
   */
  turnAt = 0;
  longQueue = false;
  /** Plain calls in flight, their costs, and when the first of them was sent. */
  plainCalls = 0;
  plainCost = 0;
  plainSince = 0;
  /** The last decision the bucket made, for the fields of local answers, and when it came. */
  last = null;
  lastAt = 0;
  /**
   * When a request on the bucket was last denied, here or by the object (isolate clock, ms),
   * and how many were denied since the demand was last measured (demand.js).
   */
  deniedAt = -Infinity;
  denied = 0;
  /** When the previous request on the bucket came (isolate clock, ms). */
  previousAt = -Infinity;
  /** With shares: the share held (a HeldShare), and the demand since it was last reported. */
  share = null;
  demand = 0;
  demandSince = null;
  /** The rate last reported: it stands in for the part of a second before a short measure. */
  reportedRate = 0;
  /**
   * Until when (isolate clock, ms) no share is asked for: the object put this isolate's ask on
   * record instead of granting one (more isolates ask than shares fit), and counts it until
   * then.
   */
  noShareUntil = 0;
  /**
   * Whether a call that settles or takes a lease is in flight. Requests on the bucket meanwhile
   * make plain calls: awaiting another request's call is not allowed in Workers (the wait
   * would continue in that request's context, and its I/O is not ours).
   */
  leasing = false;
}

/** A request on `entry` denied at `now`, here or by the object. */
export function noteDenial(entry, now) {
  entry.deniedAt = now;
  entry.denied += 1;
}

/**
 * The decision's fields for local answers, and a denial to repeat until its retry time, or
 * longer when it answered this isolate's `own` lease call (see Entry.hold): when many
 * isolates wait for the same tokens, each asks again only as often as it wins one, so the
 * calls the object gets follow its refill, not the request rate. Returns the decision as
 * this isolate answers it: a denial's retry time is when this isolate asks again.
 * `maxHoldMs`: LocalLimits' option.
 */
export function remember(entry, decision, now, maxHoldMs, own = false) {
  entry.last = decision;
  entry.lastAt = now;
  if (!decision.allowed) noteDenial(entry, now);
  if (!decision.allowed && decision.retry_after_ms !== null && decision.retry_after_ms > 0) {
    const retry = decision.retry_after_ms;
    if (own) entry.hold = Math.min(MAX_HOLD_MS, Math.max(retry, 2 * entry.hold));
    // The whole wait the object named (the time left of a block, a slow bucket's next
    // token), or longer for a bucket this isolate keeps losing; at most maxHoldMs.
    const hold = Math.min(maxHoldMs, own ? Math.max(retry, entry.hold) : retry);
    // From now, not from when the object decided: locally it can only be stricter.
    entry.deniedUntil = Math.max(entry.deniedUntil, now + hold);
    entry.denial = decision;
    entry.denialEnds = now + retry;
    return { ...decision, retry_after_ms: Math.max(retry, Math.ceil(entry.deniedUntil - now)) };
  }
  if (decision.allowed && own) entry.hold = entry.hold < 1 ? 0 : entry.hold / 2;
  return decision;
}

/** `call()` as the one call in flight that settles or takes a lease or share on `entry`. */
export async function leasing(entry, call) {
  entry.leasing = true;
  try {
    return await call();
  } finally {
    entry.leasing = false;
  }
}

/** A granted lease as this isolate spends it: until `marginMs` before its expiry. */
export function leaseOf(granted, sent, marginMs) {
  // From when the call was sent: the lease began later at the object.
  const expires = sent + granted.ttl_ms;
  return { id: granted.id, billionths: Math.round(granted.tokens * BILLION), used: 0, deadline: expires - marginMs, expires };
}

/** Whether `lease` (or null) can spend `units` more billionths at `now`. */
export function covers(lease, units, now) {
  return lease !== null && now < lease.deadline && lease.used + units <= lease.billionths;
}

/** `lease` is no longer spent: the next call settles it. */
export function retire(entry, lease) {
  entry.unsettled.push(lease);
}

/**
 * Retires the leases held (a call replaces them) and settles them: see settleAll.
 */
export function settleInCall(entry, request, now) {
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
export function settleAll(entry, request, now) {
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

export const NONE = Object.freeze([]);

/**
 * `{ maxTokens, intervalMs }` of a bucket: from the policy of the call when it gives both, else
 * from the bucket's last decision; null when neither tells.
 */
export function bucketOf(policy, last) {
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
export function aboveCapacity(cost, policy, entry) {
  const bucket = bucketOf(policy, entry.last);
  return bucket !== null && cost > bucket.maxTokens;
}

/** The name of a bucket's entry: its owner's number, scope, key and policy. */
export function entryName(number, scope, key, policy) {
  return `${number}\u0000${scope}\u0000${key}\u0000${policyName(policy)}`;
}

/** Whether `policy` is undefined or an object with no fields but those of a policy. */
export function plain(policy) {
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
