// One bucket as this isolate sees it (docs/SPEC.md, 10.5): its last answer, the denial it holds, the
// leases it spends and those it has still to settle. Decisions from it are in answers.js, calls in limits.js.

/** Leases count in billionths of a token: fractional costs add up exactly. */
export const BILLION = 1e9;

export const NONE = Object.freeze([]);

// The longest a denial of this isolate's own lease call, or a top-up hold, lasts (Entry.hold, Entry.topUpHold).
const MAX_HOLD_MS = 10_000;

/** One bucket as this isolate sees it; times are this isolate's clock (ms). */
export class Entry {
  // The lease spent (see leaseOf), the next one (renewed ahead of time), those not settled, oldest first.
  lease = null;
  next = null;
  unsettled = [];
  renewDue = false; // the local answer just made starts the renewal ahead of time
  want = 0; // tokens to ask for at the next call: 0 at first (exactly one call per request)
  // The denial held until `deniedUntil`, and when its own wait ends (later if maxHoldMs cut the hold).
  deniedUntil = 0;
  denial = null;
  denialEnds = 0;
  hold = 0; // how long a denial of this isolate's own lease call is held (remember)
  // This isolate's turn in the object's queue (0: none), and whether it was beyond a round trip (11.11).
  turnAt = 0;
  longQueue = false;
  // When each plain call in flight was sent, their costs, and when the first of them was sent.
  plainSent = [];
  plainCost = 0;
  plainSince = 0;
  // When the lease call in flight was sent, and the shortest round trip seen on this bucket (ms): a call in
  // flight far longer finds the object behind (slowObject).
  leaseSent = 0;
  fastest = Infinity;
  last = null; // the bucket's last decision, and when it came
  lastAt = 0;
  deniedAt = -Infinity; // the last denial (here or by the object), and the denials counted with the demand
  denied = 0;
  previousAt = -Infinity; // when the previous request came
  // With shares: the HeldShare, the demand since it was last reported, the rate reported, and until when
  // no share is asked for (the object put the ask on record instead).
  share = null;
  demand = 0;
  demandSince = null;
  reportedRate = 0;
  noShareUntil = 0;
  // The top-up hold: no top-up before `topUpAfter` unless the last answer had room (backOffTopUps).
  topUpAfter = 0;
  topUpHold = 0;
  // A call that settles or takes a lease is in flight (no request may await another request's I/O).
  leasing = false;
}

/** A request on `entry` denied at `now`, here or by the object. */
export function noteDenial(entry, now) {
  entry.deniedAt = now;
  entry.denied += 1;
}

/** Records `decision` and holds a denial, longer after this isolate's `own` lease call (docs/SPEC.md, 10.5). */
export function remember(entry, decision, now, maxHoldMs, own = false) {
  entry.last = decision;
  entry.lastAt = now;
  if (!decision.allowed) noteDenial(entry, now);
  if (!decision.allowed && decision.retry_after_ms !== null && decision.retry_after_ms > 0) {
    const retry = decision.retry_after_ms;
    if (own) entry.hold = Math.min(MAX_HOLD_MS, Math.max(retry, 2 * entry.hold));
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

/**
 * After a top-up answered at `now` (docs/SPEC.md, 11.9): denied, the next waits its `retry_after_ms`, or
 * twice the last hold if longer; allowed, the hold halves. Renewals leave it: their being allowed says
 * nothing of room in the main bucket.
 */
export function backOffTopUps(entry, { allowed, retry_after_ms: retry }, now) {
  const doubled = Math.max(retry ?? 0, 2 * entry.topUpHold);
  entry.topUpHold = allowed ? entry.topUpHold / 2 : Math.min(MAX_HOLD_MS, doubled);
  entry.topUpAfter = now + entry.topUpHold;
}

// A call in flight longer than twice the shortest round trip and this margin finds the object behind.
const SLOW_MARGIN_MS = 20;

/** Notes a call on `entry` sent at `sent` and answered at `now`. */
export function noteRoundTrip(entry, sent, now) {
  entry.fastest = Math.min(entry.fastest, now - sent);
}

/** Whether a call on `entry` has been in flight at `now` far longer than its round trips take (docs/SPEC.md, 10.5). */
export function slowObject(entry, now) {
  if (entry.fastest === Infinity) return false;
  let oldest = entry.leasing ? entry.leaseSent : Infinity;
  for (const sent of entry.plainSent) oldest = Math.min(oldest, sent);
  return now - oldest > 2 * entry.fastest + SLOW_MARGIN_MS;
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

/** A granted lease as this isolate spends it: until `marginMs` before its expiry, counted from `sent`. */
export function leaseOf(granted, sent, marginMs) {
  const expires = sent + granted.ttl_ms;
  return { id: granted.id, billionths: Math.round(granted.tokens * BILLION), used: 0, deadline: expires - marginMs, expires };
}

/** Whether `lease` (or null) can spend `units` more billionths at `now`. */
export function covers(lease, units, now) {
  return lease !== null && now < lease.deadline && lease.used + units <= lease.billionths;
}

/** Retires the leases held (a call replaces them) and settles them: see settleAll. */
export function settleInCall(entry, request, now) {
  if (entry.lease !== null) entry.unsettled.push(entry.lease);
  if (entry.next !== null) entry.unsettled.push(entry.next);
  entry.lease = entry.next = null;
  return settleAll(entry, request, now);
}

/**
 * Settles the unsettled leases: the oldest by `request`, the `others` returned for `settle` calls of their
 * own. `settled` is every lease taken, to settle again if the call fails (docs/SPEC.md, 10.5).
 */
export function settleAll(entry, request, now) {
  const settled = entry.unsettled;
  let others = NONE;
  let ended = null;
  for (const lease of settled) {
    // A lease past its expiry counts as fully used: settled only when no other is.
    if (now >= lease.expires) ended = lease;
    else if (request.settle === undefined) request.settle = settlement(lease);
    else (others === NONE ? (others = []) : others).push(lease);
  }
  if (request.settle === undefined && ended !== null) request.settle = settlement(ended);
  entry.unsettled = [];
  return { others, settled };
}

// A plain lease lasts this long at the object; a share with its next term, no longer.
const LONGEST_LEASE_MS = 10_000;

/** The lease or share asked for as `id` in a call sent at `sent` whose answer never came: settled as unused. */
export const unheard = (id, sent) => ({ id, used: 0, expires: sent + LONGEST_LEASE_MS });

/** What a `settle` of `lease` says: its id and the tokens used. */
export const settlement = (lease) => ({ id: lease.id, used: lease.used / BILLION });

/** `{ maxTokens, intervalMs }` of a bucket, from the call's policy, else its last decision; or null. */
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

/** The name of a bucket's entry: its owner's number, scope, key and the policy's two numbers. */
export function entryName(number, scope, key, policy) {
  const numbers = policy === undefined ? '' : `${policy?.max_tokens}/${policy?.refill_every_seconds}`;
  return `${number}\u0000${scope}\u0000${key}\u0000${numbers}`;
}
