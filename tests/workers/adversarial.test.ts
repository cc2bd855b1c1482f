// Adversarial inputs to RateLimiterServer over native Durable Object RPC, inside workerd
// (docs/SPEC.md, rules 2.2 and 2.3, and section 4). Table-driven: every bad value class
// for keys, costs, options, policies and limitAll requests, across every method. For each
// bad call:
// - the rejection has the documented class (TypeError or RangeError) and the exact message
//   of the package, which names the field (and, for numbers, the value);
// - getStatus of a partly consumed bucket, of a bucket with its own policy, of a
//   lone-surrogate key and of an unused key (the instance options) is identical before and
//   after, on a frozen clock;
// - the Durable Object keeps serving: a valid consume afterwards returns true.
// Values are structured-cloned over RPC, so objects with throwing getters (and Proxies)
// cannot be sent; they are passed to the instance directly with runInDurableObject.
//
// Speed: creating a Durable Object costs ~10-20 ms in the pool, a call ~2 ms. So the table
// runs one test (one idFromName) per method, its rows one after another on that object,
// and each test compares a row-by-row table, so a failure names its rows.
import { runInDurableObject } from 'cloudflare:test';
import { RpcTarget } from 'cloudflare:workers';
import type { RateLimiterServer } from '@delightstack/rate-limiter';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection, type Stub } from './support';


/** The RPC methods with untyped arguments, to send what the types forbid. */
type Method = 'setOptions' | 'check' | 'consume' | 'getStatus' | 'reset' | 'limit' | 'limitAll';
type Loose = Record<Method, (...args: unknown[]) => Promise<unknown>>;
const loose = (stub: Stub) => stub as unknown as Loose;

/** The instance itself, inside the Durable Object, with untyped arguments. */
type LooseInstance = Record<Method, (...args: unknown[]) => unknown>;

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);

beforeEach(() => {
  // A frozen clock, so that "unchanged" includes reset_in_ms.
  vi.useFakeTimers();
  at(0);
});

afterEach(() => {
  vi.useRealTimers();
});

// The state every case starts from: 'k' partly consumed under the instance options, 'p'
// partly consumed under a policy of its own, 'fresh' never used (so it shows the options),
// and a lone-surrogate key (which takes the binding's general path, not the fast one).
const POLICY = { max_tokens: 5, refill_every_seconds: 60 };
const WATCHED = ['k', 'p', 'fresh', '\ud800'];
const BEFORE = [
  { remaining: 6, limit: 10, reset_in_ms: 8_766 },
  { remaining: 3, limit: 5, reset_in_ms: 58_766 },
  { remaining: 10, limit: 10, reset_in_ms: 0 },
  { remaining: 7, limit: 10, reset_in_ms: 8_766 },
];

const statuses = (stub: Stub) => Promise.all(WATCHED.map((k) => stub.getStatus(k)));

/** With the clock at 0: brings the watched buckets to BEFORE, 1.234 s later. */
async function prepare(stub: Stub) {
  expect(await stub.consume('k', 4)).toBe(true);
  expect((await stub.limit('p', 2, POLICY)).allowed).toBe(true);
  expect(await stub.consume('\ud800', 3)).toBe(true);
  at(1_234); // part-way to the next token, so reset_in_ms is not a round number
  expect(await statuses(stub)).toEqual(BEFORE);
}

/** The object keeps serving, with the same options and the same policy on 'p'. */
async function expectServing(stub: Stub) {
  expect(await stub.consume('k')).toBe(true);
  // One call that reads every watched bucket, its options and its policy.
  const all = await stub.limitAll([{ key: 'k' }, { key: 'p' }, { key: 'fresh' }, { key: '\ud800', cost: 7 }]);
  expect(all.allowed).toBe(true);
  expect(all.results.map(({ remaining, limit, reset_in_ms }) => ({ remaining, limit, reset_in_ms }))).toEqual([
    { remaining: 4, limit: 10, reset_in_ms: 8_766 },
    { remaining: 2, limit: 5, reset_in_ms: 58_766 },
    { remaining: 9, limit: 10, reset_in_ms: 10_000 },
    { remaining: 0, limit: 10, reset_in_ms: 8_766 },
  ]);
}

/** What a row observed: the error, whether the watched buckets are unchanged, and whether
 *  the object still serves (a valid consume on a key of the row's own). */
type Observed = {
  label: string;
  /** The class by instanceof (the error's own class survives RPC), then its name and message. */
  instance?: string;
  name?: string;
  message?: string;
  unchanged: boolean | string;
  serving: boolean | string;
};

async function observe(stub: Stub, label: string, i: number, call: () => Promise<unknown>): Promise<Observed> {
  const e = await rejection(call());
  const after = await statuses(stub).then(
    (s) => (JSON.stringify(s) === JSON.stringify(BEFORE) ? true : JSON.stringify(s)),
    (error: Error) => `getStatus throws ${error.name}: ${error.message}`,
  );
  const serving = await stub.consume(`serving-${i}`).then(
    (allowed) => allowed,
    (error: Error) => `consume throws ${error.name}: ${error.message}`,
  );
  return {
    label,
    ...(e === null
      ? { name: 'no error' }
      : {
          instance: e instanceof RangeError ? 'RangeError' : e instanceof TypeError ? 'TypeError' : 'other',
          name: e.name,
          message: e.message,
        }),
    unchanged: after,
    serving,
  };
}

// ---------------------------------------------------------------------------------------
// The table of bad calls.

type Bad = { label: string; method: Method; args: unknown[]; name: 'TypeError' | 'RangeError'; message: string };
const cases: Bad[] = [];
const bad = (label: string, method: Method, args: unknown[], name: Bad['name'], message: string) =>
  cases.push({ label, method, args, name, message });

const fn = () => 1; // arrives as an RPC stub: a function
// [label, value, how the message describes it]
const NOT_STRINGS: [string, unknown, string][] = [
  ['undefined (missing)', undefined, 'undefined'],
  ['null', null, 'null'],
  ['a number', 5, 'number 5'],
  ['NaN', NaN, 'number NaN'],
  ['-0', -0, 'number -0'],
  ['a bigint', 5n, 'bigint 5n'],
  ['a boolean', false, 'boolean false'],
  ['an array', ['k'], 'an array'],
  ['an object', { key: 'k' }, 'an object'],
  ['a nested object', { k: { k: { k: 'k' } } }, 'an object'],
  ['a function', fn, 'a function'],
];

// Keys: every method that takes one.
for (const method of ['check', 'consume', 'getStatus', 'reset', 'limit'] as const) {
  for (const [label, value, described] of NOT_STRINGS) {
    const args = label.startsWith('undefined') ? [] : [value];
    bad(`${method}: key ${label}`, method, args, 'TypeError', `key must be a string, got ${described}`);
  }
}

// Costs: every method that takes one. A bad cost with a lone-surrogate key (general path too).
const NOT_NUMBERS: [string, unknown, string][] = [
  ['a string', '1', 'string "1"'],
  ['an empty string', '', 'string ""'],
  ['null', null, 'null'],
  ['a bigint', 1n, 'bigint 1n'],
  ['a boolean', true, 'boolean true'],
  ['an array', [1], 'an array'],
  ['a nested object', { cost: { value: 1 } }, 'an object'],
  ['a function', fn, 'a function'],
];
const OUT_OF_RANGE: [string, number, string][] = [
  ['NaN', NaN, 'NaN'],
  ['Infinity', Infinity, 'Infinity'],
  ['-Infinity', -Infinity, '-Infinity'],
  ['negative', -1, '-1'],
  ['a tiny negative', -1e-300, '-1e-300'],
  ['-Number.MIN_VALUE', -Number.MIN_VALUE, '-5e-324'],
  ['-1e300', -1e300, '-1e+300'],
];
for (const method of ['check', 'consume', 'limit'] as const) {
  for (const [label, value, described] of NOT_NUMBERS) {
    bad(`${method}: cost ${label}`, method, ['k', value], 'TypeError', `cost must be a number, got ${described}`);
  }
  for (const [label, value, described] of OUT_OF_RANGE) {
    bad(`${method}: cost ${label}`, method, ['k', value], 'RangeError', `cost must be a finite number >= 0, got ${described}`);
  }
  bad(`${method}: cost NaN, lone-surrogate key`, method, ['\ud800', NaN], 'RangeError', 'cost must be a finite number >= 0, got NaN');
}
bad('consume: cost a long string, cut to 40 characters', 'consume', ['k', 'y'.repeat(100)], 'TypeError',
  `cost must be a number, got string "${'y'.repeat(40)}"\u2026`);

// Option fields: setOptions ('max_tokens …'), limit's policy ('policy.max_tokens …') and a
// limitAll request's policy ('requests[1].policy.max_tokens …', after a valid request).
const MAX_TOKENS: [string, unknown, Bad['name'], string][] = [
  ['NaN', NaN, 'RangeError', 'NaN'],
  ['Infinity', Infinity, 'RangeError', 'Infinity'],
  ['-Infinity', -Infinity, 'RangeError', '-Infinity'],
  ['negative', -1, 'RangeError', '-1'],
  ['0', 0, 'RangeError', '0'],
  ['-0', -0, 'RangeError', '-0'],
  ['fractional 1.5', 1.5, 'RangeError', '1.5'],
  ['fractional 0.5', 0.5, 'RangeError', '0.5'],
  ['2^53', 2 ** 53, 'RangeError', '9007199254740992'],
  ['1e300', 1e300, 'RangeError', '1e+300'],
  ['a string', '5', 'TypeError', 'string "5"'],
  ['null', null, 'TypeError', 'null'],
  ['a bigint', 5n, 'TypeError', 'bigint 5n'],
  ['a boolean', true, 'TypeError', 'boolean true'],
  ['an array', [5], 'TypeError', 'an array'],
  ['a nested object', { max_tokens: 5 }, 'TypeError', 'an object'],
];
const REFILL: [string, unknown, Bad['name'], string][] = [
  ['NaN', NaN, 'RangeError', 'NaN'],
  ['Infinity', Infinity, 'RangeError', 'Infinity'],
  ['-Infinity', -Infinity, 'RangeError', '-Infinity'],
  ['negative', -1, 'RangeError', '-1'],
  ['0', 0, 'RangeError', '0'],
  ['-0', -0, 'RangeError', '-0'],
  ['a string', '10', 'TypeError', 'string "10"'],
  ['null', null, 'TypeError', 'null'],
  ['a bigint', 10n, 'TypeError', 'bigint 10n'],
  ['an array', [10], 'TypeError', 'an array'],
];
const fieldMessage = (field: string, name: Bad['name'], described: string) =>
  name === 'TypeError'
    ? `${field} must be a number, got ${described}`
    : field.endsWith('max_tokens')
      ? `${field} must be a whole number from 1 to 9007199254740991, got ${described}`
      : `${field} must be a finite number > 0, got ${described}`;

for (const [field, table] of [['max_tokens', MAX_TOKENS], ['refill_every_seconds', REFILL]] as const) {
  for (const [label, value, name, described] of table) {
    const options = { [field]: value };
    bad(`setOptions: ${field} ${label}`, 'setOptions', [options], name, fieldMessage(field, name, described));
    bad(`limit: policy.${field} ${label}`, 'limit', ['p', 1, options], name, fieldMessage(`policy.${field}`, name, described));
    bad(`limitAll: requests[1].policy.${field} ${label}`, 'limitAll', [[{ key: 'k' }, { key: 'p', policy: options }]],
      name, fieldMessage(`requests[1].policy.${field}`, name, described));
  }
}
// All or nothing: a valid field beside an invalid one is not applied either.
bad('setOptions: valid max_tokens beside NaN refill', 'setOptions', [{ max_tokens: 3, refill_every_seconds: NaN }],
  'RangeError', 'refill_every_seconds must be a finite number > 0, got NaN');
bad('limit: valid policy field beside 2^53', 'limit', ['p', 1, { refill_every_seconds: 1, max_tokens: 2 ** 53 }],
  'RangeError', 'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 9007199254740992');

// Whole options / policy objects of the wrong kind.
const NOT_OBJECTS: [string, unknown, string][] = [
  ['null', null, 'null'],
  ['a number', 5, 'number 5'],
  ['NaN', NaN, 'number NaN'],
  ['a string', 'max_tokens=5', 'string "max_tokens=5"'],
  ['an array', [5, 10], 'an array'],
  ['an empty array', [], 'an array'],
  ['a bigint', 1n, 'bigint 1n'],
  ['a boolean', true, 'boolean true'],
  ['a function', fn, 'a function'],
  ['an RpcTarget (arrives as a stub)', new (class extends RpcTarget { max_tokens = 1; })(), 'a function'],
];
for (const [label, value, described] of NOT_OBJECTS) {
  bad(`setOptions: options ${label}`, 'setOptions', [value], 'TypeError', `options must be an object, got ${described}`);
  bad(`limit: policy ${label}`, 'limit', ['p', 1, value], 'TypeError', `policy must be an object, got ${described}`);
}
bad('setOptions: options missing', 'setOptions', [], 'TypeError', 'options must be an object, got undefined');

// Unknown fields, including one that is a nested object and one named __proto__.
const UNKNOWN: [string, Record<string, unknown>, string][] = [
  ['a typo', { max_token: 1 }, 'max_token'],
  ['an extra field beside valid ones', { max_tokens: 5, refill_every_seconds: 1, burst: 5 }, 'burst'],
  ['a nested options object', { max_tokens: 5, policy: { max_tokens: 5 } }, 'policy'],
  ['an own __proto__', JSON.parse('{"__proto__": {"max_tokens": 1}}') as Record<string, unknown>, '__proto__'],
  ['an empty name', { '': 1 }, ''],
  ['a case variant', { MAX_TOKENS: 5 }, 'MAX_TOKENS'],
];
const FIELDS = '(the fields are max_tokens and refill_every_seconds)';
const POLICY_FIELDS = '(the fields are max_tokens, refill_every_seconds and block_seconds)';
for (const [label, value, field] of UNKNOWN) {
  bad(`setOptions: unknown field, ${label}`, 'setOptions', [value], 'TypeError', `options has no field "${field}" ${FIELDS}`);
  bad(`limit: unknown policy field, ${label}`, 'limit', ['p', 1, value], 'TypeError', `policy has no field "${field}" ${POLICY_FIELDS}`);
}
bad('limitAll: unknown policy field', 'limitAll', [[{ key: 'p', policy: { max_tokens: 5, x: 1 } }]], 'TypeError',
  `requests[0].policy has no field "x" ${POLICY_FIELDS}`);

// limitAll: the list, each request, and each request's fields.
const REQUESTS: [string, unknown, string][] = [
  ['undefined (missing)', undefined, 'undefined'],
  ['null', null, 'null'],
  ['a string', 'k', 'string "k"'],
  ['a number', 5, 'number 5'],
  ['a bigint', 1n, 'bigint 1n'],
  ['an object', { 0: { key: 'k' }, length: 1 }, 'an object'],
  ['a typed array', new Uint8Array(2), 'an object'],
  ['a single request', { key: 'k' }, 'an object'],
  ['a function', fn, 'a function'],
];
for (const [label, value, described] of REQUESTS) {
  const args = label.startsWith('undefined') ? [] : [value];
  bad(`limitAll: requests ${label}`, 'limitAll', args, 'TypeError', `requests must be an array, got ${described}`);
}
const REQUEST: [string, unknown, string][] = [
  ['null', null, 'null'],
  ['a number', 5, 'number 5'],
  ['a string', 'k', 'string "k"'],
  ['an array (nested list)', [{ key: 'k' }], 'an array'],
  ['a hole in a sparse array', undefined, 'undefined'],
  ['a function', fn, 'a function'],
];
for (const [label, value, described] of REQUEST) {
  const list: unknown[] = [{ key: 'k', cost: 2 }];
  if (label.startsWith('a hole')) list.length = 2;
  else list.push(value);
  bad(`limitAll: request ${label}`, 'limitAll', [list], 'TypeError', `requests[1] must be an object, got ${described}`);
}
bad('limitAll: request with an unknown field', 'limitAll', [[{ key: 'k', colour: 'red' }]], 'TypeError',
  'requests[0] has no field "colour" (the fields are key, cost, policy and shadow)');
bad('limitAll: request with a misspelt cost', 'limitAll', [[{ key: 'k', costs: 1 }]], 'TypeError',
  'requests[0] has no field "costs" (the fields are key, cost, policy and shadow)');
for (const [label, value, described] of NOT_STRINGS) {
  const request = label.startsWith('undefined') ? { cost: 1 } : { key: value };
  bad(`limitAll: request key ${label}`, 'limitAll', [[{ key: 'k' }, request]], 'TypeError',
    `requests[1].key must be a string, got ${described}`);
}
for (const [label, value, described] of NOT_NUMBERS) {
  bad(`limitAll: request cost ${label}`, 'limitAll', [[{ key: 'k' }, { key: 'p', cost: value }]], 'TypeError',
    `requests[1].cost must be a number, got ${described}`);
}
for (const [label, value, described] of OUT_OF_RANGE) {
  bad(`limitAll: request cost ${label}`, 'limitAll', [[{ key: 'k' }, { key: 'p', cost: value }]], 'RangeError',
    `requests[1].cost must be a finite number >= 0, got ${described}`);
}
for (const [label, value, described] of NOT_OBJECTS) {
  bad(`limitAll: request policy ${label}`, 'limitAll', [[{ key: 'k' }, { key: 'p', policy: value }]], 'TypeError',
    `requests[1].policy must be an object, got ${described}`);
}
bad('limitAll: the same key twice', 'limitAll', [[{ key: 'k' }, { key: 'p' }, { key: 'k', cost: 0 }]], 'TypeError',
  'requests[2].key repeats the key of requests[0].key: give each key once, with the costs added up');
bad('limitAll: the same lone-surrogate key twice', 'limitAll', [[{ key: '\ud800' }, { key: '\ud800' }]], 'TypeError',
  'requests[1].key repeats the key of requests[0].key: give each key once, with the costs added up');
bad('limitAll: a bad request after 500 valid ones', 'limitAll',
  [[...Array.from({ length: 500 }, (_, i) => ({ key: `u${i}` })), { key: 'k', cost: -1 }]], 'RangeError',
  'requests[500].cost must be a finite number >= 0, got -1');

// Extra arguments are ignored, but not the arguments before them.
bad('consume: extra arguments do not hide a bad cost', 'consume', ['k', NaN, 1, 'extra'], 'RangeError',
  'cost must be a finite number >= 0, got NaN');
bad('limit: extra arguments do not hide a bad policy', 'limit', ['p', 1, { max_tokens: 0 }, { max_tokens: 5 }],
  'RangeError', 'policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0');

const METHODS: Method[] = ['setOptions', 'check', 'consume', 'getStatus', 'reset', 'limit', 'limitAll'];

describe(`${cases.length} bad calls over RPC: documented error, nothing changes, the object keeps serving`, () => {
  it('covers at least 40 bad calls and every method', () => {
    const perMethod = METHODS.map((m) => `${m} ${cases.filter((c) => c.method === m).length}`).join(', ');
    console.log(`adversarial: ${cases.length} bad calls over RPC (${perMethod})`);
    expect(cases.length).toBeGreaterThanOrEqual(40);
    expect(new Set(cases.map((c) => c.label)).size).toBe(cases.length);
    expect(new Set(cases.map((c) => c.method))).toEqual(new Set(METHODS));
  });

  it.each(METHODS)('%s', async (method) => {
    const rows = cases.filter((c) => c.method === method);
    const stub = limiter(`adversarial-${method}`);
    await prepare(stub);
    const observed: Observed[] = [];
    for (const [i, { label, args }] of rows.entries()) {
      observed.push(await observe(stub, label, i, () => loose(stub)[method](...args)));
    }
    expect(observed).toEqual(
      rows.map(({ label, name, message }) => ({ label, instance: name, name, message, unchanged: true, serving: true })),
    );
    await expectServing(stub);
  });
});

// ---------------------------------------------------------------------------------------
// Edge values that are valid: accepted, with exactly the documented effect.

describe('edge values that are not errors', () => {
  it('-0 is a valid cost meaning 0: accepted by every method, and changes nothing', async () => {
    const stub = limiter('edge-negative-zero');
    await prepare(stub);
    expect(await stub.check('k', -0)).toBe(true);
    expect(await stub.consume('k', -0)).toBe(true);
    expect(await stub.consume('\ud800', -0)).toBe(true);
    expect(await stub.limit('k', -0)).toEqual({
      allowed: true,
      remaining: 6,
      limit: 10,
      reset_in_ms: 8_766,
      retry_after_ms: 0,
      window_ms: 100_000,
    });
    expect(await stub.limitAll([{ key: 'p', cost: -0 }, { key: 'fresh', cost: -0 }])).toMatchObject({
      allowed: true,
      retry_after_ms: 0,
    });
    // On an empty bucket too.
    expect(await stub.consume('empty', 10)).toBe(true);
    expect(await stub.consume('empty', -0)).toBe(true);
    expect(await stub.check('empty', -0)).toBe(true);
    expect((await stub.getStatus('empty')).remaining).toBe(0);
    expect(await statuses(stub)).toEqual(BEFORE);
    await expectServing(stub);
  });

  it('a huge cost (1e300, Number.MAX_VALUE) is denied, not an error, and changes nothing', async () => {
    const stub = limiter('edge-huge-cost');
    await prepare(stub);
    for (const cost of [1e300, Number.MAX_VALUE, 2 ** 64, 11]) {
      expect(await stub.check('k', cost)).toBe(false);
      expect(await stub.consume('k', cost)).toBe(false);
      expect(await stub.consume('\ud800', cost)).toBe(false);
      expect(await stub.limit('k', cost)).toEqual({
        allowed: false,
        remaining: 6,
        limit: 10,
        reset_in_ms: 8_766,
        retry_after_ms: null,
        window_ms: 100_000,
      });
      const all = await stub.limitAll([{ key: 'fresh' }, { key: 'p', cost }]);
      expect(all.allowed).toBe(false);
      expect(all.retry_after_ms).toBeNull();
    }
    expect(await statuses(stub)).toEqual(BEFORE);
    await expectServing(stub);
  });

  it('the smallest positive cost (5e-324) is charged one billionth, never nothing', async () => {
    const stub = limiter('edge-tiny-cost');
    expect(await stub.consume('k', Number.MIN_VALUE)).toBe(true);
    expect((await stub.getStatus('k')).remaining).toBe(9.999999999);
    expect(await stub.consume('k', 9.999999999)).toBe(true);
    expect(await stub.check('k', Number.MIN_VALUE)).toBe(false);
  });

  it('undefined where optional: a cost of undefined means 1, a field of undefined keeps its value', async () => {
    const stub = limiter('edge-undefined');
    await prepare(stub);
    await loose(stub).setOptions({ max_tokens: undefined, refill_every_seconds: undefined });
    await loose(stub).setOptions({});
    expect(await statuses(stub)).toEqual(BEFORE);
    expect(await loose(stub).check('k', undefined)).toBe(true);
    expect(await loose(stub).limit('fresh', undefined, undefined)).toMatchObject({ allowed: true, remaining: 9 });
    expect(await loose(stub).limitAll([{ key: 'k', cost: undefined, policy: undefined }])).toMatchObject({
      allowed: true,
      results: [{ remaining: 5, limit: 10 }],
    });
  });

  it('max_tokens 2^53 - 1 is the largest capacity; 2^53 is a RangeError', async () => {
    const stub = limiter('edge-max-tokens');
    await stub.setOptions({ max_tokens: 2 ** 53 - 1 });
    expect(await stub.getStatus('k')).toEqual({ remaining: 2 ** 53 - 1, limit: 2 ** 53 - 1, reset_in_ms: 0 });
    expect(await stub.consume('k', 2 ** 53 - 1)).toBe(true);
    expect((await stub.getStatus('k')).remaining).toBe(0);
    const e = await rejection(stub.setOptions({ max_tokens: 2 ** 53 }));
    expect(e?.name).toBe('RangeError');
    expect(e?.message).toBe('max_tokens must be a whole number from 1 to 9007199254740991, got 9007199254740992');
    expect((await stub.getStatus('other')).limit).toBe(2 ** 53 - 1);
  });

  it('extra arguments are ignored, whatever they are', async () => {
    const stub = limiter('edge-extra-arguments');
    await prepare(stub);
    const s = loose(stub);
    expect(await s.check('k', 6, NaN, 'extra')).toBe(true);
    expect(await s.getStatus('k', -1, { max_tokens: 0 })).toEqual(BEFORE[0]);
    expect(await s.reset('never-seen', NaN)).toBeUndefined();
    expect(await s.setOptions({}, { max_tokens: NaN }, 5n)).toBeUndefined();
    expect(await statuses(stub)).toEqual(BEFORE);
    expect(await s.consume('k', 1, -1, null, [], {})).toBe(true);
    expect(await s.limit('p', 1, undefined, { max_tokens: 0 })).toMatchObject({ allowed: true, remaining: 2, limit: 5 });
    // (limitAll's second argument is its permit: an undefined one is none.)
    expect(await s.limitAll([{ key: 'fresh' }], undefined, [{ key: 'fresh', cost: NaN }])).toMatchObject({ allowed: true });
    const bad = await rejection(s.limitAll([{ key: 'fresh' }], [{ key: 'fresh', cost: NaN }]));
    expect([bad?.name, bad?.message]).toEqual(['TypeError', 'permit must be an object, got an array']);
    expect(await statuses(stub)).toEqual([
      { remaining: 5, limit: 10, reset_in_ms: 8_766 },
      { remaining: 2, limit: 5, reset_in_ms: 58_766 },
      { remaining: 9, limit: 10, reset_in_ms: 10_000 },
      BEFORE[3],
    ]);
  });

  it('a 1 MB key works and is distinct from its 1 MB - 1 prefix and its last-character variants', async () => {
    const stub = limiter('edge-1mb-key');
    const key = 'x'.repeat(1 << 20);
    const prefix = key.slice(1);
    const variant = `${prefix}y`;
    const withSurrogate = `${prefix}\ud800`;
    expect(await stub.consume(key, 7)).toBe(true);
    expect(await stub.consume(withSurrogate, 2)).toBe(true);
    expect(await stub.getStatus(key)).toEqual({ remaining: 3, limit: 10, reset_in_ms: 10_000 });
    expect(await stub.getStatus(prefix)).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
    expect(await stub.getStatus(variant)).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
    expect((await stub.getStatus(withSurrogate)).remaining).toBe(8);
    expect(await stub.limit(key, 4)).toMatchObject({ allowed: false, remaining: 3, retry_after_ms: 10_000 });
    expect((await stub.limitAll([{ key }, { key: prefix, cost: 10 }])).results.map((r) => r.remaining)).toEqual([2, 0]);
    await stub.reset(key);
    expect((await stub.getStatus(key)).remaining).toBe(10);
    expect((await stub.getStatus(prefix)).remaining).toBe(0);
    expect((await stub.getStatus(withSurrogate)).remaining).toBe(8);
  });

  it('objects that carry no fields of their own (Map, Date, Error) are empty options', async () => {
    // Not a TypeError: they are objects, and options are read from own enumerable fields.
    const stub = limiter('edge-odd-objects');
    await prepare(stub);
    await loose(stub).setOptions(new Map([['max_tokens', 1]]));
    await loose(stub).setOptions(new Date(0));
    await loose(stub).setOptions(new Error('max_tokens'));
    expect(await statuses(stub)).toEqual(BEFORE);
    expect(await loose(stub).limit('fresh', 1, new Map([['max_tokens', 1]]))).toMatchObject({ allowed: true, limit: 10 });
  });
});

// ---------------------------------------------------------------------------------------
// Throwing getters and Proxies: only possible on the instance itself (not clonable).

const boom = () => {
  throw new Error('boom from a getter');
};
/** Calls the instance inside the Durable Object and returns what it threw (or null). */
const throwInside = (stub: Stub, call: (s: LooseInstance) => unknown) =>
  runInDurableObject(stub, (instance: RateLimiterServer) => {
    try {
      call(instance as unknown as LooseInstance);
      return null;
    } catch (error) {
      return error as Error;
    }
  });

describe('objects that throw when read, passed to the instance inside the Durable Object', () => {
  const READABLE = 'must be a readable value, got a property that throws when read';

  // [label, call, message]; all TypeErrors.
  const throwing: [string, (s: LooseInstance) => unknown, string][] = [
    ['setOptions: options.max_tokens getter', (s) => s.setOptions({ get max_tokens() { return boom(); } }),
      `max_tokens ${READABLE}`],
    ['setOptions: options.refill_every_seconds getter, beside a valid max_tokens',
      (s) => s.setOptions({ max_tokens: 3, get refill_every_seconds() { return boom(); } }),
      `refill_every_seconds ${READABLE}`],
    ['limit: policy.max_tokens getter', (s) => s.limit('p', 1, { get max_tokens() { return boom(); } }),
      `policy.max_tokens ${READABLE}`],
    ['limit: policy.refill_every_seconds getter, lone-surrogate key',
      (s) => s.limit('\ud800', 1, { get refill_every_seconds() { return boom(); } }),
      `policy.refill_every_seconds ${READABLE}`],
    ['limitAll: request key getter', (s) => s.limitAll([{ key: 'k' }, { get key() { return boom(); } }]),
      `requests[1].key ${READABLE}`],
    ['limitAll: request cost getter', (s) => s.limitAll([{ key: 'k', get cost() { return boom(); } }]),
      `requests[0].cost ${READABLE}`],
    ['limitAll: request policy getter', (s) => s.limitAll([{ key: 'p', get policy() { return boom(); } }]),
      `requests[0].policy ${READABLE}`],
    ['limitAll: request policy field getter',
      (s) => s.limitAll([{ key: 'k' }, { key: 'p', policy: { get max_tokens() { return boom(); } } }]),
      `requests[1].policy.max_tokens ${READABLE}`],
    ['setOptions: a Proxy whose get trap throws', (s) => s.setOptions(new Proxy({ max_tokens: 3 }, { get: boom })),
      `max_tokens ${READABLE}`],
  ];

  it(`${throwing.length} throwing getters: a TypeError naming the field, nothing changes, the object keeps serving`, async () => {
    const stub = limiter('throwing-getters');
    await prepare(stub);
    const observed: Observed[] = [];
    for (const [i, [label, call]] of throwing.entries()) {
      observed.push(await observe(stub, label, i, () => throwInside(stub, call).then((e) => { if (e) throw e; })));
    }
    expect(observed).toEqual(
      throwing.map(([label, , message]) => ({
        label,
        instance: 'TypeError',
        name: 'TypeError',
        message,
        unchanged: true,
        serving: true,
      })),
    );
    await expectServing(stub);
  });

  // When reading the input throws anywhere other than a plain property getter (an array
  // index getter, a Proxy trap such as ownKeys or getOwnPropertyDescriptor, get on the list
  // itself, a revoked Proxy), the binding must catch it: an exception that unwound through
  // the wasm binding would leave the RateLimiter borrowed, and every later call on the
  // instance would throw "recursive use of an object detected". None of these values can be
  // sent over RPC (not structured-clonable): only code in the object's own isolate can do this.
  const unreadable: [string, (s: LooseInstance) => unknown, string][] = [
    ['limitAll: an array whose index getter throws', (s) => {
      const requests = [{ key: 'k' }, { key: 'p' }];
      Object.defineProperty(requests, 1, { get: boom });
      return s.limitAll(requests);
    }, 'requests[1]'],
    ['setOptions: a Proxy whose ownKeys trap throws', (s) => s.setOptions(new Proxy({}, { ownKeys: boom })), 'options'],
    ['limit: a policy Proxy whose ownKeys trap throws',
      (s) => s.limit('p', 1, new Proxy({}, { ownKeys: boom })), 'policy'],
    ['limitAll: a request Proxy whose getOwnPropertyDescriptor trap throws',
      (s) => s.limitAll([new Proxy({ key: 'k' }, { getOwnPropertyDescriptor: boom })]), 'requests[0]'],
    ['limitAll: a list Proxy whose get trap throws', (s) => s.limitAll(new Proxy([], { get: boom })), 'requests'],
    ['setOptions: a revoked Proxy', (s) => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return s.setOptions(proxy);
    }, 'options'],
  ];

  it.each(unreadable.map(([label, call, field], i) => ({ label, call, field, i })))(
    '$label — a TypeError naming $field, and the object keeps serving',
    async ({ label, call, field, i }) => {
      const stub = limiter(`unreadable-${i}`);
      await prepare(stub);
      const observed = await observe(stub, label, 0, () => throwInside(stub, call).then((e) => { if (e) throw e; }));
      // Everything observed at once, so the failure shows every broken property.
      expect(observed).toEqual({
        label,
        instance: 'TypeError',
        name: 'TypeError',
        message: expect.stringMatching(new RegExp(`^${field.replace(/[[\]]/g, '\\$&')}[ .]`)),
        unchanged: true,
        serving: true,
      });
    },
  );
});

// ---------------------------------------------------------------------------------------
// Distinct keys never collide across RPC (docs/SPEC.md, section 4).

// Each group: keys that are distinct JS strings but differ only in one way.
const KEY_GROUPS: Record<string, string[]> = {
  'lone surrogates': ['\ud800', '\udc00', '\ufffd', '\ud800\udc00', '\udc00\ud800', 'a\ud800', 'a\ufffd', '\ud83d', '\ude00', '\ud83d\ude00'],
  'NUL': ['a', 'a\0', '\0a', 'a\0\0', '\0', ''],
  'Unicode normalisation': ['\u00e9', 'e\u0301', '\u00c5', 'A\u030a', '\u212b', '\ufb01', 'fi'],
  'case': ['Key', 'key', 'KEY', '\u00df', 'SS', 'ss', '\u0130', 'i', 'I'],
};

describe('distinct keys never collide over RPC', () => {
  it.each(Object.keys(KEY_GROUPS))('%s: RPC delivers each key exactly (read back inside the object)', async (group) => {
    const keys = KEY_GROUPS[group]!;
    expect(new Set(keys).size).toBe(keys.length);
    const stub = limiter(`keys-exact-${group}`);
    await stub.setOptions({ max_tokens: 100 });
    // Key i takes i + 1 tokens over RPC: its fingerprint.
    for (const [i, key] of keys.entries()) expect(await stub.consume(key, i + 1)).toBe(true);
    const expected = keys.map((_, i) => 100 - (i + 1));
    expect(await Promise.all(keys.map(async (key) => (await stub.getStatus(key)).remaining))).toEqual(expected);
    // Inside the object, the same strings (not cloned: a closure) find the same buckets, so
    // what arrived over RPC was exactly these strings, lone surrogates included.
    const local = await runInDurableObject(stub, (instance: RateLimiterServer) =>
      keys.map((key) => instance.getStatus(key).remaining),
    );
    expect(local).toEqual(expected);
  });

  it.each(Object.keys(KEY_GROUPS))('%s: draining any one key leaves the others full', async (group) => {
    const keys = KEY_GROUPS[group]!;
    const stub = limiter(`keys-drain-${group}`);
    const observed = [];
    for (const [i, key] of keys.entries()) {
      const drained = [await stub.consume(key, 10), await stub.consume(key), (await stub.limit(key)).allowed];
      const others = keys.filter((_, j) => j !== i);
      const othersFull = (await Promise.all(others.map((k) => stub.getStatus(k)))).every(
        (s) => s.remaining === 10 && s.limit === 10 && s.reset_in_ms === 0,
      );
      // Checking every other key in one atomic call: a collision would be a "repeats" error.
      const othersAllowed = await stub.limitAll(others.map((k) => ({ key: k, cost: 0 }))).then(
        (d) => d.allowed,
        (e: Error) => e.message,
      );
      // reset() is per key too: after it, the next round finds this key full again.
      await stub.reset(key);
      observed.push({ key: JSON.stringify(key), drained, othersFull, othersAllowed });
    }
    expect(observed).toEqual(
      keys.map((key) => ({ key: JSON.stringify(key), drained: [true, false, false], othersFull: true, othersAllowed: true })),
    );
    const full = { remaining: 10, limit: 10, reset_in_ms: 0 };
    expect(await Promise.all(keys.map((k) => stub.getStatus(k)))).toEqual(keys.map(() => full));
  });
});
