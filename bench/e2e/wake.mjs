// node bench/e2e/wake.mjs: what a wake-up costs DurableRateLimiterServer (benchmark "wake-up
// cost" in bench/README.md: measured, no goal), in workerd. For Durable Objects whose SQLite
// storage holds N saved buckets (N = 10, 1,000, 100,000, and 0: the empty baseline), times
// from this process, per operation:
//   first   a wake-up then check() of one key: the lazy load, one point SELECT (on N = 0 the
//           SELECT finds no row: the baseline)
//   full    the same after a full-table scan + restore of all N rows, as an eager wake-up
//           would load them (what loading once under blockConcurrencyWhile would cost)
//   many    a wake-up then check() of m = min(N, 1,000) distinct keys: m point SELECTs
//   warm    check() of the same m keys on a server that holds them (no load at all)
// workerd's clock stands still during compute, so each request repeats its operation `reps`
// times and is timed here; the cost of one operation is (median request − median no-op
// request) / reps. Prints `WAKE …` lines, writes bench/out/wake.json.
// Settings (environment): WAKE_SAMPLES=9 (timed requests per operation), WAKE_SIZES="10 1000
// 100000" (the row counts N), TMPFS=/dev/shm (where the SQLite files go; tmpfs keeps disk syncs
// out of the figures). workerd is started and stopped by tests/support/workerd.mjs.
import { mkdirSync, writeFileSync } from 'node:fs';
import { machineInfo } from '../common.mjs';
import { join } from 'node:path';
import { bundleWorker, makeTmpfsDir, ROOT, startWorkerd, workerdVersion, wranglerConfig, writeConfig } from '../../tests/support/workerd.mjs';

const HERE = new URL('.', import.meta.url).pathname;
const OUT = join(ROOT, 'bench', 'out');
const SIZES = (process.env.WAKE_SIZES ?? '10 1000 100000').split(/[\s,]+/).filter(Boolean).map(Number);
const SAMPLES = Number(process.env.WAKE_SAMPLES ?? 9);
const TMPFS = process.env.TMPFS ?? '/dev/shm';

const log = (...args) => console.error('[wake]', ...args);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// ---- bundle, config, workerd (tests/support/workerd.mjs: stopped by PID, also at exit) ----
const storage = makeTmpfsDir('rl-wake-', TMPFS);
if (!storage.tmpfs) log(`no tmpfs at ${TMPFS}: SQLite files on the disk (${storage.dir})`);
log('bundling bench/e2e/wake-worker.js with wrangler deploy --dry-run');
const bundle = await bundleWorker(wranglerConfig(join(HERE, 'wake.toml')), { prefix: 'rl-wake-' });
const workerd = await startWorkerd(
  (port) =>
    writeConfig(join(bundle.dir, 'config.capnp'), {
      port,
      v8Flags: ['--expose-gc'],
      workers: [
        {
          name: 'main',
          bundle,
          // SQLite-backed, as new_sqlite_classes declares it; inMemory storage has no SQL API
          durableObjects: [{ className: 'WakeBench', uniqueKey: 'rl-wake', sql: true }],
          storage: { disk: storage.dir },
          bindings: [{ name: 'WAKE', durableObject: 'WakeBench' }],
        },
      ],
    }),
  { ready: '/run?n=0&op=noop&reps=1' },
);
const base = workerd.base;

async function call(path) {
  const response = await fetch(base + path);
  const text = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${text}\n${workerd.log()}`);
  return JSON.parse(text);
}
// Before each timed request: a GC, and a turn of the event loop for the finalizers it queued.
async function timed(path, n) {
  await call(`/gc?n=${n}`);
  await new Promise((r) => setTimeout(r, 2));
  const start = process.hrtime.bigint();
  await call(path);
  return Number(process.hrtime.bigint() - start) / 1e6; // ms
}

const version = await workerdVersion();
log(`${version} pid ${workerd.pid}, SQLite files in ${storage.dir} (${storage.tmpfs ? 'tmpfs' : 'disk'})`);

// ---- seed: N rows per DO, 10,000 per request ----
for (const n of SIZES) {
  let rows = 0;
  for (let from = 0; from < n; from += 10_000) rows = await call(`/seed?n=${n}&from=${from}&to=${Math.min(n, from + 10_000)}`);
  if (rows !== n) throw new Error(`wake-${n}: ${rows} rows after seeding ${n}`);
  log(`wake-${n}: ${rows} rows`);
}

// ---- the measurements: reps for requests of roughly 5-100 ms, at most 200 fresh servers a
// request (each holds some 200 KB of wasm memory until the GC between requests frees it) ----
const reps = (work) => Math.min(200, Math.max(1, Math.round(20_000 / work)));
const plan = [{ n: 0, op: 'first', m: 0, reps: 200 }];
for (const n of SIZES) {
  const m = Math.min(n, 1000);
  plan.push(
    { n, op: 'first', m: 0, reps: 200 },
    { n, op: 'full', m: 0, reps: reps(n) },
    { n, op: 'many', m, reps: reps(m) },
    { n, op: 'warm', m, reps: Math.round(20_000 / m) }, // no fresh servers: no cap
  );
}
const repsSet = [...new Set(plan.map((p) => p.reps))];
const pathOf = (p) => `/run?n=${p.n}&op=${p.op}&m=${p.m}&reps=${p.reps}`;
for (const p of plan) await timed(pathOf(p), p.n); // warm-up (and builds the warm servers)
const times = new Map(plan.map((p) => [p, []]));
const noop = new Map(repsSet.map((reps) => [reps, []]));
// Sample by sample, every operation in turn, so drift on a shared machine hits all alike.
for (let s = 0; s < SAMPLES; s++) {
  for (const reps of repsSet) noop.get(reps).push(await timed(`/run?n=0&op=noop&m=0&reps=${reps}`, 0));
  for (const p of plan) times.get(p).push(await timed(pathOf(p), p.n));
}
if (workerd.child.exitCode !== null) throw new Error(`workerd died:\n${workerd.log()}`);
const wasmMemory = Math.max(...(await Promise.all([0, ...SIZES].map((n) => call(`/gc?n=${n}`)))));

// The no-op loop itself costs nothing measurable: all no-op requests form one baseline.
const noopMs = median([...noop.values()].flat());
const us = (p) => ((median(times.get(p)) - noopMs) * 1000) / p.reps;
const find = (n, op) => plan.find((p) => p.n === n && p.op === op);
const emptyUs = us(find(0, 'first'));
const round = (x, d = 2) => Number(x.toFixed(d));
const results = SIZES.map((n) => {
  const m = Math.min(n, 1000);
  const first = us(find(n, 'first'));
  const full = us(find(n, 'full'));
  const perKeyLoad = (us(find(n, 'many')) - us(find(n, 'warm'))) / m;
  return {
    rows: n,
    first_call_lazy_us: round(first),
    first_call_full_load_us: round(full),
    full_over_lazy: round(full / first, 3),
    lazy_over_empty: round(first / emptyUs, 3),
    full_over_empty: round(full / emptyUs, 3),
    m_keys: m,
    many_lazy_us: round(us(find(n, 'many'))),
    many_warm_us: round(us(find(n, 'warm'))),
    lazy_load_per_key_us: round(perKeyLoad, 3),
    // keys a woken DO must touch before the point SELECTs have cost what the scan costs
    break_even_keys: Math.round((full - first) / perKeyLoad),
  };
});

console.log(`WAKE baseline first_call_empty_us=${round(emptyUs)} (wake-up + check() on a DO with no rows)`);
for (const r of results) {
  console.log(
    `WAKE rows=${r.rows} first_call_lazy_us=${r.first_call_lazy_us} first_call_full_load_us=${r.first_call_full_load_us} ` +
      `full/lazy=${r.full_over_lazy} lazy/empty=${r.lazy_over_empty} full/empty=${r.full_over_empty} ` +
      `lazy_load_per_key_us=${r.lazy_load_per_key_us} (m=${r.m_keys}: ${r.many_lazy_us} vs warm ${r.many_warm_us}) break_even_keys=${r.break_even_keys}`,
  );
}
mkdirSync(OUT, { recursive: true });
const report = {
  benchmark: 'wake-workerd',
  generated_at: new Date().toISOString(),
  machine: {
    ...machineInfo(),
    workerd: version,
  },
  params: {
    samples: SAMPLES,
    storage: storage.tmpfs ? 'localDisk on tmpfs' : 'localDisk on disk',
    wasm_memory_mib: round(wasmMemory / 2 ** 20, 1),
    noop_request_ms: round(noopMs, 3),
    noop_request_ms_by_reps: Object.fromEntries([...noop].map(([reps, xs]) => [reps, round(median(xs), 3)])),
    plan: plan.map((p) => ({ rows: p.n, op: p.op, m: p.m, reps: p.reps, median_request_ms: round(median(times.get(p)), 3) })),
  },
  first_call_empty_us: round(emptyUs),
  results,
};
writeFileSync(join(OUT, 'wake.json'), JSON.stringify(report, null, 2) + '\n');
log(`wasm memory at the end (its peak: it never shrinks): ${round(wasmMemory / 2 ** 20, 1)} MiB`);
console.log(`WAKE wrote ${join(OUT, 'wake.json')}`);
await workerd.stop();
