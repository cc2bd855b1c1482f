// Durable across restarts: a real workerd process with localDisk storage is stopped and a new
// one started on the same directory between two calls; DurableRateLimiterServer finds its
// buckets, options and policies as they were. The clock is real: reset_in_ms must have moved by
// exactly the wall time between the two readings (bounded by the request timestamps), never by a
// sleep. The in-memory RateLimiterServer on the same restart comes back full, which is why the
// durable class exists. Run: node --test tests/process/restart.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get, query } from '../support/net.mjs';
import { makeTempDir, removeTempDir } from '../support/workerd.mjs';
import { bundleWorker, startWorkerd } from './workerd.mjs';

let bundle;
let disk;
let workerd;

/** GET with the wall-clock interval it took: workerd's Date.now() for it lies inside. */
async function timed(path) {
  const start = Date.now();
  const res = await get(workerd.base, path);
  const end = Date.now();
  assert.ok(res.status === 200 || res.status === 429, `${path}: ${res.status} ${res.text}`);
  return { ...res, start, end };
}

const call = (route, params) => timed(`/${route}?${query(params)}`);

/** Stops workerd by PID (SIGTERM: a clean shutdown, SIGKILL: a crash) and starts a new one on the same disk. */
async function restart(signal = 'SIGTERM') {
  const oldPid = workerd.pid;
  const { code, signal: by } = await workerd.stop(signal);
  assert.ok(code !== null || by !== null, 'workerd did not exit');
  workerd = await startWorkerd(bundle, { disk });
  assert.notEqual(workerd.pid, oldPid);
}

/**
 * `after` is `before` read again after a restart: same remaining and limit, and reset_in_ms
 * smaller by the time that passed between the two workerd reads, which lies between
 * after.start - before.end and after.end - before.start (±1 ms for whole-millisecond clocks).
 */
function assertSameBucket(what, before, after) {
  assert.equal(after.json.remaining, before.json.remaining, `${what}: remaining`);
  assert.equal(after.json.limit, before.json.limit, `${what}: limit`);
  const was = before.json.reset_in_ms;
  const now = after.json.reset_in_ms;
  const figures = `${what}: remaining ${after.json.remaining}/${after.json.limit}, reset_in_ms ${was}→${now}`;
  if (was === 0) {
    assert.equal(now, 0, `${what}: a full bucket stays full`);
    return figures;
  }
  const low = was - (after.end - before.start) - 1;
  const high = was - (after.start - before.end) + 1;
  assert.ok(
    low <= now && now <= high,
    `${what}: reset_in_ms ${now} after restart, expected ${low}..${high} (was ${was}, ` +
      `${after.start - before.end}..${after.end - before.start} ms passed)`,
  );
  return `${figures} (${after.start - before.end}..${after.end - before.start} ms passed)`;
}

describe('restart: workerd stopped and started again on the same localDisk directory', () => {
  before(async () => {
    bundle = await bundleWorker();
    disk = makeTempDir('rl-process-disk-');
    workerd = await startWorkerd(bundle, { disk });
  });

  after(async () => {
    if (workerd) await workerd.stop();
    if (bundle) removeTempDir(bundle.dir);
    if (disk) removeTempDir(disk);
  });

  for (const signal of ['SIGTERM', 'SIGKILL']) {
    it(`durable class after ${signal}: buckets, setOptions and limit() policies are as they were`, async () => {
      const opts = { class: 'durable', do: `options-${signal}` };
      const pol = { class: 'durable', do: `policy-${signal}` };
      assert.equal((await call('setup', { ...opts, max: 5, every: 300 })).status, 200);
      for (let i = 0; i < 3; i++) assert.equal((await call('consume', { ...opts, key: 'partial' })).status, 200);
      for (let i = 0; i < 5; i++) assert.equal((await call('consume', { ...opts, key: 'empty' })).status, 200);
      assert.equal((await call('consume', { ...opts, key: 'empty' })).status, 429);
      // A per-key policy (7 tokens, one per 120 s) on a DO whose options stay the defaults (10).
      for (let i = 0; i < 3; i++) {
        assert.equal((await call('limit', { ...pol, key: 'p', max: 7, every: 120 })).status, 200);
      }

      const reads = [
        ['partial', opts, 'partial'],
        ['empty', opts, 'empty'],
        ['untouched key, DO options', opts, 'fresh'],
        ['policy key', pol, 'p'],
      ];
      const beforeRestart = [];
      for (const [, where, key] of reads) beforeRestart.push(await call('status', { ...where, key }));
      assert.deepEqual(
        beforeRestart.map((r) => [r.json.remaining, r.json.limit]),
        [[2, 5], [0, 5], [5, 5], [4, 7]],
        'before the restart',
      );

      await restart(signal);

      const figures = [];
      for (const [i, [what, where, key]] of reads.entries()) {
        figures.push(assertSameBucket(what, beforeRestart[i], await call('status', { ...where, key })));
      }
      // The buckets still act as they were: empty denies, the policy applies without being sent.
      const empty = await call('consume', { ...opts, key: 'empty' });
      assert.equal(empty.status, 429, 'the empty bucket still denies');
      const partial = await call('limit', { ...opts, key: 'partial' });
      assert.deepEqual([partial.status, partial.json.remaining, partial.json.limit], [200, 1, 5]);
      const policy = await call('limit', { ...pol, key: 'p' });
      assert.deepEqual([policy.status, policy.json.remaining, policy.json.limit], [200, 3, 7], 'policy still applied');
      console.log(`process restart (${signal}): ${figures.join('; ')}`);
    });
  }

  it('the in-memory class on the same restart comes back full, with default options', async () => {
    const mem = { class: 'memory', do: 'contrast' };
    assert.equal((await call('setup', { ...mem, max: 5, every: 300 })).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await call('consume', { ...mem, key: 'k' })).status, 200);
    const was = await call('status', { ...mem, key: 'k' });
    assert.deepEqual([was.json.remaining, was.json.limit], [2, 5]);

    await restart();

    const now = await call('status', { ...mem, key: 'k' });
    assert.deepEqual(now.json, { remaining: 10, limit: 10, reset_in_ms: 0 }, 'bucket and options are gone');
  });

  it('keys differing only by a lone surrogate, NUL or normalization stay separate buckets', async () => {
    const where = { class: 'durable', do: 'keys' };
    // Each would merge with another if keys went through UTF-8 (lone surrogates → U+FFFD),
    // a C string (cut at NUL) or Unicode normalization.
    const keys = [
      '\ud800', '\udc00', '\ufffd', '\ud800\udc00', '\udc00\ud800', '\u{10000}x',
      'a', 'a\u0000', 'a\u0000b', '\u0000',
      '\u00e9', 'e\u0301', '\u00c5', 'A\u030a', '\u212b',
    ];
    assert.equal((await call('setup', { ...where, max: 20, every: 300 })).status, 200);
    // Key i takes i + 1 tokens: merged keys would show the sum.
    for (const [i, key] of keys.entries()) {
      const res = await call('consume', { ...where, kj: JSON.stringify(key), cost: i + 1 });
      assert.equal(res.status, 200, `key #${i}`);
    }
    const beforeRestart = [];
    for (const key of keys) beforeRestart.push(await call('status', { ...where, kj: JSON.stringify(key) }));
    assert.deepEqual(beforeRestart.map((r) => r.json.remaining), keys.map((_, i) => 20 - (i + 1)), 'before the restart');

    await restart();

    for (const [i, key] of keys.entries()) {
      assertSameBucket(`key #${i} ${JSON.stringify(key)}`, beforeRestart[i], await call('status', { ...where, kj: JSON.stringify(key) }));
    }
  });
});
