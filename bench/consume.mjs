// Goal "shim speed" (bench/README.md): ns per consume() through the JS shim in Node at 1 / 10k
// / 1M live keys, beside a plain-JS Map implementation of the same algorithm and the floor (a
// wasm export that only receives the key string), all measured in this run. Also limit() at
// 10k keys, and consume() at 10k keys with a key string built per call.
// Run: node --expose-gc bench/consume.mjs (after scripts/build.sh and scripts/build.sh --bench-floor)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import {
  PlainJsLimiter, ROOT, fmt, fmtRatio, gc, keyOf, makeKeys, median, printTable, ratio,
  shuffled, writeResult,
} from './common.mjs';

const SIZES = [1, 10_000, 1_000_000];
const CALLS = 1_000_000; // timed calls per round
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5); // median of rounds, implementations interleaved
const WARMUP = 200_000;
// Never fills up nor runs dry during the run: every call consumes and every key stays live.
const OPTIONS = { max_tokens: 1e15, refill_every_seconds: 3600 };

// The floor: `scripts/build.sh --bench-floor` (run by scripts/bench.sh) builds the same crate
// with `--features bench-floor` into target/pkg-bench-floor, wasm-opt'd like the package.
const FLOOR = join(ROOT, 'target', 'pkg-bench-floor');
const floorJs = join(FLOOR, 'rate_limiter.js');
let receiveKey = null;
if (existsSync(floorJs)) {
  const floor = await import(pathToFileURL(floorJs).href);
  floor.initSync({ module: readFileSync(join(FLOOR, 'rate_limiter_bg.wasm')) });
  receiveKey = floor.receiveKey;
} else {
  console.warn(`floor not built (${floorJs} missing): run scripts/build.sh --bench-floor; floor column left empty`);
}

// One loop per implementation, so that each call site stays monomorphic.
function runShim(server, keys, seq, calls) {
  let allowed = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (server.consume(keys[seq[i]], 1)) allowed++;
  const ns = Number(process.hrtime.bigint() - start);
  if (allowed !== calls) throw new Error(`shim: expected every call allowed, got ${allowed}/${calls}`);
  return ns / calls;
}

function runPlain(plain, keys, seq, calls) {
  let allowed = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (plain.consume(keys[seq[i]], 1)) allowed++;
  const ns = Number(process.hrtime.bigint() - start);
  if (allowed !== calls) throw new Error(`plain: expected every call allowed, got ${allowed}/${calls}`);
  return ns / calls;
}

function runFloor(receive, keys, seq, calls) {
  let sum = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sum += receive(keys[seq[i]]);
  const ns = Number(process.hrtime.bigint() - start);
  if (sum === 0) throw new Error('floor received nothing');
  return ns / calls;
}

function runShimLimit(server, keys, seq, calls) {
  let allowed = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (server.limit(keys[seq[i]], 1).allowed) allowed++;
  const ns = Number(process.hrtime.bigint() - start);
  if (allowed !== calls) throw new Error(`shim limit: expected every call allowed, got ${allowed}/${calls}`);
  return ns / calls;
}

function runPlainLimit(plain, keys, seq, calls) {
  let allowed = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (plain.limit(keys[seq[i]], 1).allowed) allowed++;
  const ns = Number(process.hrtime.bigint() - start);
  if (allowed !== calls) throw new Error(`plain limit: expected every call allowed, got ${allowed}/${calls}`);
  return ns / calls;
}

// Fresh key strings: built in the loop, as a request handler builds `${ip}:${route}`; the
// plain Map must then hash each string (V8 caches a string's hash in the string itself).
function runShimFresh(server, ids, calls) {
  let allowed = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (server.consume('client-' + ids[i] + ':api', 1)) allowed++;
  const ns = Number(process.hrtime.bigint() - start);
  if (allowed !== calls) throw new Error('shim fresh: not all allowed');
  return ns / calls;
}

function runPlainFresh(plain, ids, calls) {
  let allowed = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) if (plain.consume('client-' + ids[i] + ':api', 1)) allowed++;
  const ns = Number(process.hrtime.bigint() - start);
  if (allowed !== calls) throw new Error('plain fresh: not all allowed');
  return ns / calls;
}

function runFloorFresh(receive, ids, calls) {
  let sum = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sum += receive('client-' + ids[i] + ':api');
  const ns = Number(process.hrtime.bigint() - start);
  if (sum === 0) throw new Error('floor received nothing');
  return ns / calls;
}

/** The access sequence: a shuffled permutation of the keys, repeated up to `calls` entries. */
function sequence(n, calls) {
  const order = shuffled(n);
  const seq = new Uint32Array(calls);
  for (let i = 0; i < calls; i++) seq[i] = order[i % n];
  return seq;
}

/** ns per `Date.now()`: every consume() reads the clock once, the floor does not. */
function runClock(calls) {
  let sum = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sum += Date.now();
  const ns = Number(process.hrtime.bigint() - start);
  if (sum === 0) throw new Error('the clock read nothing');
  return ns / calls;
}

/** Runs `round()` ROUNDS times per implementation, interleaved; median ns/call of each. */
function measure(impls) {
  const samples = Object.fromEntries(Object.keys(impls).map((k) => [k, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, round] of Object.entries(impls)) samples[name].push(round());
  }
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, { median: median(v), samples: v }]));
}

const t0 = Date.now();
const rows = [];
let limitRow = null; // limit() at 10k keys
let freshRow = null; // consume() at 10k keys, key string built per call
for (const size of SIZES) {
  const keys = makeKeys(size);
  const seq = sequence(size, CALLS);
  const server = new RateLimiterServer({}, {});
  server.setOptions(OPTIONS);
  const plain = new PlainJsLimiter();
  plain.setOptions(OPTIONS);
  // Every key live before timing, then a warm-up on the timed sequence.
  for (let i = 0; i < size; i++) {
    server.consume(keys[i], 1);
    plain.consume(keys[i], 1);
  }
  runShim(server, keys, seq, WARMUP);
  runPlain(plain, keys, seq, WARMUP);
  if (receiveKey) runFloor(receiveKey, keys, seq, WARMUP);
  gc();
  const impls = {
    shim: () => runShim(server, keys, seq, CALLS),
    plain: () => runPlain(plain, keys, seq, CALLS),
  };
  if (receiveKey) impls.floor = () => runFloor(receiveKey, keys, seq, CALLS);
  const m = measure(impls);
  rows.push({
    keys: size,
    shim_ns: m.shim.median,
    plain_ns: m.plain.median,
    floor_ns: m.floor?.median ?? null,
    samples: { shim: m.shim.samples, plain: m.plain.samples, floor: m.floor?.samples ?? null },
  });
  console.error(`  consume at ${fmt(size)} keys: shim ${m.shim.median.toFixed(1)} ns, plain ${m.plain.median.toFixed(1)} ns` +
    (m.floor ? `, floor ${m.floor.median.toFixed(1)} ns` : ''));

  if (size === 10_000) {
    // limit() (decides and reports in one call) beside the plain-JS limit(), same keys.
    const lServer = new RateLimiterServer({}, {});
    lServer.setOptions(OPTIONS);
    const lPlain = new PlainJsLimiter();
    lPlain.setOptions(OPTIONS);
    for (let i = 0; i < size; i++) {
      lServer.limit(keys[i], 1);
      lPlain.limit(keys[i], 1);
    }
    runShimLimit(lServer, keys, seq, WARMUP);
    runPlainLimit(lPlain, keys, seq, WARMUP);
    gc();
    // consume() again in the same rounds: the ratio limit()/consume() is the median of each
    // round's own ratio, so a slow phase of a shared machine weighs on both sides alike.
    const l = measure({
      shim: () => runShimLimit(lServer, keys, seq, CALLS),
      plain: () => runPlainLimit(lPlain, keys, seq, CALLS),
      consume: () => runShim(server, keys, seq, CALLS),
    });
    const perRound = l.shim.samples.map((ns, r) => ns / l.consume.samples[r]);
    limitRow = {
      keys: size, shim_ns: l.shim.median, plain_ns: l.plain.median, floor_ns: null,
      consume_ns: l.consume.median, over_consume: median(perRound),
    };
    console.error(`  limit at 10,000 keys: shim ${l.shim.median.toFixed(1)} ns, plain ${l.plain.median.toFixed(1)} ns, ` +
      `shim consume in the same rounds ${l.consume.median.toFixed(1)} ns (limit/consume per round, median: ${fmtRatio(limitRow.over_consume)})`);

    // consume() with the key string built per call (same ids, same order).
    const fresh = measure({
      shim: () => runShimFresh(server, seq, CALLS),
      plain: () => runPlainFresh(plain, seq, CALLS),
      ...(receiveKey ? { floor: () => runFloorFresh(receiveKey, seq, CALLS) } : {}),
    });
    freshRow = {
      keys: size,
      shim_ns: fresh.shim.median,
      plain_ns: fresh.plain.median,
      floor_ns: fresh.floor?.median ?? null,
    };
    console.error(`  consume at 10,000 keys, fresh strings: shim ${fresh.shim.median.toFixed(1)} ns, plain ${fresh.plain.median.toFixed(1)} ns`);
  }
  gc();
}

const dateNowNs = measure({ clock: () => runClock(CALLS) }).clock.median;

const result = {
  date_now_ns: dateNowNs,
  calls_per_round: CALLS,
  rounds: ROUNDS,
  warmup_calls: WARMUP,
  options: OPTIONS,
  key_format: keyOf('i'),
  access_order: 'a fixed-seed shuffled permutation of the keys (repeated to fill the rounds); at 1M keys each round visits every key once in random order, not in insertion order',
  sizes: rows.map(({ samples: _, ...r }) => r),
  samples: rows.map((r) => ({ keys: r.keys, ...r.samples })),
  limit_10k: limitRow,
  fresh_strings_10k: freshRow,
  floor_available: receiveKey !== null,
  seconds: (Date.now() - t0) / 1000,
};
writeResult('consume', result);

console.log(`\nGoal "shim speed" — consume() on a live key, ns/call (median of ${ROUNDS} interleaved rounds of ${fmt(CALLS)} calls, Node ${process.version})\n`);
const line = (label, r) => [
  label, r.shim_ns.toFixed(1), r.plain_ns.toFixed(1), r.floor_ns === null ? '—' : r.floor_ns.toFixed(1),
  fmtRatio(ratio(r.shim_ns, r.plain_ns)), fmtRatio(ratio(r.shim_ns, r.floor_ns)),
];
console.log(`Date.now() alone: ${dateNowNs.toFixed(1)} ns (read once by every consume(), not by the floor)\n`);
printTable(
  ['live keys', 'shim ns', 'plain JS ns', 'floor ns', 'shim/plain', 'shim/floor'],
  [
    ...rows.map((r) => line(fmt(r.keys), r)),
    line('10,000, limit()', limitRow),
    line('10,000, key built per call', freshRow),
  ],
);
console.log(`\nlimit() / consume() at 10,000 keys, measured in the same rounds: ${fmtRatio(limitRow.over_consume)} ` +
  `(median of the rounds' own ratios; consume ${limitRow.consume_ns.toFixed(1)} ns in those rounds)`);
