// The demand this isolate sees on a bucket, what it reports of it, and the thresholds it
// decides by: when a bucket is busy enough for a lease, when it runs low or is short for this
// isolate, and when the demand is worth a share (docs/SPEC.md, 10.5 and 11.9).

import { bucketOf } from './entry.js';

// A lease is asked for only when requests on a bucket come at least this often: at lower
// rates every request makes its own call, exactly as without local decisions (a leased token
// waits for the isolate's next request, and no other isolate can use it meanwhile).
export const BUSY_MS = 100;

/** A bucket counts as running low below this share of its capacity (as last reported). */
const PRESSURE = 0.25;

/** Demand is measured over at most this long without a share (ms), and at least a second. */
const DEMAND_MS = 10_000;

/** The shortest time a first report of demand is measured over. */
const FIRST_REPORT_MS = 100;

/**
 * A share is asked for only by an isolate whose demand is at least the refill that comes with
 * this many tokens of capacity (the bucket's rate over its capacity, times this): twice the
 * least share of an overloaded key (3 tokens, drained at twice their refill). With less, a
 * sub-bucket fills up while its holder is idle and others wait (docs/SPEC.md, 11.9).
 */
const SHARE_TOKENS = 6;

/**
 * A first share is asked for only once this many requests were counted since the demand was
 * last measured: the object sizes the share, and judges whether this isolate is alone on the
 * key, by the rate reported, which a handful of requests over a short measure overstates.
 */
const FIRST_ASK_REQUESTS = 8;

/**
 * A share held is renewed while its holder's demand is at least this part of what asking for
 * one takes: a share granted on a moment's demand ends when the demand was not there, and one
 * whose holder's demand wavers around the threshold is kept (docs/SPEC.md, 11.9).
 */
export const KEEP_SHARE = 0.5;

/**
 * Buckets that refill more slowly than a token this often are not shared: a share's term
 * (1 s) would bring its holder less than a token, so it would only hold capacity away from the
 * object, and held denials already keep the calls to about one per token given out.
 */
const SLOWEST_SHARED_INTERVAL_MS = 1_000;

/**
 * Counts a request of `cost` towards the demand on `entry`: since the last report, or over at
 * most DEMAND_MS without a share (the requests after the one that starts the measure).
 */
export function countDemand(entry, cost, now) {
  if (entry.demandSince === null || (entry.share === null && now - entry.demandSince > DEMAND_MS)) {
    restartDemand(entry, now);
  } else {
    entry.demand += cost;
  }
}

/** Starts a new measure of the demand on `entry` (and of its denials) at `now`. */
export function restartDemand(entry, now) {
  entry.demand = 0;
  entry.denied = 0;
  entry.demandSince = now;
}

/**
 * The tokens per second a call reports for `entry` at `now`: its demand since the last report
 * (demandRate). A first report is measured over what has passed, at least FIRST_REPORT_MS: the
 * object judges from the reports whether the key is overloaded, and an isolate's first calls
 * come in its first moments under pressure.
 */
export function reportedRate(entry, now) {
  if (entry.reportedRate !== 0) return demandRate(entry, now);
  return entry.demand / (Math.max(FIRST_REPORT_MS, now - entry.demandSince) / 1_000);
}

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

/** Whether the demand on `entry` is enough for a share (`part` of SHARE_TOKENS' refill). */
export function worthAShare(entry, policy, now, part = 1) {
  if (entry.share === null && (entry.demand < FIRST_ASK_REQUESTS || now < entry.noShareUntil)) return false;
  const bucket = bucketOf(policy, entry.last);
  if (bucket === null) return true;
  if (bucket.intervalMs > SLOWEST_SHARED_INTERVAL_MS) return false;
  const refillOfAToken = 1_000 / (bucket.intervalMs * bucket.maxTokens);
  return demandRate(entry, now) >= part * SHARE_TOKENS * refillOfAToken;
}

/**
 * A share is asked for only by an isolate that had at least this part of its requests since
 * its demand was last measured denied, here or at the object, the last within
 * DENIED_WITHIN_MS (ms), or whose own demand reaches the bucket's refill. A bucket can run
 * low because plain leases hold its tokens while its refill is more than enough, and at the
 * limit its refill covers the demand but for bursts (a few requests in a hundred denied):
 * plain leases pool the demand of every isolate there, and a share takes capacity and
 * refill from the isolates that need them. Beyond the limit half or more are denied
 * (docs/SPEC.md, 11.9).
 */
const DENIED_PART = 0.2;
const DENIED_WITHIN_MS = 3_000;

/**
 * Whether the bucket is scarce for `entry` at `now`: it ran low, and requests were denied or
 * this isolate alone asks for its whole refill.
 */
export function scarce(entry, policy, now) {
  if (!underPressure(entry)) return false;
  if (deniedPart(entry, now, DENIED_PART)) return true;
  const bucket = bucketOf(policy, entry.last);
  return bucket !== null && demandRate(entry, now) >= 1_000 / bucket.intervalMs;
}

/**
 * Whether at least `part` of the requests on `entry` since its demand was last measured were
 * denied, the last within DENIED_WITHIN_MS of `now`.
 */
function deniedPart(entry, now, part) {
  return now - entry.deniedAt < DENIED_WITHIN_MS && entry.denied >= part * Math.max(1, entry.demand);
}

/**
 * A plain call with shares asks for no lease where the bucket is short for many isolates that
 * each see few requests: it ran low and denied at least LEASE_DENIED_PART of this isolate's
 * requests, and this isolate's demand is under a request per BUSY_MS and under 1 /
 * ONE_OF_MANY of the refill. A token leased there waits for the isolate's next request while
 * the others are denied; without a lease each request takes its token as it comes
 * (docs/SPEC.md, 11.9).
 */
const LEASE_DENIED_PART = 0.05;
const ONE_OF_MANY = 32;

/** Whether a lease on `entry` would wait idle at `now` (see LEASE_DENIED_PART). */
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
