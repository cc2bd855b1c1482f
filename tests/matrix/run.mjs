// The consumer matrix: the packed package installed, as a user installs it, into small
// projects on the toolchains users run today, each pinned by its own lockfile.
//
//   current        Node 22, the newest wrangler, @cloudflare/vitest-plugin, tsc against the
//                  newest @cloudflare/workers-types, wrangler deploy --dry-run, the upgrade cases,
//                  and wrangler dev on the oldest compatibility date with Durable Object RPC,
//                  the last one without FinalizationRegistry, and today's
//   vite           vite build with @cloudflare/vite-plugin, and vite dev answering 200 then 429
//   npm-workspace  the Worker in an npm workspace, its dependencies hoisted above its folder
//   pnpm           the Worker as a pnpm project (symlinks into node_modules/.pnpm)
//
// Every project gets the same Worker and test suite (tests/matrix/app/) and runs on Node 22
// from tests/matrix/tools/ (scripts/bootstrap.sh installs it). Each works in its own folder
// under ~/.cache (MATRIX_DIR overrides), which keeps node_modules between runs so later runs
// install little.
// A project that runs no test fails. Usage: node tests/matrix/run.mjs [name...]
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';

const here = import.meta.dirname;
const root = resolve(here, '../..');
// Outside the repository: Node and TypeScript look for packages in every parent folder, and
// must not find the repository's own node_modules. One folder per clone.
const work =
  process.env.MATRIX_DIR ??
  join(homedir(), '.cache/delightstack-rate-limiter', `matrix-${createHash('sha256').update(root).digest('hex').slice(0, 8)}`);
const tools = join(here, 'tools/node_modules/.bin');
const PKG = '@delightstack/rate-limiter';
const wasm = readFileSync(join(root, 'pkg/rate_limiter_bg.wasm'));
const env = {
  ...process.env,
  PATH: `${tools}:${process.env.PATH}`,
  WRANGLER_SEND_METRICS: 'false',
  NO_COLOR: '1',
  FORCE_COLOR: '0',
};

let checks = 0;
const ok = (message) => {
  checks++;
  console.log(`  ok   ${message}`);
};

/** Runs a command to completion; its output is shown only when it fails. */
function run(cwd, command, args, { allowFailure = false } = {}) {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 << 20 });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (result.status !== 0 && !allowFailure) {
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) exited ${result.status}:\n${output}`);
  }
  return { status: result.status, output, stdout: result.stdout };
}

/** The first `dir/path` that exists from `dir` up to the project's folder, as Node looks. */
function findUp(dir, path) {
  for (let d = dir; d.startsWith(work); d = resolve(d, '..')) {
    if (existsSync(join(d, path))) return join(d, path);
  }
  throw new Error(`no ${path} from ${dir} up`);
}

const bin = (dir, name) => findUp(dir, join('node_modules/.bin', name));
/** The folder of the package `name` as it resolves from `dir`. */
const installed = (dir, name) => dirname(findUp(dir, join('node_modules', name, 'package.json')));
const version = (dir) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;

// ---- the steps a project can run, each with the app directory ----

/** The packed package is what got installed, and every pinned dependency is at its pin. */
function checkInstall(project, app) {
  const pkg = installed(app, PKG);
  if (!readFileSync(join(pkg, 'rate_limiter_bg.wasm')).equals(wasm)) {
    throw new Error(`${relative(work, pkg)} holds another .wasm than pkg/`);
  }
  ok(`${PKG}@${version(pkg)} from the tarball at ${relative(join(work, project.name), pkg)}, .wasm identical to pkg/'s`);
  const manifest = JSON.parse(readFileSync(join(here, 'projects', project.name, project.app, 'package.json'), 'utf8'));
  const pins = Object.entries({ ...manifest.dependencies, ...manifest.devDependencies });
  const off = pins.filter(([name, pin]) => version(installed(app, name)) !== pin);
  if (off.length) throw new Error(`not at their pins: ${off.map(([n, p]) => `${n} ${version(installed(app, n))} ≠ ${p}`)}`);
  ok(`pinned: ${pins.map(([name, pin]) => `${name} ${pin}`).join(', ')}`);
  const lockfile = project.manager === 'pnpm' ? 'pnpm-lock.yaml' : 'package-lock.json';
  const want = locked(join(here, 'projects', project.name, lockfile));
  const got = locked(join(work, project.name, lockfile)).filter((p) => !p.includes(PKG.replace('/', '+')) && !p.includes(PKG));
  if (want.join() !== got.join()) {
    const diff = [...want.filter((p) => !got.includes(p)).map((p) => `-${p}`), ...got.filter((p) => !want.includes(p)).map((p) => `+${p}`)];
    throw new Error(`the install moved away from ${lockfile}: ${diff.join(' ')}`);
  }
  ok(`every one of the ${want.length} packages in ${lockfile} installed at its locked version, and nothing else`);
}

/** The packages a lockfile holds, as sorted "path-or-name@version" strings. */
function locked(file) {
  const text = readFileSync(file, 'utf8');
  if (file.endsWith('.json')) {
    const { packages } = JSON.parse(text);
    return Object.entries(packages)
      .filter(([path, p]) => path.includes('node_modules/') && !p.link)
      .map(([path, p]) => `${path}@${p.version}`)
      .sort();
  }
  // pnpm-lock.yaml: the keys of its top-level `packages:` map, e.g. `  vitest@5.1.2:`.
  const section = text.split(/^packages:$/m)[1]?.split(/^\S/m)[0] ?? '';
  return [...section.matchAll(/^  '?([^\s':]+)'?:$/gm)].map((m) => m[1]).sort();
}

function checkHoisted(project, app) {
  const hoisted = [PKG, 'wrangler', 'vitest'];
  const inside = hoisted.filter((name) => existsSync(join(app, 'node_modules', name)));
  const elsewhere = hoisted.filter((name) => installed(app, name) !== join(work, project.name, 'node_modules', name));
  if (inside.length || elsewhere.length) throw new Error(`not hoisted to the workspace root: ${[...inside, ...elsewhere]}`);
  ok(`${hoisted.join(', ')} hoisted to the workspace root, outside the Worker's folder ${project.app}`);
}

function checkPnpmLayout(project, app) {
  const link = join(app, 'node_modules', PKG);
  const target = realpathSync(link);
  if (!lstatSync(link).isSymbolicLink() || !target.includes('/node_modules/.pnpm/')) {
    throw new Error(`${PKG} is not a symlink into node_modules/.pnpm (${target})`);
  }
  ok(`node_modules/${PKG} is a symlink to ${relative(app, target)}`);
}

function tsc(project, app) {
  run(app, bin(app, 'tsc'), ['--noEmit', '-p', '.']);
  ok(`tsc ${version(installed(app, 'typescript'))} --noEmit: src and test type-check against @cloudflare/workers-types ${version(installed(app, '@cloudflare/workers-types'))}`);
}

function vitest(project, app) {
  const report = join(app, 'vitest-report.json');
  const { output, status } = run(app, bin(app, 'vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile=${report}`], {
    allowFailure: true,
  });
  const json = existsSync(report) ? JSON.parse(readFileSync(report, 'utf8')) : null;
  if (status !== 0 || !json || json.numFailedTests > 0) throw new Error(`vitest failed:\n${output}`);
  const byProject = {};
  for (const file of json.testResults) {
    const name = relative(app, file.name).split('/')[1];
    byProject[name] = (byProject[name] ?? 0) + file.assertionResults.filter((t) => t.status === 'passed').length;
  }
  for (const name of ['node', 'workerd']) {
    if (!byProject[name]) throw new Error(`vitest ran no test in test/${name}:\n${output}`);
  }
  project.tests += json.numPassedTests;
  ok(`vitest ${version(installed(app, 'vitest'))}: ${byProject.node} tests in Node, ${byProject.workerd} in workerd (@cloudflare/vitest-plugin ${version(installed(app, '@cloudflare/vitest-plugin'))})`);
}

function dryRun(project, app) {
  const { output } = run(app, bin(app, 'wrangler'), ['deploy', '--dry-run', '--outdir', 'dist']);
  if (/\[(WARNING|ERROR)\]/.test(output)) throw new Error(`wrangler warned:\n${output}`);
  const wasms = readdirSync(join(app, 'dist')).filter((f) => f.endsWith('.wasm'));
  if (wasms.length !== 1 || !readFileSync(join(app, 'dist', wasms[0])).equals(wasm)) {
    throw new Error(`dist holds ${wasms.join(', ') || 'no .wasm'}, want one copy of the package's`);
  }
  ok(`wrangler ${version(installed(app, 'wrangler'))} deploy --dry-run: bundled with no warning, the .wasm as a module (${wasms[0]})`);
}

async function upgrade(project, app) {
  const { checkUpgrade } = await import('./upgrade.mjs');
  await checkUpgrade({ dir: app, wrangler: bin(app, 'wrangler'), env, ok });
}

/** Every file under dir, recursively. */
const files = (dir) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));

function viteBuild(project, app) {
  run(app, bin(app, 'vite'), ['build']);
  const out = files(join(app, 'dist'));
  const wasms = out.filter((f) => f.endsWith('.wasm'));
  if (wasms.length !== 1 || !readFileSync(wasms[0]).equals(wasm)) {
    throw new Error(`vite build wrote ${wasms.map((f) => relative(app, f)).join(', ') || 'no .wasm'}`);
  }
  const config = out.find((f) => f.endsWith('/wrangler.json'));
  const built = JSON.parse(readFileSync(config, 'utf8'));
  const classes = built.durable_objects.bindings.map((b) => b.class_name).sort().join(', ');
  if (classes !== 'DurableRateLimiterServer, RateLimiterServer') throw new Error(`built bindings: ${classes}`);
  ok(`vite ${version(installed(app, 'vite'))} build with @cloudflare/vite-plugin ${version(installed(app, '@cloudflare/vite-plugin'))}: ${relative(app, wasms[0])} is the package's .wasm, ${relative(app, config)} binds ${classes}`);
}

const freePort = () =>
  new Promise((done, failed) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
    server.on('error', failed);
  });

async function viteDev(project, app) {
  const port = await freePort();
  const child = spawn(bin(app, 'vite'), ['dev', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
    cwd: app,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const url = `http://127.0.0.1:${port}/`;
  try {
    const started = Date.now();
    for (;;) {
      if (child.exitCode !== null) throw new Error(`vite dev exited ${child.exitCode}:\n${output}`);
      if (Date.now() - started > 60_000) throw new Error(`vite dev did not answer on ${url} in 60 s:\n${output}`);
      // Until the server listens and its Worker is up (a 5xx takes no token).
      const first = await fetch(url, { headers: { 'CF-Connecting-IP': '198.51.100.1' } }).catch(() => null);
      if (first && first.status < 500) {
        if (first.status !== 200) throw new Error(`first request: ${first.status} ${await first.text()}\n${output}`);
        break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const statuses = [200];
    for (let i = 0; i < 10; i++) {
      const response = await fetch(url, { headers: { 'CF-Connecting-IP': '198.51.100.1' } });
      statuses.push(response.status);
      if (response.status === 429 && response.headers.get('Retry-After') === null) throw new Error('429 without Retry-After');
    }
    const want = [...Array(10).fill(200), 429].join(' ');
    if (statuses.join(' ') !== want) throw new Error(`vite dev answered ${statuses.join(' ')}, want ${want}`);
    project.tests += 1;
    ok(`vite dev on ${url}: 10 requests answered 200, the 11th 429 with Retry-After`);
  } finally {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {}
  }
}

// The oldest compatibility date with Durable Object RPC and the last one without
// FinalizationRegistry; compatibilityDates adds today's.
const COMPATIBILITY_DATES = ['2024-04-03', '2025-05-04'];

/** Today's date, or the date of the workerd that wrangler runs when it is older (1.YYYYMMDD.n). */
function newestDate(app) {
  const today = new Date().toISOString().slice(0, 10);
  const workerd = version(installed(installed(app, 'wrangler'), 'workerd'));
  const [, day] = workerd.match(/^1\.(\d{8})\./) ?? [];
  if (!day) throw new Error(`cannot read a date from workerd ${workerd}`);
  const runtime = `${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6)}`;
  if (runtime >= today) return { date: today, note: ' (today)' };
  return { date: runtime, note: ` (today is ${today}, wrangler's workerd ${workerd} is from this date)` };
}

/**
 * The Worker under `wrangler dev` on each of COMPATIBILITY_DATES: the Quickstart's middleware
 * on RateLimiterServer (`/`, 10 tokens) and on DurableRateLimiterServer (`/login`, 5 tokens)
 * admit their tokens, then answer 429 with Retry-After.
 */
async function compatibilityDates(project, app) {
  const newest = newestDate(app);
  for (const date of [...COMPATIBILITY_DATES, newest.date]) {
    const note = date === newest.date ? newest.note : '';
    const port = await freePort();
    const state = join(app, `.wrangler-${date}`);
    const child = spawn(
      bin(app, 'wrangler'),
      ['dev', '--ip', '127.0.0.1', '--port', String(port), '--compatibility-date', date, '--persist-to', state],
      { cwd: app, env: { ...env, CI: 'true' }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const url = `http://127.0.0.1:${port}`;
    try {
      const statuses = async (path, ip, n) => {
        const got = [];
        for (let i = 0; i < n; i++) {
          const response = await fetch(`${url}${path}`, { headers: { 'CF-Connecting-IP': ip } });
          await response.arrayBuffer();
          if (response.status === 429 && response.headers.get('Retry-After') === null) throw new Error(`${path}: 429 without Retry-After`);
          got.push(response.status);
        }
        return got.join(' ');
      };
      const started = Date.now();
      for (;;) {
        if (child.exitCode !== null) throw new Error(`wrangler dev exited ${child.exitCode}:\n${output}`);
        if (Date.now() - started > 90_000) throw new Error(`wrangler dev did not answer on ${url} in 90 s:\n${output}`);
        // Until it listens and the Worker is up; a request from an address no check uses.
        const first = await fetch(`${url}/`, { headers: { 'CF-Connecting-IP': '192.0.2.1' } }).catch(() => null);
        if (first) {
          const body = await first.text();
          if (first.status !== 200) throw new Error(`first request: ${first.status} ${body}\n${output}`);
          break;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      const api = await statuses('/', '198.51.100.2', 11);
      const login = await statuses('/login', '198.51.100.3', 6);
      const want = (n) => [...Array(n).fill(200), 429].join(' ');
      if (api !== want(10) || login !== want(5)) {
        throw new Error(`compatibility date ${date}: / answered ${api} (want ${want(10)}), /login ${login} (want ${want(5)}):\n${output}`);
      }
      if (/\[ERROR\]|Uncaught/.test(output)) throw new Error(`compatibility date ${date}: wrangler dev logged an error:\n${output}`);
      project.tests += 2;
      ok(`wrangler dev on compatibility date ${date}${note}: ` +
        `the middleware on RateLimiterServer answered 10 × 200 then 429, on DurableRateLimiterServer 5 × 200 then 429`);
    } finally {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {}
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
    }
  }
}

/** "Testing your limits" in the user README shows the matrix Worker's files: verbatim. */
function checkReadme() {
  const readme = readFileSync(join(root, 'pkg-template/README.md'), 'utf8');
  // A code block whose first line is `// <path>: …` shows that file of tests/matrix/app.
  const shown = new Map([...readme.matchAll(/^```ts\n(\/\/ (\S+?): [^]*?)^```$/gm)].map((m) => [m[2], m[1]]));
  const paths = ['src/index.ts', 'vitest.config.ts', 'test/env.d.ts', 'test/node/limits.test.ts', 'test/workerd/limits.test.ts'];
  const differ = paths.filter((file) => shown.get(file) !== readFileSync(join(here, 'app', file), 'utf8'));
  if (differ.length) throw new Error(`pkg-template/README.md does not show these files of tests/matrix/app as they are: ${differ}`);
  ok(`pkg-template/README.md shows ${paths.join(', ')} exactly as every project runs them`);
}

// ---- the projects ----

const PROJECTS = [
  { name: 'current', manager: 'npm', app: '.', steps: [checkInstall, tsc, vitest, dryRun, upgrade, compatibilityDates] },
  { name: 'vite', manager: 'npm', app: '.', steps: [checkInstall, viteBuild, viteDev] },
  { name: 'npm-workspace', manager: 'npm', app: 'apps/api', steps: [checkInstall, checkHoisted, tsc, vitest] },
  { name: 'pnpm', manager: 'pnpm', app: '.', steps: [checkInstall, checkPnpmLayout, tsc, vitest] },
];

function prepare(project, tarball) {
  const dir = join(work, project.name);
  const app = join(dir, project.app);
  // Keep the installed packages from the last run, and nothing else.
  if (existsSync(dir)) {
    for (const entry of readdirSync(dir)) if (entry !== 'node_modules') rmSync(join(dir, entry), { recursive: true });
  }
  // The package from the last run, so that only this run's tarball can be found.
  rmSync(join(dir, 'node_modules', PKG), { recursive: true, force: true });
  const pnpmStore = join(dir, 'node_modules/.pnpm');
  for (const entry of existsSync(pnpmStore) ? readdirSync(pnpmStore) : []) {
    if (entry.startsWith(PKG.replace('/', '+'))) rmSync(join(pnpmStore, entry), { recursive: true });
  }
  cpSync(join(here, 'projects', project.name), dir, { recursive: true });
  cpSync(join(here, 'app'), app, { recursive: true });
  if (project.manager === 'pnpm') {
    run(dir, 'pnpm', ['add', '--prefer-offline', tarball]);
  } else {
    const workspace = project.app === '.' ? [] : ['--workspace', project.app];
    run(dir, 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...workspace, tarball]);
  }
  return app;
}

const wanted = process.argv.slice(2);
const projects = PROJECTS.filter((p) => !wanted.length || wanted.includes(p.name));
if (wanted.length !== 0 && projects.length !== wanted.length) throw new Error(`projects are ${PROJECTS.map((p) => p.name)}`);

const started = Date.now();
try {
  mkdirSync(work, { recursive: true });
  const packed = JSON.parse(run(root, 'npm', ['pack', './pkg', '--json', '--pack-destination', work]).stdout);
  const tarball = join(work, packed[0].filename);
  checkReadme();
  const node = run(root, 'node', ['--version']).stdout.trim();
  if (!node.startsWith('v22.')) throw new Error(`node --version printed ${node}: run scripts/bootstrap.sh --matrix`);
  ok(`every project runs on Node ${node} from tests/matrix/tools`);
  const summary = [];
  for (const project of projects) {
    const before = checks;
    const t0 = Date.now();
    project.tests = 0;
    console.log(`== ${project.name}`);
    const app = prepare(project, tarball);
    const manager = `${project.manager} ${run(app, project.manager, ['--version']).stdout.trim()}`;
    ok(`installed with ${manager} from the lockfile (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    for (const step of project.steps) await step(project, app);
    if (project.tests === 0) throw new Error(`${project.name} ran no test`);
    const seconds = ((Date.now() - t0) / 1000).toFixed(1);
    summary.push(`${project.name}: ${checks - before} checks, tests passed: ${project.tests}, ${seconds} s`);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`\n${summary.join('\n')}\nmatrix: ${checks} checks passed in ${seconds} s`);
} catch (error) {
  console.error(`\n!!! ${error.message}\nmatrix: FAILED after ${checks} checks passed`);
  process.exit(1);
}
