// The fewest calls per second at which any design of shares can admit a given part of one exact
// bucket, on an even split: a yardstick between the floor F (floor.mjs, which ignores what
// sub-buckets lose) and what the modes make (bench/sim/README.md, "The frontier").
//
// The family of designs: H of the N isolates hold a share, each a sub-bucket of c whole tokens
// and q tokens per second of refill; the main bucket keeps the rest (capacity B - H·c, refill
// r - H·q). Every other isolate, and a holder whose share runs dry, is served by the main
// bucket. Admissions per second:
// - by the shares: H · q · admittedShare(c, d / q), d = D / N each isolate's demand (Poisson
//   requests; sub-bucket.mjs);
// - by the main bucket: at most its refill and the demand left over; each call admits its own
//   request and may hand out a lease of k tokens for a life τ, holding k of the main bucket's
//   capacity for τ, of which its holder uses what its requests in τ take (callsFor). That is
//   generous on purpose: every call finds a token (calls timed perfectly to the refill), and a
//   lease's capacity comes back at the end of its life without a call.
// Calls per second: the calls to the main bucket plus H / term (each holder renews once a term).
// So for a cell, the fewest calls reaching `target` × min(D, r) admissions is a lower bound for
// every design of that family (shares of any size and number, any split of the refill, any
// timing of the calls to the main bucket), not a measurement of one.
//
//   node bench/sim/frontier.mjs                       # the cells of the sweep that miss a goal
//   node bench/sim/frontier.mjs --n 256 --demand 10 --limit 1000 --term 1,5 --target 0.95 --rtt 50 --margin 100

import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { LIMITS, floorCallsPerSecond } from './floor.mjs';
import { stream } from './random.mjs';
import { admittedShare } from './sub-bucket.mjs';

/** Demand over refill on a geometric grid; beyond the last point a sub-bucket loses nothing that matters. */
const RATIOS = Array.from({ length: 71 }, (_, i) => 0.5 * 1.06 ** i); // 0.5 … ~29.5
const MAX_CAPACITY = 25;
const EVENTS = 400_000;

/** admittedShare on the grid, by capacity (1 token: exactly ratio / (1 + ratio)). */
function shareTable(seed) {
  const table = [];
  for (let c = 1; c <= MAX_CAPACITY; c++) {
    table[c] = RATIOS.map((ratio) =>
      c === 1 ? ratio / (1 + ratio) : admittedShare(c, ratio, Math.max(2_000, EVENTS / ratio), stream(seed, `frontier ${c} ${ratio}`)),
    );
  }
  return table;
}

/** The part of its refill a sub-bucket of `c` tokens admits at `ratio`, interpolated on the grid. */
function shareAdmits(table, c, ratio) {
  const row = table[Math.min(c, MAX_CAPACITY)];
  if (ratio <= RATIOS[0]) return (row[0] * ratio) / RATIOS[0]; // below the grid: every request, at most
  if (ratio >= RATIOS[RATIOS.length - 1]) return row[row.length - 1];
  const i = Math.floor(Math.log(ratio / RATIOS[0]) / Math.log(1.06));
  const t = (ratio - RATIOS[i]) / (RATIOS[i + 1] - RATIOS[i]);
  return row[i] + t * (row[i + 1] - row[i]);
}

/** Lease sizes and lives (s) the main bucket may hand out with a call. */
const LEASE_TOKENS = Array.from({ length: 16 }, (_, k) => k);
const LEASE_LIVES = Array.from({ length: 40 }, (_, i) => 0.01 * 1.15 ** i); // 10 ms … ~2.3 s

/** E[min(k, X)] for X Poisson with mean m: the tokens of a lease of k used within its life. */
function usedOfLease(k, m) {
  let p = Math.exp(-m);
  let below = 0; // Σ_{j<k} j·P(X=j) + k·P(X>=k)
  let cumulative = 0;
  for (let j = 0; j < k; j++) {
    below += j * p;
    cumulative += p;
    p *= m / (j + 1);
  }
  return below + k * (1 - cumulative);
}

/**
 * The fewest calls per second that admit `A` requests per second from a main bucket of
 * `capacity` tokens, isolates asking `d` per second each: every call admits its own request and
 * may hand out a lease of k tokens that holds k of the capacity for its life τ (given back
 * unused at its end, without a call: generous, a real lease is held until it is settled or
 * expires), of which its holder uses what its requests take in τ less `lostSeconds` (the round
 * trip before the lease arrives and the margin before its end, 10.4).
 */
function callsFor(A, capacity, d, lostSeconds) {
  let best = Infinity;
  for (const k of LEASE_TOKENS) {
    for (const life of k === 0 ? [0] : LEASE_LIVES) {
      if (k > 0 && life <= lostSeconds) continue;
      const perCall = 1 + (k === 0 ? 0 : usedOfLease(k, d * (life - lostSeconds)));
      const calls = A / perCall;
      if (calls * k * life <= capacity && calls < best) best = calls;
    }
  }
  return best;
}

/**
 * The fewest calls per second at which a design of the family admits `target` × min(D, r), and
 * that design; null when none does. Admissions and calls per second.
 */
export function frontier(table, { isolates, demand, maxTokens, refillSeconds }, termSeconds, target, lostSeconds) {
  const r = 1 / refillSeconds;
  const D = demand * r;
  const d = D / isolates;
  const goal = target * Math.min(D, r);
  let best = null;
  const consider = (design) => {
    if (best === null || design.calls < best.calls) best = design;
  };
  for (let holders = 0; holders <= Math.min(isolates, maxTokens); holders++) {
    const renewals = holders / termSeconds;
    for (let c = holders === 0 ? 0 : 1; c * holders <= maxTokens && c <= MAX_CAPACITY; c++) {
      const mainCapacity = maxTokens - c * holders;
      for (let step = holders === 0 ? 0 : 1; step <= 100; step++) {
        const sharesRate = holders === 0 ? 0 : (r * step) / 100;
        const q = holders === 0 ? 0 : sharesRate / holders;
        const byShares = holders === 0 ? 0 : holders * q * shareAdmits(table, c, d / q);
        const mainRate = r - sharesRate;
        const leftover = D - byShares;
        const needed = goal - byShares;
        if (needed <= 0) {
          consider({ calls: renewals, holders, c, sharesRate });
          continue;
        }
        // The main bucket must admit `needed`: within its refill and the demand left over.
        if (mainCapacity < 1 || needed > Math.min(mainRate, leftover) + 1e-9) continue;
        const mainCalls = callsFor(needed, mainCapacity, d, lostSeconds);
        if (mainCalls === Infinity) continue;
        consider({ calls: renewals + mainCalls, holders, c, sharesRate });
      }
    }
  }
  return best;
}

/** The cells of the sweep (50 ms, even split, seed 1) that missed a goal, with that goal's calls per second. */
const MISSED = [
  { isolates: 4, demand: 2, limit: 10, goalCalls: 11.6 },
  { isolates: 32, demand: 10, limit: 10, goalCalls: 22.8 },
  { isolates: 256, demand: 100, limit: 10, goalCalls: 112.4 },
  { isolates: 32, demand: 2, limit: 1000, goalCalls: 141 },
  { isolates: 256, demand: 2, limit: 1000, goalCalls: 979 },
  { isolates: 256, demand: 10, limit: 1000, goalCalls: 206 },
  { isolates: 256, demand: 100, limit: 1000, goalCalls: 314 },
];

function main() {
  const { values } = parseArgs({
    options: {
      n: { type: 'string' },
      demand: { type: 'string' },
      limit: { type: 'string', default: '10,1000' },
      term: { type: 'string', default: '1,5' },
      target: { type: 'string', default: '0.95' },
      seed: { type: 'string', default: '1' },
      rtt: { type: 'string', default: '50' },
      margin: { type: 'string', default: '100' },
    },
  });
  const list = (s) => s.split(',').map(Number);
  const terms = list(values.term);
  const target = Number(values.target);
  const lostSeconds = (Number(values.rtt) + Number(values.margin)) / 1000;
  let cells = MISSED;
  if (values.n !== undefined || values.demand !== undefined) {
    cells = [];
    for (const isolates of list(values.n ?? '1,4,32,256,1000')) {
      for (const demand of list(values.demand ?? '2,10,100')) {
        for (const limit of list(values.limit)) cells.push({ isolates, demand, limit, goalCalls: null });
      }
    }
  }
  const table = shareTable(Number(values.seed));
  console.log(`Fewest calls/s for ${target} of one exact bucket, any design of shares (even split, Poisson requests, ${values.rtt} ms round trips, ${values.margin} ms lease margin)\n`);
  const termCols = terms.map((t) => `${t} s terms: calls/s (holders × tokens, refill to shares)`);
  console.log(`| N | demand | limit | F | goal calls/s | ${termCols.join(' | ')} |`);
  console.log(`| ---: | ---: | --- | ---: | ---: | ${terms.map(() => '---').join(' | ')} |`);
  for (const { isolates, demand, limit, goalCalls } of cells) {
    const cell = { isolates, demand, ...LIMITS[limit] };
    const F = floorCallsPerSecond(cell);
    const cols = terms.map((t) => {
      const best = frontier(table, cell, t, target, lostSeconds);
      if (best === null) return 'none reaches it';
      const split = best.holders === 0 ? 'no shares' : `${best.holders} × ${best.c}, ${Math.round((100 * best.sharesRate) / (1 / cell.refillSeconds))}%`;
      return `${best.calls.toFixed(1)} (${split})`;
    });
    const goal = goalCalls === null ? '' : String(goalCalls);
    console.log(`| ${isolates} | ${demand}x | ${limit}/s | ${F.toFixed(1)} | ${goal} | ${cols.join(' | ')} |`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) main();
