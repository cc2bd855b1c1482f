// What the `process` test layer runs in workerd: tests/process/worker.js, its wrangler config and
// its capnp config. Bundling, starting, stopping and cleanup are tests/support/workerd.mjs's.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
      workers: [
        {
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
        },
      ],
    });
  return workerd.startWorkerd(config, { ready: '/health' });
}
