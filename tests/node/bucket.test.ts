// The token bucket as a consumer sees it (docs/SPEC.md, sections 2 and 3): defaults,
// depletion, refill, getStatus, reset, cost 0 / above capacity / fractional, and a clock
// that goes back.
// Time is Date.now() under vi.useFakeTimers(): nothing here sleeps.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import { type Ctx, SECOND, T0, newServer, status } from './support';

const DAY = 86_400 * SECOND;

let server: RateLimiterServer;

// setup.ts has set the fake clock to T0 by now.
beforeEach(() => {
  server = newServer();
});

/** Consumes `n` single tokens, each of which must succeed. */
function take(key: string, n: number): void {
  for (let i = 0; i < n; i++) expect(server.consume(key), `consume #${i + 1}`).toBe(true);
}

/** Empties a default (10-token) bucket. */
function drain(key: string): void {
  take(key, 10);
  expect(server.getStatus(key).remaining).toBe(0);
}

describe('construction', () => {
  it('is constructed as (ctx, env) and keeps both', () => {
    const ctx = { id: 'ctx' } as unknown as Ctx;
    const env = { SOME_BINDING: 1 };
    const s = new RateLimiterServer(ctx, env);
    expect(s).toBeInstanceOf(RateLimiterServer);
    const fields = s as unknown as { ctx: unknown; env: unknown };
    expect(fields.ctx).toBe(ctx);
    expect(fields.env).toBe(env);
  });

  it('methods are callable synchronously on an instance', () => {
    const consumed: unknown = server.consume('k');
    const checked: unknown = server.check('k');
    const reported: unknown = server.getStatus('k');
    expect(consumed).toBe(true);
    expect(checked).toBe(true);
    expect(reported).not.toBeInstanceOf(Promise);
    expect(reported).toEqual(status(9, 10, 10_000));
    expect(server.setOptions({})).toBeUndefined();
    expect(server.reset('k')).toBeUndefined();
  });

  it('two instances have separate buckets', () => {
    const other = newServer();
    drain('k');
    expect(other.getStatus('k')).toEqual(status(10, 10, 0));
    expect(other.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });
});

describe('defaults and depletion', () => {
  it('defaults to 10 tokens refilled one every 10 s', () => {
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    drain('k');
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
    vi.advanceTimersByTime(10 * SECOND - 1);
    expect(server.getStatus('k')).toEqual(status(0, 10, 1));
    vi.advanceTimersByTime(1);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
  });

  it('10 consumes succeed and the 11th fails', () => {
    for (let i = 1; i <= 10; i++) expect(server.consume('k'), `consume #${i}`).toBe(true);
    expect(server.consume('k')).toBe(false);
    expect(server.check('k')).toBe(false);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });

  it('a failed consume takes nothing', () => {
    take('k', 9);
    expect(server.consume('k', 2)).toBe(false);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
    expect(server.consume('k', 1)).toBe(true);
    expect(server.getStatus('k').remaining).toBe(0);
  });

  it('partial consumption: consume 3 leaves 7', () => {
    expect(server.consume('k', 3)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(7, 10, 10_000));
  });

  it('a cost equal to what is left succeeds and empties the bucket', () => {
    expect(server.consume('k', 10)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
    expect(server.consume('k')).toBe(false);
  });
});

describe('refill', () => {
  it('one interval after draining, one token is back', () => {
    drain('k');
    vi.advanceTimersByTime(10 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
    expect(server.consume('k')).toBe(true);
    expect(server.consume('k')).toBe(false);
  });

  it('ten intervals after draining, the bucket is full', () => {
    drain('k');
    vi.advanceTimersByTime(100 * SECOND);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    take('k', 10);
    expect(server.consume('k')).toBe(false);
  });

  it('never refills above max_tokens, however long the bucket idles', () => {
    drain('k');
    vi.advanceTimersByTime(DAY);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    take('k', 10);
    expect(server.consume('k')).toBe(false);
  });

  it('a bucket that was never used does not bank tokens while idle', () => {
    vi.advanceTimersByTime(DAY);
    take('k', 10);
    expect(server.consume('k')).toBe(false);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });

  it('a full bucket banks no progress: its refill clock restarts at the next consume', () => {
    expect(server.consume('k')).toBe(true); // 9 left, refilling since T0
    vi.advanceTimersByTime(15 * SECOND); // full at T0+10 s
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    expect(server.consume('k')).toBe(true); // at T0+15 s: the next token is due at T0+25 s
    expect(server.getStatus('k')).toEqual(status(9, 10, 10_000));
    vi.advanceTimersByTime(5 * SECOND);
    expect(server.getStatus('k')).toEqual(status(9, 10, 5_000));
  });

  it('sub-interval progress is kept: +15 s gives one token, the next +5 s completes the second', () => {
    drain('k');
    vi.advanceTimersByTime(15 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 5_000));
    vi.advanceTimersByTime(5 * SECOND);
    expect(server.getStatus('k')).toEqual(status(2, 10, 10_000));
  });

  it('consuming does not reset sub-interval progress', () => {
    drain('k');
    vi.advanceTimersByTime(15 * SECOND);
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(0, 10, 5_000));
    vi.advanceTimersByTime(5 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
  });

  it('rapid calls do not reset the refill timer', () => {
    drain('k');
    for (let s = 1; s <= 9; s++) {
      vi.advanceTimersByTime(SECOND);
      expect(server.consume('k'), `consume at +${s} s`).toBe(false);
      expect(server.check('k'), `check at +${s} s`).toBe(false);
      expect(server.getStatus('k'), `status at +${s} s`).toEqual(status(0, 10, 10_000 - s * SECOND));
    }
    vi.advanceTimersByTime(SECOND); // T0+10 s: the token is on time
    expect(server.consume('k')).toBe(true);
    expect(server.consume('k')).toBe(false);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });

  it('refill moments stay exact over many observations at a realistic epoch', () => {
    server.setOptions({ max_tokens: 1000, refill_every_seconds: 0.1 });
    take('k', 1000);
    // 999 observations one millisecond apart, then the 1000th ms: 10 tokens, no more, no less.
    for (let ms = 1; ms < 1000; ms++) {
      vi.advanceTimersByTime(1);
      expect(server.getStatus('k').remaining).toBe(Math.floor(ms / 100));
    }
    vi.advanceTimersByTime(1);
    expect(server.getStatus('k')).toEqual(status(10, 1000, 100));
  });

  it('keeps the token-bucket bound: never more than max_tokens + floor(T / interval) in a window', () => {
    server.setOptions({ refill_every_seconds: 0.25 });
    const successes: number[] = [];
    for (let t = 0; t <= 10_000; t += 7) {
      vi.setSystemTime(T0 + t);
      if (server.consume('k')) successes.push(t);
    }
    // 10 at once, then one per 250 ms token: tokens 1..39 arrive by the last call (9996 ms).
    expect(successes).toHaveLength(49);
    for (let i = 0; i < successes.length; i++) {
      for (let j = i; j < successes.length; j++) {
        const window = successes[j]! - successes[i]!;
        expect(j - i + 1).toBeLessThanOrEqual(10 + Math.floor(window / 250));
      }
    }
  });
});

describe('check', () => {
  it('answers like consume and changes nothing', () => {
    expect(server.check('k')).toBe(true);
    expect(server.check('k', 10)).toBe(true);
    expect(server.check('k', 10.5)).toBe(false);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    take('k', 7);
    expect(server.check('k', 3)).toBe(true);
    expect(server.check('k', 3.5)).toBe(false);
    for (let i = 0; i < 100; i++) server.check('k');
    expect(server.getStatus('k')).toEqual(status(3, 10, 10_000));
    expect(server.consume('k', 3)).toBe(true);
    expect(server.check('k')).toBe(false);
  });

  it('sees refilled tokens without consuming them', () => {
    drain('k');
    expect(server.check('k')).toBe(false);
    vi.advanceTimersByTime(10 * SECOND);
    expect(server.check('k')).toBe(true);
    expect(server.check('k', 2)).toBe(false);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
  });
});

describe('getStatus', () => {
  it('a new key is full: { remaining: 10, limit: 10, reset_in_ms: 0 }', () => {
    expect(server.getStatus('new')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('a consumed key reports what is left and the wait for the next token', () => {
    server.consume('k');
    expect(server.getStatus('k')).toEqual({ remaining: 9, limit: 10, reset_in_ms: 10_000 });
  });

  it('mid-refill: consume 5, +3 s gives { remaining: 5, limit: 10, reset_in_ms: 7000 }', () => {
    expect(server.consume('k', 5)).toBe(true);
    vi.advanceTimersByTime(3 * SECOND);
    expect(server.getStatus('k')).toEqual({ remaining: 5, limit: 10, reset_in_ms: 7000 });
  });

  it('a key refilled to full reports reset_in_ms 0', () => {
    server.consume('k');
    vi.advanceTimersByTime(10 * SECOND);
    expect(server.getStatus('k')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('reports custom options', () => {
    server.setOptions({ max_tokens: 5, refill_every_seconds: 2 });
    expect(server.getStatus('k')).toEqual({ remaining: 5, limit: 5, reset_in_ms: 0 });
    server.consume('k', 2);
    expect(server.getStatus('k')).toEqual({ remaining: 3, limit: 5, reset_in_ms: 2000 });
    vi.advanceTimersByTime(500);
    expect(server.getStatus('k')).toEqual({ remaining: 3, limit: 5, reset_in_ms: 1500 });
  });

  it('consumes nothing', () => {
    server.consume('k', 4);
    for (let i = 0; i < 100; i++) server.getStatus('k');
    expect(server.getStatus('k')).toEqual(status(6, 10, 10_000));
    take('k', 6);
    expect(server.consume('k')).toBe(false);
  });

  it('returns a plain object with exactly remaining, limit and reset_in_ms', () => {
    server.consume('k', 2);
    const s = server.getStatus('k');
    expect(Object.getPrototypeOf(s)).toBe(Object.prototype);
    expect(Object.keys(s).sort()).toEqual(['limit', 'remaining', 'reset_in_ms']);
    expect(typeof s.remaining).toBe('number');
    expect(typeof s.limit).toBe('number');
    expect(typeof s.reset_in_ms).toBe('number');
    expect(JSON.parse(JSON.stringify(s))).toEqual({ remaining: 8, limit: 10, reset_in_ms: 10_000 });
    expect(structuredClone(s)).toEqual(s);
  });

  it('returns a fresh object: mutating one result changes nothing', () => {
    const s = server.getStatus('k');
    s.remaining = 0;
    s.limit = 1;
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    expect(server.consume('k', 10)).toBe(true);
  });
});

describe('reset', () => {
  it('restores full capacity', () => {
    drain('k');
    server.reset('k');
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    take('k', 10);
    expect(server.consume('k')).toBe(false);
  });

  it('forgets sub-interval progress: the refill clock starts at the next consume', () => {
    drain('k');
    vi.advanceTimersByTime(7 * SECOND);
    server.reset('k');
    take('k', 10);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });

  it('is a no-op on an unknown key', () => {
    server.consume('other', 4);
    expect(() => server.reset('unknown')).not.toThrow();
    expect(server.getStatus('unknown')).toEqual(status(10, 10, 0));
    expect(server.getStatus('other')).toEqual(status(6, 10, 10_000));
  });

  it('touches only its own key', () => {
    drain('a');
    drain('b');
    server.reset('a');
    expect(server.getStatus('a')).toEqual(status(10, 10, 0));
    expect(server.getStatus('b')).toEqual(status(0, 10, 10_000));
  });
});

describe('independent keys', () => {
  it('each key has its own bucket', () => {
    drain('a');
    expect(server.consume('a')).toBe(false);
    expect(server.getStatus('b')).toEqual(status(10, 10, 0));
    expect(server.consume('b', 3)).toBe(true);
    expect(server.getStatus('a')).toEqual(status(0, 10, 10_000));
    expect(server.getStatus('b')).toEqual(status(7, 10, 10_000));
  });

  it('each key has its own refill clock', () => {
    drain('a');
    vi.advanceTimersByTime(4 * SECOND);
    drain('b');
    vi.advanceTimersByTime(6 * SECOND);
    expect(server.getStatus('a')).toEqual(status(1, 10, 10_000));
    expect(server.getStatus('b')).toEqual(status(0, 10, 4_000));
  });
});

describe('cost 0', () => {
  it('succeeds on a full bucket and changes nothing', () => {
    expect(server.check('k', 0)).toBe(true);
    expect(server.consume('k', 0)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
  });

  it('succeeds on a partly used bucket and changes nothing', () => {
    server.consume('k', 4);
    vi.advanceTimersByTime(3 * SECOND);
    expect(server.consume('k', 0)).toBe(true);
    expect(server.check('k', 0)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(6, 10, 7_000));
  });

  it('succeeds on an empty bucket and changes nothing', () => {
    drain('k');
    vi.advanceTimersByTime(SECOND);
    expect(server.consume('k', 0)).toBe(true);
    expect(server.check('k', 0)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(0, 10, 9_000));
    vi.advanceTimersByTime(9 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
  });
});

describe('cost above capacity', () => {
  it('check and consume return false, do not throw, and consume nothing', () => {
    expect(server.check('k', 11)).toBe(false);
    expect(server.consume('k', 11)).toBe(false);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
    expect(server.consume('k', 10)).toBe(true);
  });

  it('is never satisfiable, even after a long idle', () => {
    server.consume('k', 2);
    vi.advanceTimersByTime(DAY);
    expect(server.consume('k', 10.5)).toBe(false);
    expect(server.consume('k', 1e300)).toBe(false);
    expect(server.consume('k', Number.MAX_VALUE)).toBe(false);
    expect(server.check('k', Number.MAX_SAFE_INTEGER)).toBe(false);
    expect(server.getStatus('k')).toEqual(status(10, 10, 0));
  });

  it('leaves a partly used bucket as it was', () => {
    server.setOptions({ max_tokens: 3 });
    server.consume('k', 1);
    expect(server.consume('k', 3.5)).toBe(false);
    expect(server.check('k', 4)).toBe(false);
    expect(server.getStatus('k')).toEqual(status(2, 3, 10_000));
  });
});

describe('fractional costs', () => {
  it('consume 0.5 leaves 9.5', () => {
    expect(server.consume('k', 0.5)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(9.5, 10, 10_000));
  });

  it('0.1 ten times leaves exactly 9, and then exactly 0', () => {
    for (let i = 0; i < 10; i++) expect(server.consume('k', 0.1)).toBe(true);
    expect(server.getStatus('k').remaining).toBe(9);
    expect(server.consume('k', 9)).toBe(true);
    expect(server.getStatus('k').remaining).toBe(0);
    expect(server.check('k', 1e-9)).toBe(false);
  });

  it('0.1 then 0.2 leaves exactly 9.7 (no floating-point residue)', () => {
    server.consume('k', 0.1);
    server.consume('k', 0.2);
    expect(server.getStatus('k').remaining).toBe(9.7);
  });

  it('counts billionths of a token exactly', () => {
    expect(server.consume('k', 1e-9)).toBe(true);
    expect(server.getStatus('k').remaining).toBe(9.999999999);
    expect(server.consume('k', 9.999999999)).toBe(true);
    expect(server.getStatus('k').remaining).toBe(0);
  });

  it('a fractional remainder refills in whole tokens', () => {
    expect(server.consume('k', 9.5)).toBe(true);
    expect(server.consume('k', 1)).toBe(false);
    expect(server.check('k', 0.5)).toBe(true);
    vi.advanceTimersByTime(10 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1.5, 10, 10_000));
    expect(server.consume('k', 1.5)).toBe(true);
    expect(server.getStatus('k').remaining).toBe(0);
  });
});

describe('a clock that goes back', () => {
  it('never refills and never throws', () => {
    drain('k');
    vi.setSystemTime(T0 - 60 * SECOND);
    expect(server.consume('k')).toBe(false);
    expect(server.check('k')).toBe(false);
    // The next token is still due at T0 + 10 s.
    expect(server.getStatus('k')).toEqual(status(0, 10, 70_000));
    vi.setSystemTime(T0 + 10 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
  });

  it('meets the bucket as the last change left it: a read keeps no refill', () => {
    drain('k');
    vi.setSystemTime(T0 + 15 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 5_000));
    vi.setSystemTime(T0 + 5 * SECOND);
    expect(server.getStatus('k')).toEqual(status(0, 10, 5_000));
    expect(server.consume('k')).toBe(false);
    vi.setSystemTime(T0 + 20 * SECOND);
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(1, 10, 10_000));
    // A consume keeps its refill: going back again finds what it left.
    vi.setSystemTime(T0 + 12 * SECOND);
    expect(server.getStatus('k')).toEqual(status(1, 10, 18_000));
  });

  it('a full bucket can still be consumed after the clock goes back', () => {
    vi.setSystemTime(T0 - DAY);
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(9, 10, 10_000));
  });

  it('does not throw even before the Unix epoch', () => {
    drain('k');
    vi.setSystemTime(-5 * SECOND);
    expect(server.consume('k')).toBe(false);
    expect(server.check('k')).toBe(false);
    const s = server.getStatus('k');
    expect(s.remaining).toBe(0);
    expect(Number.isInteger(s.reset_in_ms)).toBe(true);
    expect(s.reset_in_ms).toBeGreaterThan(10_000);
  });
});
