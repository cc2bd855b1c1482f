// Self-test of the simulator's own machinery: the bound checker must fail a sequence one
// token over its bound and pass one exactly at it, the fast checkers must agree with trying
// every window, a chain of awaits must finish before simulated time moves, the object's clock
// must be exact, and a seed must reproduce a cell. Returns the failures (empty when all pass).
import { BoundMonitor, checkBound, checkBoundByBruteForce } from './check.mjs';
import { EventQueue } from './heap.mjs';
import { MODES } from './modes.mjs';
import { splitmix32 } from './random.mjs';
import { figuresOf, regressions } from './recorded.mjs';
import { WARM_UP_S, engineNanos, objectMs, simulateCell } from './simulate.mjs';

export async function selftest(lib, log = console.log) {
  const failures = [];
  const expect = (condition, what) => {
    if (!condition) failures.push(what);
  };

  // 1. One token over the bound, and exactly at it. maxTokens 3, interval 100 ns.
  const M = 3;
  const I = 100;
  // A full bucket at 0, then one token at every refill moment for 100 intervals: at the bound.
  const atBound = [0, 0, 0];
  for (let k = 1; k <= 100; k++) atBound.push(k * I);
  expect(checkBound(Float64Array.from(atBound), M, I).ok, 'a sequence exactly at the bound was rejected');
  expect(checkBound(Float64Array.from(atBound), M, I).maxExcess === 0, 'the bound-exact sequence has excess 0');
  // The same with one token 1 ns early: [0, 50I - 1] then holds M + 50 tokens, its bound M + 49.
  const earlyLong = atBound.slice();
  earlyLong[3 + 49] -= 1;
  const long = checkBound(Float64Array.from(earlyLong), M, I);
  expect(!long.ok && long.maxExcess === 1, 'one token early, 50 intervals in, was not caught as one over');
  expect(long.violation?.end === 50 * I - 1, 'the violation is not reported at the early token');
  // A burst of M + 1 at one instant.
  expect(!checkBound(Float64Array.from([5, 5, 5, 5]), M, I).ok, 'a burst of maxTokens + 1 was accepted');
  expect(checkBound(Float64Array.from([5, 5, 5, 105]), M, I).ok, 'maxTokens then one interval later was rejected');
  expect(!checkBound(Float64Array.from([5, 5, 5, 104]), M, I).ok, 'maxTokens then one interval minus 1 ns was accepted');
  // The online monitor, fed the same sequences in two batches.
  const online = (times, cut) => {
    const monitor = new BoundMonitor(M, I);
    times.forEach((t, k) => {
      monitor.add(t);
      if (k === cut) monitor.flush();
    });
    monitor.flush();
    return monitor;
  };
  expect(online(atBound, 40).maxExcess === 0, 'online: the bound-exact sequence has excess 0');
  const earlyOnline = online(earlyLong, 10);
  expect(earlyOnline.maxExcess === 1 && earlyOnline.violation?.end === 50 * I - 1, 'online: one early token missed');

  // 2. Random sequences: the Fenwick check, the online monitor (random flushes) and brute force agree.
  const random = splitmix32(7);
  let agreed = 0;
  for (let round = 0; round < 400; round++) {
    const maxTokens = 1 + Math.floor(random() * 5);
    const interval = 1 + Math.floor(random() * 50);
    const n = 1 + Math.floor(random() * 60);
    const times = new Float64Array(n);
    let t = Math.floor(random() * 1000);
    for (let k = 0; k < n; k++) {
      times[k] = t;
      t += random() < 0.3 ? 0 : Math.floor(random() * interval * 1.3);
    }
    const brute = checkBoundByBruteForce(times, maxTokens, interval);
    const fast = checkBound(times, maxTokens, interval);
    const monitor = new BoundMonitor(maxTokens, interval);
    for (let k = 0; k < n; k++) {
      monitor.add(times[k]);
      if (random() < 0.2) monitor.flush();
    }
    monitor.flush();
    const same =
      brute.maxExcess === fast.maxExcess &&
      brute.maxExcess === monitor.maxExcess &&
      JSON.stringify(brute.violation) === JSON.stringify(fast.violation) &&
      JSON.stringify(brute.violation) === JSON.stringify(monitor.violation);
    if (same) agreed += 1;
    else failures.push(`checkers disagree on ${JSON.stringify({ maxTokens, interval, times: [...times] })}`);
  }

  // 2b. The event queue pops by (time, order of scheduling), through growth and slot reuse.
  {
    const queue = new EventQueue();
    const expected = [];
    const popped = [];
    let id = 0;
    const popOne = () => {
      queue.pop();
      popped.push([queue.t, queue.fire(), queue.drain]);
    };
    for (let round = 0; round < 20_000; round++) {
      if (queue.size > 0 && random() < 0.45) popOne();
      else {
        const t = (popped.length > 0 ? popped[popped.length - 1][0] : 0) + Math.floor(random() * 50);
        const mine = id++;
        const drain = random() < 0.5;
        expected.push([t, mine, drain]);
        queue.push(t, () => mine, drain);
      }
    }
    while (queue.size > 0) popOne();
    // The same events sorted by time, ties in the order they were scheduled (ids increase).
    expected.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    // Events are pushed no earlier than the last popped one, so the pops come out in that order.
    expect(JSON.stringify(popped) === JSON.stringify(expected), 'the event queue popped events out of (time, order) order');
  }

  // 3. The object's clock: every whole nanosecond is read exactly by the engine.
  for (let k = 0; k < 10_000; k++) {
    const t = Math.floor(random() * 1e13);
    try {
      objectMs(t);
    } catch {
      failures.push(`object clock inexact at ${t} ns`);
      break;
    }
  }
  expect(engineNanos(objectMs(0)) === 1e12, 'object clock at 0');

  // 4. Microtasks: a decision reached through a long chain of awaits after its answer is taken
  // at the answer's moment; one that sleeps after the answer is flagged as late.
  const chainModes = {
    chain: {
      build:
        ({ stub, key, policy }) =>
        async () => {
          const decision = await stub.limit(key, 1, policy);
          for (let k = 0; k < 50; k++) await null;
          const nested = async (depth) => (depth === 0 ? decision : nested(depth - 1));
          return await nested(20);
        },
    },
    late: {
      build:
        ({ stub, key, policy, sleep }) =>
        async () => {
          const decision = await stub.limit(key, 1, policy);
          await sleep(1);
          return decision;
        },
    },
  };
  const small = {
    isolates: 3,
    demand: 2,
    split: 'even',
    rttMs: 20,
    maxTokens: 10,
    refillSeconds: 0.1,
    seconds: 3,
    seed: 11,
    skewMs: 100,
    jitter: 0.1,
    evictPerSecond: 0,
  };
  const chain = await simulateCell({ ...small, mode: 'chain' }, lib, chainModes);
  expect(chain.requests > 0 && chain.lateDecisions === 0, `a chain of awaits finished after time moved (${chain.lateDecisions} late)`);
  expect(chain.waitedShare === 1 && chain.undecided === 0, 'every chained request waited for its call and was decided');
  const late = await simulateCell({ ...small, mode: 'late' }, lib, chainModes);
  expect(late.lateDecisions === late.requests - late.undecided, 'decisions made after the answer were not all flagged late');

  // 5. A seed reproduces a cell, with evictions and leases.
  const cell = { ...small, mode: 'leases', isolates: 4, demand: 5, evictPerSecond: 0.5, seconds: 5 };
  const strip = ({ events, ...rest }) => JSON.stringify(rest) + events;
  const first = await simulateCell(cell, lib, MODES);
  const second = await simulateCell(cell, lib, MODES);
  expect(strip(first) === strip(second), 'the same seed gave two different runs');
  expect(first.evictions > 0, 'the reproducibility cell had no eviction');

  // 5b. The figures from the warm-up on: none for a cell shorter than twice it; for one call
  // per request, every request from then on waits, and its calls then (a whole number) are
  // about half the run's, its demand being even over the run.
  expect(first.warmCallsPerSecond === null && first.warmWaitedShare === null, 'a 5 s cell has figures from the warm-up on');
  const warmCell = { ...small, mode: 'request', seconds: 2 * WARM_UP_S };
  const warm = await simulateCell(warmCell, lib, MODES);
  const warmCalls = warm.warmCallsPerSecond * WARM_UP_S;
  expect(warm.warmWaitedShare === 1, `one call per request waited for ${warm.warmWaitedShare} of its requests from the warm-up on`);
  expect(
    Math.abs(warmCalls - Math.round(warmCalls)) < 1e-9 && Math.abs(warmCalls / warm.objectCalls - 0.5) < 0.1,
    `one call per request made ${warmCalls} of its ${warm.objectCalls} calls from the warm-up on`,
  );

  // 6. An object restart: the durable class reloads and keeps the bound; an object that
  // restarts with empty memory (the in-memory class) gives its bucket back, which the check sees.
  const restarting = { ...small, mode: 'request', demand: 5, seconds: 5, restartPerSecond: 2 };
  const durable = await simulateCell(restarting, lib, MODES);
  expect(durable.restarts > 0 && durable.boundOk, `the durable object broke the bound across ${durable.restarts} restarts`);
  const forgetful = { ...lib, node: { ...lib.node, DurableRateLimiterServer: lib.RateLimiterServer } };
  const amnesia = await simulateCell(restarting, forgetful, MODES);
  expect(amnesia.restarts > 0 && !amnesia.boundOk, 'an object that forgot its bucket at each restart kept the bound');

  // 7. The regression check of --small: more than half again the recorded calls fails, the
  // default mode below 0.9 at overload fails; other modes, cells with faults and missing
  // records are told apart.
  const base = { isolates: 4, demand: 10, split: 'even', rttMs: 50, maxTokens: 10, refillSeconds: 0.1, evictPerSecond: 0.01, seed: 1 };
  const was = [
    { ...base, mode: 'shares', efficiency: 0.99, callsPerSecond: 20 },
    { ...base, mode: 'leases', efficiency: 0.95, callsPerSecond: 2 },
    { ...base, mode: 'shares', failShare: 0.05, efficiency: 0.7, callsPerSecond: 20 },
  ];
  const recorded = figuresOf(was);
  const now = (changes) => was.map((c, k) => ({ ...c, ...(changes[k] ?? {}) }));
  expect(regressions(was, recorded).length === 0, 'the recorded figures themselves fail the regression check');
  expect(regressions(now([{ callsPerSecond: 30 }]), recorded).length === 0, 'calls 1.5x the recorded ones failed');
  expect(regressions(now([{ callsPerSecond: 31 }]), recorded).length === 1, 'calls 1.55x the recorded ones passed');
  expect(regressions(now([{ efficiency: 0.89 }]), recorded).length === 1, 'the default mode at 0.89 at overload passed');
  expect(regressions(now([{}, { efficiency: 0.5 }]), recorded).length === 0, 'the floor applied to a mode other than the default');
  expect(regressions(now([{}, {}, { efficiency: 0.5 }]), recorded).length === 0, 'the floor applied to a cell with faults');
  expect(regressions([was[0]], {}).length === 1, 'a cell without recorded figures passed');

  log(`selftest: checker ${agreed}/400 random sequences agree with brute force; ${failures.length} failure(s)`);
  for (const failure of failures) log(`selftest FAILED: ${failure}`);
  return failures;
}
