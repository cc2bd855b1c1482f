// Keys (docs/SPEC.md, section 4): any JS string is a key, and every distinct string is a
// distinct bucket, whatever encoding the engine uses inside (UTF-8 would merge lone
// surrogates into U+FFFD).
import { beforeEach, describe, expect, it } from 'vitest';
import { RateLimiterServer } from '@delightstack/rate-limiter';
import { newServer } from './support';

const CAPACITY = 1_000_000;

let server: RateLimiterServer;

// setup.ts has set the fake clock to T0 by now.
beforeEach(() => {
  server = newServer();
});

/**
 * Takes i + 1 tokens from the i-th key, then checks that every key holds exactly what was
 * taken from it alone; then resets the first key and checks that only it changed.
 */
function expectDistinctBuckets(keys: readonly string[]): void {
  expect(new Set(keys).size, 'the keys are distinct JS strings').toBe(keys.length);
  server.setOptions({ max_tokens: CAPACITY });
  keys.forEach((key, i) => expect(server.consume(key, i + 1)).toBe(true));
  const remaining = keys.map((key) => server.getStatus(key).remaining);
  expect(remaining).toEqual(keys.map((_, i) => CAPACITY - (i + 1)));
  server.reset(keys[0]!);
  expect(keys.map((key) => server.getStatus(key).remaining)).toEqual(
    keys.map((_, i) => (i === 0 ? CAPACITY : CAPACITY - (i + 1))),
  );
}

describe('any string is a key', () => {
  it('the empty string is a key of its own', () => {
    expect(server.consume('', 3)).toBe(true);
    expect(server.getStatus('')).toEqual({ remaining: 7, limit: 10, reset_in_ms: 10_000 });
    expect(server.check('', 7)).toBe(true);
    expect(server.check('', 8)).toBe(false);
    expect(server.getStatus(' ')).toEqual({ remaining: 10, limit: 10, reset_in_ms: 0 });
  });

  it('the empty string is distinct from blank and look-alike keys', () => {
    expectDistinctBuckets(['', ' ', '\0', '\u200b', '\ufeff', 'undefined', 'null']);
  });

  it('emoji are keys, and the halves of a surrogate pair are other keys', () => {
    expectDistinctBuckets(['😀', '😁', '\ud83d', '\ude00', '\ude01', '😀😀', 'user:😀']);
  });

  it('NUL is part of a key, not its end', () => {
    expectDistinctBuckets(['\0', '\0\0', 'a', 'a\0', 'a\0b', 'ab', '\0a']);
  });

  it('very long keys (100k chars) are distinct down to the last character', () => {
    const long = 'x'.repeat(100_000);
    expectDistinctBuckets([
      long,
      `${'x'.repeat(99_999)}y`,
      `y${'x'.repeat(99_999)}`,
      'x'.repeat(99_999),
      'x'.repeat(100_001),
      `${'x'.repeat(99_999)}\ud800`,
      `${'x'.repeat(99_999)}\ufffd`,
    ]);
    expect(server.getStatus('x'.repeat(100_000)).remaining).toBe(CAPACITY);
  });

  it("lone surrogates are distinct keys: '\\ud800', '\\udc00' and '\\ufffd'", () => {
    expectDistinctBuckets([
      '\ud800',
      '\udc00',
      '\ufffd',
      '\ud800\udc00', // a valid pair: U+10000
      '\udc00\ud800', // two lone surrogates
      '\ud800\ud800',
      '\ufffd\ufffd',
      'a\ud800',
      'a\udc00',
      'a\ufffd',
      '\ud800a',
      '\ufffda',
    ]);
  });

  it('strings differing only by Unicode normalization are distinct', () => {
    expectDistinctBuckets([
      '\u00e9', // é precomposed (NFC)
      'e\u0301', // e + combining acute (NFD)
      '\u00c5', // Å
      'A\u030a', // A + combining ring
      '\u212b', // ANGSTROM SIGN
      '\ufb01', // ﬁ ligature
      'fi',
    ]);
  });

  it('strings differing only by case are distinct', () => {
    expectDistinctBuckets(['api', 'API', 'Api', 'aPI', '\u00df', 'SS', 'ss', '\u0130', 'i', 'I']);
  });

  it('keys that spell other values are ordinary distinct strings', () => {
    expectDistinctBuckets(['5', '5.0', 'NaN', 'null', 'undefined', 'true', '[object Object]', '0', '-0']);
  });

  it('thousands of keys each keep their own bucket', () => {
    const keys = Array.from({ length: 5_000 }, (_, i) => `user:${i}`);
    keys.forEach((key, i) => expect(server.consume(key, (i % 10) + 1)).toBe(true));
    keys.forEach((key, i) => expect(server.getStatus(key).remaining).toBe(10 - ((i % 10) + 1)));
  });
});

describe('the same string is the same bucket', () => {
  it('however the string was built', () => {
    server.consume('ab', 2);
    expect(server.getStatus(['a', 'b'].join('')).remaining).toBe(8);
    server.consume('\u{1F600}', 3);
    expect(server.getStatus('\ud83d\ude00').remaining).toBe(7);
    expect(server.getStatus('😀').remaining).toBe(7);
    const long = 'xy'.repeat(50_000);
    server.consume(long, 4);
    expect(server.getStatus(`${'xy'.repeat(25_000)}${'xy'.repeat(25_000)}`).remaining).toBe(6);
    server.consume('\ud800', 5);
    expect(server.getStatus(String.fromCharCode(0xd800)).remaining).toBe(5);
  });

  it('a key used again after others is its own bucket, whichever path each call took', () => {
    // The shim skips passing a key that is the same string as its last fast call: keys that
    // alternate, a key that cannot take the fast path (a lone surrogate) between two that
    // can, a bad cost on the repeated key and checks between consumes must all keep each
    // bucket apart.
    server.setOptions({ max_tokens: 100 });
    const built = (s: string) => [...s].join('');
    const sequence: [string, number][] = [
      ['a', 1], ['a', 2], ['b', 4], ['a', 8], [built('a'), 16], ['\ud800', 32], ['a', 3], ['b', 5],
    ];
    const taken = new Map<string, number>();
    for (const [key, cost] of sequence) {
      expect(server.check(key, cost)).toBe(true);
      expect(server.consume(key, cost)).toBe(true);
      taken.set(key, (taken.get(key) ?? 0) + cost);
    }
    expect(() => server.consume('a', -1)).toThrow(RangeError);
    expect(() => server.check('a', Number.NaN)).toThrow(RangeError);
    for (const [key, used] of taken) expect(server.getStatus(key).remaining).toBe(100 - used);
    expect(server.consume('a', 100 - taken.get('a')! + 1)).toBe(false);
    expect(server.consume('b', 100 - taken.get('b')!)).toBe(true);
    expect(server.getStatus('a').remaining).toBe(100 - taken.get('a')!);
  });
});
