// Where DurableRateLimiterServer keeps its snapshots and options: the Durable Object's
// SQLite storage (`ctx.storage.sql`), or a Map where there is none (plain Node, for unit
// tests). Both answer synchronously, so every method of the class stays synchronous and
// the writes of one call commit together with it.
//
// A row holds a key's snapshot: its bytes, when the bucket is full if nothing consumes
// (`full_at`, epoch ms: after it, the row is dead and a batch delete drops it) and whether
// the key has its own policy (rows without one are rewritten when the options change).

const BUCKETS = 'rate_limiter_buckets';
const OPTIONS = 'rate_limiter_options';
// A gate's row: its live permits, and when the last of them expires (`ends_at`, epoch ms:
// after it, the row is dead and a batch delete drops it).
const GATES = 'rate_limiter_gates';
// A block's row: when it ends (`until`, epoch ms: after it, the row is dead).
const BLOCKS = 'rate_limiter_blocks';

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
      key PRIMARY KEY, snapshot BLOB NOT NULL, full_at INTEGER NOT NULL, policy INTEGER NOT NULL
    ) WITHOUT ROWID`);
    sql.exec(`CREATE INDEX IF NOT EXISTS ${BUCKETS}_full_at ON ${BUCKETS} (full_at)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS ${GATES} (
      key PRIMARY KEY, permits BLOB NOT NULL, ends_at INTEGER NOT NULL
    ) WITHOUT ROWID`);
    sql.exec(`CREATE INDEX IF NOT EXISTS ${GATES}_ends_at ON ${GATES} (ends_at)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS ${BLOCKS} (key PRIMARY KEY, until INTEGER NOT NULL) WITHOUT ROWID`);
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

  /** The snapshot bytes of `key` (an ArrayBuffer), if a row is there. */
  snapshot(key) {
    for (const row of this.#sql.exec(`SELECT snapshot FROM ${BUCKETS} WHERE key = ?`, storedKey(key))) {
      return row.snapshot;
    }
    return undefined;
  }

  /** Saves `snapshot` (`{ bytes, full_at_ms, has_policy }`) as the row of `key`. */
  saveSnapshot(key, snapshot) {
    this.#insert(key, snapshot.bytes, snapshot.full_at_ms, snapshot.has_policy);
  }

  deleteSnapshot(key) {
    this.#sql.exec(`DELETE FROM ${BUCKETS} WHERE key = ?`, storedKey(key));
  }

  /** Every row, as [key, snapshot bytes]. */
  *snapshots() {
    for (const row of this.#sql.exec(`SELECT key, snapshot FROM ${BUCKETS}`)) {
      yield [keyOf(row.key), row.snapshot];
    }
  }

  /** Replaces every row without a policy by `snapshots` (`{ key, bytes, full_at_ms }` each). */
  replaceSnapshotsWithoutPolicy(snapshots) {
    this.#sql.exec(`DELETE FROM ${BUCKETS} WHERE policy = 0`);
    for (const { key, bytes, full_at_ms } of snapshots) this.#insert(key, bytes, full_at_ms, false);
  }

  /** Drops the rows of buckets that are full by `nowMs` (through the full_at index). */
  dropFull(nowMs) {
    this.#sql.exec(`DELETE FROM ${BUCKETS} WHERE full_at <= ?`, nowMs);
  }

  /** The permits of `key`'s gate (an ArrayBuffer), if a row is there. */
  gate(key) {
    for (const row of this.#sql.exec(`SELECT permits FROM ${GATES} WHERE key = ?`, storedKey(key))) {
      return row.permits;
    }
    return undefined;
  }

  /** Saves `gate` (`{ bytes, ends_at_ms }`) as the gate row of `key`. */
  saveGate(key, gate) {
    this.#sql.exec(
      `INSERT OR REPLACE INTO ${GATES} (key, permits, ends_at) VALUES (?, ?, ?)`,
      storedKey(key),
      gate.bytes,
      gate.ends_at_ms,
    );
  }

  deleteGate(key) {
    this.#sql.exec(`DELETE FROM ${GATES} WHERE key = ?`, storedKey(key));
  }

  /** Drops the gate rows whose permits have all expired by `nowMs`. */
  dropEndedGates(nowMs) {
    this.#sql.exec(`DELETE FROM ${GATES} WHERE ends_at <= ?`, nowMs);
  }

  /** Every block in force at `nowMs`, as [key, until]. */
  *blocks(nowMs) {
    for (const row of this.#sql.exec(`SELECT key, until FROM ${BLOCKS} WHERE until > ?`, nowMs)) {
      yield [keyOf(row.key), row.until];
    }
  }

  saveBlock(key, until) {
    this.#sql.exec(`INSERT OR REPLACE INTO ${BLOCKS} (key, until) VALUES (?, ?)`, storedKey(key), until);
  }

  deleteBlock(key) {
    this.#sql.exec(`DELETE FROM ${BLOCKS} WHERE key = ?`, storedKey(key));
  }

  dropEndedBlocks(nowMs) {
    this.#sql.exec(`DELETE FROM ${BLOCKS} WHERE until <= ?`, nowMs);
  }

  #insert(key, bytes, fullAt, hasPolicy) {
    this.#sql.exec(
      `INSERT OR REPLACE INTO ${BUCKETS} (key, snapshot, full_at, policy) VALUES (?, ?, ?, ?)`,
      storedKey(key),
      bytes,
      fullAt,
      hasPolicy ? 1 : 0,
    );
  }
}

/** The same on a Map: the stand-in where `ctx.storage` does not exist (plain Node). */
export class MemoryBuckets {
  #rows = new Map();
  #gates = new Map();
  #blocks = new Map();
  #options;

  *blocks(nowMs) {
    for (const [key, until] of this.#blocks) if (until > nowMs) yield [key, until];
  }

  saveBlock(key, until) {
    this.#blocks.set(key, until);
  }

  deleteBlock(key) {
    this.#blocks.delete(key);
  }

  dropEndedBlocks(nowMs) {
    for (const [key, until] of this.#blocks) if (until <= nowMs) this.#blocks.delete(key);
  }

  gate(key) {
    return this.#gates.get(key)?.bytes;
  }

  saveGate(key, gate) {
    this.#gates.set(key, { ...gate });
  }

  deleteGate(key) {
    this.#gates.delete(key);
  }

  dropEndedGates(nowMs) {
    for (const [key, gate] of this.#gates) if (gate.ends_at_ms <= nowMs) this.#gates.delete(key);
  }

  options() {
    return this.#options === undefined ? undefined : { ...this.#options };
  }

  saveOptions(options) {
    this.#options = { ...options };
  }

  snapshot(key) {
    return this.#rows.get(key)?.bytes;
  }

  saveSnapshot(key, { bytes, full_at_ms, has_policy }) {
    this.#rows.set(key, { bytes, full_at_ms, has_policy });
  }

  deleteSnapshot(key) {
    this.#rows.delete(key);
  }

  *snapshots() {
    for (const [key, row] of this.#rows) yield [key, row.bytes];
  }

  replaceSnapshotsWithoutPolicy(snapshots) {
    for (const [key, row] of this.#rows) if (!row.has_policy) this.#rows.delete(key);
    for (const { key, bytes, full_at_ms } of snapshots) {
      this.#rows.set(key, { bytes, full_at_ms, has_policy: false });
    }
  }

  dropFull(nowMs) {
    for (const [key, row] of this.#rows) if (row.full_at_ms <= nowMs) this.#rows.delete(key);
  }
}

// Where the durable class keeps its snapshots without `ctx.storage` (plain Node): one per
// ctx, so a new server on the same ctx finds what an evicted one saved.
const standIns = new WeakMap();

/**
 * The storage of the Durable Object whose state is `ctx`: SQLite, or (`standIn`, the Node
 * entry) a Map per ctx where `ctx.storage` does not exist. Throws where neither is allowed.
 */
export function openBuckets(ctx, { standIn = false } = {}) {
  const storage = ctx?.storage;
  if (storage === undefined || storage === null) {
    if (!standIn) {
      throw new Error('DurableRateLimiterServer needs the Durable Object storage (ctx.storage)');
    }
    if (typeof ctx !== 'object' || ctx === null) return new MemoryBuckets();
    if (!standIns.has(ctx)) standIns.set(ctx, new MemoryBuckets());
    return standIns.get(ctx);
  }
  // workerd gives every class a `sql`; on a class that is not SQLite-backed its first query
  // (in SqlBuckets) throws workerd's own error, which names new_sqlite_classes. This check is
  // for a runtime that has no `sql` at all, or throws on reading it.
  let sql;
  try {
    sql = storage.sql;
  } catch {}
  if (sql === undefined) {
    throw new Error(
      'DurableRateLimiterServer needs SQLite storage: declare its class in a migration ' +
        'under new_sqlite_classes (not new_classes)',
    );
  }
  return new SqlBuckets(sql);
}
