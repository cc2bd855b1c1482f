// Shared pieces of the Node benchmarks: the plain-JS baseline, keys, access orders, the
// fake clock and the JSON results that bench/report.mjs assembles into bench/RESULTS.md.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';
import os from 'node:os';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const OUT = join(ROOT, 'bench', 'out');

/** The installed package (what a consumer imports), by file path so that it is the same
 * module instance the `node` entry uses. */
export const INSTALLED = join(ROOT, 'node_modules', '@delightstack', 'rate-limiter');
export const installedUrl = (file) => pathToFileURL(join(INSTALLED, file)).href;

/** The build of the installed .wasm when this process started (others may rebuild meanwhile). */
export const WASM_BUILD = (() => {
  try {
    const bytes = readFileSync(join(INSTALLED, 'rate_limiter_bg.wasm'));
    return `${createHash('sha256').update(bytes).digest('hex').slice(0, 12)} (${bytes.length} B)`;
  } catch {
    return null;
  }
})();

/** The key of client `i`, as every benchmark spells it. */
export const keyOf = (i) => `client-${i}:api`;

/** The size goal (bench/README.md, "size"): the .wasm raw and gzip -9 in KB (1,024 B), compile + instantiate in ms. */
export const SIZE_TARGETS = { rawKb: 110, gzipKb: 48, startMs: 4 };

export function makeKeys(n) {
  const keys = new Array(n);
  for (let i = 0; i < n; i++) keys[i] = keyOf(i);
  return keys;
}

/** Deterministic PRNG (mulberry32), so every run and every implementation sees the same order. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random permutation of 0..n-1 (Fisher–Yates, fixed seed). */
export function shuffled(n, seed = 42) {
  const random = rng(seed);
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

/** The plain-JS baseline, shared with the end-to-end Worker (bench/e2e/worker.js). */
export { PlainJsLimiter } from './plain-limiter.mjs';

/** Replaces `Date.now` with a clock the benchmark moves; returns its controls. */
export function fakeClock(start = 1_700_000_000_000) {
  const realNow = Date.now;
  const clock = { now: start };
  Date.now = () => clock.now;
  clock.restore = () => {
    Date.now = realNow;
  };
  return clock;
}

export function median(values) {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/** The value at quantile q (0..1) of an already sorted typed array (nearest rank). */
export function quantile(sorted, q) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

export function gc() {
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc');
  global.gc();
  global.gc();
}

/** Writes bench/out/<name>.json for bench/report.mjs. */
export function writeResult(name, data) {
  mkdirSync(OUT, { recursive: true });
  const file = join(OUT, `${name}.json`);
  writeFileSync(file, JSON.stringify({ ...data, wasm_build: WASM_BUILD, node: process.version, at: new Date().toISOString() }, null, 2));
  return file;
}

export const fmt = (x, digits = 0) =>
  x === null || x === undefined || Number.isNaN(x)
    ? '—'
    : x.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits });

export const ratio = (a, b) => (a && b ? a / b : null);
export const fmtRatio = (r, digits = 2) => (r === null || r === undefined ? '—' : `${r.toFixed(digits)}×`);

/** Prints a markdown table (header row + rows of cells). */
export function printTable(header, rows) {
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const row of rows) lines.push(`| ${row.join(' | ')} |`);
  console.log(lines.join('\n'));
}

/** The machine a result was measured on, as every results file records it. */
export function machineInfo() {
  return {
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? null,
    os: `${os.type()} ${os.release()}`,
    loadavg_1m_at_end: Math.round(os.loadavg()[0] * 100) / 100,
    node: process.version,
  };
}
