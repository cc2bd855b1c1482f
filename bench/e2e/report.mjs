// Report of bench/e2e/run.mjs: reads the per-round results (TSV), prints one E2E line per
// variant, the ratios of the goals "end-to-end throughput" and "durable overhead" (durable /
// in-memory; bench/README.md defines both), and writes the JSON file.
// Usage: node report.mjs <results.tsv> <out.json>  (metadata in E2E_* environment variables)
import { readFileSync, writeFileSync } from 'node:fs';
import { machineInfo } from '../common.mjs';

const [tsv, outPath] = process.argv.slice(2);
const FIELDS = ['round', 'variant', 'requests', 'duration_us', 'p50_us', 'p99_us', 'mean_us', 'max_us', 'errors', 'non2xx'];
const rows = readFileSync(tsv, 'utf8')
  .trim()
  .split('\n')
  .map((line) => {
    const cells = line.split('\t');
    const row = Object.fromEntries(FIELDS.map((f, i) => [f, i === 1 ? cells[i] : Number(cells[i])]));
    row.rps = row.requests / (row.duration_us / 1e6);
    return row;
  });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x, digits) => Number(x.toFixed(digits));

const variants = [];
for (const row of rows) if (!variants.some((v) => v.name === row.variant)) variants.push({ name: row.variant });
for (const v of variants) {
  const rs = rows.filter((r) => r.variant === v.name);
  Object.assign(v, {
    rps: Math.round(median(rs.map((r) => r.rps))),
    p50_ms: round(median(rs.map((r) => r.p50_us)) / 1000, 3),
    p99_ms: round(median(rs.map((r) => r.p99_us)) / 1000, 3),
    mean_ms: round(median(rs.map((r) => r.mean_us)) / 1000, 3),
    max_ms: round(Math.max(...rs.map((r) => r.max_us)) / 1000, 3),
    requests: rs.reduce((a, r) => a + r.requests, 0),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
    rounds: rs.map((r) => ({
      round: r.round,
      rps: Math.round(r.rps),
      p50_ms: round(r.p50_us / 1000, 3),
      p99_ms: round(r.p99_us / 1000, 3),
      requests: r.requests,
      errors: r.errors,
      non2xx: r.non2xx,
    })),
  });
  console.log(`E2E variant=${v.name} rps=${v.rps} p50_ms=${v.p50_ms} p99_ms=${v.p99_ms} errors=${v.errors} non2xx=${v.non2xx}`);
}

const by = Object.fromEntries(variants.map((v) => [v.name, v]));
const ratio = (a, b) => (a === undefined || b === undefined || b === 0 ? null : round(a / b, 3));
const ratios = {
  consume_over_floor_rps: ratio(by.consume?.rps, by.floor?.rps),
  consume_over_plain_js_rps: ratio(by.consume?.rps, by['plain-js']?.rps),
  limit_added_over_three_call_added_p50:
    by.limit && by['three-call'] && by.none
      ? ratio(by.limit.p50_ms - by.none.p50_ms, by['three-call'].p50_ms - by.none.p50_ms)
      : null,
  // durable overhead: DurableRateLimiterServer against RateLimiterServer, same call, same run
  durable_consume_over_consume_p50: ratio(by['durable-consume']?.p50_ms, by.consume?.p50_ms),
  durable_consume_over_consume_p99: ratio(by['durable-consume']?.p99_ms, by.consume?.p99_ms),
  durable_consume_over_consume_rps: ratio(by['durable-consume']?.rps, by.consume?.rps),
  durable_limit_over_limit_p50: ratio(by['durable-limit']?.p50_ms, by.limit?.p50_ms),
  durable_limit_over_limit_p99: ratio(by['durable-limit']?.p99_ms, by.limit?.p99_ms),
  durable_limit_over_limit_rps: ratio(by['durable-limit']?.rps, by.limit?.rps),
  durable_consume_disk_over_consume_p50: ratio(by['durable-consume-disk']?.p50_ms, by.consume?.p50_ms),
  durable_consume_disk_over_consume_rps: ratio(by['durable-consume-disk']?.rps, by.consume?.rps),
  durable_limit_disk_over_limit_p50: ratio(by['durable-limit-disk']?.p50_ms, by.limit?.p50_ms),
  durable_limit_disk_over_limit_rps: ratio(by['durable-limit-disk']?.rps, by.limit?.rps),
};
const check = (value, ok) => (value === null ? null : ok(value));
const goals = {
  consume_ge_0_95_floor: check(ratios.consume_over_floor_rps, (x) => x >= 0.95),
  consume_ge_0_98_plain_js: check(ratios.consume_over_plain_js_rps, (x) => x >= 0.98),
  limit_adds_le_0_5_of_three_call: check(ratios.limit_added_over_three_call_added_p50, (x) => x <= 0.5),
  durable_consume_le_1_2_consume_p50: check(ratios.durable_consume_over_consume_p50, (x) => x <= 1.2),
  durable_limit_le_1_2_limit_p50: check(ratios.durable_limit_over_limit_p50, (x) => x <= 1.2),
  durable_consume_disk_le_1_2_consume_p50: check(ratios.durable_consume_disk_over_consume_p50, (x) => x <= 1.2),
  durable_limit_disk_le_1_2_limit_p50: check(ratios.durable_limit_disk_over_limit_p50, (x) => x <= 1.2),
};
const show = (x) => (x === null ? 'n/a' : x);
const met = (x) => (x === null ? 'n/a' : x ? 'met' : 'not met');
console.log(`E2E ratio consume/floor rps=${show(ratios.consume_over_floor_rps)} (goal >= 0.95: ${met(goals.consume_ge_0_95_floor)})`);
console.log(`E2E ratio consume/plain-js rps=${show(ratios.consume_over_plain_js_rps)} (goal >= 0.98: ${met(goals.consume_ge_0_98_plain_js)})`);
console.log(
  `E2E ratio (limit-none)/(three-call-none) p50=${show(ratios.limit_added_over_three_call_added_p50)} ` +
    `(goal <= 0.5: ${met(goals.limit_adds_le_0_5_of_three_call)})`,
);
for (const [durable, memory, goal] of [
  ['durable-consume', 'consume', 'durable_consume_le_1_2_consume_p50'],
  ['durable-limit', 'limit', 'durable_limit_le_1_2_limit_p50'],
  ['durable-consume-disk', 'consume', 'durable_consume_disk_le_1_2_consume_p50'],
  ['durable-limit-disk', 'limit', 'durable_limit_disk_le_1_2_limit_p50'],
]) {
  const d = by[durable];
  const m = by[memory];
  if (!d || !m) continue;
  console.log(
    `E2E ratio ${durable}/${memory} p50=${show(ratio(d.p50_ms, m.p50_ms))} (goal <= 1.2: ${met(goals[goal])}) ` +
      `p99=${show(ratio(d.p99_ms, m.p99_ms))} rps=${show(ratio(d.rps, m.rps))} ` +
      `(${durable} p50 ${d.p50_ms} ms p99 ${d.p99_ms} ms ${d.rps} rps; ${memory} p50 ${m.p50_ms} ms p99 ${m.p99_ms} ms ${m.rps} rps)`,
  );
}

const report = {
  benchmark: 'e2e-workerd',
  generated_at: new Date().toISOString(),
  machine: {
    ...machineInfo(),
    workerd: process.env.E2E_WORKERD ?? null,
    wrangler: process.env.E2E_WRANGLER ?? null,
    load_generator: process.env.E2E_LOADGEN ?? null,
  },
  params: JSON.parse(process.env.E2E_PARAMS ?? '{}'),
  notes:
    'Closed-loop load (fixed connections), so latency includes queueing at saturation. ' +
    'Medians over rounds when rounds > 1; errors/non2xx are sums. non2xx counts status >= 400 ' +
    '(a denied request answers 429). Every request is allowed, so every durable call writes ' +
    'its bucket\'s row. On a shared machine the numbers are indicative only.',
  variants,
  ratios,
  goals,
};
writeFileSync(outPath, JSON.stringify(report, null, 2) + '\n');
console.log(`E2E wrote ${outPath}`);
