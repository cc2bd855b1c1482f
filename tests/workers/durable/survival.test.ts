// DurableRateLimiterServer keeps its state when the object's memory is discarded
// (docs/SPEC.md, section 6).
// Memory is discarded here by building a fresh instance on the same Durable Object state
// (what workerd does after an eviction: a new object, the same storage) and by ctx.abort();
// tests/process restarts a real workerd process on on-disk storage. The clock is faked.
import { env } from 'cloudflare:workers';
import { runInDurableObject } from 'cloudflare:test';
import { DurableRateLimiterServer, type RateLimiterOptions } from '@delightstack/rate-limiter';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { limiter, rejection } from '../support';

const T0 = Date.UTC(2026, 3, 1);
const at = (ms: number) => vi.setSystemTime(T0 + ms);
const rows = (state: DurableObjectState) =>
  state.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM rate_limiter_buckets').one().n;

beforeEach(() => {
  vi.useFakeTimers();
  at(0);
});
afterEach(() => {
  vi.useRealTimers();
});

type Step =
  | ['setOptions', RateLimiterOptions]
  | ['consume' | 'check', string, number]
  | ['getStatus' | 'reset', string]
  | ['limit', string, number, RateLimiterOptions?]
  | ['limitAll', { key: string; cost?: number; policy?: RateLimiterOptions }[]]
  | ['advance', number];

const call = (server: DurableRateLimiterServer, [method, ...args]: Step): unknown => {
  const target = server as unknown as Record<string, (...a: unknown[]) => unknown>;
  return target[method]!(...args);
};

// Every kind of state: instance options, buckets without a policy, per-key policies that outlive
// option changes, limitAll, reset, distinct keys that differ only in ways encodings lose,
// and options changes both ways between reads.
const SCRIPT: Step[] = [
  ['setOptions', { max_tokens: 5, refill_every_seconds: 300 }],
  ['consume', 'login:alice', 2],
  ['consume', 'login:alice', 2],
  ['getStatus', 'login:alice'],
  ['limit', 'upload:bob', 1, { max_tokens: 100, refill_every_seconds: 864 }],
  ['limit', 'upload:bob', 30],
  ['consume', 'nul\u0000', 3],
  ['consume', 'nul', 1],
  ['consume', '\ud800', 4],
  ['consume', '\ufffd', 1],
  ['consume', 'caf\u00e9', 2],
  ['consume', 'cafe\u0301', 1],
  ['advance', 150_000],
  ['getStatus', 'login:alice'],
  ['consume', 'login:alice', 1],
  ['check', 'login:alice', 2],
  ['limitAll', [{ key: 'login:alice', cost: 1 }, { key: 'upload:bob', cost: 5 }]],
  ['limitAll', [{ key: 'login:alice', cost: 9 }, { key: 'upload:bob', cost: 5 }]],
  ['advance', 299_999],
  ['getStatus', 'login:alice'],
  ['setOptions', { max_tokens: 8 }],
  ['getStatus', 'login:alice'],
  ['getStatus', 'upload:bob'],
  ['limit', 'upload:bob', 0],
  ['setOptions', { refill_every_seconds: 60 }],
  ['advance', 61_000],
  ['getStatus', 'nul\u0000'],
  ['getStatus', 'nul'],
  ['getStatus', '\ud800'],
  ['getStatus', '\ufffd'],
  ['getStatus', 'caf\u00e9'],
  ['getStatus', 'cafe\u0301'],
  ['reset', 'caf\u00e9'],
  ['getStatus', 'caf\u00e9'],
  ['limit', 'login:alice', 50],
  ['setOptions', { max_tokens: 3 }],
  ['getStatus', 'login:alice'],
  ['advance', 3_600_000],
  ['getStatus', 'upload:bob'],
  ['limit', 'upload:bob', 2],
];

describe('memory discarded', () => {
  it('before every call: every answer equals that of an object that kept its memory', async () => {
    const kept = limiter('survival-kept');
    const fresh = limiter('survival-fresh');
    const expected: unknown[] = [];
    const got: unknown[] = [];
    await runInDurableObject(kept, (instance: DurableRateLimiterServer) => {
      at(0);
      let now = 0;
      for (const step of SCRIPT) {
        if (step[0] === 'advance') at((now += step[1]));
        else expected.push(call(instance, step));
      }
    });
    await runInDurableObject(fresh, (_: DurableRateLimiterServer, state: DurableObjectState) => {
      at(0);
      let now = 0;
      for (const step of SCRIPT) {
        if (step[0] === 'advance') at((now += step[1]));
        else got.push(call(new DurableRateLimiterServer(state, env), step));
      }
    });
    expect(got).toEqual(expected);
    // The script reaches denials, partial buckets and policies, so the comparison bites.
    expect(expected).toContainEqual(false);
    expect(expected).toContainEqual(expect.objectContaining({ allowed: false }));
    expect(expected).toContainEqual(expect.objectContaining({ limit: 100 }));
  });

  it('after a consume, a new instance reports the same remaining and reset_in_ms', async () => {
    const stub = limiter('survival-status');
    await stub.setOptions({ max_tokens: 5, refill_every_seconds: 300 });
    expect(await stub.consume('login:alice', 4)).toBe(true);
    at(100_000);
    const before = await stub.getStatus('login:alice');
    expect(before).toEqual({ remaining: 1, limit: 5, reset_in_ms: 200_000 });
    await runInDurableObject(stub, (_: DurableRateLimiterServer, state: DurableObjectState) => {
      const restarted = new DurableRateLimiterServer(state, env);
      expect(restarted.getStatus('login:alice')).toEqual(before);
      expect(restarted.consume('login:alice', 2)).toBe(false);
      expect(restarted.getStatus('other')).toEqual({ remaining: 5, limit: 5, reset_in_ms: 0 });
    });
  });

  it('by ctx.abort(): the next object on the same id finds the bucket as it was', async () => {
    const name = 'survival-abort';
    await limiter(name).setOptions({ max_tokens: 5, refill_every_seconds: 300 });
    await limiter(name).limit('k', 3, { max_tokens: 7 });
    const before = await limiter(name).getStatus('k');
    // The aborting call itself fails: the object is gone.
    const aborted = await rejection(
      runInDurableObject(limiter(name), (_: unknown, state: DurableObjectState) => {
        state.abort('test: discard the memory');
      }),
    );
    expect(aborted).toBeInstanceOf(Error);
    expect(await limiter(name).getStatus('k')).toEqual(before);
    expect(before).toEqual({ remaining: 4, limit: 7, reset_in_ms: 300_000 });
  });
});

describe('gates (concurrency limits)', () => {
  const gateRows = (state: DurableObjectState) =>
    state.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM rate_limiter_gates').one().n;

  it('a new instance and an aborted object hold the same live permits; ended gates leave storage', async () => {
    const name = 'survival-gates';
    const gate = { max_in_flight: 2, ttl_seconds: 30 };
    const first = await limiter(name).acquire('gen', 1, gate);
    await limiter(name).acquire('gen', 1, gate);
    await runInDurableObject(limiter(name), (_: DurableRateLimiterServer, state: DurableObjectState) => {
      const restarted = new DurableRateLimiterServer(state, env);
      expect(restarted.gateStatus('gen')).toEqual({ in_flight: 2, permits: 2 });
      expect(restarted.acquire('gen', 1, gate).allowed).toBe(false);
      expect(restarted.release('gen', first.id!).released).toBe(true);
    });
    const aborted = await rejection(
      runInDurableObject(limiter(name), (_: unknown, state: DurableObjectState) => {
        state.abort('test: discard the memory');
      }),
    );
    expect(aborted).toBeInstanceOf(Error);
    expect(await limiter(name).gateStatus('gen')).toEqual({ in_flight: 1, permits: 1 });
    expect(await limiter(name).release('gen', first.id!)).toEqual({ released: false, in_flight: 1 });
    // Every permit expires unreleased: the next write drops the dead row.
    at(30_000);
    await limiter(name).acquire('other', 1, gate);
    await runInDurableObject(limiter(name), (_: unknown, state: DurableObjectState) => {
      expect(gateRows(state)).toBe(1);
    });
  });
});

describe('blocks', () => {
  it('an aborted object finds its blocks, and its unblocks, as they were', async () => {
    const name = 'survival-blocks';
    await limiter(name).block('mallory', 600);
    await limiter(name).block('eve', 600);
    await limiter(name).unblock('eve');
    const aborted = await rejection(
      runInDurableObject(limiter(name), (_: unknown, state: DurableObjectState) => {
        state.abort('test: discard the memory');
      }),
    );
    expect(aborted).toBeInstanceOf(Error);
    at(100_000);
    expect(await limiter(name).consume('mallory')).toBe(false);
    expect(await limiter(name).consume('eve')).toBe(true);
    expect((await limiter(name).blocked()).keys).toEqual([{ key: 'mallory', blocked_for_ms: 500_000 }]);
  });
});

describe('storage', () => {
  it('stays bounded under key churn: buckets that refill to full leave storage in batches', async () => {
    await runInDurableObject(limiter('survival-churn'), (instance: DurableRateLimiterServer, state: DurableObjectState) => {
      instance.setOptions({ max_tokens: 2, refill_every_seconds: 1 });
      // 3,000 keys, one new every 10 ms; each is full again 1 s after its only consume.
      let peak = 0;
      for (let i = 0; i < 3_000; i++) {
        at(i * 10);
        expect(instance.consume(`client-${i}`)).toBe(true);
        peak = Math.max(peak, rows(state));
      }
      // Live: the last 1 s of keys (100); plus at most 10 s of full ones awaiting the batch.
      expect(peak).toBeLessThanOrEqual(100 + 1_000 + 1);
      expect(peak).toBeGreaterThan(100);
      // Quiet for a while, then one write: only its own row is left.
      at(3_000 * 10 + 20_000);
      expect(instance.consume('late')).toBe(true);
      expect(rows(state)).toBe(1);
    });
  });

  it('is not written by check or getStatus, and once per consume, limit or reset', async () => {
    await runInDurableObject(limiter('survival-writes'), (_: DurableRateLimiterServer, state: DurableObjectState) => {
      const writes: string[] = [];
      const sql = state.storage.sql;
      expect(state.storage.sql).toBe(sql); // one object, which the class keeps
      // Cloudflare's storage API, watched (not our code): every statement but reads counts.
      const exec = sql.exec.bind(sql);
      Object.defineProperty(sql, 'exec', {
        configurable: true,
        value: (query: string, ...bindings: unknown[]) => {
          if (!/^\s*(SELECT|CREATE)/i.test(query)) writes.push(query.trim().split(/\s+/)[0]!);
          return exec(query, ...bindings);
        },
      });
      const server = new DurableRateLimiterServer(state, env);
      server.setOptions({ max_tokens: 3, refill_every_seconds: 60 });
      writes.length = 0;
      const writesOf = (run: () => unknown) => {
        const start = writes.length;
        run();
        return writes.slice(start);
      };
      // The first write of an object's life also drops dead rows (one batch per 10 s).
      expect(writesOf(() => server.consume('k'))).toEqual(['INSERT', 'DELETE']);
      expect(writesOf(() => server.consume('k'))).toEqual(['INSERT']);
      expect(writesOf(() => server.check('k', 1))).toEqual([]);
      expect(writesOf(() => server.getStatus('k'))).toEqual([]);
      expect(writesOf(() => server.getStatus('unknown'))).toEqual([]);
      expect(writesOf(() => server.consume('k', 5))).toEqual([]); // denied: nothing changed
      expect(writesOf(() => server.limit('k', 5))).toEqual([]); // denied, no policy
      expect(writesOf(() => server.limit('k', 1))).toEqual(['INSERT']);
      expect(writesOf(() => server.reset('k'))).toEqual(['DELETE']);
      expect(writesOf(() => server.setOptions({ max_tokens: 3 }))).toEqual([]); // unchanged
      delete (sql as { exec?: unknown }).exec;
    });
  });

  it('a bucket that cannot be read is a clear Error naming the key, and reset() clears it', async () => {
    await runInDurableObject(limiter('survival-corrupt'), (instance: DurableRateLimiterServer, state: DurableObjectState) => {
      expect(instance.consume('victim')).toBe(true);
      state.storage.sql.exec(
        "UPDATE rate_limiter_buckets SET snapshot = x'0102' WHERE key = 'victim'",
      );
      const fresh = new DurableRateLimiterServer(state, env);
      const error = (() => {
        try {
          fresh.getStatus('victim');
        } catch (e) {
          return e as Error;
        }
      })();
      expect(error?.constructor).toBe(Error);
      expect(error?.message).toBe(
        'the stored bucket of key "victim" is not a bucket this version saved (2 bytes): reset the key to start it afresh',
      );
      expect(fresh.getStatus('other').remaining).toBe(10);
      fresh.reset('victim');
      expect(fresh.getStatus('victim').remaining).toBe(10);
    });
  });

  it('refuses storage that is not SQLite, naming the fix', async () => {
    const stub = env.WITHOUT_SQL.get(env.WITHOUT_SQL.idFromName('no-sql'));
    const error = await rejection(stub.consume('k'));
    expect(error?.message).toContain('new_sqlite_classes');
  });
});
