// Runs Workers in the real workerd binary, for the tests (tests/process) and the benchmarks
// (bench/e2e): bundle a Worker with `wrangler deploy --dry-run`, write a capnp config for the
// bundle, start workerd (its own process, started and stopped by PID) on a free loopback port
// and wait until it answers, stop it with SIGTERM then SIGKILL. Every process and temp dir made
// through this module is also removed when the Node process exits or is interrupted (SIGINT,
// SIGTERM), so a failing or killed run leaves nothing behind.
//
//   const bundle = await bundleWorker(wranglerConfig('bench/e2e/wrangler.toml'));
//   const server = await startWorkerd((port) => writeConfig(join(bundle.dir, 'config.capnp'), {
//     port, workers: [{ name: 'main', bundle, durableObjects: [...], storage: { disk }, bindings: [...] }],
//   }), { cwd: bundle.dir, ready: '/health' });
//   ... fetch(server.base + '/path') ...
//   await server.stop();
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, get, sleep } from './net.mjs';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const WORKERD = join(ROOT, 'node_modules/@cloudflare/workerd-linux-64/bin/workerd');
export const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
/** The package as a consumer installs it (scripts/build.sh puts it there). */
export const PACKAGE = join(ROOT, 'node_modules/@delightstack/rate-limiter');
export const COMPAT_DATE = '2026-04-01';

// ---- cleanup of everything started here, also on exit / SIGINT / SIGTERM ----
const children = new Set(); // ChildProcess objects still running
const tempDirs = new Set();

function cleanupNow() {
  // Synchronous (an exit handler cannot wait): no grace period here, stop() gives one.
  for (const child of children) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  children.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}
process.once('exit', cleanupNow);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    cleanupNow();
    process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
  });
}

/** A fresh temp dir (under `parent`, default the OS temp dir), removed by `removeTempDir` or at exit at the latest. */
export function makeTempDir(prefix, parent = tmpdir()) {
  const dir = mkdtempSync(join(parent, prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

const TMPFS_MAGIC = 0x01021994;

/** Whether `path` is on a tmpfs (false if it does not exist). */
export function isTmpfs(path) {
  try {
    return statfsSync(path).type === TMPFS_MAGIC;
  } catch {
    return false;
  }
}

/**
 * A temp dir on the tmpfs `tmpfs` (default /dev/shm) if that is one and writable, else in the OS
 * temp dir (on the disk). Returns { dir, tmpfs } (tmpfs: whether it is on a tmpfs). For Durable
 * Object storage whose cost should exclude disk I/O.
 */
export function makeTmpfsDir(prefix, tmpfs = '/dev/shm') {
  if (isTmpfs(tmpfs)) {
    try {
      return { dir: makeTempDir(prefix, tmpfs), tmpfs: true };
    } catch {
      // not writable: the disk it is
    }
  }
  const dir = makeTempDir(prefix);
  return { dir, tmpfs: isTmpfs(dir) };
}

/** Tracks a started child process, so that it is killed at exit if nobody stopped it. */
export function track(child) {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Resolves once `child` has exited (at once if it has), with { code, signal }. */
export function exited(child) {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Sends `signal` to `child` by PID, then SIGKILL if it is still there after `graceMs`. */
export async function stopProcess(child, { signal = 'SIGTERM', graceMs = 5000 } = {}) {
  const done = exited(child);
  if (child.exitCode !== null || child.signalCode !== null) return done;
  try {
    process.kill(child.pid, signal);
  } catch {
    return done;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // exited in between
    }
  }, graceMs);
  const result = await done;
  clearTimeout(timer); // a pending timer would keep the process alive
  return result;
}

// ---- bundle ----

/**
 * The text of the wrangler config at `path`, with its `main` made absolute (resolved against the
 * config's own dir), ready for `bundleWorker`.
 */
export function wranglerConfig(path) {
  const text = readFileSync(path, 'utf8');
  let found = false;
  const out = text.replace(/^main\s*=\s*"([^"]+)"/m, (_, main) => {
    found = true;
    return `main = ${JSON.stringify(resolve(dirname(path), main))}`;
  });
  if (!found) throw new Error(`${path} has no \`main = "…"\` line`);
  return out;
}

/**
 * Bundles the Worker of the wrangler config `toml` (text; its `main` an absolute path, see
 * `wranglerConfig`) with `wrangler deploy --dry-run` into a new temp dir. The config is written
 * into that dir, so wrangler's `.wrangler` scratch dir lands there and not in the working tree.
 * Waits for the installed package first (scripts/build.sh may be replacing it right now) and
 * tries once more after a pause if wrangler fails.
 * Returns { dir, main, modules }: `dir` holds `bundle/`; `main` is the bundle's entry module
 * and `modules` the other modules wrangler wrote (names relative to `bundle/`).
 */
export async function bundleWorker(toml, { prefix = 'rl-workerd-' } = {}) {
  for (const [path, what] of [[WORKERD, 'workerd binary'], [WRANGLER, 'wrangler']]) {
    if (!existsSync(path)) throw new Error(`no ${what} at ${path}: run npm ci`);
  }
  const mainPath = toml.match(/^main\s*=\s*"([^"]+)"/m)?.[1];
  if (!mainPath) throw new Error(`wrangler config has no \`main = "…"\` line:\n${toml}`);
  const dir = makeTempDir(prefix);
  writeFileSync(join(dir, 'wrangler.toml'), toml);
  for (let attempt = 1; ; attempt++) {
    await waitForPackage();
    try {
      await wrangler(dir);
      break;
    } catch (error) {
      if (attempt === 2) throw error;
      await sleep(30_000);
    }
  }
  const main = basename(mainPath);
  const files = readdirSync(join(dir, 'bundle'));
  if (!files.includes(main)) throw new Error(`wrangler wrote no ${main} in ${dir}/bundle (${files.join(', ')})`);
  const modules = files.filter((file) => file !== main && /\.(wasm|m?js)$/.test(file));
  return { dir, main, modules };
}

const PACKAGE_FILES = ['package.json', 'rate_limiter.js', 'rate_limiter_bg.wasm'];

async function waitForPackage() {
  for (let waited = 0; ; waited += 1000) {
    const missing = PACKAGE_FILES.filter((file) => !existsSync(join(PACKAGE, file)));
    if (missing.length === 0) {
      // package.json lists every file the package ships: all of them must be there.
      const listed = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')).files ?? [];
      missing.push(...listed.filter((file) => !existsSync(join(PACKAGE, file))));
      if (missing.length === 0) return;
    }
    if (waited >= 60_000) {
      throw new Error(`${PACKAGE} lacks ${missing.join(', ')}: run scripts/build.sh`);
    }
    await sleep(1000);
  }
}

function wrangler(dir) {
  return new Promise((resolve, reject) => {
    execFile(
      WRANGLER,
      ['deploy', '--dry-run', '--config', join(dir, 'wrangler.toml'), '--outdir', join(dir, 'bundle')],
      { cwd: dir, env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: '1' } },
      (error, stdout, stderr) => (error ? reject(new Error(`wrangler failed:\n${stdout}${stderr}`)) : resolve()),
    );
  });
}

// ---- config ----

const str = JSON.stringify;

/** A capnp binding from { name, durableObject, service? } (a Durable Object namespace, of another worker if `service`) or { name, text }. */
function binding(b) {
  if (b.durableObject !== undefined) {
    const ns = b.service === undefined ? str(b.durableObject) : `(className = ${str(b.durableObject)}, serviceName = ${str(b.service)})`;
    return `(name = ${str(b.name)}, durableObjectNamespace = ${ns})`;
  }
  if (b.text !== undefined) return `(name = ${str(b.name)}, text = ${str(String(b.text))})`;
  throw new Error(`unknown binding ${str(b)}`);
}

/**
 * Writes a workerd capnp config to `path` and returns `path`. The bundles' `embed` paths are
 * relative to the config, so write it into the bundle's `dir` (from `bundleWorker`).
 *   port     the loopback port of the one HTTP socket, served by the first worker
 *   v8Flags  e.g. ['--expose-gc']
 *   workers  [{ name, bundle, durableObjects, storage, bindings }]:
 *     bundle          what `bundleWorker` returned (several workers may share one)
 *     durableObjects  [{ className, uniqueKey, sql }] (`sql`: SQLite-backed, as
 *                     `new_sqlite_classes` declares it on Cloudflare)
 *     storage         { disk: absolute dir } for `localDisk` storage (a service of its own,
 *                     `<name>-storage`), else `inMemory`, which has no SQL API
 *     bindings        [{ name, durableObject, service? } | { name, text }]
 */
export function writeConfig(path, { port, v8Flags = [], workers }) {
  // capnp constant names: camelCase, no underscores.
  const id = (name) => `worker${name.replace(/(?:^|[^A-Za-z0-9]+)([A-Za-z0-9])/g, (_, c) => c.toUpperCase())}`;
  const services = [];
  const defs = [];
  for (const w of workers) {
    services.push(`    (name = ${str(w.name)}, worker = .${id(w.name)}),`);
    const modules = [`    (name = ${str(w.bundle.main)}, esModule = embed ${str(`bundle/${w.bundle.main}`)}),`];
    for (const file of w.bundle.modules) {
      const kind = file.endsWith('.wasm') ? 'wasm' : 'esModule';
      modules.push(`    (name = ${str(file)}, ${kind} = embed ${str(`bundle/${file}`)}),`);
    }
    let storage = '(inMemory = void)';
    if (w.storage?.disk) {
      const service = `${w.name}-storage`;
      services.push(`    (name = ${str(service)}, disk = (path = ${str(w.storage.disk)}, writable = true)),`);
      storage = `(localDisk = ${str(service)})`;
    }
    const namespaces = (w.durableObjects ?? []).map(
      (d) => `    (className = ${str(d.className)}, uniqueKey = ${str(d.uniqueKey)}${d.sql ? ', enableSql = true' : ''}),`,
    );
    defs.push(
      `const ${id(w.name)} :Workerd.Worker = (`,
      `  compatibilityDate = ${str(COMPAT_DATE)},`,
      '  modules = [',
      ...modules,
      '  ],',
      ...(namespaces.length ? ['  durableObjectNamespaces = [', ...namespaces, '  ],', `  durableObjectStorage = ${storage},`] : []),
      '  bindings = [',
      ...(w.bindings ?? []).map((b) => `    ${binding(b)},`),
      '  ],',
      ');',
    );
  }
  const config = [
    'using Workerd = import "/workerd/workerd.capnp";',
    'const config :Workerd.Config = (',
    ...(v8Flags.length ? [`  v8Flags = [ ${v8Flags.map(str).join(', ')} ],`] : []),
    '  services = [',
    ...services,
    '  ],',
    `  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = ${str(workers[0].name)}) ],`,
    ');',
    ...defs,
    '',
  ].join('\n');
  writeFileSync(path, config);
  return path;
}

// ---- workerd ----

/**
 * Starts workerd on a free loopback port and waits until GET `ready` answers 200.
 * `configFor(port)` writes the config for that port and returns its path (see `writeConfig`);
 * it is called again with another port if the first one was taken meanwhile. workerd's output
 * goes to `<config>.log`. `cwd`: workerd's working dir (default the config's dir).
 * Returns { base, port, pid, child, config, log(), stop(signal?) }; stop() sends `signal`
 * (default SIGTERM), then SIGKILL after 5 s, and resolves with { code, signal } once it exited.
 */
export async function startWorkerd(configFor, { ready = '/', cwd, timeoutMs = 20_000 } = {}) {
  if (!existsSync(WORKERD)) throw new Error(`no workerd binary at ${WORKERD}: run npm ci`);
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const config = configFor(port);
    const logPath = `${config}.log`;
    const out = openSync(logPath, 'w');
    const child = track(spawn(WORKERD, ['serve', config], { cwd: cwd ?? dirname(config), stdio: ['ignore', out, out] }));
    closeSync(out); // the child has its own copy
    const base = `http://127.0.0.1:${port}`;
    const log = () => readFileSync(logPath, 'utf8');
    const server = { base, port, pid: child.pid, child, config, log, stop: (signal) => stopProcess(child, { signal }) };
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      try {
        const res = await get(base, ready, { timeoutMs: 2000 });
        if (res.status === 200) return server;
        last = `${res.status} ${res.text.slice(0, 500)}`;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    await server.stop('SIGKILL');
    // Someone may have taken the port between freePort() and workerd's bind: try another.
    if (attempt < 3 && /address already in use/i.test(log())) continue;
    throw new Error(`workerd did not come up on ${base} (GET ${ready}: ${last}):\n${log()}`);
  }
}

/** `workerd --version`, e.g. "workerd 2026-04-26". */
export function workerdVersion() {
  return new Promise((resolve, reject) =>
    execFile(WORKERD, ['--version'], (error, stdout) => (error ? reject(error) : resolve(stdout.trim()))),
  );
}
