// Edge-local decisions under load: the load of load.test.mjs (a second process, keep-alive
// connections on loopback) through the middleware, on EDGES Worker instances of one workerd
// (each its own isolate with its own LocalLimits; all bind the Durable Object namespaces of the
// worker "main", so they compete for the same buckets; tests/process/workerd.mjs
// startEdgeWorkerd). Every request goes to the next edge in turn.
//
// Phase "bound" (LOCAL_LOAD_SECONDS, default 30): buckets that refill 4 to 16 tokens a second
// under an offered load well above that (asserted: each bucket is offered at least 1.5 times
// its bound), so the limit binds throughout. The same buckets three times over fresh Durable
// Objects, one set per mode, in ONE run with the requests interleaved (rpc, local, leases, …):
// per-request RPC (`local: false`), local decisions as `local: true` makes them (the
// isolate's LocalLimits: shares once a bucket runs low) and plain leases only
// (`local: { shares: false }`), so every mode sees the same offered load, connections,
// duration and machine. Durable Object storage is on a tmpfs where there is one. Asserts: no
// error and only 200/429; for every bucket in every mode admitted <= max_tokens +
// floor(T / interval), T the whole run's wall time (first request sent to last answer read:
// an over-estimate of the bucket's window); every bucket denied some requests; total
// admitted(leases) >= 0.95 x total admitted(rpc), and admitted(local) >= 0.9 x the bound. The
// calls per request of each local mode are printed (measured, not asserted).
//
// Phase "far" (LOCAL_FAR_SECONDS, default 10): one bucket per class far from its limit
// (max_tokens 1e9), local mode only: everything admitted, and at most 0.02 Durable Object calls
// per request. (How few calls depends on the request rate each isolate sees per bucket: the
// summary line prints it.)
//
// Run: node --test --test-concurrency=1 --test-reporter=tap tests/process/local.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get, query } from '../support/net.mjs';
import { makeTmpfsDir } from '../support/workerd.mjs';
import { bundleWorker, runLoad, stopAndClean, startEdgeWorkerd } from './workerd.mjs';

const SECONDS = Number(process.env.LOCAL_LOAD_SECONDS ?? 30);
const FAR_SECONDS = Number(process.env.LOCAL_FAR_SECONDS ?? 10);
const EDGES = Number(process.env.LOCAL_EDGES ?? 4);
const CONNECTIONS = 32;
const MODES = ['rpc', 'local', 'leases'];
const LOCAL_PARAM = { rpc: 0, local: 1, leases: 2 };
const MIN_RATIO = 0.95;
const MIN_OF_BOUND = 0.9;
const MAX_RPC_PER_REQUEST_FAR = 0.02;

// Per mode: bucket j of each class refills one token every `every` s (4 to 16 a second), up to `max`.
const LIMITS = [
  { max: 10, every: 0.25 },
  { max: 20, every: 0.125 },
  { max: 30, every: 0.08 },
  { max: 40, every: 0.0625 },
];
// Each bucket is offered at least this many times its bound (else the limit did not bind).
const MIN_OFFERED = 1.5;

/** Buckets of a phase: one per class × limits × mode, each on a Durable Object of its own. */
function bucketsOf(phase, limits, modes) {
  const buckets = [];
  for (const mode of modes) {
    for (const cls of ['memory', 'durable']) {
      limits.forEach(({ max, every }, j) => {
        const id = `${phase}/${mode}/${cls}/${j}`;
        const params = { class: cls, do: `${phase}-${mode}-${j}`, name: 'api', max, every, local: LOCAL_PARAM[mode] };
        buckets.push({ id, mode, cls, max, every, path: `/mw?${query(params)}` });
      });
    }
  }
  return buckets;
}

/** Targets for load.mjs: each bucket on each edge, interleaved so that modes and edges alternate. */
function targetsOf(buckets, edgeBases) {
  const targets = [];
  const perMode = MODES.map((mode) => buckets.filter((b) => b.mode === mode)).filter((list) => list.length > 0);
  for (let j = 0; j < perMode[0].length; j++) {
    edgeBases.forEach((base, e) => {
      for (const list of perMode) targets.push({ id: `${list[j].id}@${e}`, bucket: list[j].id, path: list[j].path, base });
    });
  }
  return targets;
}

/** The sum over every edge of its LocalLimits counters. */
async function localStats(edgeBases) {
  const sum = { calls: 0, local_answers: 0, leases_calls: 0, leases_local_answers: 0, perEdge: [] };
  for (const base of edgeBases) {
    const res = await get(base, '/local-stats');
    assert.equal(res.status, 200, res.text);
    for (const name of ['calls', 'local_answers', 'leases_calls', 'leases_local_answers']) sum[name] += res.json[name];
    sum.perEdge.push(res.json);
  }
  return sum;
}

/** Per bucket: { requests, statuses } summed over its targets (one per edge). */
function perBucket(report, targets) {
  const out = new Map();
  for (const t of targets) {
    const sum = out.get(t.bucket) ?? { requests: 0, statuses: {}, errors: 0 };
    const got = report.targets[t.id];
    sum.errors += got.errors;
    for (const [code, n] of Object.entries(got.statuses)) {
      sum.statuses[code] = (sum.statuses[code] ?? 0) + n;
      sum.requests += n;
    }
    out.set(t.bucket, sum);
  }
  return out;
}

/** Runs one phase: load, and the LocalLimits counters around it. */
async function phase(server, buckets, seconds) {
  const targets = targetsOf(buckets, server.edgeBases);
  const before = await localStats(server.edgeBases);
  const spec = targets.map(({ id, path, base }) => ({ id, path, base }));
  const report = await runLoad({ base: server.base, seconds, connections: CONNECTIONS, targets: spec });
  const afterStats = await localStats(server.edgeBases);
  const counts = perBucket(report, targets);
  const modes = {};
  for (const mode of MODES) {
    const mine = buckets.filter((b) => b.mode === mode);
    if (mine.length === 0) continue;
    const sum = (f) => mine.reduce((s, b) => s + f(counts.get(b.id)), 0);
    modes[mode] = { requests: sum((c) => c.requests), admitted: sum((c) => c.statuses[200] ?? 0), errors: sum((c) => c.errors) };
  }
  const calls = afterStats.calls - before.calls;
  const localAnswers = afterStats.local_answers - before.local_answers;
  const edgeCalls = afterStats.perEdge.map((s, i) => s.calls - before.perEdge[i].calls);
  const leasesCalls = afterStats.leases_calls - before.leases_calls;
  const leasesLocalAnswers = afterStats.leases_local_answers - before.leases_local_answers;
  return { report, counts, modes, calls, localAnswers, edgeCalls, leasesCalls, leasesLocalAnswers };
}

const bound = (b, ms) => b.max + Math.floor(ms / (b.every * 1000));
// The run's wall time, over-estimated by 1 ms: load.mjs reports it rounded to whole ms.
const windowOf = (report) => report.duration_ms + 1;

describe(`local decisions: ${EDGES} Worker isolates, ${CONNECTIONS} connections from a second process`, () => {
  const boundBuckets = bucketsOf('bound', LIMITS, MODES);
  const farBuckets = bucketsOf('far', [{ max: 1e9, every: 1 }], ['local']);
  let bundle;
  let disk;
  let server;
  let bound1;
  let far;

  before(async () => {
    bundle = await bundleWorker();
    // On a tmpfs where there is one: SQLite on the disk would slow the load, not change it.
    disk = makeTmpfsDir('rl-process-disk-').dir;
    server = await startEdgeWorkerd(bundle, { disk, edges: EDGES });

    bound1 = await phase(server, boundBuckets, SECONDS);
    const { report, modes } = bound1;
    const T = windowOf(report);
    const rpc = modes.rpc;
    const loc = modes.local;
    const bounds = (mode) => boundBuckets.filter((b) => b.mode === mode).reduce((s, b) => s + bound(b, T), 0);
    console.log(
      `local bound phase: seconds=${(T / 1000).toFixed(1)} edges=${EDGES} connections=${CONNECTIONS} ` +
        `requests=${report.requests} (rpc ${rpc.requests}, local ${loc.requests}) errors=${report.errors} stale-socket retries=${report.stale_retries} ` +
        `admitted rpc=${rpc.admitted} local=${loc.admitted} (bound ${bounds('local')} each) ` +
        `ratio=${(loc.admitted / rpc.admitted).toFixed(4)} ` +
        `rpcs/request local=${(bound1.calls / loc.requests).toFixed(4)} (calls ${bound1.calls}, local answers ${bound1.localAnswers}, per edge ${bound1.edgeCalls.join('/')}) rpc=1`,
    );
    const offered = boundBuckets.filter((b) => b.mode === 'local').reduce((s, b) => s + bound1.counts.get(b.id).requests / bound(b, T), 0) / (2 * LIMITS.length);
    console.log(
      `local bound phase, local: true: requests=${loc.requests} (${offered.toFixed(1)}x the bound per bucket on average) ` +
        `admitted=${loc.admitted} (bound ${bounds('local')}: ${(loc.admitted / bounds('local')).toFixed(4)}) ` +
        `rpcs/request=${(bound1.calls / loc.requests).toFixed(4)}`,
    );
    const le = modes.leases;
    console.log(
      `local bound phase, local: { shares: false }: requests=${le.requests} ` +
        `admitted=${le.admitted} (bound ${bounds('leases')}: ${(le.admitted / bounds('leases')).toFixed(4)}, ratio to rpc ${(le.admitted / rpc.admitted).toFixed(4)}) ` +
        `rpcs/request=${(bound1.leasesCalls / le.requests).toFixed(4)} (calls ${bound1.leasesCalls}, local answers ${bound1.leasesLocalAnswers})`,
    );
    const perKey = boundBuckets.map((b) => `${b.id}=${bound1.counts.get(b.id).statuses[200] ?? 0}/${bound(b, T)}`).join(' ');
    console.log(`local bound phase admitted(got/bound): ${perKey}`);

    far = await phase(server, farBuckets, FAR_SECONDS);
    const f = far.modes.local;
    const perHolder = f.requests / (EDGES * farBuckets.length) / (far.report.duration_ms / 1000);
    console.log(
      `local far phase: seconds=${(far.report.duration_ms / 1000).toFixed(1)} requests=${far.report.requests} ` +
        `(${Math.round(perHolder)}/s per isolate and bucket) ` +
        `errors=${far.report.errors} stale-socket retries=${far.report.stale_retries} admitted local=${f.admitted} ` +
        `rpcs/request local=${(far.calls / f.requests).toFixed(4)} (calls ${far.calls}, local answers ${far.localAnswers}, per edge ${far.edgeCalls.join('/')})`,
    );
  });

  after(() => stopAndClean(server, bundle?.dir, disk));

  it('no socket or HTTP error, only 200/429, and workerd is still up', () => {
    for (const { report, counts } of [bound1, far]) {
      assert.equal(report.errors, 0, `errors: ${report.error_samples.join('; ')}`);
      for (const [id, { statuses }] of counts) {
        const others = Object.entries(statuses).filter(([code]) => code !== '200' && code !== '429');
        assert.deepEqual(others, [], `${id} got other statuses`);
      }
    }
    assert.equal(server.child.exitCode, null, server.log());
  });

  it('every mode saw the same offered load, and every local-mode request was counted by a LocalLimits', () => {
    const { rpc, local, leases } = bound1.modes;
    assert.ok(Math.abs(rpc.requests - local.requests) <= CONNECTIONS, `rpc ${rpc.requests} vs local ${local.requests} requests`);
    assert.ok(Math.abs(rpc.requests - leases.requests) <= CONNECTIONS, `rpc ${rpc.requests} vs leases ${leases.requests} requests`);
    // (Renewals in the background, of a plain lease ahead of time or of a share, and settles
    // beside a call are calls of no request.)
    assert.ok(bound1.localAnswers <= local.requests, 'local answers <= local-mode requests');
    assert.ok(bound1.calls + bound1.localAnswers >= local.requests, 'calls + local answers cover every local-mode request');
    assert.ok(bound1.leasesLocalAnswers <= leases.requests, 'leases: local answers <= requests');
    assert.ok(
      bound1.leasesCalls + bound1.leasesLocalAnswers >= leases.requests,
      'leases: calls + local answers cover every leases-mode request',
    );
    assert.ok(bound1.edgeCalls.every((n) => n > 0), `an edge made no call: ${bound1.edgeCalls.join('/')}`);
  });

  it('no bucket admitted more than max_tokens + floor(T / interval), in any mode', () => {
    const T = windowOf(bound1.report);
    for (const b of boundBuckets) {
      const admitted = bound1.counts.get(b.id).statuses[200] ?? 0;
      assert.ok(admitted <= bound(b, T), `${b.id}: admitted ${admitted} > bound ${bound(b, T)} (T ${T} ms)`);
    }
  });

  it(`the limit bound throughout: every bucket was offered at least ${MIN_OFFERED} x its bound, and denied requests`, () => {
    const T = windowOf(bound1.report);
    for (const b of boundBuckets) {
      const { statuses, requests } = bound1.counts.get(b.id);
      assert.ok(requests >= MIN_OFFERED * bound(b, T), `${b.id}: offered ${requests}, bound ${bound(b, T)}`);
      assert.ok((statuses[429] ?? 0) > 0, `${b.id}: nothing denied of ${requests}`);
    }
  });

  it(`plain leases admitted at least ${MIN_RATIO} x what per-request RPC admitted, local: true at least ${MIN_OF_BOUND} x the bound`, () => {
    const { rpc, local, leases } = bound1.modes;
    assert.ok(rpc.admitted > 0, 'rpc admitted nothing');
    assert.ok(
      leases.admitted >= MIN_RATIO * rpc.admitted,
      `leases admitted ${leases.admitted} < ${MIN_RATIO} x rpc ${rpc.admitted} (ratio ${(leases.admitted / rpc.admitted).toFixed(4)})`,
    );
    const T = windowOf(bound1.report);
    const bounds = boundBuckets.filter((b) => b.mode === 'local').reduce((s, b) => s + bound(b, T), 0);
    assert.ok(
      local.admitted >= MIN_OF_BOUND * bounds,
      `local admitted ${local.admitted} < ${MIN_OF_BOUND} x the bound ${bounds} (${(local.admitted / bounds).toFixed(4)})`,
    );
  });

  it(`far from the limit: everything admitted with at most ${MAX_RPC_PER_REQUEST_FAR} calls per request`, () => {
    const { requests, admitted } = far.modes.local;
    assert.equal(admitted, requests, 'far from the limit, everything is admitted');
    assert.ok(far.localAnswers <= requests, 'local answers <= requests');
    assert.ok(far.calls + far.localAnswers >= requests, 'calls + local answers cover every request');
    assert.ok(
      far.calls / requests <= MAX_RPC_PER_REQUEST_FAR,
      `${far.calls} calls for ${requests} requests (${(far.calls / requests).toFixed(4)} per request)`,
    );
  });
});
