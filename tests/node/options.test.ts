// setOptions (docs/SPEC.md, rule 2.4): partial updates, clamping, fractional intervals
// (rounded up to whole nanoseconds) and reset_in_ms (rounded up to whole milliseconds,
// never early).
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimiterStatus } from '@delightstack/rate-limiter';
import { SECOND, T0, newServer, status } from './support';

const DAY_MS = 86_400 * SECOND;
const MAX_SAFE = 9_007_199_254_740_991; // 2^53 - 1

let server: RateLimiterServer;

// setup.ts has set the fake clock to T0 by now.
beforeEach(() => {
  server = newServer();
});

function take(key: string, n: number): void {
  for (let i = 0; i < n; i++) expect(server.consume(key), `consume #${i + 1}`).toBe(true);
}

/** Asserts the options in force by behaviour: capacity and refill interval (in ms). */
function expectOptions(maxTokens: number, intervalMs: number): void {
  const probe = `probe-${maxTokens}-${intervalMs}-${Date.now()}`;
  expect(server.getStatus(probe)).toEqual(status(maxTokens, maxTokens, 0));
  take(probe, maxTokens);
  expect(server.consume(probe)).toBe(false);
  expect(server.getStatus(probe)).toEqual(status(0, maxTokens, intervalMs));
  vi.advanceTimersByTime(intervalMs - 1);
  expect(server.getStatus(probe).remaining).toBe(0);
  vi.advanceTimersByTime(1);
  expect(server.getStatus(probe)).toEqual(status(1, maxTokens, intervalMs));
  server.reset(probe);
}

describe('setOptions: partial updates', () => {
  it('defaults are max_tokens 10 and refill_every_seconds 10', () => {
    expectOptions(10, 10_000);
  });

  it('setting both fields applies both', () => {
    server.setOptions({ max_tokens: 3, refill_every_seconds: 4 });
    expectOptions(3, 4_000);
  });

  it('only max_tokens: the interval keeps its value', () => {
    server.setOptions({ max_tokens: 5 });
    expectOptions(5, 10_000);
  });

  it('only refill_every_seconds: max_tokens keeps its value', () => {
    server.setOptions({ refill_every_seconds: 2 });
    expectOptions(10, 2_000);
  });

  it('successive partial updates combine', () => {
    server.setOptions({ max_tokens: 3 });
    server.setOptions({ refill_every_seconds: 4 });
    expectOptions(3, 4_000);
    server.setOptions({ max_tokens: 7 });
    expectOptions(7, 4_000);
  });

  it('{} changes nothing (defaults)', () => {
    server.setOptions({});
    expectOptions(10, 10_000);
  });

  it('{} changes nothing (custom options) and leaves buckets as they are', () => {
    server.setOptions({ max_tokens: 3, refill_every_seconds: 4 });
    server.consume('k', 2);
    vi.advanceTimersByTime(SECOND);
    server.setOptions({});
    expect(server.getStatus('k')).toEqual(status(1, 3, 3_000));
    expectOptions(3, 4_000);
  });

  it('a field set to undefined keeps its value', () => {
    server.setOptions({ max_tokens: 3, refill_every_seconds: 4 });
    server.setOptions({ max_tokens: undefined, refill_every_seconds: undefined });
    expectOptions(3, 4_000);
    server.setOptions({ max_tokens: 6, refill_every_seconds: undefined });
    expectOptions(6, 4_000);
    server.setOptions({ max_tokens: undefined, refill_every_seconds: 1 });
    expectOptions(6, 1_000);
  });

  it('setting the same options again changes nothing', () => {
    server.setOptions({ max_tokens: 4, refill_every_seconds: 2 });
    server.consume('k', 3);
    vi.advanceTimersByTime(500);
    server.setOptions({ max_tokens: 4, refill_every_seconds: 2 });
    expect(server.getStatus('k')).toEqual(status(1, 4, 1_500));
  });

  it('accepts an options object without a prototype', () => {
    const options = Object.assign(Object.create(null) as object, { max_tokens: 4 });
    server.setOptions(options);
    expectOptions(4, 10_000);
  });

  it('options belong to the instance', () => {
    const other = newServer();
    server.setOptions({ max_tokens: 2, refill_every_seconds: 1 });
    expect(other.getStatus('k')).toEqual(status(10, 10, 0));
    other.consume('k');
    expect(other.getStatus('k')).toEqual(status(9, 10, 10_000));
    expect(server.getStatus('k')).toEqual(status(2, 2, 0));
  });
});

describe('setOptions: existing buckets', () => {
  it('lowering max_tokens clamps a fuller bucket to the new capacity', () => {
    server.consume('k', 2); // 8 left
    server.setOptions({ max_tokens: 5 });
    expect(server.getStatus('k')).toEqual(status(5, 5, 0));
    take('k', 5);
    expect(server.consume('k')).toBe(false);
  });

  it('lowering max_tokens above what a bucket holds leaves it refilling', () => {
    server.consume('k', 8); // 2 left
    vi.advanceTimersByTime(3 * SECOND);
    server.setOptions({ max_tokens: 5 });
    expect(server.getStatus('k')).toEqual(status(2, 5, 7_000));
    vi.advanceTimersByTime(7 * SECOND + 20 * SECOND);
    expect(server.getStatus('k')).toEqual(status(5, 5, 0));
  });

  it('raising max_tokens: a used bucket refills up to the new capacity, an unused one is full', () => {
    server.consume('used', 2); // 8 of 10
    take('empty', 10);
    server.setOptions({ max_tokens: 20 });
    expect(server.getStatus('used')).toEqual(status(8, 20, 10_000));
    expect(server.getStatus('fresh')).toEqual(status(20, 20, 0));
    vi.advanceTimersByTime(100 * SECOND);
    expect(server.getStatus('empty')).toEqual(status(10, 20, 10_000));
    expect(server.getStatus('used')).toEqual(status(18, 20, 10_000));
    vi.advanceTimersByTime(100 * SECOND);
    expect(server.getStatus('empty')).toEqual(status(20, 20, 0));
  });

  it('a bucket that refilled to full unobserved stays full when max_tokens is raised', () => {
    take('k', 10);
    vi.advanceTimersByTime(100 * SECOND); // full at T0+100 s, though nothing looked at it
    server.setOptions({ max_tokens: 20 });
    // A full bucket is indistinguishable from an absent one: full at the new capacity.
    expect(server.getStatus('k')).toEqual(status(20, 20, 0));
    expect(server.getStatus('never-used')).toEqual(status(20, 20, 0));
  });

  it('a new interval applies to every bucket at its next access', () => {
    take('a', 10);
    take('b', 10);
    vi.advanceTimersByTime(2 * SECOND);
    server.setOptions({ refill_every_seconds: 1 });
    // Refilling since T0 at one token a second: 2 tokens at T0+2 s.
    expect(server.getStatus('a')).toEqual(status(2, 10, 1_000));
    server.setOptions({ refill_every_seconds: 100 });
    // 'b' still refills from T0: the next token is due at T0+100 s.
    expect(server.getStatus('b')).toEqual(status(0, 10, 98_000));
  });
});

describe('fractional and extreme intervals', () => {
  it('refill_every_seconds 0.25 is four tokens a second', () => {
    server.setOptions({ refill_every_seconds: 0.25 });
    take('k', 10);
    expect(server.getStatus('k')).toEqual(status(0, 10, 250));
    vi.advanceTimersByTime(SECOND);
    expect(server.getStatus('k')).toEqual(status(4, 10, 250));
    vi.advanceTimersByTime(125);
    expect(server.getStatus('k')).toEqual(status(4, 10, 125));
    vi.advanceTimersByTime(125);
    expect(server.getStatus('k')).toEqual(status(5, 10, 250));
    vi.advanceTimersByTime(5 * 250);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
  });

  it('reset_in_ms is rounded up to whole ms: refill_every_seconds 0.0015 (1.5 ms)', () => {
    server.setOptions({ refill_every_seconds: 0.0015 });
    take('k', 10);
    const seen: RateLimiterStatus[] = [];
    for (let ms = 0; ms <= 6; ms++) {
      vi.setSystemTime(T0 + ms);
      seen.push(server.getStatus('k'));
    }
    // Tokens are due at 1.5, 3, 4.5, 6 ms: a wait is the time to the next one, rounded up.
    expect(seen).toEqual([
      status(0, 10, 2), // next at 1.5 ms: 1.5 -> 2
      status(0, 10, 1), // 0.5 -> 1
      status(1, 10, 1), // next at 3 ms: 1 -> 1
      status(2, 10, 2), // next at 4.5 ms: 1.5 -> 2
      status(2, 10, 1), // 0.5 -> 1
      status(3, 10, 1), // next at 6 ms: 1 -> 1
      status(4, 10, 2), // next at 7.5 ms: 1.5 -> 2
    ]);
  });

  it('a wait is never early: refill_every_seconds 1/3 is 333333334 ns, rounded up', () => {
    server.setOptions({ refill_every_seconds: 1 / 3 });
    take('k', 10);
    // Tokens are due at n * 333.333334 ms after T0.
    const at = (ms: number): RateLimiterStatus => {
      vi.setSystemTime(T0 + ms);
      return server.getStatus('k');
    };
    expect(at(0)).toEqual(status(0, 10, 334)); // 333.333334 -> 334
    expect(at(1)).toEqual(status(0, 10, 333)); // 332.333334 -> 333
    expect(at(333)).toEqual(status(0, 10, 1)); // 0.333334 -> 1
    expect(at(334)).toEqual(status(1, 10, 333)); // next at 666.666668: 332.666668 -> 333
    expect(at(666)).toEqual(status(1, 10, 1)); // 0.666668 -> 1
    expect(at(667)).toEqual(status(2, 10, 334)); // next at 1000.000002: 333.000002 -> 334
    expect(at(1000)).toEqual(status(2, 10, 1)); // 3 intervals are 1000.000002 ms: not yet
    expect(at(1001)).toEqual(status(3, 10, 333)); // next at 1333.333336: 332.333336 -> 333
  });

  it('a client that waits reset_in_ms always finds a token', () => {
    server.setOptions({ refill_every_seconds: 0.0437 });
    take('k', 10);
    for (let i = 0; i < 200; i++) {
      const { reset_in_ms } = server.getStatus('k');
      expect(reset_in_ms).toBeGreaterThan(0);
      expect(Number.isInteger(reset_in_ms)).toBe(true);
      vi.advanceTimersByTime(reset_in_ms - 1);
      expect(server.consume('k'), `early by 1 ms, round ${i}`).toBe(false);
      vi.advanceTimersByTime(1);
      expect(server.consume('k'), `on time, round ${i}`).toBe(true);
    }
  });

  it('an interval below a nanosecond is one nanosecond: reset_in_ms is 1, then full', () => {
    server.setOptions({ refill_every_seconds: 1e-300 });
    take('k', 10);
    expect(server.getStatus('k')).toEqual(status(0, 10, 1));
    vi.advanceTimersByTime(1);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
  });

  it('a very long interval is exact: 2^53 s', () => {
    server.setOptions({ max_tokens: 1, refill_every_seconds: 2 ** 53 });
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(0, 1, 2 ** 53 * 1000));
    vi.advanceTimersByTime(DAY_MS);
    expect(server.getStatus('k')).toEqual(status(0, 1, 2 ** 53 * 1000 - DAY_MS));
  });

  it('max_tokens 1 allows one call per interval', () => {
    server.setOptions({ max_tokens: 1 });
    expect(server.consume('k')).toBe(true);
    expect(server.consume('k')).toBe(false);
    expect(server.getStatus('k')).toEqual(status(0, 1, 10_000));
    vi.advanceTimersByTime(10 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 1, 0));
  });

  it('max_tokens 2^53 - 1 counts exactly', () => {
    server.setOptions({ max_tokens: MAX_SAFE });
    expect(server.getStatus('k')).toEqual(status(MAX_SAFE, MAX_SAFE, 0));
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(MAX_SAFE - 1, MAX_SAFE, 10_000));
    expect(server.consume('all', MAX_SAFE)).toBe(true);
    expect(server.getStatus('all')).toEqual(status(0, MAX_SAFE, 10_000));
  });
});
