// Renewal ahead of time (docs/SPEC.md, 10.5 and 11.9): whether the lease or share a local
// answer spent is due for renewal, and how a renewal runs: in the background, awaited by no
// request. The renewal calls themselves are LocalLimits' (limits.js, #renew).

import { BUSY_MS, KEEP_SHARE, underPressure, worthAShare } from './demand.js';
import { leasing } from './entry.js';

/** The next lease asked for ahead of time is at most 1 / (2 × this) of what the bucket has left. */
const RENEW_SHARE = 10;

/**
 * Whether the local answer that just spent `lease` on `entry` at `now` is due to start the
 * renewal of the lease ahead of time (read before `entry.previousAt` moves to `now`).
 */
export function leaseRenewalDue(entry, lease, now) {
  // Far from the limit, a busy bucket's next lease is asked for once half of this one is
  // spent, in the background: no request then waits for a lease call or makes a plain call.
  return (
    now - entry.previousAt <= BUSY_MS && entry.next === null && !entry.leasing &&
    2 * lease.used > lease.billionths && farFromTheLimit(entry)
  );
}

/** Whether the local answer by `share` on `entry` at `now` is due to start its renewal. */
export function shareRenewalDue(entry, share, policy, now) {
  // Once the bucket has room again, or its holder's demand no longer is worth a share, the
  // share is left to end with its term.
  return !entry.leasing && share.dueAt(now) && underPressure(entry) && worthAShare(entry, policy, now, KEEP_SHARE);
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

/**
 * `call()` as the one call in flight on `entry`, in the background: `waitUntil` keeps it alive,
 * no request awaits it, and its failure is nobody's (what it did not do is left to expire).
 */
export function inBackground(entry, call, waitUntil) {
  const done = leasing(entry, call).then(
    () => {},
    () => {},
  );
  if (typeof waitUntil === 'function') waitUntil(done);
}
