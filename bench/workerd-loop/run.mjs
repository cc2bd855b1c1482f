// node bench/workerd-loop/run.mjs: bundles the loop Worker with wrangler and runs it in
// workerd (Miniflare); prints ns per consume() for the package and for plain JS, alternated.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const here = new URL('.', import.meta.url).pathname;
const root = join(here, '../..');
const { Miniflare } = createRequire(join(root, 'package.json'))('miniflare');
const out = join(here, 'dist'); // inside the project: Miniflare resolves modules below it
rmSync(out, { recursive: true, force: true });
execFileSync(join(root, 'node_modules/.bin/wrangler'), ['deploy', '--dry-run', '--outdir', out], { cwd: here, stdio: 'ignore' });

const mf = new Miniflare({
  modules: true,
  scriptPath: join(out, 'index.js'),
  modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
  durableObjects: { LOOP: 'Loop' },
  compatibilityDate: '2026-04-01',
});
const CALLS = 2_000_000;
const best = { ours: Infinity, plain: Infinity };
for (let round = 0; round < 4; round++) {
  for (const which of ['ours', 'plain']) {
    const start = process.hrtime.bigint();
    const allowed = Number(await (await mf.dispatchFetch(`http://loop/?n=${CALLS}&w=${which}`)).text());
    if (allowed !== CALLS) throw new Error(`${which}: ${allowed} of ${CALLS} allowed`);
    best[which] = Math.min(best[which], Number(process.hrtime.bigint() - start) / CALLS);
  }
}
await mf.dispose();
console.log(`workerd loop: ${CALLS.toLocaleString('en')} consume() calls per round, best of 4 rounds`);
console.log(`WORKERD_LOOP ours_ns=${best.ours.toFixed(1)} plain_ns=${best.plain.toFixed(1)} ratio=${(best.ours / best.plain).toFixed(2)}`);
