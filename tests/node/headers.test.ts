// rateLimitHeaders (docs/SPEC.md, section 8): the response headers for a limit() or
// limitAll() decision.
// IETF RateLimit-Policy / RateLimit (draft-ietf-httpapi-ratelimit-headers-11) are parsed back
// with a strict Structured Fields list parser (RFC 9651) written here, so both the syntax and
// the values are checked; X-RateLimit-* and Retry-After are checked as plain values,
// including the rounding at the edges (times up, tokens down: a client is never early).
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { RateLimiterServer, rateLimitHeaders } from '@delightstack/rate-limiter';
import type { RateLimitAllDecision, RateLimitDecision, RateLimitRequest } from '@delightstack/rate-limiter';
import { newServer } from './support';

const SF_INTEGER_MAX = 999_999_999_999_999;
const IETF = ['RateLimit-Policy', 'RateLimit'];
const LEGACY = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

let server: RateLimiterServer;

// setup.ts has set the fake clock to T0 by now.
beforeEach(() => {
  server = newServer();
});

// ---------------------------------------------------------------------------------------
// A strict Structured Fields list parser, for lists of sf-string items with integer params.

interface Member {
  name: string;
  /** Parameter names in order. */
  keys: string[];
  params: Record<string, number>;
}

function parseList(field: string): Member[] {
  let i = 0;
  const fail = (why: string): never => {
    throw new SyntaxError(`${why} at ${i} in ${JSON.stringify(field)}`);
  };
  const skipOWS = (): void => {
    while (field[i] === ' ' || field[i] === '\t') i++;
  };
  const parseString = (): string => {
    if (field[i] !== '"') fail('expected a string');
    i++;
    let out = '';
    for (;;) {
      if (i >= field.length) fail('unterminated string');
      const c = field[i++];
      if (c === '\\') {
        const next = field[i++];
        if (next !== '"' && next !== '\\') fail('bad escape');
        out += next;
      } else if (c === '"') {
        return out;
      } else {
        const code = c.charCodeAt(0);
        if (code < 0x20 || code > 0x7e) fail('character outside printable ASCII');
        out += c;
      }
    }
  };
  const parseKey = (): string => {
    const m = /^[a-z*][a-z0-9_\-.*]*/.exec(field.slice(i));
    if (!m) return fail('expected a key');
    i += m[0].length;
    return m[0];
  };
  const parseInteger = (): number => {
    const m = /^-?[0-9]+/.exec(field.slice(i));
    if (!m) return fail('expected an integer');
    if (m[0].replace('-', '').length > 15) fail('integer of more than 15 digits');
    if (field[i + m[0].length] === '.') fail('expected an integer, got a decimal');
    i += m[0].length;
    return Number(m[0]);
  };
  const members: Member[] = [];
  if (field.length === 0) fail('empty list');
  for (;;) {
    const name = parseString();
    const keys: string[] = [];
    const params: Record<string, number> = {};
    while (field[i] === ';') {
      i++;
      while (field[i] === ' ') i++;
      const key = parseKey();
      if (field[i] !== '=') fail('expected =integer');
      i++;
      if (key in params) fail(`repeated parameter ${key}`);
      keys.push(key);
      params[key] = parseInteger();
    }
    members.push({ name, keys, params });
    skipOWS();
    if (i === field.length) return members;
    if (field[i] !== ',') fail('expected ,');
    i++;
    skipOWS();
    if (i === field.length) fail('trailing comma');
  }
}

/** `[name, q, w]` per member of RateLimit-Policy, `[name, r, t]` per member of RateLimit. */
function parsed(headers: Record<string, string>): { policy: [string, number, number][]; limit: [string, number, number][] } {
  const policy = parseList(headers['RateLimit-Policy']);
  const limit = parseList(headers['RateLimit']);
  for (const m of policy) expect(m.keys).toEqual(['q', 'w']);
  for (const m of limit) expect(m.keys).toEqual(['r', 't']);
  return {
    policy: policy.map((m) => [m.name, m.params.q, m.params.w]),
    limit: limit.map((m) => [m.name, m.params.r, m.params.t]),
  };
}

function expectPlainHeaders(headers: unknown, keys: string[]): asserts headers is Record<string, string> {
  expect(Object.getPrototypeOf(headers)).toBe(Object.prototype);
  expect(Object.keys(headers as object).sort()).toEqual([...keys].sort());
  for (const value of Object.values(headers as object)) expect(typeof value).toBe('string');
}

// Decisions built field by field, consistent or not (the headers must not trust `allowed`
// alone): hence the casts past the types' `allowed` unions.
type DecisionFields = { [K in keyof RateLimitDecision]: RateLimitDecision[K] | (K extends 'allowed' ? boolean : number) };

function mk(fields: Partial<DecisionFields> = {}): RateLimitDecision {
  return <RateLimitDecision>{
    allowed: true,
    remaining: 5,
    limit: 10,
    reset_in_ms: 1_000,
    retry_after_ms: 0,
    window_ms: 10_000,
    ...fields,
  };
}

function all(results: RateLimitDecision[], allowed: boolean, retry_after_ms: number | null): RateLimitAllDecision {
  return <RateLimitAllDecision>{ allowed, retry_after_ms, results };
}

describe('the parser in this file', () => {
  it('accepts the draft examples and rejects malformed lists', () => {
    expect(parseList('"api";q=10;w=100')).toEqual([{ name: 'api', keys: ['q', 'w'], params: { q: 10, w: 100 } }]);
    expect(parseList('"a\\"b\\\\c";r=3;t=7,"x";r=0;t=0').map((m) => m.name)).toEqual(['a"b\\c', 'x']);
    expect(parseList('"a";r=1;t=1 ,\t"b";r=2;t=2')).toHaveLength(2);
    for (const bad of ['', 'api;q=1', '"api', '"a";q=1.5', '"a";q', '"a";Q=1', '"a";q=1,', '"a\\x"', '"a";q=1234567890123456', '"é"']) {
      expect(() => parseList(bad), bad).toThrow(SyntaxError);
    }
  });
});

// ---------------------------------------------------------------------------------------
// One limit

describe('rateLimitHeaders for a limit() decision', () => {
  it('an allowed decision: the five headers, no Retry-After, as a plain object of strings', () => {
    const headers = rateLimitHeaders(server.limit('k'));
    expectPlainHeaders(headers, [...IETF, ...LEGACY]);
    expect(headers).toStrictEqual({
      'RateLimit-Policy': '"default";q=10;w=100',
      'RateLimit': '"default";r=9;t=10',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '10',
    });
    expect(parsed(headers)).toEqual({ policy: [['default', 10, 100]], limit: [['default', 9, 10]] });
  });

  it('a full bucket: r is the capacity and t is 0', () => {
    const headers = rateLimitHeaders(server.limit('k', 0));
    expect(parsed(headers)).toEqual({ policy: [['default', 10, 100]], limit: [['default', 10, 0]] });
    expect(headers['X-RateLimit-Reset']).toBe('0');
  });

  it('a denied decision adds Retry-After, and t and X-RateLimit-Reset are its wait (8.3)', () => {
    server.consume('k', 10);
    vi.advanceTimersByTime(2_500);
    const d = server.limit('k', 3);
    // The next token in 7.5 s, the three the call needs in 27.5 s.
    expect(d).toMatchObject({ reset_in_ms: 7_500, retry_after_ms: 27_500 });
    const headers = rateLimitHeaders(d);
    expectPlainHeaders(headers, [...IETF, ...LEGACY, 'Retry-After']);
    expect(headers).toStrictEqual({
      'RateLimit-Policy': '"default";q=10;w=100',
      'RateLimit': '"default";r=0;t=28',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '28',
      'Retry-After': '28',
    });
    expect(parsed(headers)).toEqual({ policy: [['default', 10, 100]], limit: [['default', 0, 28]] });
  });

  it('a denied decision that no wait can satisfy (retry_after_ms null) has no Retry-After', () => {
    const d = server.limit('k', 11);
    expect(d.retry_after_ms).toBeNull();
    const headers = rateLimitHeaders(d);
    expectPlainHeaders(headers, [...IETF, ...LEGACY]);
    expect(parsed(headers)).toEqual({ policy: [['default', 10, 100]], limit: [['default', 10, 0]] });
  });

  it('fractional intervals: every time is rounded up', () => {
    server.setOptions({ refill_every_seconds: 1 / 3 });
    server.consume('k', 10);
    const d = server.limit('k', 3);
    // Next token at 333_333_334 ns; 3 tokens at 1_000_000_002 ns; window 3_333_333_340 ns.
    expect(d).toMatchObject({ reset_in_ms: 334, retry_after_ms: 1_001, window_ms: 3_334 });
    const headers = rateLimitHeaders(d);
    expect(parsed(headers)).toEqual({ policy: [['default', 10, 4]], limit: [['default', 0, 2]] });
    expect(headers['Retry-After']).toBe('2');
    expect(headers['X-RateLimit-Reset']).toBe('2');
  });

  it('a decision made under a policy reports that policy', () => {
    const d = server.limit('k', 2.5, { max_tokens: 60, refill_every_seconds: 1 });
    const headers = rateLimitHeaders(d, { name: 'per-minute' });
    expect(parsed(headers)).toEqual({ policy: [['per-minute', 60, 60]], limit: [['per-minute', 57, 1]] });
    expect(headers['X-RateLimit-Limit']).toBe('60');
    expect(headers['X-RateLimit-Remaining']).toBe('57');
  });

  it('does not modify the decision', () => {
    const d = Object.freeze(mk({ allowed: false, remaining: 2.9, retry_after_ms: 1_234 }));
    const copy = { ...d };
    rateLimitHeaders(d, { name: 'x' });
    expect(d).toEqual(copy);
  });
});

describe('rounding at the edges', () => {
  it.each([
    [0, 0],
    [1, 1],
    [999, 1],
    [1_000, 1],
    [1_001, 2],
    [1_999, 2],
    [2_000, 2],
    [86_400_001, 86_401],
  ])('reset_in_ms %s → t=%s and X-RateLimit-Reset %s', (reset_in_ms, seconds) => {
    const headers = rateLimitHeaders(mk({ reset_in_ms }));
    expect(parsed(headers).limit).toEqual([['default', 5, seconds]]);
    expect(headers['X-RateLimit-Reset']).toBe(String(seconds));
  });

  it.each([
    [2.9, 2],
    [0.5, 0],
    [0, 0],
    [3, 3],
    [9.999999999, 9],
  ])('remaining %s → r=%s and X-RateLimit-Remaining %s', (remaining, whole) => {
    const headers = rateLimitHeaders(mk({ remaining }));
    expect(parsed(headers).limit).toEqual([['default', whole, 1]]);
    expect(headers['X-RateLimit-Remaining']).toBe(String(whole));
  });

  it.each([
    [1, 1],
    [999, 1],
    [1_000, 1],
    [1_001, 2],
    [3_600_000, 3_600],
  ])('window_ms %s → w=%s', (window_ms, seconds) => {
    expect(parsed(rateLimitHeaders(mk({ window_ms }))).policy).toEqual([['default', 10, seconds]]);
  });

  it.each([
    [1, '1'],
    [999, '1'],
    [1_000, '1'],
    [1_001, '2'],
    [2_000, '2'],
    [2_001, '3'],
    [0, '1'], // at least 1 on a denied decision
  ])('retry_after_ms %s → Retry-After %s', (retry_after_ms, header) => {
    const headers = rateLimitHeaders(mk({ allowed: false, retry_after_ms }));
    expect(headers['Retry-After']).toBe(header);
  });

  it('a real 1 ms wait gives Retry-After 1', () => {
    server.setOptions({ refill_every_seconds: 0.0015 });
    server.consume('k', 10);
    vi.advanceTimersByTime(1);
    const d = server.limit('k');
    expect(d.retry_after_ms).toBe(1);
    expect(rateLimitHeaders(d)['Retry-After']).toBe('1');
  });

  it('no Retry-After when allowed, whatever retry_after_ms says, nor when it is null', () => {
    expect(rateLimitHeaders(mk({ allowed: true, retry_after_ms: 0 }))).not.toHaveProperty('Retry-After');
    expect(rateLimitHeaders(mk({ allowed: true, retry_after_ms: 5_000 }))).not.toHaveProperty('Retry-After');
    expect(rateLimitHeaders(mk({ allowed: false, retry_after_ms: null }))).not.toHaveProperty('Retry-After');
  });

  it('huge values stay valid Structured Fields integers (at most 15 digits)', () => {
    const d = server.limit('k', 1, { max_tokens: Number.MAX_SAFE_INTEGER, refill_every_seconds: 1e6 });
    const headers = rateLimitHeaders(d);
    const { policy, limit } = parsed(headers);
    for (const [, a, b] of [...policy, ...limit]) {
      expect(a).toBeLessThanOrEqual(SF_INTEGER_MAX);
      expect(b).toBeLessThanOrEqual(SF_INTEGER_MAX);
    }
    expect(limit[0][2]).toBe(1_000_000);
  });
});

// ---------------------------------------------------------------------------------------
// Names

describe('policy names', () => {
  it('default "default"; options.name replaces it', () => {
    expect(parsed(rateLimitHeaders(mk())).policy[0][0]).toBe('default');
    expect(parsed(rateLimitHeaders(mk(), {})).policy[0][0]).toBe('default');
    const headers = rateLimitHeaders(mk(), { name: 'api' });
    expect(headers['RateLimit-Policy']).toBe('"api";q=10;w=10');
    expect(headers['RateLimit']).toBe('"api";r=5;t=1');
  });

  it.each(['say "hi"', 'back\\slash', '\\"', '"', '\\', 'a "b" \\c\\ "'])('%s is escaped and parses back', (name) => {
    const headers = rateLimitHeaders(mk(), { name });
    const { policy, limit } = parsed(headers);
    expect(policy[0][0]).toBe(name);
    expect(limit[0][0]).toBe(name);
  });

  it('escapes exactly " and \\ with a backslash', () => {
    expect(rateLimitHeaders(mk(), { name: 'a"b\\c' })['RateLimit-Policy']).toBe('"a\\"b\\\\c";q=10;w=10');
  });

  it('every printable ASCII character is accepted', () => {
    let name = '';
    for (let c = 0x20; c <= 0x7e; c++) name += String.fromCharCode(c);
    const { policy, limit } = parsed(rateLimitHeaders(mk(), { name }));
    expect(policy[0][0]).toBe(name);
    expect(limit[0][0]).toBe(name);
    expect(parsed(rateLimitHeaders(mk(), { name: '' })).policy[0][0]).toBe('');
  });

  it.each([
    ['é', 'é'],
    ['a newline', 'a\nb'],
    ['a tab', 'a\tb'],
    ['DEL', 'a\x7f'],
    ['NUL', '\0'],
    ['an emoji', 'api 🚀'],
    ['a lone surrogate', '\ud800'],
  ])('%s is rejected with a TypeError', (_, name) => {
    expect(() => rateLimitHeaders(mk(), { name })).toThrow(TypeError);
    expect(() => rateLimitHeaders(all([mk(), mk()], true, 0), { name: ['ok', name] })).toThrow(TypeError);
  });
});

// ---------------------------------------------------------------------------------------
// Several limits

describe('rateLimitHeaders for a limitAll() decision', () => {
  const SEC = { max_tokens: 10, refill_every_seconds: 0.1 };
  const PER_HOUR = { max_tokens: 1000, refill_every_seconds: 3.6 };
  const both = (): RateLimitRequest[] => [
    { key: 'sec', policy: SEC },
    { key: 'hour', policy: PER_HOUR },
  ];

  it('one list member per limit, joined with ", ", named name-1, name-2…', () => {
    const d = server.limitAll(both());
    expect(d.allowed).toBe(true);
    const headers = rateLimitHeaders(d);
    expectPlainHeaders(headers, [...IETF, ...LEGACY]);
    expect(headers).toStrictEqual({
      'RateLimit-Policy': '"default-1";q=10;w=1, "default-2";q=1000;w=3600',
      'RateLimit': '"default-1";r=9;t=1, "default-2";r=999;t=4',
      // The binding limit when allowed: the fewest whole tokens left (9 of 10).
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1',
    });
    expect(parsed(headers)).toEqual({
      policy: [
        ['default-1', 10, 1],
        ['default-2', 1000, 3600],
      ],
      limit: [
        ['default-1', 9, 1],
        ['default-2', 999, 4],
      ],
    });
  });

  it('an empty limitAll result has no limit to report: {}', () => {
    const d = server.limitAll([]);
    expect(d).toStrictEqual({ allowed: true, retry_after_ms: 0, results: [] });
    for (const headers of [
      rateLimitHeaders(d),
      rateLimitHeaders(d, { name: 'api' }),
      rateLimitHeaders(d, { name: [] }),
      rateLimitHeaders(all([], true, 0)),
    ]) {
      expectPlainHeaders(headers, []);
      expect(headers).toStrictEqual({});
    }
  });

  it('a single member is named "default" (not "default-1"), as for limit()', () => {
    const d = server.limitAll([{ key: 'a', policy: SEC }]);
    expect(d.allowed).toBe(true);
    const headers = rateLimitHeaders(d);
    expectPlainHeaders(headers, [...IETF, ...LEGACY]);
    expect(headers).toStrictEqual({
      'RateLimit-Policy': '"default";q=10;w=1',
      'RateLimit': '"default";r=9;t=1',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1',
    });
    // The same headers as limit() gives for the same bucket.
    expect(headers).toStrictEqual(rateLimitHeaders(server.limit('b', 1, SEC)));
    expect(rateLimitHeaders(d, { name: 'api' })['RateLimit-Policy']).toBe('"api";q=10;w=1');
    expect(rateLimitHeaders(d, { name: ['only'] })['RateLimit']).toBe('"only";r=9;t=1');
  });

  it('name: "api" numbers the members api-1, api-2', () => {
    const { policy, limit } = parsed(rateLimitHeaders(server.limitAll(both()), { name: 'api' }));
    expect(policy.map((m) => m[0])).toEqual(['api-1', 'api-2']);
    expect(limit.map((m) => m[0])).toEqual(['api-1', 'api-2']);
  });

  it('name: string[] names each member', () => {
    const headers = rateLimitHeaders(server.limitAll(both()), { name: ['per-second', 'per "hour"'] });
    expect(headers['RateLimit-Policy']).toBe('"per-second";q=10;w=1, "per \\"hour\\"";q=1000;w=3600');
    const { policy, limit } = parsed(headers);
    expect(policy.map((m) => m[0])).toEqual(['per-second', 'per "hour"']);
    expect(limit.map((m) => m[0])).toEqual(['per-second', 'per "hour"']);
  });

  it('three limits', () => {
    const d = server.limitAll([
      { key: 'a', cost: 2 },
      { key: 'b', policy: { max_tokens: 3, refill_every_seconds: 1 } },
      { key: 'c', cost: 0 },
    ]);
    const { policy, limit } = parsed(rateLimitHeaders(d, { name: 'L' }));
    expect(policy).toEqual([
      ['L-1', 10, 100],
      ['L-2', 3, 3],
      ['L-3', 10, 100],
    ]);
    expect(limit).toEqual([
      ['L-1', 8, 10],
      ['L-2', 2, 1],
      ['L-3', 10, 0],
    ]);
  });

  it('denied: Retry-After from the top-level retry, X-RateLimit-* of the denied limit', () => {
    for (let i = 0; i < 10; i++) server.limitAll(both());
    const d = server.limitAll(both());
    expect(d.allowed).toBe(false);
    expect(d.retry_after_ms).toBe(100);
    const headers = rateLimitHeaders(d, { name: ['sec', 'hour'] });
    expect(headers).toStrictEqual({
      'RateLimit-Policy': '"sec";q=10;w=1, "hour";q=1000;w=3600',
      'RateLimit': '"sec";r=0;t=1, "hour";r=990;t=4',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '1',
      'Retry-After': '1',
    });
  });

  it('denied: the binding limit is the denied one, even when a limit with room has fewer tokens', () => {
    server.consume('few', 9); // 1 left: has room for 1
    server.consume('many', 7); // 3 left: not enough for 5
    const d = server.limitAll([
      { key: 'few', cost: 1 },
      { key: 'many', cost: 5, policy: { max_tokens: 10, refill_every_seconds: 2 } },
    ]);
    expect(d.allowed).toBe(false);
    expect(d.results.map((r) => r.allowed)).toEqual([true, false]);
    const headers = rateLimitHeaders(d);
    // Its 3 tokens are not enough for the cost of 5: nothing for this request until its wait.
    expect(headers['X-RateLimit-Limit']).toBe('10');
    expect(headers['X-RateLimit-Remaining']).toBe('0');
    expect(headers['X-RateLimit-Reset']).toBe(String(Math.ceil((d.retry_after_ms as number) / 1000)));
    expect(headers['Retry-After']).toBe(String(Math.ceil((d.retry_after_ms as number) / 1000)));
    expect(parsed(headers).limit).toEqual([
      ['default-1', 1, Math.ceil(d.results[0].reset_in_ms / 1000)],
      ['default-2', 0, 4],
    ]);
  });

  it('denied: of several denied limits, the one with the longest wait binds', () => {
    const d = all(
      [
        mk({ allowed: false, remaining: 0, limit: 10, reset_in_ms: 500, retry_after_ms: 500 }),
        mk({ allowed: false, remaining: 4, limit: 1000, reset_in_ms: 3_000, retry_after_ms: 9_001 }),
        mk({ allowed: true, remaining: 1, limit: 5, reset_in_ms: 100, retry_after_ms: 0 }),
      ],
      false,
      9_001,
    );
    const headers = rateLimitHeaders(d);
    expect(headers['X-RateLimit-Limit']).toBe('1000');
    expect(headers['X-RateLimit-Remaining']).toBe('0');
    expect(headers['X-RateLimit-Reset']).toBe('10');
    expect(headers['Retry-After']).toBe('10');
    expect(parsed(headers).limit).toEqual([
      ['default-1', 0, 1],
      ['default-2', 0, 10],
      ['default-3', 1, 1],
    ]);
  });

  it('allowed: the limit with the fewest whole tokens binds (2.9 counts as 2)', () => {
    const d = all(
      [
        mk({ remaining: 3, limit: 100, reset_in_ms: 1_000 }),
        mk({ remaining: 2.9, limit: 10, reset_in_ms: 4_001 }),
        mk({ remaining: 50, limit: 60, reset_in_ms: 10 }),
      ],
      true,
      0,
    );
    const headers = rateLimitHeaders(d);
    expect(headers['X-RateLimit-Limit']).toBe('10');
    expect(headers['X-RateLimit-Remaining']).toBe('2');
    expect(headers['X-RateLimit-Reset']).toBe('5');
    expect(headers).not.toHaveProperty('Retry-After');
  });

  it('a member that can never pass: no Retry-After', () => {
    const d = server.limitAll([{ key: 'a' }, { key: 'b', cost: 11 }]);
    expect(d.allowed).toBe(false);
    expect(d.retry_after_ms).toBeNull();
    const headers = rateLimitHeaders(d);
    expect(headers).not.toHaveProperty('Retry-After');
    expect(parsed(headers).policy).toHaveLength(2);
  });
});

// ---------------------------------------------------------------------------------------
// Denials: every header says to wait Retry-After (section 8.3)

/**
 * Asserts that no header of `headers`, for a denied decision, says that a request of `cost`
 * could pass before Retry-After: each limit that denied (`denied`, by name) has fewer than
 * `cost` left, with 1 <= t <= Retry-After, the longest equal to it; the X-RateLimit-* limit
 * has fewer than `cost` left and Retry-After as its reset.
 */
function expectNoHeaderSaysRetryNow(headers: Record<string, string>, cost: number, denied: string[]) {
  const retryAfter = Number(headers['Retry-After']);
  expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
  if (headers['RateLimit'] !== undefined) {
    const limits = new Map(parsed(headers).limit.map(([name, r, t]) => [name, { r, t }]));
    const waits = denied.map((name) => {
      const { r, t } = limits.get(name)!;
      expect(r, name).toBeLessThan(cost);
      expect(t >= 1 && t <= retryAfter, `t=${t} of ${name}, Retry-After ${retryAfter}`).toBe(true);
      return t;
    });
    expect(Math.max(...waits)).toBe(retryAfter);
  }
  if (headers['X-RateLimit-Remaining'] !== undefined) {
    expect(Number(headers['X-RateLimit-Remaining'])).toBeLessThan(cost);
    expect(headers['X-RateLimit-Reset']).toBe(String(retryAfter));
  }
}

describe('a denial: every header says to wait Retry-After', () => {
  const LOGIN = { max_tokens: 5, refill_every_seconds: 60 };

  it('a blocked key: its tokens are there, yet r=0 and t is the time left of the block', () => {
    server.block('k', 900);
    vi.advanceTimersByTime(100_000);
    const d = server.limit('k', 1, LOGIN);
    // The decision is the bucket's (full); only retry_after_ms says "blocked".
    expect(d).toMatchObject({ allowed: false, remaining: 5, reset_in_ms: 0, retry_after_ms: 800_000 });
    const headers = rateLimitHeaders(d, { name: 'login' });
    expect(headers).toStrictEqual({
      'RateLimit-Policy': '"login";q=5;w=300',
      'RateLimit': '"login";r=0;t=800',
      'X-RateLimit-Limit': '5',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '800',
      'Retry-After': '800',
    });
    expectNoHeaderSaysRetryNow(headers, 1, ['login']);
  });

  it('a penalty: the call that goes over is told the whole block, not its next token', () => {
    const policy = { max_tokens: 2, refill_every_seconds: 60, block_seconds: 300 };
    server.limit('k', 1, policy);
    server.limit('k', 1, policy);
    const d = server.limit('k', 1, policy);
    expect(d).toMatchObject({ allowed: false, reset_in_ms: 60_000, retry_after_ms: 300_000 });
    const headers = rateLimitHeaders(d);
    expect(headers['RateLimit']).toBe('"default";r=0;t=300');
    expectNoHeaderSaysRetryNow(headers, 1, ['default']);
  });

  it('limitAll with one member blocked: it binds; the member with room keeps its r and t', () => {
    server.block('login', 120);
    server.consume('global', 3);
    const d = server.limitAll([
      { key: 'login', cost: 2, policy: LOGIN },
      { key: 'global', cost: 2 },
    ]);
    expect(d.results.map((r) => [r.allowed, r.remaining])).toEqual([
      [false, 5],
      [true, 7],
    ]);
    const headers = rateLimitHeaders(d, { name: ['login', 'global'] });
    expect(headers['RateLimit']).toBe('"login";r=0;t=120, "global";r=7;t=10');
    expect(headers['X-RateLimit-Limit']).toBe('5');
    expectNoHeaderSaysRetryNow(headers, 2, ['login']);
  });

  it('a denial held by LocalLimits: the fields it repeats, the time left of the hold', () => {
    const held = mk({ allowed: false, remaining: 5, reset_in_ms: 0, retry_after_ms: 600_000 });
    const headers = rateLimitHeaders(held, { name: 'login' });
    expect(headers['RateLimit']).toBe('"login";r=0;t=600');
    expectNoHeaderSaysRetryNow(headers, 1, ['login']);
  });

  it('each group alone says the same', () => {
    server.block('k', 30);
    const d = server.limit('k');
    const standard = rateLimitHeaders(d, { legacyHeaders: false });
    const legacy = rateLimitHeaders(d, { standardHeaders: false });
    expect(standard).toStrictEqual({ 'RateLimit-Policy': '"default";q=10;w=100', 'RateLimit': '"default";r=0;t=30', 'Retry-After': '30' });
    expect(legacy).toStrictEqual({ 'X-RateLimit-Limit': '10', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': '30', 'Retry-After': '30' });
  });

  it('a wait under a second still says t=1, as Retry-After does', () => {
    const headers = rateLimitHeaders(mk({ allowed: false, remaining: 0.5, reset_in_ms: 0, retry_after_ms: 1 }));
    expect(headers['RateLimit']).toBe('"default";r=0;t=1');
    expectNoHeaderSaysRetryNow(headers, 1, ['default']);
  });

  it('on many real decisions (blocks, costs, several limits; seeded), no denial says retry now', () => {
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    let denials = 0;
    for (let i = 0; i < 500; i++) {
      const keys = ['a', 'b', 'c'].slice(0, 1 + next(3));
      if (next(10) === 0) server.block(keys[next(keys.length)], 1 + next(600));
      const cost = 1 + next(4);
      const requests = keys.map((key) => ({ key, cost, policy: { max_tokens: 5, refill_every_seconds: 1 + next(3) } }));
      const d = keys.length === 1 ? server.limit(keys[0], cost, requests[0].policy) : server.limitAll(requests);
      const results = 'results' in d ? d.results : [d];
      const headers = rateLimitHeaders(d, { name: keys });
      if (!d.allowed) {
        denials += 1;
        expectNoHeaderSaysRetryNow(headers, cost, keys.filter((_, j) => !results[j].allowed));
      }
      vi.advanceTimersByTime(next(3_000));
    }
    expect(denials).toBeGreaterThan(100);
  });
});

describe('a choice of headers: standardHeaders and legacyHeaders', () => {
  const denied = () => {
    server.consume('k', 10);
    return server.limit('k', 3);
  };

  it('each choice gives exactly its group, and Retry-After on a denial in every one', () => {
    const cases: [boolean, boolean, string[]][] = [
      [true, true, [...IETF, ...LEGACY]],
      [true, false, IETF],
      [false, true, LEGACY],
      [false, false, []],
    ];
    for (const [standardHeaders, legacyHeaders, names] of cases) {
      const allowed = rateLimitHeaders(server.limit('allowed'), { standardHeaders, legacyHeaders });
      expect(Object.keys(allowed).sort()).toEqual([...names].sort());
      const d = denied();
      const headers = rateLimitHeaders(d, { standardHeaders, legacyHeaders });
      expect(Object.keys(headers).sort()).toEqual([...names, 'Retry-After'].sort());
      expect(headers['Retry-After']).toBe(String(Math.ceil(d.retry_after_ms! / 1000)));
      server.reset('k');
    }
  });

  it('a group left out changes nothing of the other: the same values as with both', () => {
    const d = denied();
    const both = rateLimitHeaders(d);
    const standard = rateLimitHeaders(d, { legacyHeaders: false });
    const legacy = rateLimitHeaders(d, { standardHeaders: false });
    expect({ ...standard, ...legacy }).toStrictEqual(both);
  });

  it('anything but a boolean throws a TypeError that names the option', () => {
    const d = server.limit('k');
    expect(() => rateLimitHeaders(d, { standardHeaders: 'no' as never })).toThrow(
      new TypeError('options.standardHeaders must be a boolean, got no'),
    );
    expect(() => rateLimitHeaders(d, { legacyHeaders: 0 as never })).toThrow(/^options\.legacyHeaders must be a boolean/);
  });
});
