// Runs the `wrangler deploy --dry-run` output of the consumer Worker in Miniflare (workerd),
// as Cloudflare would: the bundled entry plus its .wasm as a compiled module, LIMITER bound to
// the re-exported RateLimiterServer and LOGIN_LIMITER to DurableRateLimiterServer on SQLite
// storage persisted in a temp directory, so that a second Miniflare finds what the first saved.
// Usage: node run-bundle.mjs <dist dir>. Prints one line per check; exits 1 on a failure.
import { createRequire } from 'node:module';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../..');
// Miniflare is a dev tool of the repository, not of the consumer: load it from the root.
const { Miniflare } = createRequire(join(repoRoot, 'package.json'))('miniflare');

const dist = resolve(process.argv[2] ?? join(here, 'dist'));
const entry = join(dist, 'index.js');

let passed = 0;
function check(condition, what, detail = '') {
  if (!condition) {
    console.error(`  FAIL ${what}${detail ? `: ${detail}` : ''}`);
    throw new Error(`check failed: ${what}`);
  }
  passed += 1;
  console.log(`  ok   ${what}`);
}

const persist = mkdtempSync(join(tmpdir(), 'consumer-do-'));
const start = () =>
  new Miniflare({
    modules: true,
    scriptPath: entry,
    modulesRoot: dist,
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    durableObjects: {
      LIMITER: 'RateLimiterServer',
      LOGIN_LIMITER: { className: 'DurableRateLimiterServer', useSQLite: true },
    },
    durableObjectsPersist: persist,
    compatibilityDate: '2026-04-01',
  });
let mf = start();

async function hit(ip, path = '/api') {
  const res = await mf.dispatchFetch(`http://consumer.example${path}`, {
    headers: { 'CF-Connecting-IP': ip },
  });
  await res.arrayBuffer();
  return res;
}

let failed = false;
try {
  await mf.ready;
  check(readdirSync(dist).some((f) => f.endsWith('.wasm')), 'Miniflare started the bundle with its .wasm module');

  const ip = '203.0.113.7';
  const policy = '"api";q=10;w=100';
  for (let i = 1; i <= 10; i += 1) {
    const res = await hit(ip);
    const remaining = res.headers.get('X-RateLimit-Remaining');
    const rl = res.headers.get('RateLimit');
    check(
      res.status === 200 &&
        remaining === String(10 - i) &&
        res.headers.get('X-RateLimit-Limit') === '10' &&
        res.headers.get('RateLimit-Policy') === policy &&
        new RegExp(`^"api";r=${10 - i};t=\\d+$`).test(rl ?? '') &&
        res.headers.get('Retry-After') === null,
      `request ${i} from ${ip}: 200, X-RateLimit-Remaining ${10 - i}, X-RateLimit-Limit 10, ` +
        `RateLimit-Policy ${policy}, RateLimit "api";r=${10 - i};t=…, no Retry-After`,
      `got ${res.status}, remaining ${remaining}, limit ${res.headers.get('X-RateLimit-Limit')}, ` +
        `policy ${res.headers.get('RateLimit-Policy')}, RateLimit ${rl}, Retry-After ${res.headers.get('Retry-After')}`,
    );
  }

  const limited = await hit(ip);
  const retryAfter = limited.headers.get('Retry-After');
  check(limited.status === 429, `request 11 from ${ip}: 429`, `got ${limited.status}`);
  check(
    retryAfter !== null && /^\d+$/.test(retryAfter) && Number(retryAfter) >= 1 && Number(retryAfter) <= 10,
    `request 11: Retry-After is a whole number of seconds in [1, 10] (${retryAfter})`,
    `got ${retryAfter}`,
  );
  check(
    limited.headers.get('X-RateLimit-Remaining') === '0',
    'request 11: X-RateLimit-Remaining 0',
    `got ${limited.headers.get('X-RateLimit-Remaining')}`,
  );
  check(
    limited.headers.get('RateLimit-Policy') === policy,
    `request 11: RateLimit-Policy ${policy}`,
    `got ${limited.headers.get('RateLimit-Policy')}`,
  );
  check(
    limited.headers.get('RateLimit') === `"api";r=0;t=${retryAfter}`,
    `request 11: RateLimit "api";r=0;t=<Retry-After> (${limited.headers.get('RateLimit')})`,
    `got ${limited.headers.get('RateLimit')}`,
  );

  const other = await hit('198.51.100.1');
  check(
    other.status === 200 && other.headers.get('X-RateLimit-Remaining') === '9',
    'another IP (198.51.100.1) has its own bucket: 200, X-RateLimit-Remaining 9',
    `got ${other.status}, remaining ${other.headers.get('X-RateLimit-Remaining')}`,
  );

  // The durable class: 3 login attempts, a restart of the whole runtime, then the 4th
  // attempt finds 2 left, where the in-memory class comes back full.
  const attacker = '192.0.2.66';
  for (let i = 1; i <= 3; i += 1) {
    const res = await hit(attacker, '/login');
    check(
      res.status === 200 && res.headers.get('X-RateLimit-Remaining') === String(5 - i),
      `login ${i} from ${attacker}: 200, X-RateLimit-Remaining ${5 - i}`,
      `got ${res.status}, remaining ${res.headers.get('X-RateLimit-Remaining')}`,
    );
  }
  await mf.dispose();
  mf = start();
  await mf.ready;
  const afterRestart = await hit(attacker, '/login');
  check(
    afterRestart.status === 200 && afterRestart.headers.get('X-RateLimit-Remaining') === '1',
    'after a restart of Miniflare on the same storage, login 4: 200, X-RateLimit-Remaining 1 (DurableRateLimiterServer kept the bucket)',
    `got ${afterRestart.status}, remaining ${afterRestart.headers.get('X-RateLimit-Remaining')}`,
  );
  const memoryAfterRestart = await hit(ip);
  check(
    memoryAfterRestart.status === 200 && memoryAfterRestart.headers.get('X-RateLimit-Remaining') === '9',
    `after the restart, ${ip} on /api: 200, X-RateLimit-Remaining 9 (RateLimiterServer starts empty)`,
    `got ${memoryAfterRestart.status}, remaining ${memoryAfterRestart.headers.get('X-RateLimit-Remaining')}`,
  );
} catch (error) {
  failed = true;
  if (!String(error?.message).startsWith('check failed')) console.error('  FAIL', error);
} finally {
  await mf.dispose();
  rmSync(persist, { recursive: true, force: true });
}
if (!failed) check(true, 'Miniflare disposed');
console.log(`run-bundle: ${passed} checks passed`);
process.exit(failed ? 1 : 0);
