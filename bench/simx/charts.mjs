#!/usr/bin/env node
// Charts of a simulator run: bench/sim/calls.svg (object calls/s against demand, log axes) and
// bench/sim/efficiency.svg (admitted / what one exact bucket admits, against demand). One panel
// per limit and split (rows) and round trip (columns); in each, one colour per isolate count
// and one line style per mode, so the per-request mode and today's leases are the baselines
// drawn beside any new mode. Hollow points ran shorter than their target; skipped cells are
// missing. The calls chart also marks, per isolate count, the floor F (floor.mjs) with crosses
// on a thin line: the fewest calls per second any design of local decisions can make. Plain
// hand-written SVG.
//
//   node bench/sim/charts.mjs [bench/out/sim.json] [output directory, default bench/sim]
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { floorCallsPerSecond } from './floor.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const input = process.argv[2] ?? join(HERE, '..', 'out', 'sim.json');
const outDir = process.argv[3] ?? HERE;

const run = JSON.parse(readFileSync(input, 'utf8'));
const allCells = run.cells;
const cells = allCells.filter((c) => !c.skipped);
if (cells.length === 0) {
  console.error(`charts: no cell with results in ${input}`);
  process.exit(1);
}

const COLOURS = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#d55e00', '#56b4e9', '#7f7f7f', '#000000'];
// The two baselines are broken lines; any other mode (the design under test) is solid.
const DASHES = { request: '2 3', leases: '7 4' };
const OTHER_DASHES = ['', '12 3 2 3', '1 2'];

const unique = (values) => [...new Set(values)].sort((a, b) => a - b);
const modes = [...new Set(run.cells.map((c) => c.mode))];
const isolateCounts = unique(cells.map((c) => c.isolates));
const rtts = unique(cells.map((c) => c.rttMs));
const limits = [...new Map(cells.map((c) => [`${c.maxTokens}/${c.refillSeconds}`, c])).values()].sort(
  (a, b) => 1 / a.refillSeconds - 1 / b.refillSeconds,
);
const splits = ['even', 'zipf'].filter((s) => cells.some((c) => c.split === s));

const colourOf = (n) => COLOURS[isolateCounts.indexOf(n) % COLOURS.length];
const dashOf = (mode) => DASHES[mode] ?? OTHER_DASHES[modes.filter((m) => !(m in DASHES)).indexOf(mode) % OTHER_DASHES.length];
const num = (x) => `${+x.toPrecision(3)}`;
const esc = (text) => String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** Powers of ten covering [lo, hi] (lo > 0). */
function decades(lo, hi) {
  const ticks = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) ticks.push(10 ** e);
  return ticks;
}

function tickLabel(x) {
  if (x >= 1e6) return `${num(x / 1e6)}M`;
  if (x >= 1e3) return `${num(x / 1e3)}k`;
  return num(x);
}

/**
 * One SVG: a grid of panels; `value(cell)` is the y of a cell (null to leave it out);
 * `yScale` is 'log' or a fixed linear [lo, hi]; `floor(cell)`, if given, a y drawn per
 * isolate count as crosses on a thin line (the same for every mode of a cell).
 */
function chart({ title, yLabel, value, yScale, floor }) {
  const PW = 250; // panel plot width
  const PH = 150;
  const ML = 58; // panel margins
  const MR = 12;
  const MT = 26;
  const MB = 34;
  const panelW = ML + PW + MR;
  const panelH = MT + PH + MB;
  // Panels: a row per limit and split and a column per round trip; with one round trip, the
  // splits side by side instead.
  const byRtt = rtts.length > 1 || splits.length === 1;
  const rows = byRtt ? limits.flatMap((limit) => splits.map((split) => ({ limit, split }))) : limits.map((limit) => ({ limit }));
  const columns = byRtt ? rtts.map((rtt) => ({ rtt })) : splits.map((split) => ({ split, rtt: rtts[0] }));
  const TOP = 92; // title, notes and legend
  // The legend's width: isolate counts, modes, and the floor's entry.
  const legendW = 12 + 70 * isolateCounts.length + 10 + modes.reduce((w, mode) => w + 44 + 7 * mode.length, 0) + (floor ? 330 : 0);
  const W = Math.max(panelW * columns.length, 700, legendW);
  const H = TOP + panelH * rows.length + 10;
  const demands = unique(cells.map((c) => c.demand));
  const xLo = demands[0];
  const xHi = demands[demands.length - 1];
  const xOf = (d) => (xHi === xLo ? PW / 2 : ((Math.log10(d) - Math.log10(xLo)) / (Math.log10(xHi) - Math.log10(xLo))) * PW);

  const parts = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="11">`,
  );
  parts.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  parts.push(`<text x="12" y="20" font-size="15" font-weight="600">${esc(title)}</text>`);
  parts.push(
    `<text x="12" y="37" fill="#555">x: demand (× the limit's rate), log. y: ${esc(yLabel)}. Seed ${run.options?.seed ?? '?'}.</text>`,
  );
  parts.push(
    `<text x="12" y="52" fill="#555">Hollow points ran shorter than ${run.options?.seconds ?? '?'} s (event budget); missing points were skipped.</text>`,
  );
  // Legend: isolate counts by colour, modes by line style.
  let lx = 12;
  for (const n of isolateCounts) {
    parts.push(`<line x1="${lx}" y1="72" x2="${lx + 18}" y2="72" stroke="${colourOf(n)}" stroke-width="3"/>`);
    parts.push(`<text x="${lx + 22}" y="76">N ${n}</text>`);
    lx += 70;
  }
  lx += 10;
  for (const mode of modes) {
    parts.push(`<line x1="${lx}" y1="72" x2="${lx + 30}" y2="72" stroke="#333" stroke-width="2" stroke-dasharray="${dashOf(mode)}"/>`);
    parts.push(`<text x="${lx + 34}" y="76">${esc(mode)}</text>`);
    lx += 44 + 7 * mode.length;
  }
  if (floor) {
    parts.push(`<line x1="${lx}" y1="72" x2="${lx + 30}" y2="72" stroke="#333" stroke-width="0.8" stroke-opacity="0.6"/>`);
    parts.push(cross(lx + 15, 72, '#333'));
    parts.push(`<text x="${lx + 34}" y="76">F (floor: the fewest calls any design can make)</text>`);
  }

  rows.forEach((row, r) => {
    columns.forEach((column, c) => {
      const { limit, split, rtt } = { ...row, ...column };
      const ox = c * panelW + ML;
      const oy = TOP + r * panelH + MT;
      const inPanel = cells.filter(
        (cell) =>
          cell.maxTokens === limit.maxTokens &&
          cell.refillSeconds === limit.refillSeconds &&
          (cell.split === split || (cell.isolates === 1 && split === 'zipf')) &&
          cell.rttMs === rtt,
      );
      const points = inPanel.map((cell) => ({ cell, y: value(cell) })).filter((p) => p.y !== null && Number.isFinite(p.y));
      // The floor per isolate count and demand, from any mode's cell (skipped ones included).
      const floors = new Map();
      if (floor) {
        for (const cell of allCells) {
          if (
            cell.maxTokens === limit.maxTokens &&
            cell.refillSeconds === limit.refillSeconds &&
            (cell.split === split || (cell.isolates === 1 && split === 'zipf')) &&
            cell.rttMs === rtt
          ) {
            const y = floor(cell);
            if (y > 0 && Number.isFinite(y)) floors.set(`${cell.isolates}|${cell.demand}`, { n: cell.isolates, demand: cell.demand, y });
          }
        }
      }
      const rate = 1 / limit.refillSeconds;
      parts.push(
        `<text x="${ox}" y="${oy - 9}" font-weight="600">${esc(`${tickLabel(rate)}/s, max_tokens ${tickLabel(limit.maxTokens)}, ${split}, rtt ${rtt} ms`)}</text>`,
      );
      parts.push(`<rect x="${ox}" y="${oy}" width="${PW}" height="${PH}" fill="none" stroke="#bbb"/>`);
      if (points.length === 0) {
        parts.push(`<text x="${ox + PW / 2}" y="${oy + PH / 2}" text-anchor="middle" fill="#999">no data</text>`);
        return;
      }
      let yOf;
      let yTicks;
      if (yScale === 'log') {
        const ys = [...points.map((p) => p.y), ...[...floors.values()].map((f) => f.y)].filter((y) => y > 0);
        const lo = 10 ** Math.floor(Math.log10(Math.min(...ys)));
        const hi = 10 ** Math.ceil(Math.log10(Math.max(...ys)));
        const span = Math.log10(hi) - Math.log10(lo) || 1;
        yOf = (y) => PH - ((Math.log10(Math.max(y, lo)) - Math.log10(lo)) / span) * PH;
        yTicks = decades(lo, hi).map((t) => [t, tickLabel(t)]);
      } else {
        const [lo, hi] = yScale;
        yOf = (y) => PH - ((Math.min(Math.max(y, lo), hi) - lo) / (hi - lo)) * PH;
        yTicks = [];
        for (let t = lo; t <= hi + 1e-9; t += 0.1) yTicks.push([t, num(t)]);
      }
      for (const [t, label] of yTicks) {
        const y = oy + yOf(t);
        parts.push(`<line x1="${ox}" y1="${y}" x2="${ox + PW}" y2="${y}" stroke="#eee"/>`);
        parts.push(`<text x="${ox - 4}" y="${y + 4}" text-anchor="end" fill="#555">${label}</text>`);
      }
      for (const d of demands) {
        const x = ox + xOf(d);
        parts.push(`<line x1="${x}" y1="${oy}" x2="${x}" y2="${oy + PH}" stroke="#f3f3f3"/>`);
        parts.push(`<text x="${x}" y="${oy + PH + 14}" text-anchor="middle" fill="#555">${num(d)}</text>`);
      }
      if (yScale !== 'log') {
        const y = oy + yOf(1);
        parts.push(`<line x1="${ox}" y1="${y}" x2="${ox + PW}" y2="${y}" stroke="#999" stroke-dasharray="1 2"/>`);
      }
      for (const n of isolateCounts) {
        const line = [...floors.values()].filter((f) => f.n === n).sort((a, b) => a.demand - b.demand);
        const xy = line.map((f) => [ox + xOf(f.demand), oy + yOf(f.y)]);
        if (xy.length > 1) {
          parts.push(
            `<polyline points="${xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}" fill="none" stroke="${colourOf(n)}" stroke-width="0.8" stroke-opacity="0.6"/>`,
          );
        }
        line.forEach((f, k) => parts.push(cross(xy[k][0], xy[k][1], colourOf(n), `F, N ${n}, demand ${f.demand}: ${num(f.y)} calls/s`)));
      }
      for (const mode of modes) {
        for (const n of isolateCounts) {
          const line = points
            .filter((p) => p.cell.mode === mode && p.cell.isolates === n)
            .sort((a, b) => a.cell.demand - b.cell.demand);
          if (line.length === 0) continue;
          const xy = line.map((p) => [ox + xOf(p.cell.demand), oy + yOf(p.y)]);
          if (xy.length > 1) {
            parts.push(
              `<polyline points="${xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}" fill="none" stroke="${colourOf(n)}" stroke-width="1.6" stroke-dasharray="${dashOf(mode)}"/>`,
            );
          }
          line.forEach((p, k) => {
            const shorter = p.cell.seconds < (p.cell.targetSeconds ?? p.cell.seconds);
            const [x, y] = xy[k];
            const tip = `${mode}, N ${n}, demand ${p.cell.demand}: ${num(p.y)}${shorter ? ` (${p.cell.seconds} s)` : ''}`;
            parts.push(
              `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="2.4" fill="${shorter ? '#fff' : colourOf(n)}" stroke="${colourOf(n)}"><title>${esc(tip)}</title></circle>`,
            );
          });
        }
      }
    });
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** A small cross at (x, y), with a tooltip. */
function cross(x, y, colour, tip) {
  const d = 3;
  const path = `M${(x - d).toFixed(1)},${(y - d).toFixed(1)}L${(x + d).toFixed(1)},${(y + d).toFixed(1)}M${(x - d).toFixed(1)},${(y + d).toFixed(1)}L${(x + d).toFixed(1)},${(y - d).toFixed(1)}`;
  return `<path d="${path}" stroke="${colour}" stroke-width="1.2" fill="none">${tip ? `<title>${esc(tip)}</title>` : ''}</path>`;
}

const effs = cells.map((c) => c.efficiency).filter((e) => e !== null);
const effLo = Math.max(0, Math.floor(Math.min(0.9, ...effs) * 10) / 10);
const effHi = Math.ceil(Math.max(1.0, ...effs) * 10) / 10 + 0.0001;

const written = [];
const write = (file, svg) => {
  const path = join(outDir, file);
  writeFileSync(path, svg);
  written.push(relative(process.cwd(), path));
};
write(
  'calls.svg',
  chart({
    title: 'Calls to the Durable Object per second',
    yLabel: 'object calls per simulated second, log',
    value: (c) => c.callsPerSecond,
    yScale: 'log',
    // From the JSON, or computed for a run written before F was recorded.
    floor: (c) => c.floor ?? floorCallsPerSecond(c),
  }),
);
write(
  'efficiency.svg',
  chart({
    title: 'Efficiency: admitted / admitted by one exact bucket on the same arrivals',
    yLabel: 'efficiency',
    value: (c) => c.efficiency,
    yScale: [effLo, effHi],
  }),
);
console.log(`charts: wrote ${written.join(', ')} from ${relative(process.cwd(), input)}`);
