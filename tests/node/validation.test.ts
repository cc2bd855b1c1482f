// Input validation (docs/SPEC.md, rules 2.2 and 2.3): bad costs, keys and options throw
// TypeError / RangeError from the method itself, with a message that names the field and
// the value, and change nothing.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import type { RateLimiterStatus } from '@delightstack/rate-limiter';
import { SECOND, newServer, status, thrown } from './support';

type ErrorKind = 'TypeError' | 'RangeError';

const ERRORS = { TypeError, RangeError } as const;

let server: RateLimiterServer;

// setup.ts has set the fake clock to T0 by now.
beforeEach(() => {
  server = newServer();
});

/** Asserts the class, the name (kept over RPC) and the message fragments of `error`. */
function expectError(error: Error, kind: ErrorKind, parts: readonly string[]): void {
  expect(error).toBeInstanceOf(ERRORS[kind]);
  expect(error.name).toBe(kind);
  for (const part of parts) expect(error.message).toContain(part);
}

function statuses(keys: readonly string[]): RateLimiterStatus[] {
  return keys.map((key) => server.getStatus(key));
}

// ---------------------------------------------------------------------------------------
// cost

interface BadCost {
  name: string;
  cost: unknown;
  kind: ErrorKind;
  /** Besides 'cost': what the message must show of the value. */
  parts: string[];
}

const badCosts: BadCost[] = [
  { name: 'NaN', cost: NaN, kind: 'RangeError', parts: ['NaN'] },
  { name: '-1', cost: -1, kind: 'RangeError', parts: ['-1'] },
  { name: '-0.5', cost: -0.5, kind: 'RangeError', parts: ['-0.5'] },
  { name: 'Infinity', cost: Infinity, kind: 'RangeError', parts: ['Infinity'] },
  { name: '-Infinity', cost: -Infinity, kind: 'RangeError', parts: ['-Infinity'] },
  { name: '-Number.MIN_VALUE', cost: -Number.MIN_VALUE, kind: 'RangeError', parts: ['-5e-324'] },
  { name: "the string '1'", cost: '1', kind: 'TypeError', parts: ['"1"'] },
  { name: 'null', cost: null, kind: 'TypeError', parts: ['null'] },
  { name: '1n', cost: 1n, kind: 'TypeError', parts: ['bigint'] },
  { name: 'true', cost: true, kind: 'TypeError', parts: ['true'] },
  { name: '{}', cost: {}, kind: 'TypeError', parts: [] },
  { name: '[]', cost: [], kind: 'TypeError', parts: [] },
  { name: '[1]', cost: [1], kind: 'TypeError', parts: [] },
  { name: 'new Number(1)', cost: new Number(1), kind: 'TypeError', parts: [] },
];

describe.each(['consume', 'check'] as const)('%s with an invalid cost', (method) => {
  const keys = ['k', 'fresh', 'empty'];

  beforeEach(() => {
    server.consume('k', 3);
    for (let i = 0; i < 10; i++) server.consume('empty');
    vi.advanceTimersByTime(4 * SECOND);
    expect(statuses(keys)).toEqual([status(7, 10, 6_000), status(10, 10, 0), status(0, 10, 6_000)]);
  });

  it.each(badCosts)('cost $name throws $kind and changes nothing', ({ cost, kind, parts }) => {
    const before = statuses(keys);
    for (const key of keys) {
      const error = thrown(() => server[method](key, cost as never));
      expectError(error, kind, ['cost', ...parts]);
    }
    expect(statuses(keys)).toEqual(before);
    // The instance still works.
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(6, 10, 6_000));
  });
});

describe('valid costs at the edge', () => {
  it('-0 is accepted as 0: true, and nothing changes', () => {
    server.consume('k', 3);
    expect(server.consume('k', -0)).toBe(true);
    expect(server.check('k', -0)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(7, 10, 10_000));
    for (let i = 0; i < 7; i++) server.consume('k');
    expect(server.consume('k', -0)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(0, 10, 10_000));
  });

  it('an undefined cost means 1', () => {
    expect(server.consume('k', undefined)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(9, 10, 10_000));
    expect(server.consume('k')).toBe(true);
    expect(server.getStatus('k')).toEqual(status(8, 10, 10_000));
    server.consume('k', 7);
    expect(server.check('k', undefined)).toBe(true);
    expect(server.check('k')).toBe(true);
    server.consume('k');
    expect(server.check('k', undefined)).toBe(false);
    expect(server.consume('k', undefined)).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------
// keys

interface BadKey {
  name: string;
  key: unknown;
  /** Besides 'key': what the message must show of the value. */
  parts: string[];
}

const badKeys: BadKey[] = [
  { name: 'number 5', key: 5, parts: ['5'] },
  { name: 'number NaN', key: NaN, parts: ['NaN'] },
  { name: 'number 0', key: 0, parts: ['0'] },
  { name: 'null', key: null, parts: ['null'] },
  { name: 'undefined', key: undefined, parts: ['undefined'] },
  { name: 'object {}', key: {}, parts: [] },
  { name: "array ['k']", key: ['k'], parts: [] },
  { name: 'boolean true', key: true, parts: ['true'] },
  { name: 'bigint 5n', key: 5n, parts: ['bigint'] },
  { name: 'symbol', key: Symbol('k'), parts: [] },
  { name: 'function', key: () => 'k', parts: [] },
  { name: "String object new String('k')", key: new String('k'), parts: [] },
];

// Every string a lax implementation might coerce one of the bad keys to.
const victims = ['k', '5', 'NaN', '0', 'null', 'undefined', '[object Object]', 'true', 'Symbol(k)', ''];

const keyCalls = {
  consume: (key: unknown) => server.consume(key as never),
  'consume with cost 1': (key: unknown) => server.consume(key as never, 1),
  check: (key: unknown) => server.check(key as never),
  getStatus: (key: unknown) => server.getStatus(key as never),
  reset: (key: unknown) => server.reset(key as never),
};

describe.each(Object.keys(keyCalls) as (keyof typeof keyCalls)[])('%s with a key that is not a string', (call) => {
  beforeEach(() => {
    for (const victim of victims) server.consume(victim, 2);
    vi.advanceTimersByTime(SECOND);
  });

  it.each(badKeys)('$name throws TypeError and changes nothing', ({ key, parts }) => {
    const before = statuses(victims);
    expect(before.every((s) => s.remaining === 8)).toBe(true);
    const error = thrown(() => keyCalls[call](key));
    expectError(error, 'TypeError', ['key', ...parts]);
    expect(statuses(victims)).toEqual(before);
    expect(server.getStatus('never-used')).toEqual(status(10, 10, 0));
  });
});

// ---------------------------------------------------------------------------------------
// options

// Custom options in force and a partly used key, so that any change shows.
function prepareOptions(): void {
  server.setOptions({ max_tokens: 4, refill_every_seconds: 2 });
  server.consume('k', 3);
  vi.advanceTimersByTime(500);
  expect(server.getStatus('k')).toEqual(status(1, 4, 1_500));
}

/** max_tokens is still 4, refill_every_seconds still 2, and 'k' as prepareOptions left it. */
function expectOptionsUnchanged(): void {
  expect(server.getStatus('k')).toEqual(status(1, 4, 1_500));
  expect(server.getStatus('fresh')).toEqual(status(4, 4, 0));
  vi.advanceTimersByTime(1_500);
  expect(server.getStatus('k')).toEqual(status(2, 4, 2_000));
  vi.advanceTimersByTime(1_999);
  expect(server.getStatus('k')).toEqual(status(2, 4, 1));
  vi.advanceTimersByTime(1);
  expect(server.getStatus('k')).toEqual(status(3, 4, 2_000));
  vi.advanceTimersByTime(60 * SECOND);
  expect(server.getStatus('k')).toEqual(status(4, 4, 0));
  for (let i = 0; i < 4; i++) expect(server.consume('fresh')).toBe(true);
  expect(server.consume('fresh')).toBe(false);
}

interface BadOptions {
  name: string;
  options: unknown;
  kind: ErrorKind;
  /** What the message must contain: the field, and the value when it is a number. */
  parts: string[];
}

const notObjects: BadOptions[] = [
  { name: 'null', options: null, kind: 'TypeError', parts: ['options', 'null'] },
  { name: 'undefined', options: undefined, kind: 'TypeError', parts: ['options', 'undefined'] },
  { name: '5', options: 5, kind: 'TypeError', parts: ['options', '5'] },
  { name: "'x'", options: 'x', kind: 'TypeError', parts: ['options', '"x"'] },
  { name: '[]', options: [], kind: 'TypeError', parts: ['options'] },
  { name: 'true', options: true, kind: 'TypeError', parts: ['options', 'true'] },
  { name: '1n', options: 1n, kind: 'TypeError', parts: ['options', 'bigint'] },
];

const wrongTypes: { name: string; value: unknown; parts: string[] }[] = [
  { name: "string '3'", value: '3', parts: ['"3"'] },
  { name: 'null', value: null, parts: ['null'] },
  { name: 'object {}', value: {}, parts: [] },
  { name: 'bigint 3n', value: 3n, parts: ['bigint'] },
  { name: 'boolean true', value: true, parts: ['true'] },
  { name: 'boolean false', value: false, parts: ['false'] },
  { name: 'array [3]', value: [3], parts: [] },
  { name: 'new Number(3)', value: new Number(3), parts: [] },
];

const badFieldTypes: BadOptions[] = (['max_tokens', 'refill_every_seconds'] as const).flatMap((field) =>
  wrongTypes.map(({ name, value, parts }) => ({
    name: `${field}: ${name}`,
    options: { [field]: value },
    kind: 'TypeError' as const,
    parts: [field, ...parts],
  })),
);

const badMaxTokens: [string, number, string][] = [
  ['NaN', NaN, 'NaN'],
  ['Infinity', Infinity, 'Infinity'],
  ['-Infinity', -Infinity, '-Infinity'],
  ['0', 0, '0'],
  ['-0', -0, '0'],
  ['-1', -1, '-1'],
  ['-10', -10, '-10'],
  ['fraction 1.5', 1.5, '1.5'],
  ['fraction 0.5', 0.5, '0.5'],
  ['Number.MIN_VALUE', Number.MIN_VALUE, '5e-324'],
  ['2^53 (above 2^53 - 1)', 2 ** 53, '9007199254740992'],
  ['1e300', 1e300, '1e+300'],
];

const badRefill: [string, number, string][] = [
  ['NaN', NaN, 'NaN'],
  ['Infinity', Infinity, 'Infinity'],
  ['-Infinity', -Infinity, '-Infinity'],
  ['0', 0, '0'],
  ['-0', -0, '0'],
  ['-1', -1, '-1'],
  ['-0.25', -0.25, '-0.25'],
  ['-Number.MIN_VALUE', -Number.MIN_VALUE, '-5e-324'],
];

const badRanges: BadOptions[] = [
  ...badMaxTokens.map(([name, value, shown]) => ({
    name: `max_tokens: ${name}`,
    options: { max_tokens: value },
    kind: 'RangeError' as const,
    parts: ['max_tokens', shown],
  })),
  ...badRefill.map(([name, value, shown]) => ({
    name: `refill_every_seconds: ${name}`,
    options: { refill_every_seconds: value },
    kind: 'RangeError' as const,
    parts: ['refill_every_seconds', shown],
  })),
];

const unknownFields: BadOptions[] = [
  'max_token',
  'maxTokens',
  'MAX_TOKENS',
  'refill_every_second',
  'refillEverySeconds',
  'limit',
].map((field) => ({
  name: field,
  options: { [field]: 3 },
  kind: 'TypeError' as const,
  parts: ['options', field],
}));

// All or nothing: a valid field next to an invalid one is not applied either.
const mixed: BadOptions[] = [
  {
    name: '{ max_tokens: 5, refill_every_seconds: NaN }',
    options: { max_tokens: 5, refill_every_seconds: NaN },
    kind: 'RangeError',
    parts: ['refill_every_seconds', 'NaN'],
  },
  {
    name: '{ refill_every_seconds: 1, max_tokens: 0 }',
    options: { refill_every_seconds: 1, max_tokens: 0 },
    kind: 'RangeError',
    parts: ['max_tokens', '0'],
  },
  {
    name: '{ refill_every_seconds: 1, max_tokens: 2.5 }',
    options: { refill_every_seconds: 1, max_tokens: 2.5 },
    kind: 'RangeError',
    parts: ['max_tokens', '2.5'],
  },
  {
    name: "{ max_tokens: 5, refill_every_seconds: '1' }",
    options: { max_tokens: 5, refill_every_seconds: '1' },
    kind: 'TypeError',
    parts: ['refill_every_seconds'],
  },
  {
    name: '{ max_tokens: 5, max_token: 5 }',
    options: { max_tokens: 5, max_token: 5 },
    kind: 'TypeError',
    parts: ['options', 'max_token'],
  },
  {
    name: '{ max_token: 5, max_tokens: 5 }',
    options: { max_token: 5, max_tokens: 5 },
    kind: 'TypeError',
    parts: ['options', 'max_token'],
  },
  {
    name: '{ refill_every_seconds: 1, extra: 1 }',
    options: { refill_every_seconds: 1, extra: 1 },
    kind: 'TypeError',
    parts: ['options', 'extra'],
  },
];

describe.each([
  ['options that are not an object', notObjects],
  ['a field of the wrong type', badFieldTypes],
  ['a number out of range', badRanges],
  ['an unknown field', unknownFields],
  ['a valid field next to an invalid one', mixed],
] as const)('setOptions with %s', (_topic, cases) => {
  beforeEach(prepareOptions);

  it.each(cases)('$name throws $kind and changes nothing', ({ options, kind, parts }) => {
    const error = thrown(() => server.setOptions(options as never));
    expectError(error, kind, parts);
    expectOptionsUnchanged();
  });
});

describe('setOptions with valid values at the edge', () => {
  it('max_tokens 2^53 - 1 and 1 are accepted', () => {
    server.setOptions({ max_tokens: 2 ** 53 - 1 });
    expect(server.getStatus('k').limit).toBe(9_007_199_254_740_991);
    server.setOptions({ max_tokens: 1 });
    expect(server.getStatus('k')).toEqual(status(1, 1, 0));
  });

  it('a whole max_tokens written as 5.0 or 5e0 is accepted', () => {
    server.setOptions({ max_tokens: 5.0 });
    expect(server.getStatus('k').limit).toBe(5);
    server.setOptions({ max_tokens: 6e0 });
    expect(server.getStatus('k').limit).toBe(6);
  });

  it('tiny and huge positive refill_every_seconds are accepted', () => {
    expect(() => server.setOptions({ refill_every_seconds: Number.MIN_VALUE })).not.toThrow();
    expect(() => server.setOptions({ refill_every_seconds: 1e-12 })).not.toThrow();
    expect(() => server.setOptions({ refill_every_seconds: 2 ** 53 })).not.toThrow();
    server.setOptions({ refill_every_seconds: 3 });
    server.consume('k');
    expect(server.getStatus('k')).toEqual(status(9, 10, 3_000));
  });
});
