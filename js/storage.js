// Where DurableRateLimiterServer keeps its saved buckets and options: the Durable Object's
// SQLite storage (`ctx.storage.sql`), or a Map where there is none (plain Node, for unit
// tests). Both answer synchronously, so every method of the class stays synchronous and
// the writes of one call commit together with it.
//
// A bucket row holds the engine's saved bytes, when the bucket is full if nothing consumes
// (`full_at`, epoch ms: after it, the row is dead and a batch delete drops it) and whether
// the key has its own policy (rows without one are rewritten when the options change them).

const BUCKETS = 'rate_limiter_buckets';
const OPTIONS = 'rate_limiter_options';

/**
 * A key as stored: the string itself, or, when it holds lone surrogates (which SQLite's
 * UTF-8 text would turn into U+FFFD, merging distinct keys), its UTF-16 code units as a
 * BLOB. SQLite never compares a TEXT equal to a BLOB, so the two forms cannot collide.
 */
export function storedKey(key) {
  if (key.isWellFormed()) return key;
  const units = new DataView(new ArrayBuffer(key.length * 2));
  for (let i = 0; i < key.length; i++) units.setUint16(i * 2, key.charCodeAt(i), true);
  return units.buffer;
}

/** The key `storedKey` made `value` from. */
export function keyOf(value) {
  if (typeof value === 'string') return value;
  const units = new DataView(value);
  let key = '';
  for (let i = 0; i < units.byteLength; i += 2) key += String.fromCharCode(units.getUint16(i, true));
  return key;
}

export class SqlBuckets {
  #sql;

  constructor(sql) {
    this.#sql = sql;
    // `key` has no declared type, so TEXT and BLOB keys keep their storage class.
    sql.exec(`CREATE TABLE IF NOT EXISTS ${BUCKETS} (
      key PRIMARY KEY, state BLOB NOT NULL, full_at INTEGER NOT NULL, policy INTEGER NOT NULL
    ) WITHOUT ROWID`);
    sql.exec(`CREATE INDEX IF NOT EXISTS ${BUCKETS}_full_at ON ${BUCKETS} (full_at)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS ${OPTIONS} (
      id INTEGER PRIMARY KEY CHECK (id = 0), max_tokens REAL NOT NULL,
      refill_every_seconds REAL NOT NULL
    )`);
  }

  options() {
    for (const row of this.#sql.exec(`SELECT max_tokens, refill_every_seconds FROM ${OPTIONS}`)) {
      return { max_tokens: row.max_tokens, refill_every_seconds: row.refill_every_seconds };
    }
    return undefined;
  }

  saveOptions(options) {
    this.#sql.exec(
      `INSERT OR REPLACE INTO ${OPTIONS} (id, max_tokens, refill_every_seconds) VALUES (0, ?, ?)`,
      options.max_tokens,
      options.refill_every_seconds,
    );
  }

  /** The saved state of `key` (an ArrayBuffer), if a row is there. */
  get(key) {
    for (const row of this.#sql.exec(`SELECT state FROM ${BUCKETS} WHERE key = ?`, storedKey(key))) {
      return row.state;
    }
    return undefined;
  }

  /** Saves `saved` (what the engine's `saved` gave) for `key`, or deletes the row if undefined. */
  put(key, saved) {
    if (saved === undefined) {
      this.#sql.exec(`DELETE FROM ${BUCKETS} WHERE key = ?`, storedKey(key));
    } else {
      this.#sql.exec(
        `INSERT OR REPLACE INTO ${BUCKETS} (key, state, full_at, policy) VALUES (?, ?, ?, ?)`,
        storedKey(key),
        saved.state,
        saved.full_at_ms,
        saved.policy ? 1 : 0,
      );
    }
  }

  /** Every row, as [key, state]. */
  *all() {
    for (const row of this.#sql.exec(`SELECT key, state FROM ${BUCKETS}`)) {
      yield [keyOf(row.key), row.state];
    }
  }

  /** Replaces every row without a policy by `entries` ([key, state, full_at_ms]; each state a Uint8Array of its own). */
  replaceDefaults(entries) {
    this.#sql.exec(`DELETE FROM ${BUCKETS} WHERE policy = 0`);
    for (const [key, state, fullAt] of entries) {
      this.#sql.exec(
        `INSERT OR REPLACE INTO ${BUCKETS} (key, state, full_at, policy) VALUES (?, ?, ?, 0)`,
        storedKey(key),
        state.buffer, // a copy already (defaultBuckets makes each array)
        fullAt,
      );
    }
  }

  /** Drops the rows of buckets that are full by `nowMs` (through the full_at index). */
  dropFull(nowMs) {
    this.#sql.exec(`DELETE FROM ${BUCKETS} WHERE full_at <= ?`, nowMs);
  }

  /** How many rows there are (for the wake-up benchmark). */
  count() {
    return this.#sql.exec(`SELECT count(*) AS n FROM ${BUCKETS}`).one().n;
  }
}

/** The same on a Map: the stand-in where `ctx.storage` does not exist (plain Node). */
export class MemoryBuckets {
  #rows = new Map();
  #options;

  options() {
    return this.#options === undefined ? undefined : { ...this.#options };
  }

  saveOptions(options) {
    this.#options = { ...options };
  }

  get(key) {
    return this.#rows.get(key)?.state;
  }

  put(key, saved) {
    if (saved === undefined) this.#rows.delete(key);
    else this.#rows.set(key, { state: saved.state, fullAt: saved.full_at_ms, policy: saved.policy });
  }

  *all() {
    for (const [key, row] of this.#rows) yield [key, row.state];
  }

  replaceDefaults(entries) {
    for (const [key, row] of this.#rows) if (!row.policy) this.#rows.delete(key);
    for (const [key, state, fullAt] of entries) {
      this.#rows.set(key, { state: state.buffer, fullAt, policy: false });
    }
  }

  dropFull(nowMs) {
    for (const [key, row] of this.#rows) if (row.fullAt <= nowMs) this.#rows.delete(key);
  }
}
