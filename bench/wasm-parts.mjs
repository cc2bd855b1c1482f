// What the shipped .wasm is made of: the wasm-bindgen output (target/wasm-pack, left by
// scripts/build.sh) optimised with the build's own wasm-opt pass plus `-g`, which keeps the
// function names, then every function body's size summed by the part of the package it
// belongs to (its name: crate and module), and the data. The figures are those of the
// shipped file within the few hundred bytes the name section and the kept names cost.
// Run: node bench/wasm-parts.mjs [--top N]   (after scripts/build.sh)
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, printTable, writeResult } from './common.mjs';

const INPUT = join(ROOT, 'target', 'wasm-pack', 'rate_limiter_bg.wasm');
const SHIPPED = join(ROOT, 'pkg', 'rate_limiter_bg.wasm');
const BUILD = readFileSync(join(ROOT, 'scripts', 'build.sh'), 'utf8');
// The build's wasm-opt flags, read from scripts/build.sh so that the two never differ.
const FLAGS = BUILD.match(/WASM_OPT_FLAGS=\(([^)]*)\)/)[1].split(/\s+/).filter(Boolean);
const topAt = process.argv.indexOf('--top');
const top = topAt > 0 ? Number(process.argv[topAt + 1]) : 12;

// The parts, first match wins: a function's name (demangled by the name section) against
// each pattern.
const PARTS = [
  ['leases and shares', /limitLeased|settle|refund|engine::(lease|leasing|share|appointment)\b|limit_shared/],
  ['concurrency limits (gates)', /[Pp]ermit|release|engine::gate\b|binding::gates\b|gate_policy/],
  ['blocks', /engine::block\b|binding::blocks\b|_block|_unblock|[Bb]locked/],
  ['durable snapshots', /[Ss]napshot|restore|durable|stored/],
  ['engine core', /rate_limiter::engine::/],
  ['binding (JS values in and out)', /rate_limiter::binding::/],
  ['formatting, strings, panics', /core::fmt|alloc::fmt|core::str|core::panic|panicking|Display|Debug/],
  ['allocator, hashing, sorting, builtins', /talc|alloc::|hashbrown|foldhash|BuildHasher|core::slice::sort|compiler_builtins|memcpy|memmove|memset|memcmp|__rust_/],
  ['wasm-bindgen exports and glue', /wasm_bindgen|__wbg|__wbindgen|js_sys|externref shim|^[a-z_]+$/],
];

function leb(bytes, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if (byte < 0x80) return [value, at];
  }
}

/** `{ sections, functions: [{ index, size }], imported, names: Map, data }` of a module. */
function parse(bytes) {
  const functions = [];
  const names = new Map();
  let imported = 0;
  let data = 0;
  let at = 8;
  while (at < bytes.length) {
    const id = bytes[at];
    const [size, start] = leb(bytes, at + 1);
    const end = start + size;
    if (id === 2) {
      // Imports: count the imported functions (they come first in the index space).
      let [count, p] = leb(bytes, start);
      for (let i = 0; i < count; i++) {
        for (let s = 0; s < 2; s++) {
          const [length, q] = leb(bytes, p);
          p = q + length;
        }
        const kind = bytes[p++];
        if (kind === 0) {
          imported += 1;
          p = leb(bytes, p)[1]; // type index
        } else if (kind === 1) {
          p = limits(bytes, p + 1); // reference type, limits
        } else if (kind === 2) {
          p = limits(bytes, p);
        } else if (kind === 3) {
          p += 2; // value type, mutability
        } else {
          p = leb(bytes, p + 1)[1]; // tag: attribute, type index
        }
      }
    } else if (id === 10) {
      let [count, p] = leb(bytes, start);
      for (let i = 0; i < count; i++) {
        const [length, q] = leb(bytes, p);
        functions.push({ index: imported + i, size: length + (q - p) });
        p = q + length;
      }
    } else if (id === 11) {
      data = size;
    } else if (id === 0) {
      const [length, q] = leb(bytes, start);
      const name = new TextDecoder().decode(bytes.subarray(q, q + length));
      if (name === 'name') readNames(bytes, q + length, end, names);
    }
    at = end;
  }
  return { functions, names, data };
}

function limits(bytes, p) {
  const flags = bytes[p];
  p = leb(bytes, p + 1)[1];
  return flags & 1 ? leb(bytes, p)[1] : p;
}

function readNames(bytes, at, end, names) {
  while (at < end) {
    const id = bytes[at];
    const [size, start] = leb(bytes, at + 1);
    if (id === 1) {
      let [count, p] = leb(bytes, start);
      for (let i = 0; i < count; i++) {
        const [index, q] = leb(bytes, p);
        const [length, r] = leb(bytes, q);
        names.set(index, new TextDecoder().decode(bytes.subarray(r, r + length)));
        p = r + length;
      }
    }
    at = start + size;
  }
}

const named = join(tmpdir(), `wasm-parts-${process.pid}.wasm`);
execFileSync(join(ROOT, 'node_modules', '.bin', 'wasm-opt'), [...FLAGS, '-g', INPUT, '-o', named]);
const { functions, names, data } = parse(readFileSync(named));
rmSync(named);
const shipped = readFileSync(SHIPPED).length;

const totals = new Map(PARTS.map(([part]) => [part, 0]));
totals.set('other', 0);
const largest = [];
let code = 0;
for (const { index, size } of functions) {
  const name = names.get(index) ?? `function ${index}`;
  const part = PARTS.find(([, pattern]) => pattern.test(name))?.[0] ?? 'other';
  totals.set(part, totals.get(part) + size);
  largest.push({ name, size, part });
  code += size;
}
largest.sort((a, b) => b.size - a.size);

const kb = (n) => `${(n / 1000).toFixed(1)} KB`;
const rows = [...totals].sort((a, b) => b[1] - a[1]).map(([part, size]) => [part, kb(size), `${((100 * size) / shipped).toFixed(1)}%`]);
rows.push(['data (strings, tables)', kb(data), `${((100 * data) / shipped).toFixed(1)}%`]);
console.log(`\n.wasm ${shipped} B shipped; function bodies ${code} B in ${functions.length} functions, data ${data} B`);
printTable(['part', 'code', 'of the shipped file'], rows);
console.log(`\nLargest ${top} functions:`);
printTable(['function', 'size', 'part'], largest.slice(0, top).map((f) => [f.name.slice(0, 90), `${f.size} B`, f.part]));
writeResult('wasm-parts', { shipped, code, data, functions: functions.length, parts: Object.fromEntries(totals), largest: largest.slice(0, top) });
