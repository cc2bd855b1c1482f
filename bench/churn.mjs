// Goal "key churn" (bench/README.md): 2,000,000 distinct keys streamed through one limiter
// instance, each used once; with fake time about 100,000 buckets are not yet full at any
// moment. Reports the peak number of stored buckets and the peak wasm memory: both must follow
// the live buckets, not the 2M keys seen. Then a hash-flooding (HashDoS) check: ns per consume on adversarially patterned keys
// (long shared prefixes, sequential numbers) beside random keys, same instance kind, same run.
import { RateLimiterServer } from '@delightstack/rate-limiter';
import { initSync, RateLimiter } from '../node_modules/@delightstack/rate-limiter/rate_limiter.js';
import { fmt, printTable, writeResult } from './common.mjs';

new RateLimiterServer({}, {}); // the node entry has started the wasm instance by now
const memory = () => initSync().memory.buffer.byteLength; // the instance already started
const MiB = 1024 * 1024;

// --- churn: 100 new keys per fake millisecond, each full again 1 s after its one use.
const KEYS = 2_000_000;
const PER_MS = 100;
const churn = new RateLimiter(1, 2);
let now = 1_800_000_000_000;
churn.setOptions(now, { max_tokens: 1, refill_every_seconds: 1 });
const before = memory();
let peakStored = 0;
let peakMemory = before;
for (let i = 0; i < KEYS; i++) {
  if (i % PER_MS === 0) now += 1;
  if (churn.consumeText(now, `client-${i}:api`, 1) !== 1) throw new Error(`key ${i} denied`);
  if (i % 1000 === 0) {
    peakStored = Math.max(peakStored, churn.storedBuckets);
    peakMemory = Math.max(peakMemory, memory());
  }
}
const live = PER_MS * 1000;
console.log(`\nKey churn: ${fmt(KEYS)} distinct keys, ${PER_MS} new per fake ms, each full again after 1 s (≈ ${fmt(live)} live)\n`);
printTable(['', 'value'], [
  ['peak stored buckets', fmt(peakStored)],
  ['peak stored / live', `${(peakStored / live).toFixed(2)}×`],
  ['wasm memory before', `${(before / MiB).toFixed(1)} MiB`],
  ['peak wasm memory', `${(peakMemory / MiB).toFixed(1)} MiB`],
]);

// --- gate churn: the same stream as permits, 1,000,000 keys each with one permit of 1 s that
// is never released (its isolate vanished): gates must follow the live permits as buckets
// follow the live buckets (the baseline above, same run).
const GATE_KEYS = 1_000_000;
const gates = new RateLimiter(3, 4);
let gateNow = 1_800_000_000_000;
const gatesBefore = memory();
let peakGates = 0;
let peakGateMemory = gatesBefore;
for (let i = 0; i < GATE_KEYS; i++) {
  if (i % PER_MS === 0) gateNow += 1;
  if (!gates.acquire(gateNow, `client-${i}:generate`, 1, { max_in_flight: 1, ttl_seconds: 1 }).allowed) {
    throw new Error(`key ${i} denied a permit`);
  }
  if (i % 1000 === 0) {
    peakGates = Math.max(peakGates, gates.gatedKeys);
    peakGateMemory = Math.max(peakGateMemory, memory());
  }
}
// Long after the last expiry, calls on one key sweep the rest away.
gateNow += 2_000;
for (let i = 0; i < GATE_KEYS / 2; i++) {
  const { id } = gates.acquire(gateNow, 'busy', 1, { max_in_flight: 1 });
  gates.release(gateNow, 'busy', id);
}
const gatesLeft = gates.gatedKeys;
console.log(`\nGate churn: ${fmt(GATE_KEYS)} keys, one unreleased 1 s permit each, ${PER_MS} new per fake ms (≈ ${fmt(live)} live)\n`);
printTable(['', 'gates', 'buckets (baseline, above)', 'ratio'], [
  ['peak kept / live', `${(peakGates / live).toFixed(2)}×`, `${(peakStored / live).toFixed(2)}×`, `${(peakGates / peakStored).toFixed(2)}×`],
  ['gates left after all expired and 500,000 more calls', fmt(gatesLeft), '', ''],
  ['peak wasm memory growth', `${((peakGateMemory - gatesBefore) / MiB).toFixed(1)} MiB`, `${((peakMemory - before) / MiB).toFixed(1)} MiB`, ''],
]);

// --- block churn: 1,000,000 keys each blocked for 1 s, 100 a fake ms; then, long after, calls
// on one key sweep the rest away.
const blocks = new RateLimiter(5, 6);
let blockNow = 1_800_000_000_000;
const blocksBefore = memory();
let peakBlocks = 0;
let peakBlockMemory = blocksBefore;
for (let i = 0; i < GATE_KEYS; i++) {
  if (i % PER_MS === 0) blockNow += 1;
  blocks.block(blockNow, `client-${i}:login`, 1);
  if (i % 1000 === 0) {
    peakBlocks = Math.max(peakBlocks, blocks.blockedKeys);
    peakBlockMemory = Math.max(peakBlockMemory, memory());
  }
}
blockNow += 2_000;
for (let i = 0; i < GATE_KEYS / 2; i++) blocks.consume(blockNow, 'busy', 0);
const blocksLeft = blocks.blockedKeys;
console.log(`\nBlock churn: ${fmt(GATE_KEYS)} keys blocked for 1 s each, ${PER_MS} new per fake ms (≈ ${fmt(live)} in force)\n`);
printTable(['', 'blocks', 'buckets (baseline, above)', 'ratio'], [
  ['peak kept / in force', `${(peakBlocks / live).toFixed(2)}×`, `${(peakStored / live).toFixed(2)}×`, `${(peakBlocks / peakStored).toFixed(2)}×`],
  ['blocks left after all ended and 500,000 more calls', fmt(blocksLeft), '', ''],
  ['peak wasm memory growth', `${((peakBlockMemory - blocksBefore) / MiB).toFixed(1)} MiB`, `${((peakMemory - before) / MiB).toFixed(1)} MiB`, ''],
]);

// --- HashDoS: the same number of live keys, random vs patterned.
const N = 100_000;
const CALLS = 1_000_000;
// Random keys of the same lengths as each pattern, so only the pattern differs.
const randomLike = (keys) =>
  keys.map((k) => Array.from({ length: k.length }, () => 'abcdefghijklmnopqrstuvwxyz0123456789'[Math.floor(Math.random() * 36)]).join(''));
const patterns = {
  'shared 200-char prefix': Array.from({ length: N }, (_, i) => `${'p'.repeat(200)}${i}`),
  'sequential numbers': Array.from({ length: N }, (_, i) => String(i)),
};
function nsPerCall(keys) {
  const server = new RateLimiterServer({}, {});
  server.setOptions({ max_tokens: 1e15, refill_every_seconds: 3600 });
  for (const key of keys) server.consume(key, 1);
  const times = [];
  for (let round = 0; round < 3; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < CALLS; i++) server.consume(keys[(i * 7919) % N], 1);
    times.push(Number(process.hrtime.bigint() - start) / CALLS);
  }
  return times.sort((x, y) => x - y)[1];
}
const rows = [];
for (const [name, keys] of Object.entries(patterns)) {
  const random = nsPerCall(randomLike(keys));
  const patterned = nsPerCall(keys);
  rows.push({ name, ns: patterned, random_ns: random, ratio: patterned / random });
}
console.log(`\nHashDoS: consume() on ${fmt(N)} live keys, ${fmt(CALLS)} calls, median of 3 rounds\n`);
printTable(['patterned keys', 'ns per call', 'random keys, same lengths', 'ratio'], rows.map((r) => [r.name, r.ns.toFixed(1), r.random_ns.toFixed(1), `${r.ratio.toFixed(2)}×`]));
writeResult('churn', {
  keys: KEYS, live, peak_stored: peakStored, memory_before: before, peak_memory: peakMemory, hashdos: rows,
  gates: { keys: GATE_KEYS, peak_kept: peakGates, left: gatesLeft, memory_before: gatesBefore, peak_memory: peakGateMemory },
  blocks: { keys: GATE_KEYS, peak_kept: peakBlocks, left: blocksLeft, memory_before: blocksBefore, peak_memory: peakBlockMemory },
});
