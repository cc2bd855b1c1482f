// The requests this isolate answers at once, without a call (docs/SPEC.md, 10.5 and 11.9). They take
// LocalLimits' `clock`, not the time: a request a share leaves to the plain lease reads it once more.

import { countDemand } from './demand.js';
import { aboveCapacity, BILLION, bucketOf, covers } from './entry.js';
import { leaseRenewalDue, shareRenewalDue } from './renewal.js';

/** The decision by the plain lease (or the next one) or the denial held; else null. Sets `entry.renewDue`. */
export function localAnswer(entry, cost, clock) {
  const now = clock();
  entry.renewDue = false;
  // (A cost of 0 always passes at the object: never denied here.)
  if (now < entry.deniedUntil && cost > 0) {
    // Waiting for its turn, the bucket stays busy: the call at the turn asks for a lease.
    if (entry.turnAt > 0) entry.previousAt = now;
    return heldDenial(entry, now);
  }
  let lease = entry.lease;
  const units = Math.ceil(cost * BILLION);
  if (!covers(lease, units, now)) {
    const next = entry.next;
    if (!covers(next, units, now)) return now < entry.turnAt ? beforeTurn(entry, cost, now) : null;
    // The lease renewed ahead of time takes over; the next call settles the one it replaces.
    if (lease !== null) entry.unsettled.push(lease);
    entry.lease = lease = next;
    entry.next = null;
  }
  lease.used += units;
  entry.renewDue = leaseRenewalDue(entry, lease, now);
  entry.previousAt = now;
  const last = entry.last;
  const nextLeft = entry.next === null ? 0 : entry.next.billionths - entry.next.used;
  const left = (lease.billionths - lease.used + nextLeft) / BILLION;
  return answer(last, true, last.remaining + left, last.reset_in_ms, 0);
}

/** With shares: by the share, or denied when neither it nor the object has room; else localAnswer. */
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
  const last = entry.last;
  let allowed = true;
  if (!(whole && share.take(cost, now))) {
    if (now < entry.deniedUntil && cost > 0) return heldDenial(entry, now);
    // (A token the object reported as coming has come by now, and no top-up hold runs.)
    const noRoom =
      last === null || (last.remaining < cost && (now < entry.lastAt + last.reset_in_ms || now < entry.topUpAfter));
    if (!(whole && cost > 0 && (noRoom || entry.leasing))) return null;
    allowed = false;
  }
  entry.renewDue = shareRenewalDue(entry, share, policy, now);
  const reset = share.tokens >= share.capacityAt(now) ? 0 : share.waitMs(share.tokens + 1, now);
  const retry = allowed ? 0 : share.waitMs(cost, now);
  return answer(last, allowed, Math.max(0, last.remaining) + share.tokens, reset, retry);
}

/** A local decision: the bucket's last one with this isolate's own figures. */
function answer(last, allowed, remaining, reset, retry) {
  const { limit, window_ms } = last;
  return { allowed, remaining, limit, reset_in_ms: reset, retry_after_ms: retry, window_ms };
}

/** The denial held on `entry`, retried when the hold or, if longer, the denial's own wait ends. */
function heldDenial(entry, now) {
  return { ...entry.denial, retry_after_ms: Math.ceil(Math.max(entry.deniedUntil, entry.denialEnds) - now) };
}

/** Before this isolate's turn in the object's queue, its leases spent: denied (docs/SPEC.md, 11.11). */
function beforeTurn(entry, cost, now) {
  if (cost === 0 || entry.last === null) return null;
  entry.previousAt = now;
  return { ...entry.last, allowed: false, remaining: 0, retry_after_ms: Math.ceil(entry.turnAt - now) };
}

/** In flight: denied after a denial or a turn beyond a round trip (docs/SPEC.md, 10.5); else null. */
export function deniedInFlight(entry, cost, policy, clock) {
  if (cost === 0) return null;
  const last = entry.last;
  if (last !== null && !last.allowed && last.retry_after_ms > 0) {
    return { ...last, retry_after_ms: Math.max(1, Math.ceil(entry.lastAt + last.retry_after_ms - clock())) };
  }
  const bucket = bucketOf(policy, last);
  return entry.longQueue && bucket !== null ? overBound(last, bucket) : null;
}

/** A denial for a request beyond what the bucket can admit: the next token at the earliest. */
export function overBound(last, { maxTokens, intervalMs }) {
  const retry = Math.max(1, Math.ceil(intervalMs));
  const window = Math.ceil(maxTokens * intervalMs);
  const fields = last ?? { limit: maxTokens, reset_in_ms: window, window_ms: window };
  return { ...fields, allowed: false, remaining: 0, retry_after_ms: retry };
}
