// Assembles bench/RESULTS.md and bench/keys.svg from what the benchmarks left in bench/out/
// (goal names as bench/README.md defines them): consume.json (shim speed), memory.json (memory
// per bucket), latency.json (tail latency), size.json (size), churn.json (key churn) from the
// Node benches, engine.log (native speed, `ENGINE_BENCH` lines of `cargo bench --bench
// engine`), e2e.json or e2e.log (end-to-end throughput and durable overhead, bench/e2e/run.mjs),
// workerd-loop.log, wake.json (wake-up cost, bench/e2e/wake.mjs), local.json (local decisions,
// bench/e2e/local.mjs) and status.txt (what
// scripts/bench.sh ran, skipped or saw fail).
// Prints the same tables to stdout. Asserts nothing.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { OUT, ROOT, SIZE_TARGETS, fmt, fmtRatio, ratio } from './common.mjs';

const read = (name) => {
  const file = join(OUT, name);
  return existsSync(file) ? readFileSync(file, 'utf8') : null;
};
const readJson = (name) => {
  const text = read(name);
  try {
    return text === null ? null : JSON.parse(text);
  } catch {
    return null;
  }
};

// ---- inputs ----
const status = Object.fromEntries(
  (read('status.txt') ?? '')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [part, state, seconds, ...note] = line.split('\t');
      return [part, { state, seconds: Number(seconds), note: note.join(' ') }];
    }),
);
// A part's output counts only if scripts/bench.sh ran it to success in this run (another
// process may have written bench/out meanwhile); run alone, the report takes what exists.
const haveStatus = Object.keys(status).length > 0;
const usable = (part) => !haveStatus || status[part]?.state === 'ok';
const consume = usable('consume') ? readJson('consume.json') : null;
const churn = usable('churn') ? readJson('churn.json') : null;
const leases = usable('leases') ? readJson('leases.json') : null;
const memory = usable('memory') ? readJson('memory.json') : null;
const latency = usable('latency') ? readJson('latency.json') : null;
const size = usable('size') ? readJson('size.json') : null;
const wasmParts = usable('wasm-parts') ? readJson('wasm-parts.json') : null;
const e2eJson = usable('e2e') ? readJson('e2e.json') : null;
const wake = usable('wake') ? readJson('wake.json') : null;
const local = usable('local') ? readJson('local.json') : null;
const e2eLines = usable('e2e') ? (read('e2e.log') ?? '').split('\n').filter((l) => l.startsWith('E2E ')) : [];
const engineLog = usable('engine') ? read('engine.log') ?? '' : '';
const engine = [];
let engineGrowth = null;
for (const line of engineLog.split('\n')) {
  const fields = (prefix) =>
    Object.fromEntries(line.slice(prefix.length).trim().split(/\s+/).map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
  if (line.startsWith('ENGINE_BENCH ')) engine.push(fields('ENGINE_BENCH '));
  else if (line.startsWith('ENGINE_BENCH_GROWTH ')) engineGrowth = fields('ENGINE_BENCH_GROWTH ');
}
const engineAt = (keys) => engine.find((e) => e.keys === keys);

// ---- machine and versions ----
const run = (cmd, args) => {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n')[0];
  } catch {
    return null;
  }
};
const pkgVersion = (dir) => {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'node_modules', dir, 'package.json'), 'utf8')).version;
  } catch {
    return null;
  }
};
const lockVersion = (name) => {
  const lock = existsSync(join(ROOT, 'Cargo.lock')) ? readFileSync(join(ROOT, 'Cargo.lock'), 'utf8') : '';
  return lock.match(new RegExp(`name = "${name}"\\nversion = "([^"]+)"`))?.[1] ?? null;
};
const bin = (name) => join(ROOT, 'node_modules', '.bin', name);
const cargoBin = (name) => join(os.homedir(), '.cargo', 'bin', name);
const cpus = os.cpus();
const machine = {
  cpu: cpus[0]?.model ?? 'unknown',
  cores: cpus.length,
  ram_gib: os.totalmem() / 1024 ** 3,
  os: `${os.type()} ${os.release()} ${os.arch()}`,
  loadavg: os.loadavg(),
};
const versions = {
  node: process.version,
  rustc: run(cargoBin('rustc'), ['-V']) ?? run('rustc', ['-V']),
  'wasm-bindgen': run(cargoBin('wasm-bindgen'), ['-V']) ?? (lockVersion('wasm-bindgen') && `wasm-bindgen ${lockVersion('wasm-bindgen')} (Cargo.lock)`),
  'wasm-pack': run(cargoBin('wasm-pack'), ['-V']),
  'wasm-opt': run(bin('wasm-opt'), ['--version']),
  wrangler: pkgVersion('wrangler'),
  workerd: pkgVersion('workerd'),
  governor: lockVersion('governor'),
};

// ---- helpers ----
const md = [];
const out = (line = '') => md.push(line);
/** A markdown table; the first `left` columns are left-aligned, the others right-aligned. */
const table = (header, rows, left = 1) => {
  out(`| ${header.join(' | ')} |`);
  out(`|${header.map((_, i) => (i < left ? '---' : '---:')).join('|')}|`);
  for (const row of rows) out(`| ${row.join(' | ')} |`);
  out();
};
const verdict = (ok) => (ok === null || ok === undefined ? 'n/a' : ok ? '**met**' : '**not met**');
const ns = (x) => (x === null || x === undefined ? '—' : `${fmt(x, x < 100 ? 1 : 0)} ns`);
const us = (x) => (x === null || x === undefined ? '—' : `${fmt(x / 1000, 1)} µs`);
const bytesKb = (b) => `${fmt(b)} B (${fmt(b / 1024, 1)} KB)`;
const partNote = (part) => {
  const s = status[part];
  if (!s) return haveStatus ? 'not run' : 'no output in bench/out';
  if (s.state === 'ok') return null;
  return `${s.state}${s.note ? `: ${s.note}` : ''}`;
};
const missing = (what, part) => {
  out(`_No results: ${partNote(part) ?? 'no output'}${what ? ` (${what})` : ''}._`);
  out();
};

// ---- summary rows, filled per goal ----
const summary = [];
const addGoal = (goal, what, measured, baseline, r, target, ok) =>
  summary.push([goal, what, measured, baseline, r, target, verdict(ok)]);

// ---- goal sections ----
const sections = [];
const section = (fn) => {
  const start = md.length;
  fn();
  sections.push(md.splice(start));
};

// native speed
section(() => {
  out('## Native speed: ns per `consume` on an existing key (criterion bench)');
  out();
  if (engine.length === 0) return missing('`cargo bench --bench engine` printed no `ENGINE_BENCH` lines; see bench/out/engine.log', 'engine');
  out('`cargo bench --bench engine` (benches/engine.rs): our `Limiter` beside `governor`\'s keyed limiter on the same keys, clock advanced outside the timed region; median of rounds, see the bench\'s header for the method.');
  out();
  table(['live keys', 'ours', 'governor', 'ours/governor'], engine.map((e) => [fmt(e.keys), ns(e.ours_ns), ns(e.governor_ns), fmtRatio(e.ratio ?? ratio(e.ours_ns, e.governor_ns))]));
  const at10k = engineAt(10_000);
  if (at10k) {
    const r = at10k.ratio ?? ratio(at10k.ours_ns, at10k.governor_ns);
    addGoal('native speed', 'native consume at 10k keys', ns(at10k.ours_ns), `governor ${ns(at10k.governor_ns)}`, fmtRatio(r), '≤ 0.5× governor', r <= 0.5);
  }
  const first = engineAt(1);
  const last = engineAt(1_000_000);
  if (first && last) {
    const growth = last.ours_ns / first.ours_ns;
    const gGrowth = last.governor_ns / first.governor_ns;
    out(`Growth from 1 to 1M keys: ours ${fmtRatio(growth)}, governor ${fmtRatio(gGrowth)}.`);
    out();
    addGoal('native speed', 'native growth 1 → 1M keys', `${ns(first.ours_ns)} → ${ns(last.ours_ns)}`, `governor ${fmtRatio(gGrowth)}`, fmtRatio(growth), '≤ 2×', growth <= 2);
  } else if (engineGrowth) {
    addGoal('native speed', 'native growth 1 → 1M keys', fmtRatio(engineGrowth.ours), `governor ${fmtRatio(engineGrowth.governor)}`, fmtRatio(engineGrowth.ours), '≤ 2×', engineGrowth.ours <= 2);
  }
});

// shim speed
section(() => {
  out('## Shim speed: ns per `consume` through the JS shim in Node');
  out();
  if (!consume) return missing('bench/consume.mjs', 'consume');
  out(`\`bench/consume.mjs\`: \`RateLimiterServer.consume(key, 1)\` from the installed package, beside a plain-JS Map implementation of the same lazy token bucket (\`PlainJsLimiter\` in bench/common.mjs) and the floor — \`receiveKey(key)\`, a wasm export (\`--features bench-floor\`, wasm-opt'd like the package) that only receives the key string the way the fast path does. Keys \`client-\${i}:api\`, the same string objects for all three; all live (max_tokens 1e15, one token per hour, each key consumed once before timing); access order ${consume.access_order}. Warm-up ${fmt(consume.warmup_calls)} calls, then median of ${consume.rounds} rounds of ${fmt(consume.calls_per_round)} calls, the implementations interleaved round by round. Every call is checked to be allowed.`);
  out();
  const row = (label, r) => [label, ns(r.shim_ns), ns(r.plain_ns), ns(r.floor_ns), fmtRatio(ratio(r.shim_ns, r.plain_ns)), fmtRatio(ratio(r.shim_ns, r.floor_ns))];
  const extra = [];
  if (consume.limit_10k) extra.push(row('10,000 — `limit()` instead of `consume()`', consume.limit_10k));
  if (consume.fresh_strings_10k) extra.push(row('10,000 — key string built per call', consume.fresh_strings_10k));
  table(['live keys', 'shim (wasm)', 'plain JS Map', 'floor', 'shim/plain', 'shim/floor'], [...consume.sizes.map((r) => row(fmt(r.keys), r)), ...extra]);
  out('The `limit()` row compares `RateLimiterServer.limit(key, 1)` with a plain-JS `limit()` building the same decision object (no policy). The last row builds the key string inside the loop (`\'client-\' + i + \':api\'`), as a request handler would: V8 caches a string\'s hash in the string, so with pre-built keys the plain Map never rehashes a key while the shim must read every key\'s characters.');
  out();
  if (consume.limit_10k?.over_consume) {
    out(`\`limit()\` / \`consume()\` through the shim at 10,000 keys, both measured in the same rounds: ${fmtRatio(consume.limit_10k.over_consume)} (the median of each round\'s own ratio; \`consume\` took ${ns(consume.limit_10k.consume_ns)} in those rounds).`);
    out();
  }
  if (consume.date_now_ns) {
    const first = consume.sizes[0];
    out(`\`Date.now()\` alone costs ${ns(consume.date_now_ns)} here; every \`consume()\` reads it once (the shim reads the clock on every call), the floor does not. At ${fmt(first.keys)} key the floor plus one clock read is ${ns(first.floor_ns + consume.date_now_ns)} — ${fmtRatio(ratio(first.floor_ns + consume.date_now_ns, first.plain_ns))} plain JS before any limiting work — and the engine and shim add ${ns(first.shim_ns - first.floor_ns - consume.date_now_ns)} on top.`);
    out();
  }
  for (const r of consume.sizes) {
    addGoal('shim speed', `shim consume at ${fmt(r.keys)} ${r.keys === 1 ? 'key' : 'keys'}`, ns(r.shim_ns), `plain JS ${ns(r.plain_ns)}`, fmtRatio(ratio(r.shim_ns, r.plain_ns)), '≤ 1.5× plain JS', ratio(r.shim_ns, r.plain_ns) <= 1.5);
    if (r.floor_ns !== null) addGoal('shim speed', `shim consume at ${fmt(r.keys)} ${r.keys === 1 ? 'key' : 'keys'}`, ns(r.shim_ns), `floor ${ns(r.floor_ns)}`, fmtRatio(ratio(r.shim_ns, r.floor_ns)), '≤ 2× floor', ratio(r.shim_ns, r.floor_ns) <= 2);
  }
});

// memory per bucket
section(() => {
  out('## Memory per bucket: bytes per live bucket at 1M keys');
  out();
  if (!memory) return missing('bench/memory.mjs', 'memory');
  out(`\`bench/memory.mjs\`, one fresh Node process per measurement (wasm linear memory grows in 64 KiB pages and never shrinks). Ours: \`memory.buffer.byteLength\` of the package's wasm instance (the glue's \`initSync()\` returns the instance the node entry started) before and after ${fmt(memory.keys)} first consumes on one fresh \`RateLimiterServer\`. Plain JS: \`process.memoryUsage().heapUsed\` after \`global.gc()\`, before and after the same consumes on the Map limiter. Key strings are built per call in both, so the Map's figure includes the key strings it keeps alive; the engine copies the key bytes into linear memory and the string becomes garbage (its JS heap growth is shown for completeness). 1 MiB = 1 048 576 B.`);
  out();
  const MiB = 1024 * 1024;
  table(['', 'bytes per bucket', `total for ${fmt(memory.keys)} keys`], [
    ['ours — wasm linear memory growth', fmt(memory.ours_bytes_per_bucket, 1), `${fmt(memory.ours.bytes / MiB, 1)} MiB`],
    ['ours — JS heap growth (not counted)', fmt(memory.ours.js_heap_bytes / memory.keys, 1), `${fmt(memory.ours.js_heap_bytes / MiB, 1)} MiB`],
    ['plain JS Map — V8 heap growth', fmt(memory.plain_bytes_per_bucket, 1), `${fmt(memory.plain.bytes / MiB, 1)} MiB`],
    ['ours / plain', fmtRatio(memory.ratio), ''],
  ]);
  if (memory.objects !== undefined) {
    out();
    out(`Many small limiters: ${fmt(memory.objects)} \`RateLimiterServer\`s holding one key each (the Quickstart's one Durable Object per client puts many in one isolate, sharing one wasm memory), same method: ${fmt(memory.ours_bytes_per_object, 0)} bytes of wasm memory per limiter; ${fmt(memory.plain_bytes_per_object, 0)} bytes of V8 heap per plain-JS Map limiter (${fmtRatio(memory.ours_bytes_per_object / memory.plain_bytes_per_object)}). The first chunk of buckets grows by doubling and the index is one table until 4,096 buckets: before, each limiter took about 208 KiB, so some 600 per isolate reached the 128 MB limit.`);
  }
  addGoal('memory per bucket', 'bytes per live bucket at 1M keys', `${fmt(memory.ours_bytes_per_bucket, 1)} B`, `plain JS ${fmt(memory.plain_bytes_per_bucket, 1)} B`, fmtRatio(memory.ratio), '≤ 0.5× JS', memory.ratio <= 0.5);
  addGoal('memory per bucket', 'wasm memory for 1M live keys', `${fmt(memory.ours.bytes / MiB, 1)} MiB`, `plain JS ${fmt(memory.plain.bytes / MiB, 1)} MiB`, '', '< 64 MiB', memory.ours.bytes < 64 * MiB);
});

// tail latency
section(() => {
  out('## Tail latency: worst single call at 1M live keys, sweep included');
  out();
  if (!latency) return missing('bench/latency.mjs', 'latency');
  const s = latency.steady;
  const g = latency.growth;
  out(`\`bench/latency.mjs\`: every call timed on its own with \`process.hrtime.bigint()\` (timer overhead ≈ ${fmt(latency.timer_overhead_ns)} ns, included). Time is fake — \`Date.now\` is replaced by a clock the bench advances — so buckets refill to full and get swept within seconds: ${latency.workload}. For each call the bench also records whether the wasm memory grew during it (\`memory.buffer.byteLength\` after every call) and two outside causes of a slow call, recorded, never subtracted: V8 garbage collections of the bench process (\`PerformanceObserver\` 'gc' entries overlapping the call) and OS preemption (an involuntary context switch, \`getrusage\`, process-wide, within the call's ${latency.preemption_chunk_calls}-call chunk). A slow call is the engine's when the wasm memory grew during it, or when neither outside cause overlapped it.`);
  out();
  const split = (c) => (c ? `${c.total} (wasm memory grew: ${c.wasm_grew}; V8 GC: ${c.gc}; preempted: ${c.preempted}; engine's: ${c.engine})` : '—');
  table(['phase', 'calls', 'median', 'p99', 'p99.9', 'max', 'calls > 1 ms'], [
    ['steady state, ~1M live keys', fmt(s.calls), us(s.median_ns), us(s.p99_ns), us(s.p999_ns), us(s.max_ns), split(s.over_1ms_split)],
    [`growth 0 → ${fmt(latency.keys)} keys`, fmt(g.calls), us(g.median_ns), us(g.p99_ns), us(g.p999_ns), us(g.max_ns), split(g.over_1ms_split)],
  ]);
  const MiB = 1024 * 1024;
  const tag = (x) => `${x.wasm_grew ? ` (wasm memory grew ${fmt(x.wasm_grew[0] / MiB, 1)} → ${fmt(x.wasm_grew[1] / MiB, 1)} MiB)` : ''}${x.gc ? ` (V8 GC: ${x.gc})` : ''}${x.preempted ? ' (preempted)' : ''}`;
  out(`Steady state: first consume of a new key (insert + sweep steps) median ${us(s.new_key_median_ns)}, consume of an existing key median ${us(s.existing_key_median_ns)}; ${fmt(s.allowed)} of ${fmt(s.calls)} calls allowed; ≈ ${fmt(s.live_keys_after_estimate)} live keys at the end (sampled); ${s.gc_events} V8 GCs, ${fmt(s.gc_ms_total, 1)} ms in total, during the phase; ${s.preempted_chunks} of ${fmt(s.chunks)} chunks saw an involuntary context switch; wasm memory ${fmt(s.wasm_bytes_start / MiB, 1)} → ${fmt(s.wasm_bytes_end / MiB, 1)} MiB (${s.wasm_memory_grows} grows).`);
  out();
  out(`Slowest steady-state calls: ${s.slowest.map((x) => `call #${fmt(x.call)} ${us(x.ns)}${tag(x)}`).join('; ')}.`);
  out();
  out(`Slowest calls while growing (keys already stored): ${g.slowest.map((x) => `${fmt(x.keys_before)} keys: ${us(x.ns)}${tag(x)}`).join('; ')}. Spikes at 2^k × 7/8 keys are hash-table resizes (the table rehashes every key in one call), at 2^k keys reallocations of the bucket vector (a copy); growth is outside the "tail latency" goal (steady state at 1M) but reported here. A call that long is naturally also preempted.`);
  out();
  const sp = s.over_1ms_split;
  addGoal('tail latency', 'slowest steady-state call at 1M keys', us(s.max_ns), `median ${us(s.median_ns)}`, fmtRatio(s.max_ns / s.median_ns, 0), 'no call > 1 ms', s.over_1ms === 0);
  if (sp && sp.total > 0) {
    addGoal('tail latency', "steady-state calls > 1 ms that are the engine's (wasm memory grew, or no V8 GC / preemption)", `${sp.engine} of ${fmt(s.calls)}`, `${sp.total} > 1 ms in all`, '', 'none', sp.engine === 0);
  }
  addGoal('tail latency', `slowest call while growing 0 → 1M (info)`, us(g.max_ns), `median ${us(g.median_ns)}`, '', '(not a goal)', null);
});

// end-to-end throughput (and durable overhead)
section(() => {
  out('## End-to-end throughput: requests/s and latency in workerd');
  out();
  if (e2eJson?.variants) {
    out(`\`bench/e2e/run.mjs\`: load from a second process (${e2eJson.machine?.load_generator ?? 'load generator'}) over loopback against a Worker calling a Durable Object over RPC. ${e2eJson.notes ?? ''}`);
    out();
    if (e2eJson.params && Object.keys(e2eJson.params).length) {
      out(`Parameters: ${Object.entries(e2eJson.params).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ')}.`);
      out();
    }
    table(['variant', 'requests/s', 'p50', 'p99', 'errors', 'non-2xx'], e2eJson.variants.map((v) => [v.name, fmt(v.rps), `${v.p50_ms} ms`, `${v.p99_ms} ms`, fmt(v.errors), fmt(v.non2xx)]));
    const r = e2eJson.ratios ?? {};
    const gl = e2eJson.goals ?? {};
    const by = Object.fromEntries(e2eJson.variants.map((v) => [v.name, v]));
    addGoal('end-to-end throughput', 'workerd: consume requests/s', by.consume ? fmt(by.consume.rps) : '—', by.floor ? `floor ${fmt(by.floor.rps)}` : '—', fmtRatio(r.consume_over_floor_rps, 3), '≥ 0.95× floor', gl.consume_ge_0_95_floor);
    addGoal('end-to-end throughput', 'workerd: consume requests/s', by.consume ? fmt(by.consume.rps) : '—', by['plain-js'] ? `plain JS ${fmt(by['plain-js'].rps)}` : '—', fmtRatio(r.consume_over_plain_js_rps, 3), '≥ 0.98× plain JS', gl.consume_ge_0_98_plain_js);
    addGoal('end-to-end throughput', 'workerd: latency limit() adds (p50)', by.limit && by.none ? `${fmt(by.limit.p50_ms - by.none.p50_ms, 3)} ms` : '—', by['three-call'] && by.none ? `three calls add ${fmt(by['three-call'].p50_ms - by.none.p50_ms, 3)} ms` : '—', fmtRatio(r.limit_added_over_three_call_added_p50, 3), '≤ 0.5× three-call', gl.limit_adds_le_0_5_of_three_call);
    // durable overhead: the durable class beside the in-memory one, same call, same run
    const pairs = [
      ['consume', 'durable-consume', 'consume', 'storage on tmpfs'],
      ['limit', 'durable-limit', 'limit', 'storage on tmpfs'],
      ['consume', 'durable-consume-disk', 'consume', 'storage on disk'],
      ['limit', 'durable-limit-disk', 'limit', 'storage on disk'],
    ].filter(([, d, m]) => by[d] && by[m]);
    if (pairs.length) {
      out(`Durable overhead — DurableRateLimiterServer beside RateLimiterServer: \`durable-consume\` and \`durable-limit\` make the same one RPC as \`consume\` and \`limit\` to the durable class, whose SQLite storage (workerd \`localDisk\`; its \`inMemory\` storage has no SQL API) is on tmpfs: the SQL work without disk I/O. The \`-disk\` variants are the same with the SQLite files on the machine's disk, where each commit is written to the disk and the response waits for it. Every request is allowed, so every durable call writes its bucket's row (the worst case for writes).`);
      out();
      table(
        ['call', 'durable (storage)', 'durable p50 / p99 / req/s', 'in-memory p50 / p99 / req/s', 'p50 ratio', 'p99 ratio', 'req/s ratio'],
        pairs.map(([call, d, m, where]) => [
          `\`${call}\``,
          `${d} (${where})`,
          `${by[d].p50_ms} / ${by[d].p99_ms} ms / ${fmt(by[d].rps)}`,
          `${by[m].p50_ms} / ${by[m].p99_ms} ms / ${fmt(by[m].rps)}`,
          fmtRatio(by[d].p50_ms / by[m].p50_ms, 3),
          fmtRatio(by[d].p99_ms / by[m].p99_ms, 3),
          fmtRatio(by[d].rps / by[m].rps, 3),
        ]),
        2,
      );
      for (const [call, d, m, where] of pairs) {
        addGoal('durable overhead', `workerd: durable \`${call}\` p50 (${where})`, `${by[d].p50_ms} ms`, `in-memory ${by[m].p50_ms} ms`, fmtRatio(by[d].p50_ms / by[m].p50_ms, 3), '≤ 1.2× in-memory', by[d].p50_ms / by[m].p50_ms <= 1.2);
      }
    }
    const loop = usable('workerd-loop') ? (read('workerd-loop.log') ?? '').match(/WORKERD_LOOP ours_ns=([\d.]+) plain_ns=([\d.]+) ratio=([\d.]+)/) : null;
    if (loop) {
      const diffUs = (Number(loop[1]) - Number(loop[2])) / 1000;
      const requestUs = by.floor ? 1e6 / by.floor.rps : NaN;
      out(`Per call inside workerd, without RPC or HTTP (\`bench/workerd-loop/run.mjs\`: one Durable Object runs 2M \`consume()\` calls in a loop, keys built per call, best of 4 rounds): the package ${loop[1]} ns, plain JS ${loop[2]} ns (${loop[3]}×). The difference, ${fmt(diffUs, 3)} µs a call, is ${fmt((100 * diffUs) / requestUs, 2)}% of the ${fmt(requestUs, 0)} µs each request above costs the machine (1 / the floor's requests/s), so request-rate ratios within a few percent are the noise of 2 cores running workerd and the load generator together.`);
      out();
    }
  } else if (e2eLines.length) {
    out('Output of `bench/e2e/run.mjs` (no e2e.json):');
    out();
    out('```');
    for (const l of e2eLines) out(l);
    out('```');
    out();
  } else {
    missing('bench/e2e/run.mjs', 'e2e');
  }
});

// size
section(() => {
  out('## Size: `.wasm` size and start-up');
  out();
  if (!size) return missing('bench/size.mjs', 'size');
  // Each Node the start-up was measured in (Node 22's V8 is the closer one to workerd's).
  const coldStarts = size.cold_starts.map((c) => ({ ...c, name: `Node ${c.node.replace(/^v/, '')} (V8 ${c.v8.split('-')[0]})` }));
  out(`\`bench/size.mjs\`: \`pkg/rate_limiter_bg.wasm\` as shipped (after \`wasm-opt -O3\`, as scripts/build.sh runs it), raw and \`${size.gzip_tool}\`, beside the first wasm build's 71 KB / 32 KB (fixed reference figures, see bench/README.md; 1 KB = 1024 B). Start-up: median of ${size.cold_processes} fresh Node processes, each timing \`new WebAssembly.Module(bytes)\` then the glue's \`initSync({ module })\` (instantiation + wasm-bindgen start) — what \`pkg/node.js\` does once per process; reading the file and importing the glue are not timed. Extra row: ${size.warm_runs} in-process re-instantiations of the compiled module through the glue (\`resetWasmInstance()\`, \`initSync\`), i.e. without compilation.`);
  out();
  table(['', 'ours', 'first wasm build', 'ratio', 'target'], [
    ['raw', bytesKb(size.raw_bytes), bytesKb(size.first_build_raw_bytes), fmtRatio(size.raw_bytes / size.first_build_raw_bytes), `≤ ${SIZE_TARGETS.rawKb} KB`],
    ['gzip -9', bytesKb(size.gzip_bytes), bytesKb(size.first_build_gzip_bytes), fmtRatio(size.gzip_bytes / size.first_build_gzip_bytes), `≤ ${SIZE_TARGETS.gzipKb} KB`],
    ...coldStarts.map((c) => [
      `compile + instantiate, fresh process (median of ${size.cold_processes}), ${c.name}`,
      `${fmt(c.total_ms, 2)} ms (medians: compile ${fmt(c.compile_ms, 2)}, instantiate ${fmt(c.instantiate_ms, 2)}; slowest process ${fmt(c.total_max_ms, 2)})`,
      '',
      '',
      `≤ ${SIZE_TARGETS.startMs} ms`,
    ]),
    [`instantiate a compiled module (median of ${size.warm_runs})`, `${fmt(size.warm_instantiate_ms, 3)} ms`, '', '', ''],
  ]);
  if (coldStarts.length === 1) out('\n(The start-up row for Node 22 needs `bash scripts/bootstrap.sh --matrix`.)');
  addGoal('size', '.wasm raw', bytesKb(size.raw_bytes), `first wasm build ${fmt(size.first_build_raw_bytes / 1024)} KB`, fmtRatio(size.raw_bytes / size.first_build_raw_bytes), `≤ ${SIZE_TARGETS.rawKb} KB`, size.raw_bytes <= SIZE_TARGETS.rawKb * 1024);
  addGoal('size', '.wasm gzip -9', bytesKb(size.gzip_bytes), `first wasm build ${fmt(size.first_build_gzip_bytes / 1024)} KB`, fmtRatio(size.gzip_bytes / size.first_build_gzip_bytes), `≤ ${SIZE_TARGETS.gzipKb} KB`, size.gzip_bytes <= SIZE_TARGETS.gzipKb * 1024);
  for (const c of coldStarts) {
    addGoal('size', `compile + instantiate (${c.name}, fresh process)`, `${fmt(c.total_ms, 2)} ms`, '—', '', `≤ ${SIZE_TARGETS.startMs} ms`, c.total_ms <= SIZE_TARGETS.startMs);
  }
  if (!wasmParts) return missing('bench/wasm-parts.mjs', 'wasm-parts');
  out();
  out(`What the ${fmt(wasmParts.shipped)} B are made of (\`bench/wasm-parts.mjs\`: the build's wasm-opt pass with \`-g\`, every function body's size summed by the part its name belongs to; code inlined into a method's export counts where that method belongs): function bodies ${fmt(wasmParts.code)} B in ${wasmParts.functions} functions, data ${fmt(wasmParts.data)} B.`);
  out();
  const parts = Object.entries(wasmParts.parts).sort((a, b) => b[1] - a[1]);
  table(['part', 'bytes', 'of the file'], [
    ...parts.map(([part, bytes]) => [part, fmt(bytes), `${fmt((100 * bytes) / wasmParts.shipped, 1)}%`]),
    ['data (strings, tables)', fmt(wasmParts.data), `${fmt((100 * wasmParts.data) / wasmParts.shipped, 1)}%`],
  ]);
  out();
  out(`Largest functions: ${wasmParts.largest.slice(0, 8).map((f) => `${f.name.replace(/::h[0-9a-f]+$/, '')} ${fmt(f.size)} B`).join('; ')}.`);
  out();
});

// key churn (memory that follows the live buckets; hash flooding)
section(() => {
  out('## Key churn: memory under churn, and hash flooding');
  out();
  if (!churn) return missing('bench/churn.mjs', 'churn');
  out(`\`bench/churn.mjs\`: ${fmt(churn.keys)} distinct keys streamed through one limiter, each used once and full again 1 s (fake time) later, so about ${fmt(churn.live)} are live at any moment; then consume() on patterned keys beside random keys of the same lengths (100,000 live keys, median of 3 rounds of 1M calls).`);
  out();
  table(['', 'value'], [
    ['peak stored buckets', `${fmt(churn.peak_stored)} (${(churn.peak_stored / churn.live).toFixed(2)}× the live buckets)`],
    ['peak wasm memory', `${fmt(churn.peak_memory / (1024 * 1024), 1)} MiB`],
  ]);
  table(['patterned keys', 'ns per call', 'random keys, same lengths', 'ratio (target ≤ 1.5×)'], churn.hashdos.map((r) => [r.name, fmt(r.ns, 1), fmt(r.random_ns, 1), fmtRatio(r.ratio)]));
});

// a crowded key: lease calls while many leases are live on it
section(() => {
  out('## Crowded key: lease calls beside many live leases');
  out();
  if (!leases) return missing('bench/leases.mjs', 'leases');
  out(`\`bench/leases.mjs\`: \`limitLeased(key, 1, policy, { want: 2 })\` and the \`settle\` of the lease it got, through the shim, while L other plain leases are live on the key (as where hundreds of isolates lease from one bucket); baseline, same run: the same pair with none (median of ${leases.rounds} rounds). A call reads every lease of its key: the cost should grow about linearly with L.`);
  out();
  table(['leases live on the key', 'ns per pair', 'ratio to none', 'ns more per lease held'], leases.rows.map((r) => [fmt(r.held), fmt(r.ns), fmtRatio(r.ratio), r.per_lease_ns === null ? '—' : fmt(r.per_lease_ns, 1)]));
});

// wake-up cost of the durable class (measured, no goal)
section(() => {
  out('## Wake-up cost: DurableRateLimiterServer, lazy load vs full load');
  out();
  if (!wake?.results) return missing('bench/e2e/wake.mjs', 'wake');
  out(`\`bench/e2e/wake.mjs\`, in workerd (${wake.params?.storage ?? 'localDisk'}): Durable Objects whose SQLite storage holds N saved buckets. A wake-up is a fresh \`DurableRateLimiterServer\` on the same ctx (empty memory, storage there; reopening the database is not included). *Lazy* (what the class does): the first call, \`check()\` of one key, reads that key's row with one point SELECT. *Full*: the same after a \`SELECT key, state\` scan of all N rows restored into a limiter, as an eager load at wake-up would do. *Per further key*: a woken server checking m = min(N, 1,000) distinct keys, minus a server that holds them, per key. Baseline: the lazy first call on a Durable Object with no rows (its SELECT finds nothing): ${fmt(wake.first_call_empty_us, 1)} µs. workerd's clock stands still during compute, so each request repeats its operation and is timed from Node: (median of ${wake.params?.samples ?? '?'} requests − median no-op request) / repetitions; a full GC before each request frees the dropped servers' wasm memory.`);
  out();
  table(
    ['rows N', 'first call, lazy', 'first call after a full load', 'full / lazy', 'lazy / empty DO', 'full / empty DO', 'lazy load per further key', 'keys touched before full load pays'],
    wake.results.map((r) => [
      fmt(r.rows),
      `${fmt(r.first_call_lazy_us, 1)} µs`,
      `${fmt(r.first_call_full_load_us, r.first_call_full_load_us < 1000 ? 1 : 0)} µs`,
      fmtRatio(r.full_over_lazy, r.full_over_lazy < 10 ? 2 : 0),
      fmtRatio(r.lazy_over_empty),
      fmtRatio(r.full_over_empty, r.full_over_empty < 10 ? 2 : 0),
      `${fmt(r.lazy_load_per_key_us, 2)} µs`,
      `${fmt(r.break_even_keys)} (${fmt((100 * r.break_even_keys) / r.rows, 0)}% of N)`,
    ]),
  );
  const big = wake.results[wake.results.length - 1];
  const perRow = (big.first_call_full_load_us - big.first_call_lazy_us) / big.rows;
  out(`A full load costs ${fmt(perRow, 2)} µs a row at ${fmt(big.rows)} rows and a lazy load ${fmt(big.lazy_load_per_key_us, 2)} µs a key, so loading everything at wake-up is cheaper only for a Durable Object that touches more than ${fmt((100 * perRow) / big.lazy_load_per_key_us, 0)}% of its saved keys before it is evicted again — and even then it puts all of that cost in front of the first request (${fmt(big.first_call_full_load_us / 1000, 1)} ms at ${fmt(big.rows)} rows, every request waiting behind blockConcurrencyWhile), where the lazy first call stays at ${fmt(big.first_call_lazy_us, 1)} µs. ${wake.results.every((r) => r.first_call_full_load_us > r.first_call_lazy_us) ? 'The lazy first call is the cheaper one at every N measured.' : `The full load was the cheaper first call at N = ${wake.results.filter((r) => r.first_call_full_load_us <= r.first_call_lazy_us).map((r) => fmt(r.rows)).join(', ')}.`}`);
  out();
  addGoal('wake-up cost', `wake-up: first call at ${fmt(big.rows)} rows (lazy)`, `${fmt(big.first_call_lazy_us, 1)} µs`, `empty DO ${fmt(wake.first_call_empty_us, 1)} µs`, fmtRatio(big.lazy_over_empty), '(measure)', null);
  addGoal('wake-up cost', `wake-up: full load of ${fmt(big.rows)} rows`, `${fmt(big.first_call_full_load_us / 1000, 1)} ms`, `lazy ${fmt(big.first_call_lazy_us, 1)} µs`, fmtRatio(big.full_over_lazy, 0), '(measure)', null);
});

// local decisions: the middleware's `local` option beside per-request RPC and no limiter
section(() => {
  out('## Local decisions: the middleware with `local` leases, far from and at the limit');
  out();
  if (!local?.variants) return missing('bench/e2e/local.mjs', 'local');
  const p = local.params ?? {};
  const by = Object.fromEntries(local.variants.map((v) => [v.name, v]));
  const r = local.ratios ?? {};
  const gl = local.goals ?? {};
  out(`\`bench/e2e/local.mjs\`, in workerd: one Worker whose handler answers at once, alone (\`none\`), behind \`rateLimit({ binding, policy, key })\` with one \`limit()\` RPC per request (\`rpc-*\`), and behind the same with \`local\` (\`local-*\`: a \`LocalLimits\` of its own takes leases of tokens in one \`limitLeased\` RPC and spends them in the isolate, and after a denial answers locally until the retry time has passed). *Far* from the limit the policy is ${p.far_policy ?? 'max_tokens 1e9'}: every request is allowed. *At* the limit it is ${p.at_limit_policy ?? '?'} (one token per ${p.at_limit_interval_ms ?? '?'} ms), far below the offered load. \`headers\` (no limiter, no goal) is the handler plus only what the middleware does to an allowed response besides deciding (\`rateLimitHeaders\`, then \`withHeaders\`: a copy of the response with the headers), to show which part of the middleware's cost is not the limiter's. Each variant and round has its own key (its own Durable Object of ${p.binding ?? 'RateLimiterServer'}) and its own \`LocalLimits\`; the warm-up runs on another key, so every measured bucket starts full. The Worker counts requests, admitted (200) and denied (429) answers and the \`LocalLimits\` counters (\`calls\`, \`localAnswers\`). Load: ${local.machine?.load_generator ?? 'load generator'}, ${p.connections ?? '?'} connections, one key per variant, ${p.warmup_s ?? '?'} s warm-up + ${p.duration_s ?? '?'} s per variant, ${p.rounds ?? '?'} interleaved round(s). ${local.notes ?? ''}`);
  out();
  const rpcs = (v) => (v.rpcs_per_request === null || v.rpcs_per_request === undefined ? '—' : v.rpcs_per_request === 0 ? '0' : v.rpcs_per_request === 1 ? '1' : fmt(v.rpcs_per_request, 4));
  table(
    ['variant', 'requests/s', 'p50', 'p99', 'requests answered', 'admitted', 'denied', 'RPCs', 'RPCs per request', 'bound', 'errors'],
    local.variants.map((v) => [
      v.name,
      fmt(v.rps),
      `${v.p50_ms} ms`,
      `${v.p99_ms} ms`,
      fmt(v.answered ?? v.requests),
      fmt(v.admitted),
      fmt(v.denied),
      fmt(v.calls),
      rpcs(v),
      v.bound === null || v.bound === undefined ? '' : fmt(v.bound),
      fmt(v.errors),
    ]),
  );
  out(`Far from the limit: \`local-far\` ${fmtRatio(r.local_far_over_none_rps, 3)} the requests/s of \`none\` (\`rpc-far\` ${fmtRatio(r.rpc_far_over_none_rps, 3)}, \`headers\` ${fmtRatio(r.headers_over_none_rps, 3)}), with ${r.local_far_rpcs_per_request ?? '—'} RPCs per request. At the limit: \`local-limit\` admitted ${by['local-limit'] ? fmt(by['local-limit'].admitted) : '—'} of a bound of ${by['local-limit'] ? fmt(by['local-limit'].bound) : '—'} (${fmtRatio(r.local_limit_over_bound_admitted, 3)}), \`rpc-limit\` ${by['rpc-limit'] ? fmt(by['rpc-limit'].admitted) : '—'} of ${by['rpc-limit'] ? fmt(by['rpc-limit'].bound) : '—'} (${fmtRatio(r.rpc_limit_over_bound_admitted, 3)}): local / per-request ${fmtRatio(r.local_limit_over_rpc_limit_admitted_per_bound, 3)} relative to each run's bound (the two runs' windows differ by a few ms; raw ${fmtRatio(r.local_limit_over_rpc_limit_admitted, 3)}); the worst round was ${by['local-limit']?.max_over_bound ?? '—'} tokens from its bound (local) and ${by['rpc-limit']?.max_over_bound ?? '—'} (per-request); at the limit \`local-limit\` made ${r.local_limit_rpcs_per_request ?? '—'} RPCs per request and served ${fmtRatio(r.local_limit_over_rpc_limit_rps, 2)} the requests/s of \`rpc-limit\`.`);
  out();
  if (by['local-far'] && by.none) {
    addGoal('local decisions', 'workerd: local-far requests/s', fmt(by['local-far'].rps), `no limiter ${fmt(by.none.rps)}`, fmtRatio(r.local_far_over_none_rps, 3), '≥ 0.9× no limiter', gl.local_far_ge_0_9_none_rps);
  }
  if (by['local-far']) {
    addGoal('local decisions', 'workerd: local-far RPCs per request', String(r.local_far_rpcs_per_request), 'per-request RPC 1', String(r.local_far_rpcs_per_request), '≤ 0.02', gl.local_far_le_0_02_rpcs_per_request);
  }
  if (by['local-limit'] && by['rpc-limit']) {
    addGoal('local decisions', 'workerd: admitted at the limit, local (per bound)', `${fmt(by['local-limit'].admitted)} / ${fmt(by['local-limit'].bound)}`, `per-request RPC ${fmt(by['rpc-limit'].admitted)} / ${fmt(by['rpc-limit'].bound)}`, fmtRatio(r.local_limit_over_rpc_limit_admitted_per_bound, 3), '0.95× – 1.0× per-request', gl.local_limit_admitted_0_95_to_1_0_rpc);
  }
  if (by['local-limit']) {
    addGoal('local decisions', 'workerd: local admitted − bound, worst round', String(by['local-limit'].max_over_bound), `bound max_tokens + floor(T / interval)`, '', '≤ 0', gl.local_limit_never_above_bound);
  }
});

// ---- chart ----
const series = [];
if (consume) {
  series.push({ name: 'shim (wasm) in Node', color: '#d62728', points: consume.sizes.map((r) => [r.keys, r.shim_ns]) });
  series.push({ name: 'plain JS Map in Node', color: '#1f77b4', points: consume.sizes.map((r) => [r.keys, r.plain_ns]) });
  if (consume.sizes.some((r) => r.floor_ns !== null)) {
    series.push({ name: 'floor: receive key string (Node)', color: '#7f7f7f', dash: '6 4', points: consume.sizes.filter((r) => r.floor_ns !== null).map((r) => [r.keys, r.floor_ns]) });
  }
}
if (engine.length) {
  series.push({ name: 'native engine (Rust)', color: '#2ca02c', points: engine.map((e) => [e.keys, e.ours_ns]) });
  series.push({ name: 'native governor (Rust)', color: '#9467bd', dash: '2 3', points: engine.map((e) => [e.keys, e.governor_ns]) });
}
const svg = chart(series);
writeFileSync(join(ROOT, 'bench', 'keys.svg'), svg);

function chart(list) {
  const W = 720;
  const H = 440;
  const m = { left: 78, right: 250, top: 40, bottom: 62 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const xs = [1, 10_000, 1_000_000];
  const xLabel = { 1: '1', 10000: '10k', 1000000: '1M' };
  const x = (k) => m.left + (Math.log10(k) / 6) * pw;
  const values = list.flatMap((s) => s.points.map((p) => p[1])).filter((v) => v > 0);
  // Axis ends on the 1-2-5 ladder just outside the data.
  const ladder = (v, up) => {
    const d = 10 ** Math.floor(Math.log10(v));
    const steps = [1, 2, 5, 10].map((f) => f * d);
    return up ? steps.find((x) => x >= v) : [...steps].reverse().find((x) => x <= v);
  };
  const lo = values.length ? ladder(Math.min(...values), false) : 1;
  const hi = values.length ? ladder(Math.max(...values), true) : 1000;
  const y = (v) => m.top + ph - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo) || 1)) * ph;
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const parts = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  parts.push(`<text x="${m.left + pw / 2}" y="22" text-anchor="middle" font-size="15" font-weight="600">ns per consume() on a live key vs live keys</text>`);
  // y grid: 1, 2, 5 × 10^k
  const decade = 10 ** Math.floor(Math.log10(lo));
  for (let d = decade; d <= hi * 1.0001; d *= 10) {
    for (const f of [1, 2, 5]) {
      const v = d * f;
      if (v < lo * 0.9999) continue;
      if (v > hi * 1.0001) break;
      const yy = y(v).toFixed(1);
      parts.push(`<line x1="${m.left}" x2="${m.left + pw}" y1="${yy}" y2="${yy}" stroke="${f === 1 ? '#cccccc' : '#eeeeee'}"/>`);
      parts.push(`<text x="${m.left - 8}" y="${yy}" dy="4" text-anchor="end" fill="#444">${fmt(v)}</text>`);
    }
  }
  for (const k of xs) {
    const xx = x(k).toFixed(1);
    parts.push(`<line x1="${xx}" x2="${xx}" y1="${m.top}" y2="${m.top + ph}" stroke="#eeeeee"/>`);
    parts.push(`<text x="${xx}" y="${m.top + ph + 18}" text-anchor="middle" fill="#444">${xLabel[k]}</text>`);
  }
  parts.push(`<rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  parts.push(`<text x="${m.left + pw / 2}" y="${H - 16}" text-anchor="middle">live keys (log scale)</text>`);
  parts.push(`<text transform="translate(18 ${m.top + ph / 2}) rotate(-90)" text-anchor="middle">ns per call (log scale)</text>`);
  if (!list.length) parts.push(`<text x="${m.left + pw / 2}" y="${m.top + ph / 2}" text-anchor="middle" fill="#888">no results</text>`);
  list.forEach((s, i) => {
    const pts = s.points.filter((p) => p[1] > 0);
    const d = pts.map((p, j) => `${j ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`);
    for (const p of pts) {
      parts.push(`<circle cx="${x(p[0]).toFixed(1)}" cy="${y(p[1]).toFixed(1)}" r="4" fill="${s.color}"><title>${esc(s.name)}: ${fmt(p[1], 1)} ns at ${fmt(p[0])} keys</title></circle>`);
    }
    const ly = m.top + 10 + i * 22;
    const lx = m.left + pw + 18;
    parts.push(`<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`);
    parts.push(`<circle cx="${lx + 13}" cy="${ly}" r="4" fill="${s.color}"/>`);
    parts.push(`<text x="${lx + 34}" y="${ly}" dy="4">${esc(s.name)}</text>`);
  });
  const note = `Node ${process.version} · ${esc(machine.cpu)} · ${machine.cores} cores · ${new Date().toISOString().slice(0, 10)}`;
  parts.push(`<text x="${W - 8}" y="${H - 6}" text-anchor="end" font-size="10" fill="#666">${note}</text>`);
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

// ---- RESULTS.md ----
/** The checkout's commit, and whether it had uncommitted changes (then the figures are not
 * that commit's alone). */
function sourceCommit() {
  try {
    const git = (...args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    const head = git('rev-parse', '--short=12', 'HEAD');
    const dirty = git('status', '--porcelain', '--untracked-files=no', '--', 'src', 'js', 'Cargo.toml', 'Cargo.lock', 'pkg-template') !== '';
    return dirty ? `${head} with uncommitted changes to the package` : head;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

const date = new Date();
const totalSeconds = status.total?.seconds;
out('# Benchmark results');
out();
out(`Generated by \`npm run bench\` (scripts/bench.sh) on ${date.toISOString().replace('T', ' ').slice(0, 16)} UTC${totalSeconds ? ` in ${fmt(totalSeconds)} s` : ''}. Benchmarks, not tests: they assert nothing. Every figure is measured beside its baseline in the same run; the ratios are ours / baseline. [README.md](README.md) describes each benchmark and defines each goal named below, with its target and the reason for it.`);
out();
out('## Machine and versions');
out();
out(`- CPU: ${machine.cpu}, ${machine.cores} logical cores; RAM ${fmt(machine.ram_gib, 1)} GiB; ${machine.os}`);
out(`- Load average (1/5/15 min) when the report was written: ${machine.loadavg.map((l) => l.toFixed(2)).join(' / ')}${status.total?.note ? `; ${status.total.note}` : ''} — other processes on the machine add noise to every figure.`);
out(`- ${Object.entries(versions).map(([k, v]) => `${k}: ${v ?? 'n/a'}`).join('; ')}`);
const builds = [...new Set([consume, memory, latency, size].filter(Boolean).map((r) => r.wasm_build).filter(Boolean))];
if (builds.length === 1) out(`- Package build measured (sha-256 prefix of the installed .wasm): ${builds[0]}`);
else if (builds.length > 1) out(`- **Warning:** the package was rebuilt during the run; the Node benches measured different builds: ${builds.join(', ')} — rerun for consistent figures.`);
out(`- Source measured: commit ${sourceCommit()}`);
out();
const notes = Object.entries(status).filter(([part, s]) => part !== 'total' && s.state !== 'ok');
if (notes.length) {
  out(`Parts not run or failed: ${notes.map(([part, s]) => `${part} — ${s.state}${s.note ? ` (${s.note})` : ''}`).join('; ')}.`);
  out();
}
out('## Summary');
out();
out('![ns per consume vs live keys](keys.svg)');
out();
const summaryStart = md.length;
table(['goal', 'what', 'measured', 'baseline (same run)', 'ratio', 'target', 'status'], summary, 2);
const summaryLines = md.slice(summaryStart);
for (const s of sections) md.push(...s);
out('---');
out();
out('Raw results: `bench/out/*.json` and `bench/out/*.log` (not committed). Reproduce with `npm run bench`.');
writeFileSync(join(ROOT, 'bench', 'RESULTS.md'), md.join('\n') + '\n');

// ---- stdout: the same tables ----
console.log('\n================ benchmark summary ================\n');
console.log(summaryLines.join('\n'));
for (const s of sections) console.log(s.join('\n'));
console.log(`wrote bench/RESULTS.md and bench/keys.svg`);
