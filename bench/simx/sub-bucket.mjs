// What part of its refill a share's sub-bucket admits: a bucket of `capacity` whole tokens that
// gains one token per period and banks nothing while full (docs/SPEC.md, 3.2 and 11.1), fed by
// Poisson requests at `ratio` times its refill rate. Refill gained while the bucket is full is
// lost; this measures how much, by capacity and demand ratio (docs/SPEC.md, 11.8): the cost of
// splitting a bucket into small ones, whatever decides their sizes.
//
//   node bench/sim/sub-bucket.mjs            # the table (seeded, about a second)
//   node bench/sim/sub-bucket.mjs --periods 1000000 --seed 2

import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { exponential, stream } from './random.mjs';

const CAPACITIES = [1, 2, 3, 5, 10, 25];
const RATIOS = [1, 1.25, 1.5, 2, 3, 5];

/** Admitted / refilled over `periods` periods (time counted in periods). */
export function admittedShare(capacity, ratio, periods, random) {
  // Empty at the start, so that every token admitted came from the refill.
  let tokens = 0;
  let since = 0; // when progress towards the next token started
  let admitted = 0;
  let t = 0;
  for (;;) {
    t += exponential(random, 1 / ratio);
    if (t >= periods) break;
    if (tokens < capacity) {
      const gained = Math.min(Math.floor(t - since), capacity - tokens);
      tokens += gained;
      since += gained;
    }
    if (tokens === capacity) since = t; // full: no progress banked
    if (tokens >= 1) {
      if (tokens === capacity) since = t; // progress starts at the first token taken from full
      tokens -= 1;
      admitted += 1;
    }
  }
  return admitted / periods;
}

function main() {
  const { values } = parseArgs({
    options: { periods: { type: 'string', default: '200000' }, seed: { type: 'string', default: '1' } },
  });
  const periods = Number(values.periods);
  const seed = Number(values.seed);
  if (!(Number.isInteger(periods) && periods > 0) || !Number.isInteger(seed)) {
    throw new RangeError(`--periods must be a whole number > 0 and --seed a whole number, got ${values.periods}, ${values.seed}`);
  }
  console.log(`Part of a sub-bucket's refill it admits (Poisson demand at ratio x its refill; ${periods} periods, seed ${seed})\n`);
  console.log(`| capacity | ${RATIOS.map((r) => `${r}x`).join(' | ')} |`);
  console.log(`| ---: | ${RATIOS.map(() => '---:').join(' | ')} |`);
  for (const capacity of CAPACITIES) {
    const row = RATIOS.map((ratio) =>
      admittedShare(capacity, ratio, periods, stream(seed, `sub-bucket ${capacity} ${ratio}`)).toFixed(3),
    );
    console.log(`| ${capacity} | ${row.join(' | ')} |`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) main();
