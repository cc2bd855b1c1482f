// The shim half of scripts/bench-compare.sh (bench/README.md, "before and after"): two built
// packages, old (the baseline) and new, loaded into this one Node process, and the same calls
// through RateLimiterServer on both interleaved (they take turns every few thousand calls),
// so that machine noise hits both alike. ns per consume(key, 1), check(key, 1) and
// limit(key, 1) on a live key at 1 / 10k / 1M live keys (the method of bench/consume.mjs);
// per row, the median of the rounds and the range of the per-round ratios new / old. When the new package has blocks
// (docs/SPEC.md section 13), a third column: the new package with 1,000 blocks in force on
// other keys, so that every call takes the block branch and finds its key unblocked; its
// baselines are the new package's same call without blocks and the old package's. That column
// loads its own copy of the new package: every column has a wasm instance (and memory) of its
// own, holding only its own keys, as the old one does.
// Run: scripts/bench-compare.sh <old-rev>, which builds both packages and sets
// COMPARE_OLD_PKG and COMPARE_NEW_PKG (directories of built packages: pkg/ of a checkout).
// Environment: BENCH_ROUNDS (default 7), COMPARE_KEYS (default 1,10000,1000000).
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import os from 'node:os';
import { OUT, fmt, gc, machineInfo, makeKeys, median, printTable, shuffled } from './common.mjs';

const OLD = process.env.COMPARE_OLD_PKG;
const NEW = process.env.COMPARE_NEW_PKG;
if (!OLD || !NEW) {
  console.error('usage: COMPARE_OLD_PKG=<pkg dir> COMPARE_NEW_PKG=<pkg dir> node --expose-gc bench/compare.mjs (scripts/bench-compare.sh sets them)');
  process.exit(2);
}
const SIZES = (process.env.COMPARE_KEYS ?? '1,10000,1000000').split(',').map((s) => Number(s.trim().replaceAll('_', '')));
const CALLS = 1_000_000; // timed calls per round and column
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const WARMUP = 200_000;
const SLICE = 4_000; // calls of one column before the next one's turn; divides CALLS
// Never fills up nor runs dry during the run: every call is allowed and every key stays live.
const OPTIONS = { max_tokens: 1e15, refill_every_seconds: 3600 };
const BLOCKS = 1_000;
const BLOCK_SECONDS = 86_400; // in force through the run
const METHODS = ['consume', 'check', 'limit'];

/** A built package: its RateLimiterServer (the `node` entry, as a consumer in Node gets it). */
async function load(dir) {
  const wasm = readFileSync(join(dir, 'rate_limiter_bg.wasm'));
  const { RateLimiterServer } = await import(pathToFileURL(join(dir, 'node.js')).href);
  return {
    RateLimiterServer,
    build: `${createHash('sha256').update(wasm).digest('hex').slice(0, 12)} (${wasm.length} B)`,
  };
}
const old = await load(OLD);
const neu = await load(NEW);
const hasBlocks = typeof neu.RateLimiterServer.prototype.block === 'function';
// A package is one wasm instance however many servers it makes: the blocks column gets a copy
// of the new package, loaded from another path.
let withBlocks = null;
if (hasBlocks) {
  const copy = mkdtempSync(join(os.tmpdir(), 'rate-limiter-compare-'));
  cpSync(NEW, copy, { recursive: true });
  withBlocks = await load(copy);
  rmSync(copy, { recursive: true, force: true });
}

/**
 * The timed loop of one column and method: a function of its own (a distinct source for each),
 * so that every call site stays monomorphic, as bench/consume.mjs keeps one loop per
 * implementation.
 */
function loop(method, column) {
  const call = method === 'limit' ? 'server.limit(keys[seq[i]], 1).allowed' : `server.${method}(keys[seq[i]], 1)`;
  // ns for the calls seq[from .. from + calls).
  return new Function('server', 'keys', 'seq', 'from', 'calls', `// ${method}, ${column}
    let allowed = 0;
    const end = from + calls;
    const start = process.hrtime.bigint();
    for (let i = from; i < end; i++) if (${call}) allowed++;
    const ns = Number(process.hrtime.bigint() - start);
    if (allowed !== calls) throw new Error(${JSON.stringify(`${method}, ${column}: `)} + allowed + '/' + calls + ' allowed');
    return ns;`);
}

/** The access sequence: a shuffled permutation of the keys, repeated up to `calls` entries. */
function sequence(n, calls) {
  const order = shuffled(n);
  const seq = new Uint32Array(calls);
  for (let i = 0; i < calls; i++) seq[i] = order[i % n];
  return seq;
}

function server(pkg, keys) {
  const s = new pkg.RateLimiterServer({}, {});
  s.setOptions(OPTIONS);
  for (let i = 0; i < keys.length; i++) s.consume(keys[i], 1);
  return s;
}

const blockedNow = (s) => s.blocked({ limit: 1000 }).keys.length;

const loadStart = os.loadavg()[0];
const t0 = Date.now();
const rows = [];
for (const size of SIZES) {
  const keys = makeKeys(size);
  const seq = sequence(size, CALLS);
  const columns = [
    { name: 'old', server: server(old, keys) },
    { name: 'new', server: server(neu, keys) },
  ];
  if (hasBlocks) {
    const s = server(withBlocks, keys);
    for (let i = 0; i < BLOCKS; i++) s.block(`blocked-${i}:api`, BLOCK_SECONDS);
    if (blockedNow(s) !== BLOCKS) throw new Error(`expected ${BLOCKS} blocks in force`);
    columns.push({ name: 'new, 1,000 blocks', server: s });
  }
  for (const method of METHODS) {
    const runs = columns.map((c) => loop(method, c.name));
    columns.forEach((c, i) => runs[i](c.server, keys, seq, 0, WARMUP));
    gc();
    const samples = columns.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      // One slice of each column in turn, the first column rotating, so that every column
      // meets the same load and none always runs first. A round's figure is its total time
      // over its calls: the mean, garbage collection included (limit() allocates its result).
      const ns = columns.map(() => 0);
      for (let step = 0, from = 0; from < CALLS; step++, from += SLICE) {
        for (let j = 0; j < columns.length; j++) {
          const i = (step + j) % columns.length;
          ns[i] += runs[i](columns[i].server, keys, seq, from, SLICE);
        }
      }
      ns.forEach((t, i) => samples[i].push(t / CALLS));
    }
    if (hasBlocks && blockedNow(columns[2].server) !== BLOCKS) throw new Error('the blocks did not stay in force');
    const row = { method, keys: size, columns: columns.map((c) => c.name), samples, medians: samples.map(median) };
    rows.push(row);
    console.error(`  ${method} at ${fmt(size)} keys: ${row.columns.map((c, i) => `${c} ${row.medians[i].toFixed(1)} ns`).join(', ')}`);
  }
  gc();
}

/** a / b of the medians, and the range of the per-round ratios (how noisy the run was). */
function ratioOf(row, a, b) {
  const rounds = row.samples[a].map((x, i) => x / row.samples[b][i]);
  return { ratio: row.medians[a] / row.medians[b], min: Math.min(...rounds), max: Math.max(...rounds) };
}
const cell = (r) => `${r.ratio.toFixed(3)}× [${r.min.toFixed(2)}–${r.max.toFixed(2)}]`;

const result = {
  old: { dir: OLD, rev: process.env.COMPARE_OLD_REV ?? null, wasm_build: old.build },
  new: { dir: NEW, rev: process.env.COMPARE_NEW_REV ?? null, wasm_build: neu.build },
  calls_per_round: CALLS,
  calls_per_turn: SLICE,
  rounds: ROUNDS,
  warmup_calls: WARMUP,
  options: OPTIONS,
  blocks: hasBlocks ? { count: BLOCKS, seconds: BLOCK_SECONDS, keys: 'blocked-${i}:api, never called' } : null,
  rows: rows.map((row) => ({
    ...row,
    new_vs_old: ratioOf(row, 1, 0),
    ...(hasBlocks ? { blocks_vs_new: ratioOf(row, 2, 1), blocks_vs_old: ratioOf(row, 2, 0) } : {}),
  })),
  loadavg_1m_at_start: Math.round(loadStart * 100) / 100,
  machine: machineInfo(),
  seconds: (Date.now() - t0) / 1000,
};
// Not writeResult (common.mjs): it records the build installed in node_modules, neither of these.
mkdirSync(OUT, { recursive: true });
writeFileSync(join(OUT, 'compare-shim.json'), JSON.stringify({ ...result, at: new Date().toISOString() }, null, 2));

console.log(`\nshim: ns per call through RateLimiterServer on a live key, median of ${ROUNDS} rounds of ${fmt(CALLS)} calls, the columns taking turns every ${fmt(SLICE)} calls (Node ${process.version});`);
console.log(`ratio = new / old of the medians, [min–max of the per-round ratios]; load average ${result.loadavg_1m_at_start} at start, ${result.machine.loadavg_1m_at_end} at end`);
console.log(`old ${result.old.rev ?? OLD}: wasm ${old.build}; new ${result.new.rev ?? NEW}: wasm ${neu.build}\n`);
const header = ['method', 'live keys', 'old ns', 'new ns', 'new/old'];
if (hasBlocks) header.push('new, 1,000 blocks ns', 'blocks/new', 'blocks/old');
printTable(header, result.rows.map((row) => [
  row.method, fmt(row.keys), row.medians[0].toFixed(1), row.medians[1].toFixed(1), cell(row.new_vs_old),
  ...(hasBlocks ? [row.medians[2].toFixed(1), cell(row.blocks_vs_new), cell(row.blocks_vs_old)] : []),
]));
