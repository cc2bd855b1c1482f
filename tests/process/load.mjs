// Load generator of tests/process/load.test.mjs, run as its own process (node load.mjs '<json>'),
// so the load crosses a real loopback socket between two processes. Keeps `connections`
// keep-alive connections busy for `seconds`, each sending its next request as soon as the
// previous answer is read, cycling through `targets` ([{ id, path, base? }]; `base`, when a
// target has one, replaces the spec's for that target: another server). Prints one JSON line:
// { requests, duration_ms, errors, error_samples, stale_retries, targets: { id: { statuses: { code: n }, errors } } }
//
// A keep-alive socket that sat idle can be closed by workerd (its pipeline timeout) just as
// the agent hands it to the next request, which then fails with ECONNRESET before the
// request was read. Node's documented answer is to send such a request again; it is counted
// in `stale_retries`, and any other failure is an error.
import http from 'node:http';

const { base, seconds, connections, targets } = JSON.parse(process.argv[2]);
const origins = new Map(targets.map(({ id, base: own }) => [id, new URL(own ?? base)]));
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const counts = Object.fromEntries(targets.map(({ id }) => [id, { statuses: {}, errors: 0 }]));
const errorSamples = [];
let requests = 0;
let errors = 0;
let next = 0;
let staleRetries = 0;
const STALE_RETRIES_PER_REQUEST = 3;

function failed(target, error) {
  errors++;
  counts[target.id].errors++;
  if (errorSamples.length < 5) errorSamples.push(`${target.path}: ${error?.message ?? error}`);
}

function one() {
  const target = targets[next];
  next = (next + 1) % targets.length;
  return send(target, 0);
}

function send(target, retries) {
  const { hostname, port } = origins.get(target.id);
  return new Promise((resolve) => {
    const req = http.get({ agent, hostname, port, path: target.path }, (res) => {
      res.on('data', () => {});
      res.on('end', () => {
        requests++;
        const statuses = counts[target.id].statuses;
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        resolve();
      });
      res.on('error', (error) => {
        failed(target, error);
        resolve();
      });
    });
    req.setTimeout(10_000, () => req.destroy(new Error('no answer in 10 s')));
    req.on('error', (error) => {
      if (req.reusedSocket && error.code === 'ECONNRESET' && retries < STALE_RETRIES_PER_REQUEST) {
        staleRetries++;
        resolve(send(target, retries + 1));
        return;
      }
      failed(target, error);
      resolve();
    });
  });
}

const t0 = performance.now();
const stopAt = t0 + seconds * 1000;
await Promise.all(
  Array.from({ length: connections }, async () => {
    while (performance.now() < stopAt) await one();
  }),
);
const durationMs = performance.now() - t0;
agent.destroy();
console.log(
  JSON.stringify({ requests, duration_ms: Math.round(durationMs), errors, error_samples: errorSamples, stale_retries: staleRetries, targets: counts }),
);
