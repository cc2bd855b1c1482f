// The small configuration's regression check. `--small` runs a few cells of every mode; their
// figures for the current code are recorded in small-recorded.json (`--small --record` writes
// it). A run fails when a cell makes more than half again the calls recorded for it, or when
// the mode that local decisions use by default admits less than 0.9 of one exact bucket in an
// overload cell. The simulation is deterministic for a seed, so figures move only when the
// code does: a change that moves them on purpose records them again, in the same commit.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const RECORDED_FILE = join(dirname(fileURLToPath(import.meta.url)), 'small-recorded.json');

/** A cell may make this many times the calls recorded for it (and 0.1 a second more). */
export const CALLS_ALLOWANCE = 1.5;
/** The least efficiency of the default mode in an overload cell (demand of 2x or more). */
export const EFFICIENCY_FLOOR = 0.9;
/** The mode of `local: true` (the middleware's local decisions by default). */
export const DEFAULT_MODE = 'shares';
/** The eviction rate of a cell that sets none (run.mjs's default). */
const DEFAULT_EVICTIONS = 0.01;

/** The cell and mode of a result, as a stable name. */
export function cellName(c) {
  const faults = ['failShare', 'loseShare', 'driftPpm', 'serviceUs', 'restartPerSecond']
    .filter((k) => c[k] > 0)
    .map((k) => ` ${k}=${c[k]}`)
    .join('');
  return (
    `${c.mode} N=${c.isolates} ${c.demand}x ${c.split} rtt=${c.rttMs}ms ` +
    `${c.maxTokens}/${c.refillSeconds}s evict=${c.evictPerSecond} seed=${c.seed}${faults}`
  );
}

/** Whether a cell is an overload cell whose efficiency the floor applies to. */
function floored(c) {
  const faults = c.failShare > 0 || c.loseShare > 0 || c.driftPpm > 0 || c.serviceUs > 0 || c.restartPerSecond > 0;
  return c.mode === DEFAULT_MODE && c.demand >= 2 && !faults && c.evictPerSecond === DEFAULT_EVICTIONS;
}

/** The figures to record for `results` (the cells of a run, skipped ones left out). */
export function figuresOf(results) {
  const figures = {};
  for (const c of results) {
    if (c.skipped) continue;
    figures[cellName(c)] = { efficiency: c.efficiency, callsPerSecond: c.callsPerSecond };
  }
  return figures;
}

/** What `results` do worse than `recorded` allows: one line per regression (empty when none). */
export function regressions(results, recorded) {
  const found = [];
  for (const c of results) {
    if (c.skipped) continue;
    const name = cellName(c);
    const was = recorded[name];
    if (was === undefined) {
      found.push(`${name}: no recorded figures (run node bench/sim/run.mjs --small --record)`);
      continue;
    }
    const most = was.callsPerSecond * CALLS_ALLOWANCE + 0.1;
    if (c.callsPerSecond > most) {
      found.push(`${name}: ${c.callsPerSecond.toFixed(1)} calls/s, more than ${most.toFixed(1)} (recorded ${was.callsPerSecond.toFixed(1)})`);
    }
    if (floored(c) && !(c.efficiency >= EFFICIENCY_FLOOR)) {
      found.push(`${name}: efficiency ${c.efficiency.toFixed(3)}, below ${EFFICIENCY_FLOOR} at overload`);
    }
  }
  return found;
}

export function readRecorded(file = RECORDED_FILE) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

export function writeRecorded(results, file = RECORDED_FILE) {
  writeFileSync(file, `${JSON.stringify(figuresOf(results), null, 1)}\n`);
}
