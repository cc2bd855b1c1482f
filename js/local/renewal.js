// Renewal ahead of time (docs/SPEC.md, 10.5 and 11.9): when a local answer starts one, and how it runs: in
// the background, awaited by no request; and when a share's top-up renews it instead. The calls
// themselves are LocalLimits' (limits.js, #renew and #shareCall).

import { BUSY_MS, KEEP_SHARE, underPressure, worthAShare } from './demand.js';
import { leasing } from './entry.js';

// The next lease asked for ahead of time is at most 1 / (2 × this) of what the bucket has left.
const RENEW_SHARE = 10;

/** Whether spending `lease` at `now` starts its renewal (read before `entry.previousAt` moves to `now`). */
export function leaseRenewalDue(entry, lease, now) {
  const last = entry.last;
  return (
    now - entry.previousAt <= BUSY_MS && entry.next === null && !entry.leasing &&
    2 * lease.used > lease.billionths && last !== null && last.allowed &&
    last.remaining >= Math.max(last.limit / 2, 2 * RENEW_SHARE * entry.want)
  );
}

/** Whether the answer by `share` at `now` starts its renewal. */
export function shareRenewalDue(entry, share, policy, now) {
  return !entry.leasing && share.dueAt(now) && worthKeeping(entry, policy, now);
}

/** Whether a top-up of `share` at `now` renews it too, sparing the renewal ahead (docs/SPEC.md, 11.9). */
export function topUpRenews(entry, share, policy, now) {
  return share.renewsAt(now) && worthKeeping(entry, policy, now);
}

// Whether a share held on `entry` is worth another term: the bucket low, the demand at least KEEP_SHARE of a share's.
function worthKeeping(entry, policy, now) {
  return underPressure(entry) && worthAShare(entry, policy, now, KEEP_SHARE);
}

/** `call()` as the one call in flight on `entry`, in the background: its failure is nobody's. */
export function inBackground(entry, call, waitUntil) {
  const done = leasing(entry, call).then(() => {}, () => {});
  if (typeof waitUntil === 'function') waitUntil(done);
}
