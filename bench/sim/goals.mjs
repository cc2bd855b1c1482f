#!/usr/bin/env node
// Judges the default local mode (`shares`) of a sweep against the goals of local decisions, cell
// by cell, with the plain leases (`leases`) of the same sweep as the reference the goals name
// (bench/sim/README.md, "The goals"). Prints every cell that misses a goal, and the count.
//
//   node bench/sim/run.mjs --modes leases,shares --n 1,4,32,256 --demand 0.1,0.5,1,2,10,100 \
//     --rtt 50 --limit 10,1000 --split even --jobs 2 --json bench/out/goals.json
//   node bench/sim/goals.mjs bench/out/goals.json [--all]
//
// Exits 1 when a cell misses a goal or its bound, 2 on bad input.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { cellName } from './recorded.mjs';
import { WARM_UP_S } from './simulate.mjs';

const MODE = 'shares';
const REFERENCE = 'leases';

/** A cell's name as the judged mode's (a reference cell's then names the cell it judges). */
const asJudged = (c) => cellName({ ...c, mode: MODE });

/**
 * What `cell` must reach beside `reference` (the plain leases of the same place): efficiency at
 * least `efficiency`, calls per second at most `calls`, and a share of requests that wait for a
 * call at most `waited`.
 */
export function goalsOf(cell, reference) {
  const F = cell.floor;
  const D = cell.demand * cell.limitPerSecond;
  if (cell.demand > 1) {
    const fewIsolates = F <= 0.01 * D;
    return {
      efficiency: cell.split === 'zipf' ? 0.9 : 0.95,
      calls: Math.max(2 * F + 10, (fewIsolates ? 0.1 : 0.6) * reference.callsPerSecond),
      waited: fewIsolates ? 0.01 : 1,
    };
  }
  if (cell.demand === 1) {
    // Fewer calls than the leases wherever those reach 0.95; never more than one per request.
    const calls = reference.efficiency >= 0.95 ? reference.callsPerSecond : cell.demand * cell.limitPerSecond;
    return { efficiency: 0.95, calls, waited: 1 };
  }
  return { efficiency: 0.995, calls: reference.callsPerSecond, waited: reference.waitedShare };
}

/** The goals `cell` misses (names), with `reference` as in goalsOf. */
export function misses(cell, reference) {
  const goals = goalsOf(cell, reference);
  const missed = [];
  if (!cell.boundOk) missed.push('bound');
  if (cell.efficiency < goals.efficiency) missed.push('efficiency');
  if (cell.callsPerSecond > goals.calls * (1 + 1e-9)) missed.push('calls');
  if (cell.waitedShare > goals.waited * (1 + 1e-9)) missed.push('waited');
  return { goals, missed };
}

/**
 * The goals of `missed` that the cell still misses on its figures from the warm-up on
 * (simulate.mjs, WARM_UP_S: after every isolate's first seconds); efficiency is the whole
 * run's. Null for a cell too short to have them.
 */
export function missedWarm(cell, goals, missed) {
  if (cell.warmCallsPerSecond == null) return null;
  return missed.filter(
    (goal) =>
      (goal === 'calls' && cell.warmCallsPerSecond > goals.calls * (1 + 1e-9)) ||
      (goal === 'waited' && cell.warmWaitedShare > goals.waited * (1 + 1e-9)) ||
      (goal !== 'calls' && goal !== 'waited'),
  );
}

function main() {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  if (file === undefined) {
    console.error('usage: node bench/sim/goals.mjs <sweep.json with modes leases and shares> [--all]');
    process.exit(2);
  }
  let cells;
  try {
    cells = JSON.parse(readFileSync(file, 'utf8')).cells;
  } catch (error) {
    console.error(`${file}: ${error.message}`);
    process.exit(2);
  }
  if (!Array.isArray(cells)) {
    console.error(`${file}: no cells (write one with node bench/sim/run.mjs --json)`);
    process.exit(2);
  }
  const references = new Map(cells.filter((c) => c.mode === REFERENCE).map((c) => [asJudged(c), c]));
  const judged = cells.filter((c) => c.mode === MODE);
  if (judged.length === 0 || references.size === 0) {
    console.error(`${file}: needs cells of both modes ${REFERENCE} and ${MODE}`);
    process.exit(2);
  }
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  console.log(
    `| N | split | rtt | demand | limit/s | F | leases calls/s | ${MODE}: efficiency | calls/s | waited | ` +
      `calls/s from ${WARM_UP_S} s | waited from ${WARM_UP_S} s | goal: efficiency | calls/s | waited | missed | missed from ${WARM_UP_S} s |`,
  );
  console.log('|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|');
  let missedCells = 0;
  let missedWarmCells = 0;
  let unmatched = 0;
  for (const cell of judged) {
    const reference = references.get(asJudged(cell));
    if (reference === undefined) {
      unmatched += 1;
      continue;
    }
    const { goals, missed } = misses(cell, reference);
    const warm = missedWarm(cell, goals, missed);
    if (missed.length > 0) missedCells += 1;
    if (warm === null ? missed.length > 0 : warm.length > 0) missedWarmCells += 1;
    if (missed.length === 0 && !args.includes('--all')) continue;
    const warmCalls = cell.warmCallsPerSecond == null ? '' : cell.warmCallsPerSecond.toFixed(1);
    const warmWaited = cell.warmWaitedShare == null ? '' : pct(cell.warmWaitedShare);
    console.log(
      `| ${cell.isolates} | ${cell.split} | ${cell.rttMs} | ${cell.demand}x | ${cell.limitPerSecond} | ${cell.floor.toFixed(1)} | ` +
        `${reference.callsPerSecond.toFixed(1)} | ${cell.efficiency.toFixed(3)} | ${cell.callsPerSecond.toFixed(1)} | ${pct(cell.waitedShare)} | ` +
        `${warmCalls} | ${warmWaited} | ${goals.efficiency} | ${goals.calls.toFixed(1)} | ${goals.waited >= 1 ? '-' : pct(goals.waited)} | ` +
        `${missed.join(', ') || 'none'} | ${warm === null ? '' : warm.join(', ') || 'none'} |`,
    );
  }
  console.log(`\n${missedCells} of ${judged.length - unmatched} cells miss a goal${unmatched > 0 ? ` (${unmatched} without a ${REFERENCE} cell, not judged)` : ''}`);
  console.log(`${missedWarmCells} of them still miss one on the figures from ${WARM_UP_S} s on (calls/s and waited; efficiency is the whole run's)`);
  process.exit(missedCells > 0 ? 1 : 0);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) main();
