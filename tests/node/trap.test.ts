// Trap recovery (docs/SPEC.md, section 7): if the wasm instance ever traps, the call that
// trapped throws a WebAssembly.RuntimeError and the shim starts a fresh instance for every
// later call. No input reaches a trap in the real package, so this suite loads a test-only
// build (scripts/build.sh --trap-switch) in which consuming one reserved key executes
// `unreachable`.
import { describe, expect, it } from 'vitest';
import { DurableRateLimiterServer, RateLimiterServer } from '../../target/pkg-trap-switch';
import type { Ctx } from './support';
import { status } from './support';

const TRAP = '\0trap-switch';

const newTrapServer = () => new RateLimiterServer({} as Ctx, {});

describe('after a trap', () => {
  it('the trapping call throws WebAssembly.RuntimeError and the next call works', () => {
    const server = newTrapServer();
    expect(server.consume('k', 2)).toBe(true);
    expect(() => server.consume(TRAP)).toThrow(WebAssembly.RuntimeError);
    expect(server.consume('k', 1)).toBe(true);
    expect(server.getStatus('k')).toEqual(status(9, 10, 10_000));
  });

  it('loses the buckets of every server on the instance but keeps their options', () => {
    const a = newTrapServer();
    a.setOptions({ max_tokens: 3, refill_every_seconds: 1 });
    expect(a.consume('k', 2)).toBe(true);
    const b = newTrapServer();
    expect(b.consume('x', 5)).toBe(true);

    expect(() => a.consume(TRAP)).toThrow(WebAssembly.RuntimeError);

    // Buckets lived in the trapped instance's memory: every key is full again.
    expect(a.getStatus('k')).toEqual(status(3, 3, 0));
    expect(b.getStatus('x')).toEqual(status(10, 10, 0));
    // Options set with setOptions were re-applied to the fresh instance.
    expect(a.consume('k', 3)).toBe(true);
    expect(a.check('k', 1)).toBe(false);
  });

  it('survives repeated traps and keeps validating input', () => {
    const server = newTrapServer();
    for (let i = 0; i < 3; i++) {
      expect(() => server.consume(TRAP)).toThrow(WebAssembly.RuntimeError);
      expect(server.consume('k')).toBe(true);
    }
    expect(() => server.consume('k', Number.NaN)).toThrow(RangeError);
    expect(server.limit('k', 1, { max_tokens: 5 })).toMatchObject({ allowed: true, limit: 5 });
  });
});

describe('after a trap, the durable class', () => {
  it('reads its buckets back from storage: nothing is lost', () => {
    const server = new DurableRateLimiterServer({} as Ctx, {});
    server.setOptions({ max_tokens: 3, refill_every_seconds: 60 });
    expect(server.consume('k', 2)).toBe(true);
    expect(server.limit('p', 4, { max_tokens: 9 })).toMatchObject({ allowed: true, remaining: 5 });

    expect(() => server.consume(TRAP)).toThrow(WebAssembly.RuntimeError);

    expect(server.getStatus('k')).toEqual(status(1, 3, 60_000));
    expect(server.getStatus('p')).toEqual(status(5, 9, 60_000));
    expect(server.consume('k', 2)).toBe(false);
  });
});
