// Fallback load generator of bench/e2e/run.mjs, used when wrk is unavailable (or LOADGEN=node):
// a fixed number of keep-alive connections, each sending its next request as soon as the
// previous answer arrives, for a fixed time. Prints the same LOAD_RESULT line as load.lua.
// Usage: node load.mjs <base-url> <variant> <clients> <concurrency> <seconds> <tag>
import http from 'node:http';

const [base, variant, clientsArg, concurrencyArg, secondsArg, tag = ''] = process.argv.slice(2);
const clients = Number(clientsArg);
const concurrency = Number(concurrencyArg);
const durationMs = Number(secondsArg) * 1000;
const { hostname, port } = new URL(base);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

const latencies = [];
let errors = 0;
let non2xx = 0;
let next = 0;
let stopAt = 0;

function one() {
  return new Promise((resolve) => {
    const c = next;
    next = (next + 1) % clients;
    const start = process.hrtime.bigint();
    const req = http.get({ agent, hostname, port, path: `/${variant}?c=${c}&t=${tag}` }, (res) => {
      res.on('data', () => {});
      res.on('end', () => {
        latencies.push(Number(process.hrtime.bigint() - start) / 1000);
        if (res.statusCode >= 400) non2xx++; // as wrk counts its "status" errors
        resolve();
      });
      res.on('error', () => {
        errors++;
        resolve();
      });
    });
    req.on('error', () => {
      errors++;
      resolve();
    });
  });
}

async function loop() {
  while (performance.now() < stopAt) await one();
}

const t0 = performance.now();
stopAt = t0 + durationMs;
await Promise.all(Array.from({ length: concurrency }, loop));
const durationUs = (performance.now() - t0) * 1000;
agent.destroy();

const sorted = Float64Array.from(latencies).sort();
const pct = (p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : 0);
const mean = sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1);
console.log(
  `LOAD_RESULT requests=${sorted.length} duration_us=${Math.round(durationUs)} ` +
    `p50_us=${pct(50).toFixed(1)} p99_us=${pct(99).toFixed(1)} mean_us=${mean.toFixed(1)} ` +
    `max_us=${(sorted.at(-1) ?? 0).toFixed(1)} errors=${errors} non2xx=${non2xx}`,
);
