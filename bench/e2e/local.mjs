// node bench/e2e/local.mjs: the local-decisions benchmark (goal "local decisions" in
// bench/README.md), in workerd. One Worker (bench/e2e/local-worker.js) whose handler answers at
// once, measured side by side in one run, with the load sent by a second process (wrk, else
// bench/e2e/load.mjs) over loopback:
//   none         the handler alone, no limiter (the baseline)
//   headers      the handler plus only the middleware's work on an allowed request besides the
//                decision (rateLimitHeaders of a fixed decision, withHeaders): no limiter, no
//                goal; it shows what part of the middleware's cost is not the limiter's
//   rpc-far      behind rateLimit({ binding, policy, key }): one limit() RPC per request
//   local-far    the same with `local`: a LocalLimits takes leases and spends them in the isolate
//   rpc-limit    behind rateLimit on a bucket whose limit binds (AT_MAX_TOKENS=100 tokens, one
//                per AT_REFILL_SECONDS=0.01 s: 100/s, far below the offered load)
//   local-limit  the same with `local: true` (shares once the bucket runs low)
//   leases-limit the same with `local: { shares: false }` (plain leases only)
// The far variants use max_tokens 1e9: every request is allowed. Each variant and round has its
// own key (its own Durable Object and bucket) and, when local, its own LocalLimits; the warm-up
// before each measured run uses another key, so every measured bucket starts full at the first
// measured request. After each run the Worker's /stats gives what the isolate saw: requests,
// admitted (200), denied (429), LocalLimits.calls and .localAnswers, and the span T from the
// first request's arrival to the last decision, from which the token-bucket bound of the
// at-limit bucket, max_tokens + floor(T / interval), follows.
// Prints `LOCAL variant=…` lines and the goal ratios, writes bench/out/local.json. A benchmark,
// not a test: it asserts nothing. workerd is bundled, started and stopped by
// tests/support/workerd.mjs.
// Settings (environment): DURATION=10 WARMUP=2 (seconds per variant), ROUNDS=1 (>1 repeats the
// variants in alternating order; requests/s and latency are medians, counts are sums),
// CONNECTIONS=32, WRK_THREADS=1, LOADGEN=wrk|node, VARIANTS="none rpc-far …" (subset, in order),
// AT_MAX_TOKENS=100, AT_REFILL_SECONDS=0.01.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { machineInfo } from '../common.mjs';
import {
  bundleWorker,
  COMPAT_DATE,
  PACKAGE,
  ROOT,
  startWorkerd,
  WRANGLER,
  workerdVersion,
  wranglerConfig,
  writeConfig,
} from '../../tests/support/workerd.mjs';
import { get } from '../../tests/support/net.mjs';
import { KNOBS, loadRunner, parseLoadResult, scriptLog, smokeTest } from './loadgen.mjs';

const HERE = new URL('.', import.meta.url).pathname;
const OUT_DIR = join(ROOT, 'bench', 'out');
const env = process.env;
const { duration: DURATION, warmup: WARMUP, rounds: ROUNDS, connections: CONNECTIONS, threads: WRK_THREADS } = KNOBS;
const AT_MAX_TOKENS = Number(env.AT_MAX_TOKENS ?? 100);
const AT_REFILL_SECONDS = Number(env.AT_REFILL_SECONDS ?? 0.01);
const ALL = ['none', 'headers', 'rpc-far', 'local-far', 'rpc-limit', 'local-limit', 'leases-limit', 'noheaders-far', 'shadow-far', 'events-far'];
const VARIANTS = (env.VARIANTS ?? ALL.join(' ')).split(/\s+/).filter(Boolean);
// The limiter rounds an interval up to a whole nanosecond (at least 1 ns).
const INTERVAL_NS = Math.max(1, Math.ceil(Math.round(AT_REFILL_SECONDS * 1e12) / 1e3));

const { log, fail } = scriptLog('local');
for (const v of VARIANTS) if (!ALL.includes(v)) fail(`unknown variant: ${v} (the variants are ${ALL.join(', ')})`);

if (!existsSync(join(PACKAGE, 'local', 'limits.js'))) {
  log('package (with local/limits.js) not installed in node_modules: running scripts/build.sh');
  execFileSync('bash', [join(ROOT, 'scripts/build.sh')], { stdio: 'inherit' });
}

// ---- bundle, config, workerd (in-memory RateLimiterServer: no storage) ----
log('bundling bench/e2e/local-worker.js with wrangler deploy --dry-run');
const bundle = await bundleWorker(wranglerConfig(join(HERE, 'local.toml')), { prefix: 'rl-local-' });
const workerd = await startWorkerd(
  (port) =>
    writeConfig(join(bundle.dir, 'config.capnp'), {
      port,
      workers: [
        {
          name: 'main',
          bundle,
          durableObjects: [{ className: 'RateLimiterServer', uniqueKey: 'rl-local-limiter' }],
          bindings: [
            { name: 'LIMITER', durableObject: 'RateLimiterServer' },
            { name: 'AT_MAX_TOKENS', text: AT_MAX_TOKENS },
            { name: 'AT_REFILL_SECONDS', text: AT_REFILL_SECONDS },
          ],
        },
      ],
    }),
  { ready: '/none?c=0&t=smoke' },
);
const BASE = workerd.base;
const WORKERD_VERSION = await workerdVersion();
log(`${WORKERD_VERSION} pid ${workerd.pid} on ${BASE}`);

await smokeTest({ base: BASE, paths: VARIANTS, query: 'c=0&t=smoke', workerd, fail });
const load = loadRunner({ base: BASE, clients: 1, log, fail });
const LOADGEN_VERSION = load.version;
const runLoad = load.run;

const parseLoad = (text) => parseLoadResult(text) ?? fail(`no result from the load generator:\n${text}`);

log(
  `load: ${LOADGEN_VERSION}, ${CONNECTIONS} connections, one key per variant and round,`,
  `${WARMUP}s warm-up (on another key) + ${DURATION}s per variant, ${ROUNDS} round(s);`,
  `at the limit: max_tokens ${AT_MAX_TOKENS}, one token per ${INTERVAL_NS / 1e6} ms`,
);
const rows = [];
for (let round = 1; round <= ROUNDS; round++) {
  // even rounds go in reverse order, so drift on a shared machine hits every variant alike
  const order = round % 2 === 0 ? [...VARIANTS].reverse() : VARIANTS;
  for (const v of order) {
    if (WARMUP !== 0) await runLoad(v, WARMUP, join(bundle.dir, 'warmup.txt'), `w${round}`);
    const tag = `r${round}`;
    const load = parseLoad(await runLoad(v, DURATION, join(bundle.dir, 'load.txt'), tag));
    const stats = (await get(BASE, `/stats?v=${v}&t=${tag}`)).json;
    if (!stats) fail(`no /stats for ${v} ${tag}`);
    const span_ms = stats.last_ms - stats.first_ms;
    const row = {
      round,
      variant: v,
      rps: load.requests / (load.duration_us / 1e6),
      p50_us: load.p50_us,
      p99_us: load.p99_us,
      max_us: load.max_us,
      load_requests: load.requests,
      errors: load.errors,
      non2xx: load.non2xx,
      requests: stats.requests,
      admitted: stats.admitted,
      denied: stats.denied,
      other: stats.other,
      calls: v === 'none' || v === 'headers' ? 0 : (stats.calls ?? stats.requests), // per-request mode: one limit() per request
      local_answers: stats.local_answers ?? 0,
      span_ms,
      bound: v.endsWith('-limit') ? AT_MAX_TOKENS + Math.floor((span_ms * 1e6) / INTERVAL_NS) : null,
      other_samples: stats.samples,
    };
    rows.push(row);
    log(
      `round ${round} ${v}: ${Math.round(row.rps)} req/s p50 ${load.p50_us} µs p99 ${load.p99_us} µs;`,
      `in the Worker: ${row.requests} requests, ${row.admitted} admitted, ${row.denied} denied, ${row.other} other,`,
      `${row.calls} RPCs, ${row.local_answers} local answers, over ${span_ms} ms${row.bound === null ? '' : ` (bound ${row.bound})`}`,
    );
    if (row.other) log(`round ${round} ${v}: ${row.other} answers neither 200 nor 429, the first: ${JSON.stringify(row.other_samples)}`);
  }
}

if (workerd.child.exitCode !== null || workerd.child.signalCode !== null) fail(`workerd died during the run:\n${workerd.log()}`);
await workerd.stop();

// ---- report ----
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round3 = (x) => (x === null || !Number.isFinite(x) ? null : Number(x.toFixed(3)));
const sum = (rs, f) => rs.reduce((a, r) => a + r[f], 0);
const variants = VARIANTS.map((name) => {
  const rs = rows.filter((r) => r.variant === name);
  const requests = sum(rs, 'requests');
  // answered in the Worker: requests still in flight when the load generator closed its
  // connections are cancelled by workerd and never answered
  const answered = sum(rs, 'admitted') + sum(rs, 'denied') + sum(rs, 'other');
  const calls = sum(rs, 'calls');
  const atLimit = name.endsWith('-limit');
  return {
    name,
    rps: Math.round(median(rs.map((r) => r.rps))),
    p50_ms: round3(median(rs.map((r) => r.p50_us)) / 1000),
    p99_ms: round3(median(rs.map((r) => r.p99_us)) / 1000),
    max_ms: round3(Math.max(...rs.map((r) => r.max_us)) / 1000),
    errors: sum(rs, 'errors'),
    non2xx: sum(rs, 'non2xx'),
    requests,
    answered,
    admitted: sum(rs, 'admitted'),
    denied: sum(rs, 'denied'),
    other: sum(rs, 'other'),
    calls,
    local_answers: sum(rs, 'local_answers'),
    rpcs_per_request: name === 'none' || name === 'headers' ? 0 : name.startsWith('rpc-') ? 1 : answered ? calls / answered : null,
    span_ms: sum(rs, 'span_ms'),
    bound: atLimit ? sum(rs, 'bound') : null,
    // the worst round: admitted - bound (> 0 would break the token-bucket bound)
    max_over_bound: atLimit ? Math.max(...rs.map((r) => r.admitted - r.bound)) : null,
    rounds: rs.map(({ variant: _v, ...r }) => ({ ...r, rps: Math.round(r.rps) })),
  };
});
for (const v of variants) {
  console.log(
    `LOCAL variant=${v.name} rps=${v.rps} p50_ms=${v.p50_ms} p99_ms=${v.p99_ms} errors=${v.errors} non2xx=${v.non2xx} ` +
      `requests=${v.requests} answered=${v.answered} admitted=${v.admitted} denied=${v.denied} rpcs=${v.calls} local_answers=${v.local_answers} ` +
      `rpcs_per_request=${v.rpcs_per_request === null ? 'n/a' : v.rpcs_per_request.toFixed(4)} span_ms=${v.span_ms}` +
      (v.bound === null ? '' : ` bound=${v.bound} max_over_bound=${v.max_over_bound}`),
  );
}

const by = Object.fromEntries(variants.map((v) => [v.name, v]));
const ratio = (a, b) => (a === undefined || b === undefined || a === null || b === null || b === 0 ? null : round3(a / b));
const ratios = {
  local_far_over_none_rps: ratio(by['local-far']?.rps, by.none?.rps),
  rpc_far_over_none_rps: ratio(by['rpc-far']?.rps, by.none?.rps),
  local_far_over_rpc_far_rps: ratio(by['local-far']?.rps, by['rpc-far']?.rps),
  headers_over_none_rps: ratio(by.headers?.rps, by.none?.rps),
  local_far_over_headers_rps: ratio(by['local-far']?.rps, by.headers?.rps),
  local_far_rpcs_per_request: by['local-far'] ? Number(by['local-far'].rpcs_per_request.toPrecision(3)) : null,
  local_limit_rpcs_per_request: by['local-limit'] ? Number(by['local-limit'].rpcs_per_request.toPrecision(3)) : null,
  local_limit_over_rpc_limit_admitted: ratio(by['local-limit']?.admitted, by['rpc-limit']?.admitted),
  // the same, each relative to its own window's bound: the runs' windows differ by a few ms, and
  // every 10 ms of window is one more token
  local_limit_over_rpc_limit_admitted_per_bound:
    by['local-limit'] && by['rpc-limit']
      ? ratio(by['local-limit'].admitted / by['local-limit'].bound, by['rpc-limit'].admitted / by['rpc-limit'].bound)
      : null,
  local_limit_over_bound_admitted: ratio(by['local-limit']?.admitted, by['local-limit']?.bound),
  rpc_limit_over_bound_admitted: ratio(by['rpc-limit']?.admitted, by['rpc-limit']?.bound),
  local_limit_over_rpc_limit_rps: ratio(by['local-limit']?.rps, by['rpc-limit']?.rps),
  local_limit_over_none_rps: ratio(by['local-limit']?.rps, by.none?.rps),
  leases_limit_rpcs_per_request: by['leases-limit'] ? Number(by['leases-limit'].rpcs_per_request.toPrecision(3)) : null,
  leases_limit_over_bound_admitted: ratio(by['leases-limit']?.admitted, by['leases-limit']?.bound),
  noheaders_far_over_none_rps: ratio(by['noheaders-far']?.rps, by.none?.rps),
  shadow_far_over_local_far_rps: ratio(by['shadow-far']?.rps, by['local-far']?.rps),
  shadow_far_rpcs_per_request: by['shadow-far'] ? Number(by['shadow-far'].rpcs_per_request.toPrecision(3)) : null,
  events_far_over_local_far_rps: ratio(by['events-far']?.rps, by['local-far']?.rps),
};
const check = (value, ok) => (value === null || value === undefined ? null : ok(value));
const goals = {
  local_far_ge_0_9_none_rps: check(ratios.local_far_over_none_rps, (x) => x >= 0.9),
  local_far_le_0_02_rpcs_per_request: check(ratios.local_far_rpcs_per_request, (x) => x <= 0.02),
  local_limit_admitted_0_95_to_1_0_rpc: check(ratios.local_limit_over_rpc_limit_admitted_per_bound, (x) => x >= 0.95 && x <= 1.0),
  local_limit_never_above_bound: check(by['local-limit']?.max_over_bound, (x) => x <= 0),
  local_limit_le_0_01_rpcs_per_request: check(ratios.local_limit_rpcs_per_request, (x) => x <= 0.01),
  local_limit_ge_0_95_bound_admitted: check(ratios.local_limit_over_bound_admitted, (x) => x >= 0.95),
  leases_limit_never_above_bound: check(by['leases-limit']?.max_over_bound, (x) => x <= 0),
  noheaders_far_ge_0_9_none_rps: check(ratios.noheaders_far_over_none_rps, (x) => x >= 0.9),
  local_far_ge_0_95_headers_rps: check(ratios.local_far_over_headers_rps, (x) => x >= 0.95),
};
const show = (x) => (x === null || x === undefined ? 'n/a' : x);
const met = (x) => (x === null || x === undefined ? 'n/a' : x ? 'met' : 'not met');
console.log(
  `LOCAL ratio local-far/none rps=${show(ratios.local_far_over_none_rps)} (goal >= 0.9: ${met(goals.local_far_ge_0_9_none_rps)}); ` +
    `rpc-far/none rps=${show(ratios.rpc_far_over_none_rps)}; headers/none rps=${show(ratios.headers_over_none_rps)}; local-far/headers rps=${show(ratios.local_far_over_headers_rps)}`,
);
console.log(`LOCAL local-far RPCs per request=${show(ratios.local_far_rpcs_per_request)} (goal <= 0.02: ${met(goals.local_far_le_0_02_rpcs_per_request)}); local-limit=${show(ratios.local_limit_rpcs_per_request)}`);
console.log(
  `LOCAL ratio local-limit/rpc-limit admitted per bound=${show(ratios.local_limit_over_rpc_limit_admitted_per_bound)} ` +
    `(goal 0.95..1.0: ${met(goals.local_limit_admitted_0_95_to_1_0_rpc)}), raw=${show(ratios.local_limit_over_rpc_limit_admitted)}; ` +
    `admitted/bound local=${show(ratios.local_limit_over_bound_admitted)} rpc=${show(ratios.rpc_limit_over_bound_admitted)}; ` +
    `worst round admitted-bound local=${show(by['local-limit']?.max_over_bound)} rpc=${show(by['rpc-limit']?.max_over_bound)} ` +
    `(goal never above: ${met(goals.local_limit_never_above_bound)})`,
);
console.log(
  `LOCAL local-limit RPCs per request=${show(ratios.local_limit_rpcs_per_request)} (goal <= 0.01: ${met(goals.local_limit_le_0_01_rpcs_per_request)}); ` +
    `admitted/bound=${show(ratios.local_limit_over_bound_admitted)} (goal >= 0.95: ${met(goals.local_limit_ge_0_95_bound_admitted)}); ` +
    `leases-limit RPCs per request=${show(ratios.leases_limit_rpcs_per_request)}, admitted/bound=${show(ratios.leases_limit_over_bound_admitted)}, ` +
    `worst round admitted-bound=${show(by['leases-limit']?.max_over_bound)} (goal never above: ${met(goals.leases_limit_never_above_bound)})`,
);
console.log(
  `LOCAL ratio noheaders-far/none rps=${show(ratios.noheaders_far_over_none_rps)} (goal >= 0.9: ${met(goals.noheaders_far_ge_0_9_none_rps)}); ` +
    `local-far/headers rps=${show(ratios.local_far_over_headers_rps)} (goal >= 0.95: ${met(goals.local_far_ge_0_95_headers_rps)}); ` +
    `shadow-far/local-far rps=${show(ratios.shadow_far_over_local_far_rps)}, RPCs per request shadow=${show(ratios.shadow_far_rpcs_per_request)} ` +
    `local=${show(ratios.local_far_rpcs_per_request)}; events-far/local-far rps=${show(ratios.events_far_over_local_far_rps)}`,
);

mkdirSync(OUT_DIR, { recursive: true });
const wranglerVersion = spawnSync(WRANGLER, ['--version'], { encoding: 'utf8' }).stdout?.trim().split('\n').pop() ?? '';
const out = join(OUT_DIR, 'local.json');
writeFileSync(
  out,
  JSON.stringify(
    {
      benchmark: 'local-decisions',
      generated_at: new Date().toISOString(),
      machine: { ...machineInfo(), workerd: WORKERD_VERSION, wrangler: wranglerVersion, load_generator: LOADGEN_VERSION },
      params: {
        duration_s: DURATION,
        warmup_s: WARMUP,
        rounds: ROUNDS,
        connections: CONNECTIONS,
        wrk_threads: WRK_THREADS,
        far_policy: 'max_tokens 1e9, refill_every_seconds 1',
        at_limit_policy: `max_tokens ${AT_MAX_TOKENS}, refill_every_seconds ${AT_REFILL_SECONDS}`,
        at_limit_interval_ms: INTERVAL_NS / 1e6,
        local_limits: 'new LocalLimits() (defaults: marginMs 1000, maxLease 1000) per variant and round',
        binding: 'RateLimiterServer (in memory)',
        compatibility_date: COMPAT_DATE,
      },
      notes:
        'Closed-loop load (fixed connections), so latency includes queueing at saturation. ' +
        'requests/s and latency are medians over rounds; counts (requests, admitted, denied, RPCs, bound) are sums over rounds, ' +
        'counted in the Worker (they include requests in flight when the load generator stopped). ' +
        'non2xx counts status >= 400 (a denied request answers 429). bound = max_tokens + floor(T / interval) per round, ' +
        "T from the first request's arrival to the last decision by the isolate's clock. " +
        'RPCs per request = LocalLimits.calls / requests answered (requests in flight when the load generator closes its connections are cancelled unanswered); the per-request limiter makes one limit() RPC per request by construction. On a shared machine the numbers are indicative only.',
      variants,
      ratios,
      goals,
    },
    null,
    2,
  ) + '\n',
);
console.log(`LOCAL wrote ${out}`);
