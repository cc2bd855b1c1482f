#!/usr/bin/env node
// The simulator's command line: runs cells (every combination of the chosen modes, isolate
// counts, demands, splits, round trips and limits), prints a markdown table as they finish,
// and writes the figures as JSON (bench/out/sim.json). See bench/sim/README.md.
//
//   node bench/sim/run.mjs                       the full sweep
//   node bench/sim/run.mjs --modes request,leases --n 1,4 --demand 0.5,2 --rtt 50 --limit 10 --seconds 30 --seed 1
//   node bench/sim/run.mjs --small               a few cells of every mode, for the test suite, checked
//                                                against their recorded figures (recorded.mjs)
//   node bench/sim/run.mjs --small --record      the same, recording their figures instead
//   node bench/sim/run.mjs --selftest            only the checker and event-loop self-test
//   node bench/sim/run.mjs --plan                the cells, their durations and an estimate, no run
//
// Exits 1 when any window admitted more than its bound, a decision came late or threw, or the
// self-test failed.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LIMITS, floorCallsPerSecond } from './floor.mjs';
import { MODES } from './modes.mjs';
import { loadPackage } from './package.mjs';
import { RECORDED_FILE, readRecorded, regressions, writeRecorded } from './recorded.mjs';
import { selftest } from './selftest.mjs';
import { WARM_UP_S, simulateCell } from './simulate.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// The default skew of isolate clocks (ms): up to this minus the cell's longest one-way leg,
// ten times LocalLimits' default margin. Only durations cross between clocks, so an offset
// must cost nothing; the run checks that it does not.
const SKEW_MS = 1000;
const LEASE_SECONDS = 10;
// Events per simulated second of a cell, estimated as for the busiest mode (one call per request:
// the arrival, the call reaching the object, the answer coming back), so that every mode of a
// cell runs the same duration.
const EVENTS_PER_REQUEST = 3;
// For --plan only: events per wall second on one core of the 2-core development machine, shared
// with other work (measured: 290,000 for the request mode at 100,000 requests/s, 220,000 at
// 1,000,000 requests/s; leases and shares make about one event per request when most decisions
// are local, so they take less than the estimate there).
const PLANNED_EVENTS_PER_SECOND = 250_000;

const DEFAULTS = {
  modes: Object.keys(MODES),
  n: [1, 4, 32, 256, 1000],
  demand: [0.1, 0.5, 1, 2, 10, 100],
  rtt: [1, 50, 200],
  limit: ['10', '1000', '100000'],
  split: ['even', 'zipf'],
  seconds: 3 * LEASE_SECONDS, // a few lease periods
  minSeconds: 10, // a cell the budget would cut below this (or below its target, if shorter) is skipped
  budget: 30_000_000, // events per cell: 30 s at 100,000 requests/s, 10 s at 1,000,000
  seed: 1,
  skew: null, // ms; null: SKEW_MS minus the cell's longest one-way leg (and the drift's room)
  jitter: 0.1, // each leg is rtt/2 × (1 ± jitter), uniform
  evict: 0.01, // evictions per isolate per simulated second (a mean life of 100 s)
  // Faults, off by default (README "Faults"):
  fail: 0, // the share of calls that fail without reaching the object
  lose: 0, // the share of calls whose answer is lost after the object applied them
  drift: 0, // the largest clock drift of an isolate, parts per million (the default skew shrinks to leave room)
  service: 0, // the object's service time per call, µs; it serialises calls
  restart: 0, // restarts of the object per simulated second (the durable class, reloading its storage)
  jobs: 1, // worker threads running cells side by side (one per core at most makes sense)
  pkg: join(ROOT, 'pkg'),
  json: join(ROOT, 'bench', 'out', 'sim.json'),
};

// A handful of cells over every mode, for the test suite: each limit, the three round trips,
// both splits, and one cell where isolates come and go every second or so.
const SMALL_CELLS = [
  { n: 1, demand: 0.5, rtt: 1, limit: '10', split: 'even', seconds: 30 },
  { n: 4, demand: 2, rtt: 50, limit: '10', split: 'even', seconds: 30 },
  { n: 32, demand: 10, rtt: 200, limit: '10', split: 'zipf', seconds: 30 },
  { n: 256, demand: 100, rtt: 50, limit: '10', split: 'zipf', seconds: 30 },
  { n: 32, demand: 10, rtt: 200, limit: '10', split: 'even', seconds: 30, evict: 1 },
  { n: 4, demand: 0.5, rtt: 50, limit: '1000', split: 'even', seconds: 30 },
  { n: 32, demand: 2, rtt: 1, limit: '1000', split: 'zipf', seconds: 10 },
  { n: 4, demand: 1, rtt: 200, limit: '100000', split: 'even', seconds: 1 },
  { n: 1000, demand: 1, rtt: 200, limit: '10', split: 'zipf', seconds: 30 },
  { n: 256, demand: 0.1, rtt: 1, limit: '1000', split: 'even', seconds: 30 },
  // Where answers that crossed a term's switch once let a share run a term the object had ended.
  { n: 32, demand: 10, rtt: 50, limit: '1000', split: 'even', seconds: 30 },
  // Every fault at once: failed calls, lost answers, drifting clocks, an object with a service time.
  { n: 32, demand: 10, rtt: 50, limit: '10', split: 'zipf', seconds: 30, fail: 0.05, lose: 0.05, drift: 1000, service: 2000 },
  // The object evicted every 5 s or so: the durable class reloads its leases and shares.
  { n: 32, demand: 10, rtt: 50, limit: '1000', split: 'even', seconds: 30, restart: 0.2 },
];

function usage(message) {
  if (message) console.error(`run.mjs: ${message}`);
  console.error(
    'usage: node bench/sim/run.mjs [--small [--record] | --selftest | --plan] [--modes a,b] [--n 1,4] [--demand 0.5,2]\n' +
      '  [--rtt 50] [--limit 10,1000 | M/S] [--split even,zipf] [--seconds 30] [--min-seconds 10]\n' +
      '  [--budget 30000000] [--seed 1] [--skew ms] [--jitter 0.1] [--evict 0.01] [--pkg dir] [--json file] [--kinds]\n' +
      '  [--fail share] [--lose share] [--drift ppm] [--service us] [--restart per-s] [--jobs 1]',
  );
  process.exit(2);
}

function parseArgs(argv) {
  const options = { ...DEFAULTS, small: false, record: false, selftest: false, plan: false };
  const list = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);
  const numbers = (text, name) =>
    list(text).map((s) => {
      const x = Number(s);
      if (!Number.isFinite(x)) usage(`--${name}: ${s} is not a number`);
      return x;
    });
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${flag} needs a value`));
    switch (flag) {
      case '--small': options.small = true; break;
      case '--record': options.record = true; break;
      case '--selftest': options.selftest = true; break;
      case '--plan': options.plan = true; break;
      case '--modes': options.modes = list(value()); break;
      case '--n': options.n = numbers(value(), 'n'); break;
      case '--demand': options.demand = numbers(value(), 'demand'); break;
      case '--rtt': options.rtt = numbers(value(), 'rtt'); break;
      case '--limit': options.limit = list(value()); break;
      case '--split': options.split = list(value()); break;
      case '--seconds': options.seconds = numbers(value(), 'seconds')[0]; break;
      case '--min-seconds': options.minSeconds = numbers(value(), 'min-seconds')[0]; break;
      case '--budget': options.budget = numbers(value(), 'budget')[0]; break;
      case '--seed': options.seed = numbers(value(), 'seed')[0]; break;
      case '--skew': options.skew = numbers(value(), 'skew')[0]; break;
      case '--jitter': options.jitter = numbers(value(), 'jitter')[0]; break;
      case '--evict': options.evict = numbers(value(), 'evict')[0]; break;
      case '--fail': options.fail = numbers(value(), 'fail')[0]; break;
      case '--lose': options.lose = numbers(value(), 'lose')[0]; break;
      case '--drift': options.drift = numbers(value(), 'drift')[0]; break;
      case '--service': options.service = numbers(value(), 'service')[0]; break;
      case '--restart': options.restart = numbers(value(), 'restart')[0]; break;
      case '--pkg': options.pkg = value(); break;
      case '--kinds': options.kinds = true; break;
      case '--jobs': options.jobs = numbers(value(), 'jobs')[0]; break;
      case '--json': options.json = value(); break;
      case '--help': case '-h': usage(); break;
      default: usage(`unknown option ${flag}`);
    }
  }
  for (const mode of options.modes) if (!(mode in MODES)) usage(`unknown mode ${mode} (known: ${Object.keys(MODES).join(', ')})`);
  for (const split of options.split) if (split !== 'even' && split !== 'zipf') usage(`--split: ${split} is not even or zipf`);
  for (const n of options.n) if (!(Number.isInteger(n) && n >= 1)) usage(`--n: ${n} is not a whole number >= 1`);
  for (const limit of options.limit) limitOf(limit);
  if (!(Number.isInteger(options.jobs) && options.jobs >= 1)) usage(`--jobs: ${options.jobs} is not a whole number >= 1`);
  for (const name of ['fail', 'lose']) if (!(options[name] >= 0 && options[name] <= 1)) usage(`--${name}: ${options[name]} is not a share in [0, 1]`);
  for (const name of ['drift', 'service', 'restart']) if (!(options[name] >= 0)) usage(`--${name}: ${options[name]} is negative`);
  if (options.record && !options.small) usage('--record records the figures of --small only');
  if (options.small && options.json === DEFAULTS.json) options.json = join(ROOT, 'bench', 'out', 'sim-small.json');
  return options;
}

/** A limit by rate ("1000": a preset of the sweep) or as "max_tokens/refill_every_seconds". */
function limitOf(text) {
  if (text in LIMITS) return LIMITS[text];
  const match = /^(\d+)\/([\d.e-]+)$/.exec(text);
  const maxTokens = Number(match?.[1]);
  const refillSeconds = Number(match?.[2]);
  if (!(maxTokens >= 1 && refillSeconds > 0)) usage(`--limit: ${text} is neither ${Object.keys(LIMITS).join(', ')} nor max_tokens/refill_seconds`);
  return { maxTokens, refillSeconds };
}

/** The cells of a run, without modes: one per combination (or the small set). */
function cellsOf(options) {
  const specs = options.small
    ? SMALL_CELLS
    : options.limit.flatMap((limit) =>
        options.rtt.flatMap((rtt) =>
          options.split.flatMap((split) =>
            options.n.flatMap((n) => options.demand.map((demand) => ({ n, demand, rtt, limit, split }))),
          ),
        ),
      );
  const seen = new Set();
  const cells = [];
  for (const spec of specs) {
    // With one isolate, a Zipf split is the even one.
    const split = spec.n === 1 ? 'even' : spec.split;
    const { maxTokens, refillSeconds } = limitOf(spec.limit);
    const evictPerSecond = spec.evict ?? options.evict;
    const target = spec.seconds ?? options.seconds;
    const fail = spec.fail ?? options.fail;
    const lose = spec.lose ?? options.lose;
    const drift = spec.drift ?? options.drift;
    const service = spec.service ?? options.service;
    const restart = spec.restart ?? options.restart;
    // A drifting clock moves up to drift × (the run and its tail) away from its start: the
    // default skew shrinks by as much, so the offsets stay within SKEW_MS.
    const driftRoomMs = drift * 1e-6 * (target + 60) * 1000;
    const skewMs = options.skew ?? Math.max(0, SKEW_MS - (spec.rtt / 2) * (1 + options.jitter) - driftRoomMs);
    const cell = {
      isolates: spec.n,
      demand: spec.demand,
      split,
      rttMs: spec.rtt,
      maxTokens,
      refillSeconds,
      seed: options.seed,
      skewMs,
      jitter: options.jitter,
      evictPerSecond,
      // Only when on: a cell without faults is the same cell (and the same JSON) as before.
      ...(fail > 0 ? { failShare: fail } : {}),
      ...(lose > 0 ? { loseShare: lose } : {}),
      ...(drift > 0 ? { driftPpm: drift } : {}),
      ...(service > 0 ? { serviceUs: service } : {}),
      ...(restart > 0 ? { restartPerSecond: restart } : {}),
    };
    const id = JSON.stringify(cell);
    if (options.kinds) cell.countKinds = true;
    if (seen.has(id)) continue;
    seen.add(id);
    // The duration: the target, or what the event budget allows, or skipped when that is below
    // the minimum (or below the target, when the target is shorter than the minimum).
    const requestsPerSecond = spec.demand / refillSeconds;
    const eventsPerSecond = requestsPerSecond * EVENTS_PER_REQUEST;
    const affordable = options.budget / eventsPerSecond;
    const seconds = Math.min(target, roundDown(affordable));
    cells.push({
      ...cell,
      target,
      seconds,
      skip: seconds < Math.min(target, options.minSeconds) ? `skipped: too many events (${fmtCount(eventsPerSecond)} per simulated s, budget ${fmtCount(options.budget)})` : null,
      estimatedEvents: eventsPerSecond * seconds,
    });
  }
  return cells;
}

/** Rounds a duration down to 2 significant figures, so durations read well. */
function roundDown(seconds) {
  if (!(seconds > 0)) return 0;
  const scale = 10 ** (Math.floor(Math.log10(seconds)) - 1);
  return Number((Math.floor(seconds / scale) * scale).toPrecision(2));
}

const fmtCount = (x) => (x >= 1e6 ? `${+(x / 1e6).toPrecision(3)}M` : x >= 1e3 ? `${+(x / 1e3).toPrecision(3)}k` : `${+x.toPrecision(3)}`);
const fmt = (x, digits = 3) => (x === null || x === undefined ? '–' : `${+x.toPrecision(digits)}`);
const pct = (x) => (x === null ? '–' : `${+(x * 100).toPrecision(3)}%`);

const COLUMNS = [
  'mode', 'N', 'demand', 'split', 'rtt ms', 'limit', 'sim s', 'admitted', 'exact', 'efficiency',
  'max adm/bound', 'calls/s', 'F', 'calls / F', 'waited', `calls/s from ${WARM_UP_S} s`, `waited from ${WARM_UP_S} s`,
  'p50 ms', 'p99 ms', 'wall s', 'bound',
];

function limitName(cell) {
  return `${fmt(1 / cell.refillSeconds)}/s (${cell.maxTokens}, ${cell.refillSeconds})`;
}

function row(cell, result) {
  const head = [cell.mode, cell.isolates, cell.demand, cell.split, cell.rttMs, limitName(cell)];
  if (result === null) return [...head, '–', cell.skip, '', '', '', '', fmt(floorCallsPerSecond(cell)), '', '', '', '', '', '', '', ''];
  const seconds = cell.seconds < cell.target ? `${cell.seconds}*` : `${cell.seconds}`;
  let bound = result.boundOk
    ? 'ok'
    : `EXCEEDED by ${result.maxExcess}: ${result.violation.tokens} tokens in [${fmt(result.violation.start / 1e9, 6)} s, ` +
      `${fmt(result.violation.end / 1e9, 6)} s], bound ${result.violation.bound} (seen online at ${fmt(result.onlineViolationAtNs / 1e9)} s)`;
  if (result.lateDecisions > 0) bound += `; ${result.lateDecisions} late decisions`;
  if (result.undecided > 0) bound += `; ${result.undecided} lost with evicted isolates`;
  const faults = [
    cell.failShare > 0 && `${result.failedCalls} calls failed (${cell.failShare})`,
    cell.loseShare > 0 && `${result.lostAnswers} answers lost (${cell.loseShare})`,
    result.faultDecisions > 0 && `${result.faultDecisions} decisions rejected`,
    cell.driftPpm > 0 && `drift ±${cell.driftPpm} ppm`,
    cell.serviceUs > 0 && `service ${cell.serviceUs} µs/call`,
    cell.restartPerSecond > 0 && `${result.restarts} object restarts (${cell.restartPerSecond}/s)`,
  ].filter(Boolean);
  if (faults.length > 0) bound += `; faults: ${faults.join(', ')}`;
  return [
    ...head,
    seconds,
    result.admitted,
    result.exactAdmitted,
    fmt(result.efficiency, 4),
    fmt(result.maxRatio, 4),
    fmt(result.callsPerSecond),
    fmt(result.floor),
    fmt(result.callsOverFloor),
    pct(result.waitedShare),
    result.warmCallsPerSecond === null ? '' : fmt(result.warmCallsPerSecond),
    result.warmWaitedShare === null ? '' : pct(result.warmWaitedShare),
    fmt(result.latencyP50Ms),
    fmt(result.latencyP99Ms),
    fmt(result.wallSeconds, 2),
    bound,
  ];
}

const line = (cells) => `| ${cells.join(' | ')} |`;

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (options.plan) return plan(options);
  const lib = await loadPackage(options.pkg);
  const started = performance.now();

  if (options.selftest || options.small) {
    const failures = await selftest(lib);
    if (failures.length > 0) process.exit(1);
    if (options.selftest) return;
  }

  const cells = cellsOf(options);
  console.log(
    `sim: ${cells.length} cells × ${options.modes.length} modes (${options.modes.join(', ')}), seed ${options.seed}, ` +
      `package ${relative(process.cwd(), lib.dir) || '.'} ${lib.version} (wasm ${lib.wasm}), evictions ${options.evict}/isolate/s, jitter ±${options.jitter * 100}%` +
      (options.fail > 0 || options.lose > 0 || options.drift > 0 || options.service > 0 || options.restart > 0
        ? `; faults: ${options.fail} of calls fail, ${options.lose} of answers lost, drift up to ${options.drift} ppm, service ${options.service} µs per call, ${options.restart} object restarts/s`
        : ''),
  );
  console.log();
  console.log(line(COLUMNS));
  console.log(line(COLUMNS.map(() => '---')));
  // Every (cell, mode) in the order of the table; run here one after the other, or by
  // --jobs worker threads, the rows still printed in this order.
  const items = cells.flatMap((cell) => options.modes.map((mode) => ({ cell, full: { ...cell, mode } })));
  const results = [];
  let failed = 0;
  let checked = 0;
  const record = ({ cell, full }, result) => {
    if (cell.skip) {
      console.log(line(row(full, null)));
      results.push({ ...full, skipped: cell.skip, floor: floorCallsPerSecond(full) });
      return;
    }
    result.targetSeconds = cell.target;
    result.floor = floorCallsPerSecond(full);
    result.callsOverFloor = result.callsPerSecond / result.floor;
    checked += 1;
    // A decision that rejected with an injected fault passes the fault on: not a failure.
    const threw = result.failed - result.faultDecisions;
    if (!result.boundOk || result.lateDecisions > 0 || threw > 0) failed += 1;
    if (threw > 0) console.log(`sim: ${result.mode} threw on ${threw} request(s): ${result.firstError}`);
    results.push(result);
    console.log(line(row(full, result)));
    if (result.callsByKind !== undefined) {
      const kinds = Object.entries(result.callsByKind).map(([kind, perSecond]) => `${kind} ${fmt(perSecond)}`);
      console.log(`  calls/s by kind: ${kinds.join('; ') || 'none'}`);
    }
  };
  if (options.jobs > 1) {
    // Rows as soon as every row before them is in.
    const done = new Array(items.length).fill(null);
    let printed = 0;
    const flush = () => {
      while (printed < items.length && (items[printed].cell.skip || done[printed] !== null)) {
        record(items[printed], done[printed]);
        printed += 1;
      }
    };
    flush();
    await runInWorkers(items, options, (index, result) => {
      done[index] = result;
      flush();
    });
  } else {
    for (const item of items) {
      if (item.cell.skip) {
        record(item, null);
        continue;
      }
      const t0 = performance.now();
      const result = await simulateCell(item.full, lib);
      result.wallSeconds = (performance.now() - t0) / 1000;
      record(item, result);
    }
  }

  const shorter = cells.filter((c) => !c.skip && c.seconds < c.target);
  console.log();
  if (shorter.length > 0) {
    console.log(`* ran shorter than the target (event budget ${fmtCount(options.budget)} per cell):`);
    for (const c of shorter) {
      console.log(`  N ${c.isolates}, demand ${c.demand}, ${c.split}, rtt ${c.rttMs} ms, ${limitName(c)}: ${c.seconds} s of ${c.target} s`);
    }
  }
  const skipped = cells.filter((c) => c.skip).length;
  if (skipped > 0) console.log(`${skipped} cells skipped (fewer than ${options.minSeconds} s within the event budget of ${fmtCount(options.budget)})`);
  const wall = (performance.now() - started) / 1000;

  mkdirSync(dirname(options.json), { recursive: true });
  const { pkg: _pkg, json: _json, record: _record, ...recorded } = options;
  writeFileSync(
    options.json,
    JSON.stringify(
      {
        about: 'bench/sim: N isolates sharing one Durable Object bucket, discrete-event simulation on the real package',
        node: process.version,
        machine: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`,
        package: lib.version,
        wasm: lib.wasm,
        options: recorded,
        wallSeconds: wall,
        cells: results,
      },
      null,
      1,
    ),
  );
  console.log(`wrote ${relative(process.cwd(), options.json)} (${fmt(wall, 3)} s wall)`);
  if (failed > 0) console.log(`sim: ${failed} cell(s) FAILED: a window above its bound, a late decision, or a decision that threw`);
  if (options.small && options.record) {
    writeRecorded(results);
    console.log(`sim: recorded the figures of ${results.length} cells in ${relative(process.cwd(), RECORDED_FILE)}`);
  } else if (options.small) {
    const worse = regressions(results, readRecorded());
    for (const line of worse) console.log(`sim: regression: ${line}`);
    if (worse.length > 0) failed += 1;
  }
  console.log(`sim: ${checked} cells checked`);
  if (failed > 0) process.exit(1);
}

/**
 * Runs the items that are not skipped in `options.jobs` worker threads (worker.mjs), each one
 * cell at a time, calling `onResult(index, result)` as each finishes.
 */
async function runInWorkers(items, options, onResult) {
  const { Worker } = await import('node:worker_threads');
  const todo = items.map((item, index) => ({ ...item, index })).filter((item) => !item.cell.skip);
  let next = 0;
  const workerCount = Math.min(options.jobs, todo.length);
  await Promise.all(
    Array.from({ length: workerCount }, () => {
      const worker = new Worker(new URL('./worker.mjs', import.meta.url), { workerData: { pkg: options.pkg } });
      return new Promise((resolve, reject) => {
        const send = () => {
          if (next >= todo.length) {
            worker.terminate().then(resolve, reject);
            return;
          }
          const { index, full } = todo[next++];
          worker.postMessage({ index, cell: full });
        };
        worker.on('message', (message) => {
          if (message.ready) return send();
          if (message.error) {
            worker.terminate();
            reject(new Error(`worker: ${message.error}`));
            return;
          }
          onResult(message.index, message.result);
          send();
        });
        worker.on('error', reject);
      });
    }),
  );
}

/** The cells and an estimate of the wall time, without running anything. */
function plan(options) {
  const cells = cellsOf(options);
  let events = 0;
  let shorter = 0;
  let skipped = 0;
  for (const c of cells) {
    if (c.skip) {
      skipped += 1;
      console.log(`skip  N ${c.isolates} demand ${c.demand} ${c.split} rtt ${c.rttMs} ${limitName(c)}: ${c.skip}`);
      continue;
    }
    if (c.seconds < c.target) {
      shorter += 1;
      console.log(`short N ${c.isolates} demand ${c.demand} ${c.split} rtt ${c.rttMs} ${limitName(c)}: ${c.seconds} s`);
    }
    events += c.estimatedEvents * options.modes.length;
  }
  console.log(
    `${cells.length} cells × ${options.modes.length} modes: ${cells.length - skipped} run (${shorter} shorter than ${options.seconds} s), ` +
      `${skipped} skipped; about ${fmtCount(events)} events, ~${Math.round(events / PLANNED_EVENTS_PER_SECOND / 60)} min at ` +
      `${fmtCount(PLANNED_EVENTS_PER_SECOND)} events/s on one core` +
      (options.jobs > 1 ? `, ~${Math.round(events / PLANNED_EVENTS_PER_SECOND / 60 / options.jobs)} min with --jobs ${options.jobs} on as many free cores` : '') +
      ' (leases cells make fewer calls, so usually less)',
  );
}

await main();
