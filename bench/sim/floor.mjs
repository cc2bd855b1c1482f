// The floor F: the fewest calls per second to the object that any design of local decisions
// can make on a cell, as a yardstick for the calls the modes do make (bench/sim/README.md,
// "The floor").
//
// With a bucket of B tokens refilling r per second, N isolates and a total demand of D
// requests per second (each of cost 1):
//
//   F = min(D, max(0, 0.95 · min(D, r) − B · D / N) + N / 5)
//
// - An isolate can admit a request without a call only with a token it already holds. At most
//   B tokens are held at once, over all isolates, and a token held by one isolate waits about
//   N / D seconds for that isolate's next request (an even split); so at most B · D / N
//   admissions per second are local. Of the min(D, r) admissions per second the bucket
//   sustains, the rest need a call each; counted at 95% of them, so that a design may admit up
//   to 5% less than the bucket and still be measured against this floor.
// - Every isolate that decides locally hears from the object about once per 5 s term: N / 5
//   calls per second.
// - A design never needs more than one call per request: F is at most D.
//
// The terms are averages over an even split, not a proof: under a Zipf split idle isolates
// make no call, so a mode can come under F (bench/sim/README.md).

/** The limits of the sweep by their rate: max_tokens and refill_every_seconds. */
export const LIMITS = {
  10: { maxTokens: 10, refillSeconds: 0.1 },
  1000: { maxTokens: 100, refillSeconds: 0.001 },
  100000: { maxTokens: 10000, refillSeconds: 0.00001 },
};

/** F in calls per second for `{ isolates, demand, maxTokens, refillSeconds }` (demand × the rate). */
export function floorCallsPerSecond({ isolates, demand, maxTokens, refillSeconds }) {
  const rate = 1 / refillSeconds; // r
  const requestsPerSecond = demand * rate; // D
  const calledAdmissions = Math.max(0, 0.95 * Math.min(requestsPerSecond, rate) - (maxTokens * requestsPerSecond) / isolates);
  return Math.min(requestsPerSecond, calledAdmissions + isolates / 5);
}
