// The token-bucket bound, checked exactly over every window. With consumption times
// a_0 <= a_1 <= ... (whole nanoseconds, one token each) and the refill interval I, the bound is:
// for every i <= j, (j - i + 1) <= maxTokens + floor((a_j - a_i) / I).
//
// Write a = q*I + r (0 <= r < I). Then floor((a_j - a_i) / I) = q_j - q_i - [r_j < r_i], and the
// excess of the window [a_i, a_j] (tokens minus bound) is
//   (v_i + [r_i > r_j]) - v_j + 1 - maxTokens,   where v_k = q_k - k.
// So the worst window ending at j takes the largest v_i over earlier tokens with r_i <= r_j,
// and the largest v_i + 1 over those with r_i > r_j: two prefix maxima over residues. Done
// offline with Fenwick trees over the sorted residues (O(n log n)), and online by merging
// each new batch into a residue-sorted array with prefix/suffix maxima.

/** Growable Float64Array, for logs whose length is not known in advance. */
export class Float64Log {
  values = new Float64Array(1024);
  length = 0;

  push(x) {
    if (this.length === this.values.length) {
      const bigger = new Float64Array(this.values.length * 2);
      bigger.set(this.values);
      this.values = bigger;
    }
    this.values[this.length++] = x;
  }

  view() {
    return this.values.subarray(0, this.length);
  }
}

/** `time` as q*I + r with 0 <= r < I, exact for whole numbers below 2^53. */
function split(time, interval) {
  let q = Math.floor(time / interval);
  let r = time - q * interval;
  // The division rounds: correct a quotient that landed one off.
  if (r < 0) {
    q -= 1;
    r += interval;
  } else if (r >= interval) {
    q += 1;
    r -= interval;
  }
  return [q, r];
}

/** Largest excess (tokens - bound) of a window ending at token `j`, found by scanning every start. */
function worstWindowEndingAt(times, j, maxTokens, interval) {
  let best = null;
  for (let i = 0; i <= j; i++) {
    const bound = maxTokens + Math.floor((times[j] - times[i]) / interval);
    const excess = j - i + 1 - bound;
    if (best === null || excess > best.excess) {
      best = { excess, start: times[i], end: times[j], tokens: j - i + 1, bound };
    }
  }
  return best;
}

/** Fenwick tree for prefix maxima over positions 1..size. */
class MaxFenwick {
  constructor(size) {
    this.tree = new Float64Array(size + 1).fill(-Infinity);
  }
  raise(position, value) {
    const tree = this.tree;
    for (let p = position; p < tree.length; p += p & -p) if (tree[p] < value) tree[p] = value;
  }
  /** The largest value at positions 1..position (-Infinity when none). */
  max(position) {
    const tree = this.tree;
    let best = -Infinity;
    for (let p = position; p > 0; p -= p & -p) if (tree[p] > best) best = tree[p];
    return best;
  }
}

/** Number of entries of sorted `array[0..length)` that are <= `x`. */
function countAtMost(array, length, x) {
  let lo = 0;
  let hi = length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (array[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Worst windows among those that end at tokens `from..to-1` and start at tokens >= `from`
 * (all of them when from = 0). `outside(j, r_j)` may add the best start before `from`
 * (already as v_i or v_i + 1). Returns { maxExcess, firstViolationEnd } (index or -1).
 */
function sweep(times, from, to, maxTokens, interval, outside = null) {
  const n = to - from;
  const q = new Float64Array(n);
  const r = new Float64Array(n);
  for (let k = 0; k < n; k++) [q[k], r[k]] = split(times[from + k], interval);
  const residues = Float64Array.from(r).sort();
  let distinct = 0;
  for (let k = 0; k < n; k++) if (k === 0 || residues[k] !== residues[k - 1]) residues[distinct++] = residues[k];
  const atOrBelow = new MaxFenwick(distinct); // by residue rank
  const above = new MaxFenwick(distinct); // by reversed residue rank
  let maxExcess = -Infinity;
  let firstViolationEnd = -1;
  for (let k = 0; k < n; k++) {
    const j = from + k;
    const v = q[k] - j;
    const rank = countAtMost(residues, distinct, r[k]); // 1-based rank of r[k]
    atOrBelow.raise(rank, v);
    above.raise(distinct - rank + 1, v);
    let best = Math.max(atOrBelow.max(rank), above.max(distinct - rank) + 1);
    if (outside !== null) best = Math.max(best, outside(r[k]));
    const excess = best - v + 1 - maxTokens;
    if (excess > maxExcess) maxExcess = excess;
    if (excess > 0 && firstViolationEnd < 0) firstViolationEnd = j;
  }
  return { maxExcess, firstViolationEnd };
}

/**
 * The exact check over all windows of the sorted consumption times `times` (whole ns).
 * Returns { ok, maxExcess, violation } where violation is the earliest-ending window above its
 * bound: { start, end, tokens, bound, excess } (times in ns), or null.
 */
export function checkBound(times, maxTokens, interval) {
  for (let k = 1; k < times.length; k++) {
    if (!(times[k] >= times[k - 1])) throw new Error('checkBound: times must be sorted');
  }
  if (times.length === 0) return { ok: true, maxExcess: -Infinity, violation: null };
  const { maxExcess, firstViolationEnd } = sweep(times, 0, times.length, maxTokens, interval);
  const violation = firstViolationEnd < 0 ? null : worstWindowEndingAt(times, firstViolationEnd, maxTokens, interval);
  return { ok: maxExcess <= 0, maxExcess, violation };
}

/** The same verdict by trying every window: O(n²), for the self-test. */
export function checkBoundByBruteForce(times, maxTokens, interval) {
  let maxExcess = -Infinity;
  let violation = null;
  for (let j = 0; j < times.length; j++) {
    const worst = worstWindowEndingAt(times, j, maxTokens, interval);
    if (worst.excess > maxExcess) maxExcess = worst.excess;
    if (worst.excess > 0 && violation === null) violation = worst;
  }
  return { ok: maxExcess <= 0, maxExcess, violation };
}

/**
 * The check as the run goes: tokens are added in time order, and `flush()` (called at the end
 * of every simulated second) checks every window that ends at a token added since the last
 * flush, against all tokens so far. Exact, like checkBound; the two must agree at the end.
 */
export class BoundMonitor {
  log = new Float64Log(); // every consumption time, in order
  maxExcess = -Infinity;
  violation = null; // the first window found above its bound
  #flushed = 0;
  // Tokens before #flushed, sorted by residue: residues, v = q - index, prefix and suffix maxima.
  #residues = new Float64Array(1024);
  #values = new Float64Array(1024);
  #prefixMax = new Float64Array(1024);
  #suffixMax = new Float64Array(1024);

  constructor(maxTokens, interval) {
    this.maxTokens = maxTokens;
    this.interval = interval;
  }

  add(time) {
    const log = this.log;
    if (log.length > 0 && time < log.values[log.length - 1]) throw new Error('BoundMonitor: time went back');
    log.push(time);
  }

  /** Checks the tokens added since the last flush; returns the first violation found, or null. */
  flush() {
    const from = this.#flushed;
    const to = this.log.length;
    if (to === from) return null;
    const times = this.log.values;
    const stored = from;
    const residues = this.#residues;
    const prefixMax = this.#prefixMax;
    const suffixMax = this.#suffixMax;
    // The best start among earlier flushes, for a token with residue r.
    const outside =
      stored === 0
        ? null
        : (r) => {
            const k = countAtMost(residues, stored, r);
            return Math.max(k > 0 ? prefixMax[k - 1] : -Infinity, k < stored ? suffixMax[k] + 1 : -Infinity);
          };
    const { maxExcess, firstViolationEnd } = sweep(times, from, to, this.maxTokens, this.interval, outside);
    if (maxExcess > this.maxExcess) this.maxExcess = maxExcess;
    let found = null;
    if (firstViolationEnd >= 0 && this.violation === null) {
      found = worstWindowEndingAt(times, firstViolationEnd, this.maxTokens, this.interval);
      this.violation = found;
    }
    this.#merge(from, to);
    this.#flushed = to;
    return found;
  }

  #merge(from, to) {
    const count = to - from;
    const batch = [];
    for (let j = from; j < to; j++) {
      const [q, r] = split(this.log.values[j], this.interval);
      batch.push([r, q - j]);
    }
    batch.sort((a, b) => a[0] - b[0]);
    const total = from + count;
    if (total > this.#residues.length) {
      let size = this.#residues.length;
      while (size < total) size *= 2;
      const grow = (old) => {
        const array = new Float64Array(size);
        array.set(old.subarray(0, from));
        return array;
      };
      this.#residues = grow(this.#residues);
      this.#values = grow(this.#values);
      this.#prefixMax = new Float64Array(size);
      this.#suffixMax = new Float64Array(size);
    }
    // Merge from the back, in place.
    const residues = this.#residues;
    const values = this.#values;
    let a = from - 1;
    let b = count - 1;
    for (let out = total - 1; out >= 0; out--) {
      if (b < 0 || (a >= 0 && residues[a] > batch[b][0])) {
        residues[out] = residues[a];
        values[out] = values[a--];
      } else {
        residues[out] = batch[b][0];
        values[out] = batch[b--][1];
      }
    }
    const prefixMax = this.#prefixMax;
    const suffixMax = this.#suffixMax;
    let best = -Infinity;
    for (let k = 0; k < total; k++) prefixMax[k] = best = Math.max(best, values[k]);
    best = -Infinity;
    for (let k = total - 1; k >= 0; k--) suffixMax[k] = best = Math.max(best, values[k]);
  }
}

/**
 * The largest tokens / bound over windows [a_i, a_i + D] for D in 0, I, 2I, 4I, ... up to
 * `span` (two pointers per duration). A gauge of how close the run came, not the verdict.
 */
export function maxRatio(times, maxTokens, interval, span) {
  const n = times.length;
  let best = 0;
  let where = null;
  for (let refills = 0; ; refills = refills === 0 ? 1 : refills * 2) {
    const duration = refills * interval;
    if (refills > 0 && duration > span) break;
    const bound = maxTokens + refills;
    let hi = 0;
    for (let i = 0; i < n; i++) {
      if (hi < i) hi = i;
      while (hi < n && times[hi] <= times[i] + duration) hi++;
      const ratio = (hi - i) / bound;
      if (ratio > best) {
        best = ratio;
        where = { start: times[i], durationNs: duration, tokens: hi - i, bound };
      }
    }
  }
  return { ratio: best, where };
}
