// What the `process` test layer runs in workerd: tests/process/worker.js, its wrangler config and
// its capnp config. Bundling, starting, stopping and cleanup are tests/support/workerd.mjs's.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, get } from '../support/net.mjs';
import * as workerd from '../support/workerd.mjs';

const WORKER = fileURLToPath(new URL('worker.js', import.meta.url));

/** Bundles tests/process/worker.js; returns the bundle (its `dir` is a temp dir, see removeTempDir). */
export function bundleWorker() {
  return workerd.bundleWorker(
    [
      'name = "rate-limiter-process-tests"',
      `main = ${JSON.stringify(WORKER)}`,
      `compatibility_date = "${workerd.COMPAT_DATE}"`,
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
    { prefix: 'rl-process-' },
  );
}

let configs = 0;

/**
 * Starts workerd on `bundle` (from `bundleWorker`) and waits until /health answers.
 * `disk`: an absolute directory for `localDisk` storage; without it, `inMemory`, which has no
 * SQL API: DurableRateLimiterServer then throws ("not backed by SQLite storage").
 * Returns the server of tests/support/workerd.mjs `startWorkerd` ({ base, pid, child, stop(signal?), log() }).
 */
export function startWorkerd(bundle, { disk } = {}) {
  const config = (port) =>
    workerd.writeConfig(join(bundle.dir, `config-${++configs}.capnp`), {
      port,
      workers: [mainWorker(bundle, disk)],
    });
  return workerd.startWorkerd(config, { ready: '/health' });
}

/** The worker "main": the bundle with both classes, bound as LIMITER and DURABLE. */
function mainWorker(bundle, disk) {
  return {
    name: 'main',
    bundle,
    durableObjects: [
      { className: 'RateLimiterServer', uniqueKey: 'rl-process-memory' },
      { className: 'DurableRateLimiterServer', uniqueKey: 'rl-process-durable', sql: true },
    ],
    storage: disk ? { disk } : undefined,
    bindings: [
      { name: 'LIMITER', durableObject: 'RateLimiterServer' },
      { name: 'DURABLE', durableObject: 'DurableRateLimiterServer' },
    ],
  };
}

/**
 * Like `startWorkerd`, plus `edges` more Worker instances of the same bundle ("edge-0", …),
 * each its own isolate with its own module state (so its own LocalLimits), without Durable
 * Objects of its own: their LIMITER and DURABLE bind the namespaces of the worker "main"
 * (`durableObjectNamespace = (className, serviceName = "main")`), so every edge calls the same
 * objects. Each edge is served on a loopback socket of its own. Returns the server of
 * `startWorkerd` plus `edgeBases` (one base URL per edge).
 */
export async function startEdgeWorkerd(bundle, { disk, edges }) {
  const edgePorts = [];
  while (edgePorts.length < edges) {
    const port = await freePort();
    if (!edgePorts.includes(port)) edgePorts.push(port);
  }
  const edgeWorkers = edgePorts.map((_, i) => ({
    name: `edge-${i}`,
    bundle,
    bindings: [
      { name: 'LIMITER', durableObject: 'RateLimiterServer', service: 'main' },
      { name: 'DURABLE', durableObject: 'DurableRateLimiterServer', service: 'main' },
    ],
  }));
  const config = (port) => {
    const path = workerd.writeConfig(join(bundle.dir, `config-${++configs}.capnp`), {
      port,
      workers: [mainWorker(bundle, disk), ...edgeWorkers],
    });
    // writeConfig serves only the first worker: add one socket per edge.
    const text = readFileSync(path, 'utf8');
    const sockets = /^( {2}sockets = \[ )(\(name = "http",[^\n]*\)) \],$/m;
    if (!sockets.test(text)) throw new Error(`no sockets line of the expected form in ${path}:\n${text}`);
    const extra = edgePorts.map(
      (p, i) => `(name = "edge-${i}", address = "127.0.0.1:${p}", http = (), service = "edge-${i}")`,
    );
    writeFileSync(path, text.replace(sockets, (_, head, first) => `${head}${[first, ...extra].join(', ')} ],`));
    return path;
  };
  const server = await workerd.startWorkerd(config, { ready: '/health' });
  const edgeBases = edgePorts.map((p) => `http://127.0.0.1:${p}`);
  for (const base of edgeBases) {
    const res = await get(base, '/health');
    if (res.status !== 200) throw new Error(`edge ${base} answers /health with ${res.status}:\n${server.log()}`);
  }
  return { ...server, edgeBases };
}

/**
 * Runs tests/process/load.mjs as a child process: `connections` keep-alive connections on
 * `targets` (`{ id, path, base? }`) for `seconds`, and returns its JSON report. Bounded, so a
 * hung generator fails the test instead of blocking it.
 */
export async function runLoad({ base, seconds, connections, targets }) {
  const spec = { base, seconds, connections, targets };
  const script = fileURLToPath(new URL('load.mjs', import.meta.url));
  const child = workerd.track(spawn(process.execPath, [script, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  child.stderr.on('data', (chunk) => (err += chunk));
  const timer = setTimeout(() => workerd.stopProcess(child, { signal: 'SIGKILL' }), (seconds + 60) * 1000);
  const { code, signal } = await workerd.exited(child);
  clearTimeout(timer);
  assert.equal(code, 0, `load generator exited with ${code ?? signal}:\n${err}${out}`);
  return JSON.parse(out.trim().split('\n').at(-1));
}

/** Stops `server` (saying so if workerd had died during the run) and removes `dirs`. */
export async function stopAndClean(server, ...dirs) {
  if (server) {
    const alive = server.child.exitCode === null && server.child.signalCode === null;
    await server.stop();
    if (!alive) console.log(`workerd had exited during the run:\n${server.log()}`);
  }
  for (const dir of dirs) if (dir) workerd.removeTempDir(dir);
}
