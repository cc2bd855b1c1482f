// Shared machinery of the `process` test layer: bundle tests/process/worker.js with wrangler,
// run the bundle in the real workerd binary (its own process, started and stopped by PID) and
// talk to it over loopback. Every process and temp dir made here is also removed when the test
// process exits or is interrupted, so a failing or killed test leaves nothing behind.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, sleep } from '../support/net.mjs';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HERE = fileURLToPath(new URL('.', import.meta.url));
const WORKERD = join(ROOT, 'node_modules/@cloudflare/workerd-linux-64/bin/workerd');
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const PACKAGE = join(ROOT, 'node_modules/@delightstack/rate-limiter');
const COMPAT_DATE = '2026-04-01';

// ---- cleanup of everything started here, also on exit / SIGINT / SIGTERM ----
const children = new Set(); // ChildProcess objects still running
const tempDirs = new Set();

function cleanupNow() {
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

/** A fresh temp dir, removed by `removeTempDir` or at exit at the latest. */
export function makeTempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
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
  clearTimeout(timer); // a pending timer would keep the test process alive
  return result;
}

// ---- bundle ----

/**
 * Bundles tests/process/worker.js with `wrangler deploy --dry-run` into a new temp dir and
 * returns it. The wrangler config is written into that dir too, so wrangler's `.wrangler`
 * scratch dir lands there and not in the working tree.
 */
export async function bundleWorker() {
  for (const [path, what] of [[WORKERD, 'workerd binary'], [WRANGLER, 'wrangler']]) {
    if (!existsSync(path)) throw new Error(`no ${what} at ${path}: run npm ci`);
  }
  const dir = makeTempDir('rl-process-');
  writeFileSync(
    join(dir, 'wrangler.toml'),
    [
      'name = "rate-limiter-process-tests"',
      `main = ${JSON.stringify(join(HERE, 'worker.js'))}`,
      `compatibility_date = "${COMPAT_DATE}"`,
      '',
      '[[durable_objects.bindings]]',
      'name = "LIMITER"',
      'class_name = "RateLimiterServer"',
      '',
      '[[durable_objects.bindings]]',
      'name = "DURABLE"',
      'class_name = "DurableRateLimiterServer"',
      '',
      '[[migrations]]',
      'tag = "v1"',
      'new_classes = ["RateLimiterServer"]',
      'new_sqlite_classes = ["DurableRateLimiterServer"]',
      '',
    ].join('\n'),
  );
  // scripts/build.sh may be replacing the installed package right now: wait for its files,
  // and try the bundle once more after a pause.
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
  if (!existsSync(join(dir, 'bundle/worker.js'))) throw new Error(`wrangler wrote no worker.js in ${dir}/bundle`);
  return dir;
}

const PACKAGE_FILES = ['package.json', 'workerd.js', 'server.js', 'storage.js', 'rate_limiter.js', 'rate_limiter_bg.wasm'];

async function waitForPackage() {
  for (let waited = 0; ; waited += 1000) {
    const missing = PACKAGE_FILES.filter((file) => !existsSync(join(PACKAGE, file)));
    if (missing.length === 0) return;
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

// ---- workerd ----

let configs = 0;

/**
 * The capnp config for the bundle in `dir`, written next to it (its `embed` paths are
 * relative). `disk`: an absolute directory for `localDisk` storage; without it, `inMemory`,
 * which has no SQL API: DurableRateLimiterServer then throws ("not backed by SQLite storage").
 */
function writeConfig(dir, port, disk) {
  const modules = ['    (name = "worker.js", esModule = embed "bundle/worker.js"),'];
  for (const file of readdirSync(join(dir, 'bundle'))) {
    if (file.endsWith('.wasm')) modules.push(`    (name = ${JSON.stringify(file)}, wasm = embed "bundle/${file}"),`);
    else if (file !== 'worker.js' && /\.m?js$/.test(file)) {
      modules.push(`    (name = ${JSON.stringify(file)}, esModule = embed "bundle/${file}"),`);
    }
  }
  const services = ['(name = "main", worker = .worker)'];
  if (disk) services.push(`(name = "disk", disk = (path = ${JSON.stringify(disk)}, writable = true))`);
  const config = [
    'using Workerd = import "/workerd/workerd.capnp";',
    'const config :Workerd.Config = (',
    `  services = [ ${services.join(', ')} ],`,
    `  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],`,
    ');',
    'const worker :Workerd.Worker = (',
    `  compatibilityDate = "${COMPAT_DATE}",`,
    '  modules = [',
    ...modules,
    '  ],',
    '  durableObjectNamespaces = [',
    '    (className = "RateLimiterServer", uniqueKey = "rl-process-memory"),',
    // SQLite-backed, as `new_sqlite_classes` declares it on Cloudflare.
    '    (className = "DurableRateLimiterServer", uniqueKey = "rl-process-durable", enableSql = true),',
    '  ],',
    disk ? '  durableObjectStorage = (localDisk = "disk"),' : '  durableObjectStorage = (inMemory = void),',
    '  bindings = [',
    '    (name = "LIMITER", durableObjectNamespace = "RateLimiterServer"),',
    '    (name = "DURABLE", durableObjectNamespace = "DurableRateLimiterServer"),',
    '  ],',
    ');',
    '',
  ].join('\n');
  const path = join(dir, `config-${++configs}.capnp`);
  writeFileSync(path, config);
  return path;
}

/**
 * Starts workerd on the bundle in `dir` (from `bundleWorker`) on a free loopback port and
 * waits until it answers. `disk`: directory for localDisk storage (else in-memory storage).
 * Returns { base, pid, child, stop(signal?), log() }; stop() waits for the exit.
 */
export async function startWorkerd(dir, { disk } = {}) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const config = writeConfig(dir, port, disk);
    const logPath = `${config}.log`;
    const out = openSync(logPath, 'w');
    const child = track(spawn(WORKERD, ['serve', config], { cwd: dir, stdio: ['ignore', out, out] }));
    const base = `http://127.0.0.1:${port}`;
    const log = () => readFileSync(logPath, 'utf8');
    const server = { base, pid: child.pid, child, log, stop: (signal) => stopProcess(child, { signal }) };
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      try {
        const res = await get(base, '/health', { timeoutMs: 2000 });
        if (res.status === 200 && res.text === 'ok') return server;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    await server.stop('SIGKILL');
    // Someone may have taken the port between freePort() and workerd's bind: try another.
    if (attempt < 3 && /address already in use/i.test(log())) continue;
    throw new Error(`workerd did not come up on ${base}:\n${log()}`);
  }
}

/**
 * GET `base + path` on a new connection (no keep-alive: a pooled socket would keep the test
 * process alive, and must not outlive a workerd that is restarted). Returns { status, text,
 * json } (json undefined unless the body is JSON).
 */
export function get(base, path, { timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get(base + path, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('error', reject);
      res.on('end', () => {
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, text, json });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer to ${path} in ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/** A query string from an object (undefined values left out). */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) search.set(name, String(value));
  }
  return search.toString();
}
