// Exact under load: a LOAD_SECONDS (default 30) load from a second process over loopback against
// a real workerd produces no error and an exact admitted count. 16 buckets over both classes, 4
// Durable Objects each; bucket i has max_tokens 100 + 37 i and refills one token a day, so
// during the run every bucket admits exactly its max_tokens and denies the rest. Half the
// buckets take their limit from setOptions on their DO (/consume), half from a limit() policy
// sent on every call. Run: node --test tests/process/load.test.mjs   (LOAD_SECONDS=8 for a quick
// local run; much shorter runs cannot exhaust the larger buckets, and the test says so)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get, query } from '../support/net.mjs';
import { makeTempDir } from '../support/workerd.mjs';
import { bundleWorker, runLoad, stopAndClean, startWorkerd } from './workerd.mjs';

const SECONDS = Number(process.env.LOAD_SECONDS ?? 30);
const CONNECTIONS = 32;
const DAY = 86_400; // refill_every_seconds: no token comes back during the run

// Bucket i: class, DO, key, its max_tokens and the path the load generator hits.
const buckets = [];
for (const cls of ['memory', 'durable']) {
  for (let d = 0; d < 4; d++) {
    for (const via of ['options', 'policy']) {
      const i = buckets.length;
      const bucket = { id: `${cls}/load-${d}/${via}`, cls, do: `load-${d}`, key: `client ${d} ü/${via}`, max: 100 + 37 * i, via };
      const params = { class: cls, do: bucket.do, key: bucket.key };
      bucket.path = via === 'options' ? `/consume?${query(params)}` : `/limit?${query({ ...params, max: bucket.max, every: DAY })}`;
      buckets.push(bucket);
    }
  }
}
const totalTokens = buckets.reduce((sum, b) => sum + b.max, 0);

describe(`load: ${SECONDS} s, ${CONNECTIONS} connections from a second process`, () => {
  let bundle;
  let disk;
  let workerd;
  let report;
  const statusAfter = new Map();

  before(async () => {
    bundle = await bundleWorker();
    // localDisk, not inMemory: workerd's inMemory storage has no SQL API, which the durable class needs.
    disk = makeTempDir('rl-process-disk-');
    workerd = await startWorkerd(bundle, { disk });
    for (const b of buckets.filter((b) => b.via === 'options')) {
      const res = await get(workerd.base, `/setup?${query({ class: b.cls, do: b.do, max: b.max, every: DAY })}`);
      assert.equal(res.status, 200, res.text);
    }
    const targets = buckets.map(({ id, path }) => ({ id, path }));
    report = await runLoad({ base: workerd.base, seconds: SECONDS, connections: CONNECTIONS, targets });
    for (const b of buckets) {
      statusAfter.set(b.id, await get(workerd.base, `/status?${query({ class: b.cls, do: b.do, key: b.key })}`));
    }
    const admitted = buckets.map((b) => `${b.id}=${report.targets[b.id].statuses[200] ?? 0}/${b.max}`).join(' ');
    console.log(
      `process load: requests=${report.requests} seconds=${(report.duration_ms / 1000).toFixed(1)} ` +
        `rps=${Math.round(report.requests / (report.duration_ms / 1000))} connections=${CONNECTIONS} ` +
        `errors=${report.errors} stale-socket retries=${report.stale_retries} tokens=${totalTokens} admitted(got/max): ${admitted}`,
    );
  });

  after(() => stopAndClean(workerd, bundle?.dir, disk));

  it('no socket or HTTP error, and workerd is still up', () => {
    assert.equal(report.errors, 0, `errors: ${report.error_samples.join('; ')}`);
    assert.equal(workerd.child.exitCode, null, workerd.log());
  });

  it('every answer is 200 or 429', () => {
    for (const b of buckets) {
      const others = Object.entries(report.targets[b.id].statuses).filter(([code]) => code !== '200' && code !== '429');
      assert.deepEqual(others, [], `${b.id} got other statuses`);
    }
  });

  it('each bucket admitted exactly its max_tokens, and every bucket was pushed past it', () => {
    for (const b of buckets) {
      const { statuses } = report.targets[b.id];
      assert.equal(statuses[200] ?? 0, b.max, `${b.id}: admitted`);
      assert.ok((statuses[429] ?? 0) > 0, `${b.id}: nothing denied, so the limit was never reached`);
    }
    // The load was real load, not a trickle that just crossed each limit.
    assert.ok(report.requests >= 2 * totalTokens, `only ${report.requests} requests for ${totalTokens} tokens`);
  });

  it('afterwards /status shows 0 remaining and the bucket limit', () => {
    for (const b of buckets) {
      const res = statusAfter.get(b.id);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.remaining, 0, `${b.id}: remaining`);
      assert.equal(res.json.limit, b.max, `${b.id}: limit`);
    }
  });
});
