// node bench/e2e/run.mjs: the end-to-end benchmark in workerd (benchmark "end-to-end throughput"
// in bench/README.md, and the durable / in-memory comparison "durable overhead"): requests/s
// and p50/p99 latency of a Worker that calls a Durable Object over RPC, with the load sent by a
// second process (wrk, else a small Node generator) over loopback. Variants, all in one Worker
// (bench/e2e/worker.js), one path each, same keys, same concurrency and duration:
//   floor       one RPC to a DO that returns `true` at once
//   plain-js    one RPC to a DO running the same token bucket in plain JS over a Map
//   consume     one RPC: RateLimiterServer.consume(key, 1) (options set once per DO)
//   three-call  setOptions(policy) + consume(key, 1) + getStatus(key): three RPCs
//   limit       one RPC: RateLimiterServer.limit(key, 1, policy)
//   durable-consume  one RPC: DurableRateLimiterServer.consume(key, 1) (options set once per
//               DO), its SQLite storage on tmpfs: the SQL work without disk I/O
//   durable-limit    one RPC: DurableRateLimiterServer.limit(key, 1, policy), storage on tmpfs
//   durable-consume-disk, durable-limit-disk   the same with the storage on the disk
//   none        no DO call at all (the "no limiter" latency baseline)
// Every request is allowed, so every durable call writes its bucket's row: the worst case.
// Prints one `E2E variant=… rps=… p50_ms=… p99_ms=… errors=… non2xx=…` line per variant and
// the goal ratios (bench/e2e/report.mjs), and writes bench/out/e2e.json. A benchmark, not a
// test: it asserts nothing. workerd is bundled, started and stopped by tests/support/workerd.mjs.
// Settings (environment): DURATION=10 WARMUP=2 (seconds per variant), ROUNDS=1 (>1 repeats the
// variants in alternating order and reports per-variant medians), CONNECTIONS=32,
// WRK_THREADS=1, CLIENTS=256 (simulated clients = distinct keys), SHARDS=16 (DOs per
// variant), LOADGEN=wrk|node, VARIANTS="floor plain-js …" (subset, in order), TMPFS=/dev/shm
// (a tmpfs directory for the SQLite files of durable-consume and durable-limit; their `-disk`
// twins keep theirs under TMPDIR, normally /tmp on the machine's disk).
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  bundleWorker,
  COMPAT_DATE,
  makeTempDir,
  makeTmpfsDir,
  PACKAGE,
  ROOT,
  startWorkerd,
  WRANGLER,
  workerdVersion,
  wranglerConfig,
  writeConfig,
} from '../../tests/support/workerd.mjs';
import { KNOBS, loadRunner, scriptLog, smokeTest } from './loadgen.mjs';

const HERE = new URL('.', import.meta.url).pathname;
const OUT_DIR = join(ROOT, 'bench', 'out');
const env = process.env;
const { duration: DURATION, warmup: WARMUP, rounds: ROUNDS, connections: CONNECTIONS, threads: WRK_THREADS } = KNOBS;
const CLIENTS = Number(env.CLIENTS ?? 256);
const SHARDS = Number(env.SHARDS ?? 16);
const VARIANTS = (
  env.VARIANTS ??
  'floor plain-js consume three-call limit durable-consume durable-limit durable-consume-disk durable-limit-disk none'
)
  .split(/\s+/)
  .filter(Boolean);
const TMPFS = env.TMPFS ?? '/dev/shm';

const { log, fail } = scriptLog('e2e');

// The path of each variant in bench/e2e/worker.js.
const PATHS = {
  floor: 'floor',
  'plain-js': 'plain',
  consume: 'consume',
  'three-call': 'three',
  limit: 'limit',
  none: 'none',
  'durable-consume': 'dconsume',
  'durable-limit': 'dlimit',
  'durable-consume-disk': 'dconsume-disk',
  'durable-limit-disk': 'dlimit-disk',
};
for (const v of VARIANTS) {
  if (!PATHS[v]) {
    log(`unknown variant: ${v}`);
    process.exit(2);
  }
}

if (!existsSync(join(PACKAGE, 'rate_limiter_bg.wasm'))) {
  log('package not installed in node_modules: running scripts/build.sh');
  execFileSync('bash', [join(ROOT, 'scripts/build.sh')], { stdio: 'inherit' });
}

// ---- bundle with wrangler, storage dirs, the capnp config ----
log('bundling bench/e2e/worker.js with wrangler deploy --dry-run');
const bundle = await bundleWorker(wranglerConfig(join(HERE, 'wrangler.toml')), { prefix: 'rl-e2e-' });
// Durable Object storage. workerd's `inMemory` storage has no SQL API, so every worker here
// uses `localDisk`: the main worker's SQLite files on tmpfs (no disk I/O: the cost of the SQL
// work itself), the `-disk` variants' files under TMPDIR on the machine's disk (each commit is
// written to it). The memory-only classes never touch their storage.
const onTmpfs = makeTmpfsDir('rl-e2e-', TMPFS);
if (!onTmpfs.tmpfs) log(`no writable tmpfs at ${TMPFS}: the main worker's storage goes to the disk as well`);
const onDisk = makeTempDir('rl-e2e-disk-');
const fstype = (dir) => execFileSync('df', ['--output=fstype', dir], { encoding: 'utf8' }).trim().split('\n').pop();
const STORAGE_DESC = `localDisk: durable-* on ${fstype(onTmpfs.dir)}, durable-*-disk on ${fstype(onDisk)}`;

const shards = { name: 'SHARDS', text: SHARDS };
const workerd = await startWorkerd(
  (port) =>
    writeConfig(join(bundle.dir, 'config.capnp'), {
      port,
      workers: [
        {
          name: 'main',
          bundle,
          durableObjects: [
            { className: 'FloorServer', uniqueKey: 'rl-e2e-floor' },
            { className: 'PlainJsServer', uniqueKey: 'rl-e2e-plain' },
            { className: 'RateLimiterServer', uniqueKey: 'rl-e2e-limiter' },
            // SQLite-backed, as new_sqlite_classes declares it in wrangler.toml
            { className: 'DurableRateLimiterServer', uniqueKey: 'rl-e2e-durable', sql: true },
          ],
          storage: { disk: onTmpfs.dir },
          bindings: [
            { name: 'FLOOR', durableObject: 'FloorServer' },
            { name: 'PLAIN', durableObject: 'PlainJsServer' },
            { name: 'LIMITER', durableObject: 'RateLimiterServer' },
            { name: 'DURABLE', durableObject: 'DurableRateLimiterServer' },
            { name: 'DURABLE_DISK', durableObject: 'DurableRateLimiterServer', service: 'disk' },
            shards,
          ],
        },
        // The same bundle again, only to host the durable class with its storage on the disk.
        {
          name: 'disk',
          bundle,
          durableObjects: [{ className: 'DurableRateLimiterServer', uniqueKey: 'rl-e2e-durable-disk', sql: true }],
          storage: { disk: onDisk },
          bindings: [shards],
        },
      ],
    }),
  { ready: '/none?c=0&t=smoke' },
);
const BASE = workerd.base;
const WORKERD_VERSION = await workerdVersion();
log(`${WORKERD_VERSION} pid ${workerd.pid} on ${BASE}`);
log(`Durable Object storage: ${STORAGE_DESC} (${onTmpfs.dir}, ${onDisk})`);

await smokeTest({ base: BASE, paths: VARIANTS.map((v) => PATHS[v]), query: 'c=1&t=smoke', workerd, fail });
const load = loadRunner({ base: BASE, clients: CLIENTS, log, fail });
const LOADGEN_VERSION = load.version;
const runLoad = load.run;

const RESULTS = join(bundle.dir, 'results.tsv');
writeFileSync(RESULTS, '');
log(
  `load: ${LOADGEN_VERSION}, ${CONNECTIONS} connections, ${CLIENTS} clients over ${SHARDS} DOs per variant,`,
  `${WARMUP}s warm-up + ${DURATION}s per variant, ${ROUNDS} round(s)`,
);
for (let round = 1; round <= ROUNDS; round++) {
  // even rounds go in reverse order, so drift on a shared machine hits every variant alike
  const order = round % 2 === 0 ? [...VARIANTS].reverse() : VARIANTS;
  for (const v of order) {
    const p = PATHS[v];
    if (WARMUP !== 0) await runLoad(p, WARMUP, join(bundle.dir, 'warmup.txt'), `r${round}`);
    // same tag as the warm-up: the DOs it created are the ones measured
    const text = await runLoad(p, DURATION, join(bundle.dir, 'load.txt'), `r${round}`);
    const line = text.split('\n').find((l) => l.startsWith('LOAD_RESULT '));
    if (!line) fail(`no result from the load generator:\n${text}`);
    const values = line.split(/\s+/).slice(1).filter(Boolean).map((kv) => kv.split('=')[1]);
    appendFileSync(RESULTS, `${[round, v, ...values].join('\t')}\n`);
    log(`round ${round} ${v}: ${line.slice('LOAD_RESULT '.length)}`);
  }
}

if (workerd.child.exitCode !== null || workerd.child.signalCode !== null) fail(`workerd died during the run:\n${workerd.log()}`);
await workerd.stop();

// ---- report ----
mkdirSync(OUT_DIR, { recursive: true });
const wranglerVersion = spawnSync(WRANGLER, ['--version'], { encoding: 'utf8' }).stdout?.trim().split('\n').pop() ?? '';
const report = spawnSync(process.execPath, [join(HERE, 'report.mjs'), RESULTS, join(OUT_DIR, 'e2e.json')], {
  stdio: 'inherit',
  env: {
    ...env,
    E2E_LOADGEN: LOADGEN_VERSION,
    E2E_WORKERD: WORKERD_VERSION,
    E2E_WRANGLER: wranglerVersion,
    E2E_PARAMS: JSON.stringify({
      duration_s: DURATION,
      warmup_s: WARMUP,
      rounds: ROUNDS,
      connections: CONNECTIONS,
      wrk_threads: WRK_THREADS,
      clients: CLIENTS,
      shards: SHARDS,
      compatibility_date: COMPAT_DATE,
      do_storage: STORAGE_DESC,
    }),
  },
});
process.exitCode = report.status ?? 1;
