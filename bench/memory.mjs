// Goal "memory per bucket" (bench/README.md): bytes per live bucket at 1M keys.
// `node --expose-gc bench/memory.mjs` spawns one fresh process per measurement (wasm linear
// memory grows in 64 KiB pages and never shrinks, so a process that already held buckets would
// hide growth):
//   memory.mjs ours  — wasm linear memory growth of one fresh RateLimiterServer over 1M keys
//   memory.mjs plain — V8 heap growth (heapUsed after full GCs) of the plain-JS Map limiter
//   memory.mjs ours-objects / plain-objects — the same for 1,000 limiters holding one key
//     each: one Durable Object per client puts many small limiters in one isolate
// Key strings are built per insert, as a request handler builds them: the Map keeps its key
// strings alive (counted in its heap growth), the wasm engine copies the bytes (counted in
// linear memory) and the string becomes garbage.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fmt, fmtRatio, gc, keyOf, PlainJsLimiter, printTable, writeResult } from './common.mjs';

const KEYS = Number(process.env.BENCH_MEMORY_KEYS ?? 1_000_000);
const OPTIONS = { max_tokens: 1e15, refill_every_seconds: 3600 };
const MB = 1024 * 1024;

async function measureOurs() {
  const { RateLimiterServer } = await import('@delightstack/rate-limiter');
  // The glue module the node entry already instantiated: initSync() returns its exports.
  const { installedUrl } = await import('./common.mjs');
  const { initSync } = await import(installedUrl('rate_limiter.js'));
  const { memory } = initSync();
  const server = new RateLimiterServer({}, {});
  server.setOptions(OPTIONS);
  server.consume('warm-up', 1); // the limiter and its first allocations exist before "before"
  gc();
  const wasmBefore = memory.buffer.byteLength;
  const heapBefore = process.memoryUsage().heapUsed;
  for (let i = 0; i < KEYS; i++) server.consume(keyOf(i), 1);
  gc();
  const wasmAfter = memory.buffer.byteLength;
  const heapAfter = process.memoryUsage().heapUsed;
  // Every key must be live (stored) for the figure to mean bytes per live bucket.
  let live = 0;
  for (let i = 0; i < KEYS; i += 997) if (server.getStatus(keyOf(i)).remaining < OPTIONS.max_tokens) live++;
  return {
    which: 'ours', keys: KEYS, wasm_before: wasmBefore, wasm_after: wasmAfter,
    heap_before: heapBefore, heap_after: heapAfter, sampled_live: live, sampled: Math.ceil(KEYS / 997),
    bytes: wasmAfter - wasmBefore, js_heap_bytes: heapAfter - heapBefore,
  };
}

function measurePlain() {
  const plain = new PlainJsLimiter();
  plain.setOptions(OPTIONS);
  plain.consume('warm-up', 1);
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < KEYS; i++) plain.consume(keyOf(i), 1);
  gc();
  const after = process.memoryUsage().heapUsed;
  if (plain.buckets.size !== KEYS + 1) throw new Error('plain: not every key stored');
  return { which: 'plain', keys: KEYS, heap_before: before, heap_after: after, bytes: after - before };
}

const OBJECTS = 1_000;

async function measureOursObjects() {
  const { RateLimiterServer } = await import('@delightstack/rate-limiter');
  const { installedUrl } = await import('./common.mjs');
  const { initSync } = await import(installedUrl('rate_limiter.js'));
  const { memory } = initSync();
  new RateLimiterServer({}, {}).consume('warm-up', 1);
  gc();
  const before = memory.buffer.byteLength;
  const servers = [];
  for (let i = 0; i < OBJECTS; i++) {
    const server = new RateLimiterServer({}, {});
    server.consume(keyOf(i), 1);
    servers.push(server);
  }
  gc();
  return { which: 'ours-objects', objects: servers.length, bytes: memory.buffer.byteLength - before };
}

function measurePlainObjects() {
  new PlainJsLimiter().consume('warm-up', 1);
  gc();
  const before = process.memoryUsage().heapUsed;
  const limiters = [];
  for (let i = 0; i < OBJECTS; i++) {
    const plain = new PlainJsLimiter();
    plain.consume(keyOf(i), 1);
    limiters.push(plain);
  }
  gc();
  return { which: 'plain-objects', objects: limiters.length, bytes: process.memoryUsage().heapUsed - before };
}

const MEASURE = { ours: measureOurs, plain: measurePlain, 'ours-objects': measureOursObjects, 'plain-objects': measurePlainObjects };
const which = process.argv[2];
if (which in MEASURE) {
  process.stdout.write(JSON.stringify(await MEASURE[which]()));
} else {
  const self = fileURLToPath(import.meta.url);
  const run = (w) => {
    const child = spawnSync(process.execPath, ['--expose-gc', self, w], { encoding: 'utf8', maxBuffer: 1 << 20 });
    if (child.status !== 0) throw new Error(`memory.mjs ${w} failed:\n${child.stderr}`);
    return JSON.parse(child.stdout);
  };
  const ours = run('ours');
  const plain = run('plain');
  const oursObjects = run('ours-objects');
  const plainObjects = run('plain-objects');
  const oursPer = ours.bytes / KEYS;
  const plainPer = plain.bytes / KEYS;
  writeResult('memory', {
    keys: KEYS,
    ours,
    plain,
    ours_bytes_per_bucket: oursPer,
    plain_bytes_per_bucket: plainPer,
    ratio: oursPer / plainPer,
    ours_total_mib: ours.bytes / MB,
    plain_total_mib: plain.bytes / MB,
    ours_js_heap_bytes_per_bucket: ours.js_heap_bytes / KEYS,
    objects: OBJECTS,
    ours_bytes_per_object: oursObjects.bytes / OBJECTS,
    plain_bytes_per_object: plainObjects.bytes / OBJECTS,
  });
  console.log(`\nGoal "memory per bucket" — memory for ${fmt(KEYS)} live keys (one fresh process each)\n`);
  printTable(
    ['', 'bytes/bucket', `total for ${fmt(KEYS)} keys`],
    [
      ['ours: wasm linear memory growth', fmt(oursPer, 1), `${fmt(ours.bytes / MB, 1)} MiB`],
      ['ours: JS heap growth (not counted)', fmt(ours.js_heap_bytes / KEYS, 1), `${fmt(ours.js_heap_bytes / MB, 1)} MiB`],
      ['plain JS Map: V8 heap growth', fmt(plainPer, 1), `${fmt(plain.bytes / MB, 1)} MiB`],
      ['ratio ours/plain', fmtRatio(oursPer / plainPer), ''],
    ],
  );
  console.log(`\nMemory of ${fmt(OBJECTS)} limiters with one key each (one Durable Object per client)\n`);
  printTable(
    ['', 'bytes per limiter'],
    [
      ['ours: wasm linear memory growth', fmt(oursObjects.bytes / OBJECTS, 0)],
      ['plain JS Map limiter: V8 heap growth', fmt(plainObjects.bytes / OBJECTS, 0)],
      ['ratio ours/plain', fmtRatio(oursObjects.bytes / plainObjects.bytes)],
    ],
  );
  if (ours.sampled_live !== ours.sampled) console.warn(`warning: only ${ours.sampled_live}/${ours.sampled} sampled keys live`);
}
