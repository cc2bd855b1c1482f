// What each fault of the simulator costs (bench/sim/README.md, "Faults"): every fault alone, on
// 4, 32 and 256 isolates at 1x and 10x a 1,000/s limit with 50 ms round trips, in the three
// modes, beside the same cells without faults. Prints the table of bench/sim/RESULTS.md,
// "Faults"; every window of every run is checked against the bound as in any cell.
//
//   node bench/sim/faults.mjs                 # about 3 minutes with --jobs 2
//   node bench/sim/faults.mjs --pkg DIR --jobs 2 --seed 1

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const FAULTS = [
  ['none', []],
  ['5% of calls fail', ['--fail', '0.05']],
  ['5% of answers lost', ['--lose', '0.05']],
  ['clocks drift ±1,000 ppm', ['--drift', '1000']],
  ['100 µs per call', ['--service', '100']],
  ['500 µs per call', ['--service', '500']],
  ['a restart every 10 s', ['--restart', '0.1']],
];
const MODES = ['request', 'leases', 'shares'];
const CELLS = ['--n', '4,32,256', '--demand', '1,10', '--rtt', '50', '--limit', '1000', '--split', 'even'];

const { values } = parseArgs({
  options: { pkg: { type: 'string' }, jobs: { type: 'string', default: '2' }, seed: { type: 'string', default: '1' } },
});
const run = fileURLToPath(new URL('./run.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'sim-faults-'));
const rows = [];
let boundsHeld = true;
try {
  for (const [name, flags] of FAULTS) {
    const json = join(dir, `${rows.length}.json`);
    const args = [run, '--modes', MODES.join(','), ...CELLS, '--seed', values.seed, '--jobs', values.jobs, '--json', json, ...flags];
    if (values.pkg !== undefined) args.push('--pkg', values.pkg);
    const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
    if (child.status !== 0) boundsHeld = false; // run.mjs fails on a window above its bound
    const cells = JSON.parse(readFileSync(json, 'utf8')).cells;
    for (const n of [4, 32, 256]) {
      for (const demand of [1, 10]) {
        const of = (mode) => cells.find((c) => c.mode === mode && c.isolates === n && c.demand === demand);
        rows.push({ name, n, demand, cells: MODES.map(of) });
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const fixed = (x, digits) => (x === undefined ? '-' : x.toFixed(digits));
console.log(`Each fault alone (seed ${values.seed}, 50 ms round trips, even split, 30 s): efficiency, calls/s and p99 ms of each mode\n`);
console.log(`| fault | N | demand | ${MODES.map((m) => `${m}: efficiency | calls/s | p99 ms`).join(' | ')} | bound |`);
console.log(`| --- | ---: | ---: | ${MODES.map(() => '---: | ---: | ---:').join(' | ')} | --- |`);
for (const { name, n, demand, cells } of rows) {
  const figures = cells.map((c) => `${fixed(c?.efficiency, 3)} | ${fixed(c?.callsPerSecond, 0)} | ${fixed(c?.latencyP99Ms, 0)}`);
  const bound = cells.every((c) => c?.boundOk) ? 'ok' : 'ABOVE';
  console.log(`| ${name} | ${n} | ${demand}x | ${figures.join(' | ')} | ${bound} |`);
}
if (!boundsHeld || rows.some((r) => !r.cells.every((c) => c?.boundOk))) {
  console.error('a window above its bound');
  process.exit(1);
}
