// The demand this isolate sees on a bucket, what it reports, and the thresholds it decides by: busy, low,
// short, worth a share (docs/SPEC.md, 10.5 and 11.9, with the measurements behind each number).

import { bucketOf } from './entry.js';

/** A lease is asked for only when requests on a bucket come at least this often (ms). */
export const BUSY_MS = 100;
/** A share held is renewed while its holder's demand is at least this part of what asking takes. */
export const KEEP_SHARE = 0.5;

const PRESSURE = 0.25; // a bucket runs low below this part of its capacity (as last reported)
const DEMAND_MS = 10_000; // demand is measured over at most this long without a share
const FIRST_REPORT_MS = 100; // the shortest measure of a first report
const SHARE_TOKENS = 6; // a share takes a demand of at least the refill of this many tokens of capacity
const FIRST_ASK_REQUESTS = 8; // a first share waits for this many requests: a few overstate the rate
const SLOWEST_SHARED_INTERVAL_MS = 1_000; // slower buckets are not shared: a 1 s term brings under a token
// A bucket is short for an isolate that had this part of its requests denied, the last this recently (ms).
const DENIED_PART = 0.2;
const DENIED_WITHIN_MS = 3_000;
// A plain call asks for no lease where this part was denied and the demand is under a request per
// BUSY_MS and 1 / ONE_OF_MANY of the refill: the token would wait idle while others are denied.
const LEASE_DENIED_PART = 0.05;
const ONE_OF_MANY = 32;

/** Counts a request of `cost` towards the demand on `entry` (the one that starts a measure not counted). */
export function countDemand(entry, cost, now) {
  const restart = entry.demandSince === null || (entry.share === null && now - entry.demandSince > DEMAND_MS);
  if (restart) restartDemand(entry, now);
  else entry.demand += cost;
}

/** Starts a new measure of the demand on `entry` (and of its denials) at `now`. */
export function restartDemand(entry, now) {
  entry.demand = 0;
  entry.denied = 0;
  entry.demandSince = now;
}

/** The tokens per second a call reports for `entry` at `now`: a first report over at least FIRST_REPORT_MS. */
export function reportedRate(entry, now) {
  if (entry.reportedRate !== 0) return demandRate(entry, now);
  return entry.demand / (Math.max(FIRST_REPORT_MS, now - entry.demandSince) / 1_000);
}

// The demand since it was last reset, over at least a second: the rate reported last stands in for
// the rest of a shorter one (a first term is renewed about half a second after its grant).
function demandRate(entry, now) {
  const elapsed = now - entry.demandSince;
  const rest = elapsed < 1_000 ? 1_000 - elapsed : 0;
  const before = (entry.reportedRate * rest) / 1_000;
  return (entry.demand + before) / (Math.max(1_000, elapsed) / 1_000);
}

/** Whether the demand on `entry` is enough for a share (`part` of SHARE_TOKENS' refill). */
export function worthAShare(entry, policy, now, part = 1) {
  if (entry.share === null && (entry.demand < FIRST_ASK_REQUESTS || now < entry.noShareUntil)) return false;
  const bucket = bucketOf(policy, entry.last);
  if (bucket === null) return true;
  if (bucket.intervalMs > SLOWEST_SHARED_INTERVAL_MS) return false;
  const refillOfAToken = 1_000 / (bucket.intervalMs * bucket.maxTokens);
  return demandRate(entry, now) >= part * SHARE_TOKENS * refillOfAToken;
}

/** Whether the bucket ran low and is short for `entry`: requests were denied, or its demand is the refill. */
export function scarce(entry, policy, now) {
  if (!underPressure(entry)) return false;
  if (deniedPart(entry, now, DENIED_PART)) return true;
  const bucket = bucketOf(policy, entry.last);
  return bucket !== null && demandRate(entry, now) >= 1_000 / bucket.intervalMs;
}

// Whether at least `part` of the requests measured on `entry` were denied, the last recently.
function deniedPart(entry, now, part) {
  return now - entry.deniedAt < DENIED_WITHIN_MS && entry.denied >= part * Math.max(1, entry.demand);
}

/** Whether a lease on `entry` would wait idle at `now` while others are denied (docs/SPEC.md, 11.9). */
export function leaseWouldIdle(entry, policy, now) {
  if (!underPressure(entry) || !deniedPart(entry, now, LEASE_DENIED_PART)) return false;
  const bucket = bucketOf(policy, entry.last);
  if (bucket === null) return false;
  const rate = reportedRate(entry, now);
  return rate < 1_000 / BUSY_MS && rate * bucket.intervalMs * ONE_OF_MANY < 1_000;
}

/** Whether the bucket ran low, or denied, when it last answered. */
export function underPressure(entry) {
  const last = entry.last;
  return last !== null && (!last.allowed || last.remaining < last.limit * PRESSURE);
}
