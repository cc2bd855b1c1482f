// Benchmark "crowded key" (bench/README.md): what a lease call costs through the shim while
// many leases are live on its key, as where hundreds of isolates lease from one bucket. Each
// row holds L plain leases on the key (granted first, never settled), then times pairs of
// `limitLeased(key, 1, policy, { want: 2 })` and the `settle` of the lease it got. Baseline, same
// run: the same pair on a key with no other lease (L = 0). A call reads every lease of its
// key, so some growth with L is expected; the goal is that it stays about linear.
import { RateLimiterServer } from '@delightstack/rate-limiter';
import { fmt, fmtRatio, median, printTable, writeResult } from './common.mjs';

const POLICY = { max_tokens: 1e9, refill_every_seconds: 1 };
const HELD = [0, 10, 100, 1_000];
const ROUNDS = 9;
// Pairs per round: fewer where each is slower, about the same time per round.
const pairsFor = (held) => Math.max(200, Math.round(200_000 / (held + 10)));

/** ns per limitLeased + settle pair with `held` other leases live on the key. */
function round(held) {
  const server = new RateLimiterServer({}, {});
  for (let i = 0; i < held; i++) server.limitLeased('k', 0, POLICY, { want: 1 });
  const pairs = pairsFor(held);
  const start = process.hrtime.bigint();
  for (let i = 0; i < pairs; i++) {
    const { lease } = server.limitLeased('k', 1, POLICY, { want: 2 });
    server.settle('k', { id: lease.id, used: 1 });
  }
  return Number(process.hrtime.bigint() - start) / pairs;
}

const samples = new Map(HELD.map((held) => [held, []]));
for (let r = 0; r < ROUNDS; r++) for (const held of HELD) samples.get(held).push(round(held));
const baseline = median(samples.get(0));
const rows = HELD.map((held) => {
  const ns = median(samples.get(held));
  return { held, ns, ratio: ns / baseline, per_lease_ns: held > 0 ? (ns - baseline) / held : null };
});

console.log(`\nCrowded key: limitLeased + settle through the shim, ${ROUNDS} rounds (medians)\n`);
printTable(
  ['leases live on the key', 'ns per pair', 'ratio to none', 'ns more per lease held'],
  rows.map((r) => [fmt(r.held), fmt(r.ns), fmtRatio(r.ratio), r.per_lease_ns === null ? '—' : fmt(r.per_lease_ns, 1)]),
);
console.log(`\nwrote ${writeResult('leases', { rounds: ROUNDS, rows })}`);
