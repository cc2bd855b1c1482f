// The requests this isolate answers at once, without a call (docs/SPEC.md, 10.5 and 11.9): by
// the plain lease it holds, by its share, or with a denial. They take LocalLimits' `clock`,
// not the time: a request a share leaves to the plain lease reads it once more.

import { countDemand } from './demand.js';
import { aboveCapacity, BILLION, bucketOf, covers, retire } from './entry.js';
import { leaseRenewalDue, shareRenewalDue } from './renewal.js';

/**
 * The decision on `entry` by its plain lease (or the next one) or the denial it holds; else
 * null. Sets `entry.renewDue` when the lease is due for renewal ahead of time.
 */
export function localAnswer(entry, cost, clock) {
  const now = clock();
  entry.renewDue = false;
  // (A cost of 0 always passes at the object: never denied here.)
  if (now < entry.deniedUntil && cost > 0) {
    // (Waiting for its turn, the bucket stays busy: the call at the turn asks for a lease.)
    if (entry.turnAt > 0) entry.previousAt = now;
    return heldDenial(entry, now);
  }
  let lease = entry.lease;
  const units = Math.ceil(cost * BILLION);
  if (!covers(lease, units, now)) {
    const next = entry.next;
    if (!covers(next, units, now)) return now < entry.turnAt ? beforeTurn(entry, cost, now) : null;
    // The lease renewed ahead of time takes over; the next call settles the one it replaces.
    if (lease !== null) retire(entry, lease);
    entry.lease = lease = next;
    entry.next = null;
  }
  lease.used += units;
  entry.renewDue = leaseRenewalDue(entry, lease, now);
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

/**
 * A request on a bucket with shares, decided here: by the share while it holds the cost,
 * denied when it does not and the object had no room either when it last answered, or while
 * this isolate's call is in flight (renewals run in the background, and requests meanwhile
 * decide against the share still held); without a share, by a plain lease or a held denial.
 */
export function sharedNow(entry, cost, policy, clock) {
  const now = clock();
  countDemand(entry, cost, now);
  entry.renewDue = false;
  const share = entry.share;
  if (share !== null && !share.advance(now)) entry.share = null;
  if (entry.share === null) return localAnswer(entry, cost, clock);
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
  entry.renewDue = shareRenewalDue(entry, share, policy, now);
  return shareAnswer(entry, allowed, cost, now);
}

/** A decision made by the share: the bucket as last reported, plus the share's tokens. */
function shareAnswer(entry, allowed, cost, now) {
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
 * The denial held on `entry`, answered at `now`: its retry time is what is left of the hold, or
 * of the denial's own wait when that is longer (a hold cut short by maxHoldMs).
 */
function heldDenial(entry, now) {
  return { ...entry.denial, retry_after_ms: Math.ceil(Math.max(entry.deniedUntil, entry.denialEnds) - now) };
}

/**
 * While this isolate's call is in flight after the object denied it: the request is denied
 * here too (that call is already asking again), with the denial's retry time from when it
 * came; null when the last answer was not such a denial.
 */
export function deniedInFlight(entry, cost, clock) {
  const last = entry.last;
  if (cost === 0 || last === null || last.allowed || !(last.retry_after_ms > 0)) return null;
  const retry = Math.max(1, Math.ceil(entry.lastAt + last.retry_after_ms - clock()));
  return { ...last, retry_after_ms: retry };
}

/**
 * A request that the leases held cannot cover before this isolate's turn in the object's
 * queue (docs/SPEC.md, 11.11): denied here until the turn (nothing is left for it here), and
 * counted as keeping the bucket busy. Null for a cost of 0 (always allowed at the object).
 */
function beforeTurn(entry, cost, now) {
  if (cost === 0 || entry.last === null) return null;
  entry.previousAt = now;
  return { ...entry.last, allowed: false, remaining: 0, retry_after_ms: Math.ceil(entry.turnAt - now) };
}

/**
 * While this isolate's call on `entry` is in flight after an appointment further off than a
 * round trip (the key's queue holds more callers than a round trip refills): the request is
 * denied here (the call in flight asks for the next token), with one interval of the bucket
 * as its retry time; else null.
 */
export function deniedInQueue(entry, cost, policy) {
  const bucket = bucketOf(policy, entry.last);
  if (cost === 0 || !entry.longQueue || bucket === null) return null;
  return overBound(entry.last, bucket);
}

/** A denial for a request beyond what the bucket can admit: the next token at the earliest. */
export function overBound(last, { maxTokens, intervalMs }) {
  const retry = Math.max(1, Math.ceil(intervalMs));
  const window = Math.ceil(maxTokens * intervalMs);
  const fields = last ?? { limit: maxTokens, reset_in_ms: window, window_ms: window };
  return { ...fields, allowed: false, remaining: 0, retry_after_ms: retry };
}
