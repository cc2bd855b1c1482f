// Response headers for a limit() or limitAll() decision. Plain JavaScript, no RPC.

// Structured Field integers have at most 15 digits (RFC 9651).
const SF_INTEGER_MAX = 999_999_999_999_999;

/**
 * Headers for `decision` (from `limit` or `limitAll`):
 * - `RateLimit-Policy` and `RateLimit` of draft-ietf-httpapi-ratelimit-headers-11, one list
 *   member per limit: `"name";q=<capacity>;w=<seconds to refill an empty bucket>` and
 *   `"name";r=<whole tokens left>;t=<seconds until the next token>`;
 * - `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (seconds) of the limit
 *   that binds: the denied one with the longest wait, else the one with the fewest tokens;
 * - `Retry-After` (seconds) on a denied decision that waiting can satisfy.
 * A limit that denied with a wait reports r=0 and t = its wait, whatever denied it (a block
 * leaves tokens in the bucket; a cost above one waits for more than the next token): every
 * header of a denial then says to wait Retry-After (section 8.3 of docs/SPEC.md).
 * Times are rounded up and tokens down, so a client that follows them is never early.
 * `options.standardHeaders: false` leaves out the first two, `options.legacyHeaders: false`
 * the `X-RateLimit-*` ones; `Retry-After` is always there when waiting helps.
 */
export function rateLimitHeaders(decision, options = {}) {
  if (typeof decision !== 'object' || decision === null) {
    throw new TypeError(`decision must be the result of limit() or limitAll(), got ${decision}`);
  }
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`options must be an object, got ${options}`);
  }
  const { standardHeaders = true, legacyHeaders = true } = options;
  if (typeof standardHeaders !== 'boolean') {
    throw new TypeError(`options.standardHeaders must be a boolean, got ${standardHeaders}`);
  }
  if (typeof legacyHeaders !== 'boolean') throw new TypeError(`options.legacyHeaders must be a boolean, got ${legacyHeaders}`);
  if (!Array.isArray(decision.results)) return oneLimit(decision, options, standardHeaders, legacyHeaders);
  const limits = decision.results;
  limits.forEach(checkDecision);
  const names = policyNames(options.name, limits.length);
  if (limits.length === 0) return {}; // limitAll([]): no limit, nothing to report

  const headers = {};
  if (standardHeaders) {
    headers['RateLimit-Policy'] = limits
      .map((d, i) => {
        const window = typeof d.window_ms === 'number' ? `;w=${seconds(d.window_ms)}` : '';
        return `${names[i]};q=${integer(d.limit)}${window}`;
      })
      .join(', ');
    headers['RateLimit'] = limits
      .map((d, i) => `${names[i]};r=${left(d)};t=${resetSeconds(d)}`)
      .join(', ');
  }
  if (legacyHeaders) {
    const binding = bindingLimit(limits, decision.allowed);
    headers['X-RateLimit-Limit'] = String(integer(binding.limit));
    headers['X-RateLimit-Remaining'] = String(left(binding));
    headers['X-RateLimit-Reset'] = String(resetSeconds(binding));
  }
  if (decision.allowed === false && typeof decision.retry_after_ms === 'number') {
    headers['Retry-After'] = String(Math.max(1, seconds(decision.retry_after_ms)));
  }
  return headers;
}

/**
 * The headers of a decision on one limit (`limit()`): what the general case makes of it, with
 * no arrays and no callbacks (the middleware makes these for every request it admits).
 */
function oneLimit(d, options, standardHeaders, legacyHeaders) {
  checkDecision(d, 0);
  const { name = 'default' } = options;
  const quotedName = Array.isArray(name) ? policyNames(name, 1)[0] : quoted(name);
  const headers = {};
  if (standardHeaders) {
    const window = typeof d.window_ms === 'number' ? `;w=${seconds(d.window_ms)}` : '';
    headers['RateLimit-Policy'] = `${quotedName};q=${integer(d.limit)}${window}`;
    headers['RateLimit'] = `${quotedName};r=${left(d)};t=${resetSeconds(d)}`;
  }
  // (The binding limit of one limit is that limit.)
  if (legacyHeaders) {
    headers['X-RateLimit-Limit'] = String(integer(d.limit));
    headers['X-RateLimit-Remaining'] = String(left(d));
    headers['X-RateLimit-Reset'] = String(resetSeconds(d));
  }
  if (d.allowed === false && typeof d.retry_after_ms === 'number') {
    headers['Retry-After'] = String(Math.max(1, seconds(d.retry_after_ms)));
  }
  return headers;
}

function checkDecision(d, i) {
  // (Field by field, in this order: no array and no keyed loads per call.)
  if (!validCount(d?.remaining)) invalid(i, 'remaining');
  if (!validCount(d.limit)) invalid(i, 'limit');
  if (!validCount(d.reset_in_ms)) invalid(i, 'reset_in_ms');
}

const validCount = (x) => typeof x === 'number' && x >= 0;

/** Whether `d` denied with a wait: then nothing is left for now (8.3), even tokens a block keeps. */
const waits = (d) => d.allowed === false && typeof d.retry_after_ms === 'number';

/** `r`: whole tokens left, or 0 for a limit that denied with a wait. */
const left = (d) => (waits(d) ? 0 : integer(Math.floor(d.remaining)));

/** `t`: seconds until the next token, or the wait of a limit that denied (its Retry-After). */
const resetSeconds = (d) => (waits(d) ? Math.max(1, seconds(d.retry_after_ms)) : seconds(d.reset_in_ms));

function invalid(i, field) {
  throw new TypeError(`decision ${i === 0 ? '' : `result ${i} `}has no valid ${field}`);
}

/** The denied limit with the longest wait (`null` = forever), else the fullest-used one. */
function bindingLimit(limits, allowed) {
  const wait = (d) => (d.retry_after_ms === null ? Infinity : d.retry_after_ms ?? 0);
  const denied = allowed === false ? limits.filter((d) => wait(d) !== 0) : [];
  if (denied.length > 0) return denied.reduce((a, b) => (wait(b) > wait(a) ? b : a));
  return limits.reduce((a, b) => {
    const left = Math.floor(b.remaining) - Math.floor(a.remaining);
    return left < 0 || (left === 0 && b.reset_in_ms > a.reset_in_ms) ? b : a;
  });
}

/** Quoted Structured Field strings: one name, numbered for several limits, or one each. */
function policyNames(name = 'default', count) {
  const names = Array.isArray(name)
    ? name
    : count === 1
      ? [name]
      : Array.from({ length: count }, (_, i) => `${name}-${i + 1}`);
  if (names.length !== count) {
    throw new TypeError(`options.name has ${names.length} names for ${count} limits`);
  }
  return names.map((n) => quoted(n));
}

// The last name quoted and its quoted form (a middleware names the same policy every time).
let lastName = '';
let lastQuoted = '""';

/** `n` as a quoted Structured Field string. */
function quoted(n) {
  if (n === lastName) return lastQuoted;
  if (typeof n !== 'string' || !/^[\x20-\x7e]*$/.test(n)) {
    throw new TypeError(`options.name must be printable ASCII text, got ${JSON.stringify(n)}`);
  }
  lastQuoted = `"${n.replace(/[\\"]/g, '\\$&')}"`;
  lastName = n;
  return lastQuoted;
}

function seconds(ms) {
  return integer(Math.ceil(ms / 1000));
}

function integer(n) {
  return Math.min(n, SF_INTEGER_MAX);
}
