// One cell of the simulation: N Worker isolates sharing one Durable Object's bucket, driven by
// a discrete-event loop over the real package (the wasm engine behind RateLimiterServer, and
// LocalLimits in the isolates).
//
// Time is true time in whole nanoseconds from the start of the cell (a JS number: exact up to
// 2^53 ns, 104 days). The object's clock is true time; each isolate's clock is true time plus a
// constant skew. Nothing reads the wall clock, and all randomness comes from streams of one
// seed (random.mjs), so a seed reproduces a cell exactly.
import { BoundMonitor, checkBound, maxRatio } from './check.mjs';
import { EventQueue } from './heap.mjs';
import { MODES } from './modes.mjs';
import { exponential, stream } from './random.mjs';

const NS_PER_MS = 1e6;
const NS_PER_S = 1e9;
// The object reads (EPOCH_NS + true time) in ms. A small epoch keeps every whole nanosecond
// exact in a double of ms; at today's epoch a double of ms resolves only about 0.24 µs.
const EPOCH_NS = 1e12;
// The bound is also checked online at the end of every simulated second.
const TICK_NS = NS_PER_S;
// After the last arrival, calls in flight get at most this much simulated time to finish.
const TAIL_NS = 60 * NS_PER_S;
const ZIPF_EXPONENT = 1.1;
// Every isolate starts at 0 s, so the first seconds hold their first calls, first leases and
// first asks for shares; the figures from this second on leave that out (cells of at least
// twice as long).
export const WARM_UP_S = 5;
// The object's methods an isolate's stub offers, and those of them whose allowed answer takes
// the calling request's cost (a new RPC method of the object is one more name here).
const STUB_METHODS = ['limit', 'limitLeased', 'settle', 'refund'];
const TAKES_THE_COST = new Set(['limit', 'limitLeased']);

// The bucket and object names the isolates use (the middleware's default policy name).
const KEY = 'default';
const SCOPE = 'client';

/**
 * What kind of call the object answered, for --kinds: the method; for limitLeased whether it
 * decided a cost (`cost` or `renewal`, cost 0), what it asked (`renew` a share, `ask` for one,
 * else `lease`), whether it was allowed, and what it got (`share`, `record`: an ask kept on record
 * instead of a share, `tokens`: a plain lease, `nothing`); `threw` when the object threw.
 */
function callKind(method, args, outcome) {
  if (method !== 'limitLeased') return method;
  const request = args[3] ?? {};
  const asked = request.renew !== undefined ? 'renew' : request.rate !== undefined ? 'ask' : 'lease';
  const decision = outcome.value;
  if (decision === undefined) return `limitLeased ${asked}: threw`;
  const lease = decision.lease;
  const got =
    lease === null || lease === undefined
      ? 'nothing'
      : lease.share !== undefined
        ? 'share'
        : lease.tokens > 0
          ? 'tokens'
          : 'record';
  return `limitLeased ${args[1] === 0 ? 'renewal' : 'cost'} ${asked}: ${decision.allowed ? 'allowed' : 'denied'}, ${got}`;
}

/** The error of an injected fault (a failed call, or an answer lost after the object applied it). */
export class InjectedFault extends Error {
  name = 'InjectedFault';
}

/** The engine's reading of a Date.now() value as nanoseconds (Instant::from_millis). */
export function engineNanos(ms) {
  const whole = Math.trunc(ms);
  return whole * NS_PER_MS + Math.trunc((ms - whole) * NS_PER_MS);
}

/** The Date.now() value at which the engine reads exactly `EPOCH_NS + t` nanoseconds. */
export function objectMs(t) {
  // Aim at the middle of the nanosecond, so rounding in the conversion cannot fall below it.
  const ms = (EPOCH_NS + t + 0.5) / NS_PER_MS;
  if (engineNanos(ms) !== EPOCH_NS + t) throw new Error(`object clock: ${t} ns is not exact as ${ms} ms`);
  return ms;
}

// Date.now() during an object call: the shim reads it once per call.
let objectNow = 0;
const readObjectClock = () => objectNow;

/** Calls `fn` with Date.now() reading `ms`, as the object's isolate would at that moment. */
export function atObjectClock(ms, fn) {
  const realNow = Date.now;
  objectNow = ms;
  Date.now = readObjectClock;
  try {
    return fn();
  } finally {
    Date.now = realNow;
  }
}

/** A copy of plain data, as RPC's structured clone makes (the callee never shares the caller's objects). */
function copyPlain(value) {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyPlain);
  const copy = {};
  for (const name of Object.keys(value)) copy[name] = copyPlain(value[name]);
  return copy;
}

// The loop runs events until one that may have set off promise reactions (an answer, an
// arrival, a sleep, an eviction: `drain`), then waits until every microtask queued so far, and
// every one those queue, has run before it moves simulated time: it queues a sentinel microtask
// that queues the loop's next step with process.nextTick, and Node runs nextTick callbacks only
// once V8's microtask queue is empty (its tick loop alternates between emptying the nextTick
// queue and emptying the microtask queue). That is what a macrotask turn (setImmediate) also
// guarantees, at a fraction of the cost: no turn of the event loop, no promise per event.
// Every so many drains the step waits for a real macrotask turn instead, so that Node's event
// loop is not starved for a whole cell (nothing in the model depends on it).
const DRAINS_PER_MACROTASK = 4096;

/** Per-request records in growable typed arrays. */
class Requests {
  length = 0;
  constructor(capacity) {
    this.#allocate(Math.max(1024, capacity));
  }
  #allocate(capacity) {
    const keep = (Type, old, fill) => {
      const array = new Type(capacity);
      if (fill !== undefined) array.fill(fill);
      if (old) array.set(old.subarray(0, this.length));
      return array;
    };
    this.arrival = keep(Float64Array, this.arrival); // true time, ns
    this.decided = keep(Float64Array, this.decided, -1); // true time of the decision, ns
    this.answerAt = keep(Float64Array, this.answerAt, -1); // arrival of its call's answer, ns
    this.outcome = keep(Uint8Array, this.outcome); // PENDING, ALLOWED, DENIED, FAILED
    this.takenAt = keep(Float64Array, this.takenAt, -1); // when its token was taken, ns
  }
  add(arrival) {
    if (this.length === this.arrival.length) this.#allocate(this.length * 2);
    this.arrival[this.length] = arrival;
    return this.length++;
  }
}
const PENDING = 0;
const ALLOWED = 1;
const DENIED = 2;
const FAILED = 3;

/** Per-slot request weights: even, or Zipf (rank k gets k^-1.1). Cumulative, ending at 1. */
function cumulativeWeights(count, split) {
  const weights = Array.from({ length: count }, (_, k) => (split === 'zipf' ? (k + 1) ** -ZIPF_EXPONENT : 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative = new Float64Array(count);
  let sum = 0;
  for (let k = 0; k < count; k++) cumulative[k] = sum += weights[k] / total;
  cumulative[count - 1] = 1;
  return cumulative;
}

// The last cell's baseline (see simulateCell): its package, parameters, arrivals and result.
let lastBaseline = null;
function sameTimes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/**
 * Runs one cell and returns its figures. `cell`: { mode, isolates, demand, split, rttMs,
 * maxTokens, refillSeconds, seconds, seed, skewMs, jitter, evictPerSecond } and, optionally, the
 * faults { failShare, loseShare, driftPpm, serviceUs, restartPerSecond }. `lib`: the loaded package
 * (package.mjs). `modes`: the mode table (modes.mjs by default).
 */
export async function simulateCell(cell, lib, modes = MODES) {
  const { mode, isolates, demand, split, rttMs, maxTokens, refillSeconds, seconds, seed } = cell;
  const { skewMs, jitter, evictPerSecond } = cell;
  // Faults, all off by default (README "Faults"): the share of calls that fail without reaching
  // the object, the share whose answer is lost after the object applied them, the largest clock
  // drift of an isolate (parts per million), and the object's service time per call (µs).
  const failShare = cell.failShare ?? 0;
  const loseShare = cell.loseShare ?? 0;
  const driftPpm = cell.driftPpm ?? 0;
  const serviceNs = Math.round((cell.serviceUs ?? 0) * 1000);
  // Restarts of the object per simulated second: the object is then the durable class, and a
  // restart builds a new one on the same state (`ctx`), which reloads what the last one saved.
  const restartPerSecond = cell.restartPerSecond ?? 0;
  // Counts the object's calls by kind (callKind) when asked: a diagnosis, off by default.
  const callsByKind = cell.countKinds === true ? new Map() : null;
  if (!(mode in modes)) throw new Error(`unknown mode ${mode} (known: ${Object.keys(modes).join(', ')})`);
  const interval = Math.max(1, Math.ceil(refillSeconds * NS_PER_S)); // as the engine rounds it
  const policy = { max_tokens: maxTokens, refill_every_seconds: refillSeconds };
  const endNs = Math.round(seconds * NS_PER_S);
  // What the run costs once every isolate has started: the same figures from WARM_UP_S on.
  const warmFromNs = seconds >= 2 * WARM_UP_S ? WARM_UP_S * NS_PER_S : null;
  const requestsPerSecond = demand / refillSeconds;
  const meanGapNs = NS_PER_S / requestsPerSecond;
  const halfRttNs = (rttMs * NS_PER_MS) / 2;

  // The streams depend on the cell but not on its mode or duration: every mode sees the same
  // arrivals, and a shorter run's arrivals are the start of a longer one's.
  const name = `${isolates}|${demand}|${split}|${rttMs}|${maxTokens}|${refillSeconds}|${skewMs}|${jitter}|${evictPerSecond}`;
  const arrivalRandom = stream(seed, `${name}|arrivals`);
  const routingRandom = stream(seed, `${name}|routing`);
  const skewRandom = stream(seed, `${name}|skew`);
  const evictionRandom = stream(seed, `${name}|evictions`);
  const networkRandom = stream(seed, `${name}|network`);
  // Faults draw from streams of their own, so a cell without faults sees the same run as before.
  const faultRandom = stream(seed, `${name}|faults`);
  const driftRandom = stream(seed, `${name}|drift`);
  const restartRandom = stream(seed, `${name}|restarts`);

  const queue = new EventQueue();
  let now = 0;
  const at = (t, fire, drain) => queue.push(t, fire, drain);

  // The object's state, kept across restarts: in Node the durable class keeps its snapshots
  // per ctx object, as workerd keeps a Durable Object's storage across evictions.
  const objectState = {};
  const newServer = () =>
    restartPerSecond > 0 ? new lib.node.DurableRateLimiterServer(objectState, {}) : new lib.RateLimiterServer({}, {});
  let server = newServer();
  const monitor = new BoundMonitor(maxTokens, interval);
  const requests = new Requests(Math.ceil(requestsPerSecond * seconds * 1.1));
  const counts = { objectCalls: 0, warmCalls: 0, droppedAnswers: 0, evictions: 0, backgroundErrors: 0, isolates: 0, failedCalls: 0, lostAnswers: 0, faultDecisions: 0, restarts: 0 };
  // The object serialises calls: each starts when it arrives or when the previous one ends.
  let objectBusyUntil = 0;
  let onlineViolationAtNs = null;
  // The first error a decision threw: a bug of the mode (the cell fails).
  let firstError = null;
  // The request whose decide() is running its synchronous part: the calls it makes are its own.
  let attributedRequest = -1;

  /** One leg of a call: half the round trip, with seeded jitter. */
  const leg = () => Math.max(1, Math.round(halfRttNs * (1 + jitter * (2 * networkRandom() - 1))));

  function takeToken(index) {
    monitor.add(now);
    if (index >= 0) requests.takenAt[index] = now;
  }

  function applyAtObject(method, args, request) {
    counts.objectCalls += 1;
    if (warmFromNs !== null && now >= warmFromNs) counts.warmCalls += 1;
    let outcome;
    atObjectClock(objectMs(now), () => {
      try {
        outcome = { value: server[method](...args) };
      } catch (error) {
        outcome = { error };
      }
    });
    if (callsByKind !== null) {
      const kind = callKind(method, args, outcome);
      callsByKind.set(kind, (callsByKind.get(kind) ?? 0) + 1);
    }
    // A request's own call that the object allowed: its token is taken now.
    if (request >= 0 && TAKES_THE_COST.has(method) && outcome.value?.allowed === true) {
      const cost = args[1] ?? 1;
      if (cost !== 1) throw new Error(`simulated requests cost 1, a call asked for ${cost}`);
      takeToken(request);
    }
    return outcome;
  }

  function makeStub(isolate) {
    const call = (method, args) => {
      // Only a call that decides a cost is a request's own: one of cost 0 (a renewal) or a
      // settle sent beside the call is no request's, whichever request started it.
      const request = TAKES_THE_COST.has(method) && args[1] !== 0 ? attributedRequest : -1;
      const sent = copyPlain(args);
      return new Promise((resolve, reject) => {
        const apply = () => {
          let outcome;
          if (failShare > 0 && faultRandom() < failShare) {
            counts.failedCalls += 1;
            outcome = { error: new InjectedFault(`${method}: the call failed (injected)`) };
          } else {
            outcome = applyAtObject(method, sent, request);
            if (loseShare > 0 && faultRandom() < loseShare) {
              counts.lostAnswers += 1;
              outcome = { error: new InjectedFault(`${method}: the answer was lost (injected)`) };
            }
          }
          const answerAt = now + leg();
          if (request >= 0) requests.answerAt[request] = answerAt;
          at(
            answerAt,
            () => {
              // An evicted isolate's answers reach no one.
              if (!isolate.alive) {
                counts.droppedAnswers += 1;
                return;
              }
              if ('error' in outcome) reject(outcome.error);
              else resolve(outcome.value);
            },
            true,
          );
        };
        at(
          now + leg(),
          serviceNs > 0
            ? () => {
                // Queued behind the calls before it; applied when its service ends.
                objectBusyUntil = Math.max(now, objectBusyUntil) + serviceNs;
                at(objectBusyUntil, apply, false);
              }
            : apply,
          false,
        );
      });
    };
    return Object.fromEntries(STUB_METHODS.map((method) => [method, (...args) => call(method, args)]));
  }

  function newIsolate() {
    const isolate = { alive: true, skewNs: Math.round((2 * skewRandom() - 1) * skewMs * NS_PER_MS), bornNs: now, background: new Set() };
    counts.isolates += 1;
    // A drifting clock runs (1 + rate) as fast as true time, rate within ±driftPpm.
    const driftRate = driftPpm > 0 ? (2 * driftRandom() - 1) * driftPpm * 1e-6 : 0;
    const clock =
      driftRate === 0
        ? () => (EPOCH_NS + now + isolate.skewNs) / NS_PER_MS
        : () => (EPOCH_NS + now + isolate.skewNs + Math.round((now - isolate.bornNs) * driftRate)) / NS_PER_MS;
    const waitUntil = (promise) => {
      const kept = Promise.resolve(promise).then(
        () => isolate.background.delete(kept),
        () => {
          if (isolate.alive) counts.backgroundErrors += 1;
          isolate.background.delete(kept);
        },
      );
      isolate.background.add(kept);
    };
    const sleep = (ms) =>
      new Promise((resolve) => {
        at(now + Math.max(0, Math.round(ms * NS_PER_MS)), () => isolate.alive && resolve(), true);
      });
    const stub = makeStub(isolate);
    isolate.decide = modes[mode].build({ stub, clock, waitUntil, sleep, key: KEY, scope: SCOPE, policy, lib });
    return isolate;
  }

  const slots = Array.from({ length: isolates }, () => newIsolate());
  const cumulative = cumulativeWeights(isolates, split);
  const pickSlot = () => {
    const u = routingRandom();
    let lo = 0;
    let hi = isolates - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid] > u) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };

  function decided(index, decision) {
    requests.decided[index] = now;
    if (decision?.allowed === true) {
      requests.outcome[index] = ALLOWED;
      // Decided in the isolate: the token is spent at this moment.
      if (requests.takenAt[index] < 0) takeToken(index);
    } else {
      requests.outcome[index] = DENIED;
    }
  }

  function failed(index, error) {
    // A decision that rejected with an injected fault is the mode passing the fault on, not its bug.
    if (error instanceof InjectedFault) counts.faultDecisions += 1;
    else firstError ??= `${error?.name}: ${error?.message}`;
    requests.decided[index] = now;
    requests.outcome[index] = FAILED;
  }

  function arrive() {
    const index = requests.add(now);
    const isolate = slots[pickSlot()];
    let promise;
    attributedRequest = index;
    try {
      promise = isolate.decide();
    } catch (error) {
      promise = Promise.reject(error);
    } finally {
      attributedRequest = -1;
    }
    Promise.resolve(promise).then(
      (decision) => decided(index, decision),
      (error) => failed(index, error),
    );
    const next = now + Math.round(exponential(arrivalRandom, meanGapNs));
    if (next < endNs) at(next, arrive, true);
  }

  function evict() {
    const slot = Math.floor(evictionRandom() * isolates);
    slots[slot].alive = false;
    slots[slot] = newIsolate();
    counts.evictions += 1;
    scheduleEviction();
  }
  function scheduleEviction() {
    if (!(evictPerSecond > 0)) return;
    const next = now + Math.round(exponential(evictionRandom, NS_PER_S / (evictPerSecond * isolates)));
    if (next < endNs) at(next, evict, true); // a mode may start work when an isolate starts
  }

  // Between two calls the object is evicted and starts again: memory is gone, storage stays.
  function restart() {
    server = newServer();
    counts.restarts += 1;
    scheduleRestart();
  }
  function scheduleRestart() {
    if (!(restartPerSecond > 0)) return;
    const next = now + Math.round(exponential(restartRandom, NS_PER_S / restartPerSecond));
    if (next < endNs) at(next, restart, false);
  }

  function tick() {
    const found = monitor.flush();
    if (found !== null && onlineViolationAtNs === null) onlineViolationAtNs = now;
    if (now + TICK_NS <= endNs) at(now + TICK_NS, tick, false);
  }

  at(Math.round(exponential(arrivalRandom, meanGapNs)), arrive, true);
  scheduleEviction();
  scheduleRestart();
  at(TICK_NS, tick, false);

  let events = 0;
  await new Promise((finish, fail) => {
    let drains = 0;
    const scheduleStep = () => process.nextTick(step);
    // The sentinel is a reaction to a settled promise: a microtask like queueMicrotask's, without
    // the async resource Node makes for each of those.
    const settled = Promise.resolve();
    function step() {
      try {
        while (queue.size > 0) {
          queue.pop();
          if (queue.t > endNs + TAIL_NS) break;
          now = queue.t;
          events += 1;
          const { fire, drain } = queue;
          queue.fire = null;
          fire();
          if (drain) {
            if (++drains % DRAINS_PER_MACROTASK === 0) setImmediate(step);
            else settled.then(scheduleStep);
            return;
          }
        }
      } catch (error) {
        fail(error);
        return;
      }
      // Resolved from a nextTick or an immediate: every chain of the last event has run.
      finish();
    }
    setImmediate(step);
  });
  if (monitor.flush() !== null && onlineViolationAtNs === null) onlineViolationAtNs = now;

  // The verdict: the exact offline check over every window, which the online one must match.
  const tokens = monitor.log.view();
  const exact = checkBound(tokens, maxTokens, interval);
  if (exact.maxExcess !== monitor.maxExcess) {
    throw new Error(`checkers disagree: offline excess ${exact.maxExcess}, online ${monitor.maxExcess}`);
  }
  const span = tokens.length > 0 ? tokens[tokens.length - 1] - tokens[0] : 0;
  const ratio = maxRatio(tokens, maxTokens, interval, span);
  // The gauge samples window lengths; a window above its bound is the exact worst case.
  if (exact.violation !== null && exact.violation.tokens / exact.violation.bound > ratio.ratio) {
    ratio.ratio = exact.violation.tokens / exact.violation.bound;
    ratio.where = { start: exact.violation.start, durationNs: exact.violation.end - exact.violation.start, tokens: exact.violation.tokens, bound: exact.violation.bound };
  }

  // The baseline: the same arrivals, each one limit() at its arrival time on a fresh engine.
  // Every mode of a cell sees the same arrivals: the last cell's baseline is kept, and used
  // again only when the arrivals are the very same ones (their count and every time).
  let exactAdmitted = 0;
  const baselineKey = `${seed}|${name}|${endNs}|${maxTokens}|${refillSeconds}`;
  const arrivals = requests.arrival.subarray(0, requests.length);
  if (lastBaseline?.lib === lib && lastBaseline.key === baselineKey && sameTimes(lastBaseline.arrivals, arrivals)) {
    exactAdmitted = lastBaseline.exactAdmitted;
  } else {
    const alone = new lib.RateLimiterServer({}, {});
    for (let i = 0; i < requests.length; i++) {
      const allowed = atObjectClock(objectMs(requests.arrival[i]), () => alone.limit(KEY, 1, policy).allowed);
      if (allowed) exactAdmitted += 1;
    }
    lastBaseline = { lib, key: baselineKey, arrivals: arrivals.slice(), exactAdmitted };
  }

  let admitted = 0;
  let denied = 0;
  let failures = 0;
  let undecided = 0;
  let waited = 0;
  let warmDecided = 0;
  let warmWaited = 0;
  let lateDecisions = 0;
  const latencies = new Float64Array(requests.length);
  let decidedCount = 0;
  for (let i = 0; i < requests.length; i++) {
    const outcome = requests.outcome[i];
    if (outcome === PENDING) {
      undecided += 1;
      continue;
    }
    if (outcome === ALLOWED) admitted += 1;
    else if (outcome === DENIED) denied += 1;
    else failures += 1;
    const latency = requests.decided[i] - requests.arrival[i];
    latencies[decidedCount++] = latency / NS_PER_MS;
    if (warmFromNs !== null && requests.arrival[i] >= warmFromNs) {
      warmDecided += 1;
      if (latency > 0) warmWaited += 1;
    }
    if (latency > 0) {
      waited += 1;
      // Decided after the answer it waited for arrived: a chain did not finish in its turn.
      if (requests.answerAt[i] >= 0 && requests.decided[i] !== requests.answerAt[i]) lateDecisions += 1;
    }
  }
  const sortedLatencies = latencies.subarray(0, decidedCount).sort();

  return {
    mode,
    isolates,
    demand,
    split,
    rttMs,
    maxTokens,
    refillSeconds,
    limitPerSecond: 1 / refillSeconds,
    seconds,
    seed,
    skewMs,
    jitter,
    evictPerSecond,
    failShare,
    loseShare,
    driftPpm,
    serviceUs: serviceNs / 1000,
    ...(restartPerSecond > 0 ? { restartPerSecond, restarts: counts.restarts } : {}),
    intervalNs: interval,
    requests: requests.length,
    admitted,
    denied,
    failed: failures,
    firstError,
    undecided,
    tokensTaken: tokens.length,
    exactAdmitted,
    efficiency: exactAdmitted > 0 ? admitted / exactAdmitted : null,
    boundOk: exact.ok,
    maxExcess: exact.maxExcess === -Infinity ? null : exact.maxExcess,
    violation: exact.violation,
    onlineViolationAtNs,
    maxRatio: ratio.ratio,
    maxRatioWindow: ratio.where,
    objectCalls: counts.objectCalls,
    callsPerSecond: counts.objectCalls / seconds,
    ...(callsByKind !== null ? { callsByKind: Object.fromEntries([...callsByKind].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, n / seconds])) } : {}),
    callsPerRequest: requests.length > 0 ? counts.objectCalls / requests.length : null,
    waitedShare: decidedCount > 0 ? waited / decidedCount : null,
    warmCallsPerSecond: warmFromNs !== null ? counts.warmCalls / (seconds - WARM_UP_S) : null,
    warmWaitedShare: warmFromNs !== null && warmDecided > 0 ? warmWaited / warmDecided : null,
    latencyP50Ms: percentile(sortedLatencies, 0.5),
    latencyP99Ms: percentile(sortedLatencies, 0.99),
    lateDecisions,
    droppedAnswers: counts.droppedAnswers,
    evictions: counts.evictions,
    isolatesCreated: counts.isolates,
    backgroundErrors: counts.backgroundErrors,
    failedCalls: counts.failedCalls,
    lostAnswers: counts.lostAnswers,
    faultDecisions: counts.faultDecisions,
    events,
    endNs: now,
  };
}
