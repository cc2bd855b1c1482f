// Middleware over RateLimiterServer: derive the client key, make one limit()/limitAll() RPC
// call, answer 429 (problem+json) or add the headers to the handler's response.
// Framework-free: the Hono flavour only touches c.req.raw, c.env, c.res and c.header.
import { once, releasedWhenFinished } from './concurrency.js';
import { rateLimitHeaders } from './headers.js';
import { decidedHere, LocalLimits, localDecision, renewalDue, renewLease } from './local/limits.js';

export { analyticsEngineEvents } from './analytics.js';

export { LocalLimits };

// `local: true`: one set of leases and denials for the isolate's life, shared by every
// middleware made with it.
let sharedLocal;

// draft-ietf-httpapi-ratelimit-headers, "Problem Types": registered by the draft with IANA.
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const QUOTA_EXCEEDED_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded';

// The key of requests without CF-Connecting-IP (not from the internet through Cloudflare):
// one shared bucket, because any header a client sets itself would be a way around the limit.
export const UNKNOWN_CLIENT = 'unknown';

// Errors of these names come from bad input (a policy, a cost, a key, a binding): bugs in the
// caller, never swallowed by failOpen. Anything else from the RPC call is the limiter failing.
const PROGRAMMING_ERRORS = new Set(['TypeError', 'RangeError']);

/**
 * The default key: the client's address from CF-Connecting-IP, which Cloudflare sets and
 * clients cannot forge. IPv6 addresses are cut to their /64 prefix (one subscriber's network:
 * each address alone would let a client rotate through 2^64 of them); IPv4-mapped IPv6 gives
 * the IPv4 address. Without the header: the shared key "unknown".
 */
export function clientKey(request) {
  const ip = request.headers.get('CF-Connecting-IP')?.trim();
  if (!ip) return UNKNOWN_CLIENT;
  if (!ip.includes(':')) return ip;
  return ipv6Key(ip) ?? ip;
}

/** "2001:db8:a:b::/64" for an IPv6 address, the IPv4 address if mapped, null if not IPv6. */
function ipv6Key(ip) {
  let text = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  let tail = [];
  const v4 = /^(.*:)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (v4 !== null) {
    const bytes = v4.slice(2).map(Number);
    if (bytes.some((b) => b > 255)) return null;
    text = `${v4[1]}0:0`;
    tail = bytes;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (s) => (s === '' ? [] : s.split(':'));
  const head = parse(halves[0]);
  const rest = halves.length === 2 ? parse(halves[1]) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const groups = [...head, ...Array(halves.length === 2 ? missing : 0).fill('0'), ...rest];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return null;
  const n = groups.map((g) => parseInt(g, 16));
  if (tail.length === 4) {
    n[6] = tail[0] * 256 + tail[1];
    n[7] = tail[2] * 256 + tail[3];
  }
  if (n.slice(0, 5).every((g) => g === 0) && n[5] === 0xffff) {
    return `${n[6] >> 8}.${n[6] & 255}.${n[7] >> 8}.${n[7] & 255}`;
  }
  return `${n.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

// Options are checked once, when the middleware is made, so a typo fails at startup.
const compiled = new WeakMap();
const OPTION_NAMES = new Set([
  'binding',
  'policy',
  'key',
  'cost',
  'skip',
  'denied',
  'failOpen',
  'onError',
  'local',
  'standardHeaders',
  'legacyHeaders',
  'skipSuccessfulRequests',
  'skipFailedRequests',
  'requestWasSuccessful',
  'shadow',
  'onDecision',
  'concurrency',
]);

function compile(options) {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`rate limit options must be an object, got ${describe(options)}`);
  }
  const done = compiled.get(options);
  if (done !== undefined) return done;
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name)) {
      throw new TypeError(
        `rate limit options have no field "${name}" (the fields are ${[...OPTION_NAMES].join(', ')})`,
      );
    }
  }
  const {
    binding,
    policy,
    key,
    cost = 1,
    skip,
    denied,
    failOpen = false,
    onError,
    local = false,
    standardHeaders = true,
    legacyHeaders = true,
    skipSuccessfulRequests = false,
    skipFailedRequests = false,
    requestWasSuccessful,
    shadow = false,
    onDecision,
    concurrency,
  } = options;
  if (typeof binding !== 'string' && typeof binding !== 'function' && !isNamespace(binding)) {
    throw new TypeError(
      `options.binding must be the name of a Durable Object binding, the namespace or a function of env, got ${describe(binding)}`,
    );
  }
  const gate = gateOf(concurrency);
  // With a concurrency limit, the rate policies may be left out.
  const list = Array.isArray(policy) ? policy : policy === undefined && gate !== null ? [] : [policy];
  if (list.length === 0 && gate === null) throw new TypeError('options.policy must name at least one policy');
  const policies = list.map((p, i) => {
    const where = Array.isArray(policy) ? `options.policy[${i}]` : 'options.policy';
    if (typeof p !== 'object' || p === null || Array.isArray(p)) {
      throw new TypeError(`${where} must be an object, got ${describe(p)}`);
    }
    // The name is the bucket's key and the policy's name in the headers; `shadow` puts it
    // on trial; the rest is sent to the limiter as it is, so that it reports a typo such as
    // max_token.
    const { name = Array.isArray(policy) ? `default-${i + 1}` : 'default', shadow: trial = false, ...limits } = p;
    if (typeof name !== 'string' || !/^[\x20-\x7e]+$/.test(name)) {
      throw new TypeError(`${where}.name must be non-empty printable ASCII text, got ${describe(name)}`);
    }
    if (typeof trial !== 'boolean') throw new TypeError(`${where}.shadow must be a boolean, got ${describe(trial)}`);
    return { name, limits, trial };
  });
  const names = policies.map((p) => p.name);
  const repeated = names.find((n, i) => names.indexOf(n) !== i);
  if (repeated !== undefined) {
    throw new TypeError(`options.policy names "${repeated}" twice: each policy needs its own name (its bucket)`);
  }
  if (gate !== null && names.includes(gate.name)) {
    throw new TypeError(`options.concurrency.name "${gate.name}" is a policy's name too: the headers need each once`);
  }
  if (typeof cost !== 'number' && typeof cost !== 'function') {
    throw new TypeError(`options.cost must be a number or a function, got ${describe(cost)}`);
  }
  for (const [field, value] of [
    ['key', key],
    ['skip', skip],
    ['denied', denied],
    ['onError', onError],
    ['requestWasSuccessful', requestWasSuccessful],
    ['onDecision', onDecision],
  ]) {
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(`options.${field} must be a function, got ${describe(value)}`);
    }
  }
  for (const [field, value] of [
    ['failOpen', failOpen],
    ['standardHeaders', standardHeaders],
    ['legacyHeaders', legacyHeaders],
    ['skipSuccessfulRequests', skipSuccessfulRequests],
    ['skipFailedRequests', skipFailedRequests],
    ['shadow', shadow],
  ]) {
    if (typeof value !== 'boolean') throw new TypeError(`options.${field} must be a boolean, got ${describe(value)}`);
  }
  if (skipSuccessfulRequests && skipFailedRequests) {
    throw new TypeError('options.skipSuccessfulRequests and options.skipFailedRequests together would count no request');
  }
  if (requestWasSuccessful !== undefined && !skipSuccessfulRequests && !skipFailedRequests) {
    throw new TypeError('options.requestWasSuccessful needs skipSuccessfulRequests or skipFailedRequests');
  }
  if (typeof local !== 'boolean' && !(local instanceof LocalLimits) && (typeof local !== 'object' || local === null)) {
    throw new TypeError(`options.local must be a boolean, a LocalLimits or its options, got ${describe(local)}`);
  }
  if (gate !== null && local !== false) {
    throw new TypeError('options.local and options.concurrency do not go together: a permit is held by the Durable Object, so every request calls it anyway');
  }
  // Every policy on trial is shadow mode; some of them, a trial beside enforced ones.
  const wholeShadow = shadow || (policies.length > 0 && policies.every((p) => p.trial));
  const trial = wholeShadow ? names : policies.filter((p) => p.trial).map((p) => p.name);
  const shownNames = wholeShadow ? names : names.filter((_, i) => !policies[i].trial);
  const result = {
    binding,
    policies,
    names,
    // One policy and no gate: `limit`'s decision; else `limitAll`'s.
    single: !Array.isArray(policy) && gate === null,
    gate,
    // For several policies: which ones the answer and the headers follow (all but a trial's).
    enforced: wholeShadow ? policies.map(() => true) : policies.map((p) => !p.trial),
    partialTrial: !wholeShadow && trial.length > 0,
    trial,
    key: key ?? clientKey,
    cost,
    skip,
    denied,
    failOpen,
    onError: onError ?? logFailure,
    local: localLimits(local),
    // rateLimitHeaders' options, made once; they name what the headers show (not a trial).
    headers: { name: Array.isArray(policy) || gate !== null ? shownNames : names[0], standardHeaders, legacyHeaders },
    shownNames,
    // Which outcomes are given back after the handler.
    skipSuccessfulRequests,
    skipFailedRequests,
    requestWasSuccessful: requestWasSuccessful ?? ((request, response) => response.status < 400),
    shadow: wholeShadow,
    onDecision,
  };
  compiled.set(options, result);
  return result;
}

/**
 * Keeps `promise` running after the response with `waitUntil` of a Workers `ctx` or of a Hono
 * context's execution context (whose getter throws when it has none: then the promise just
 * runs on).
 */
function keepAlive(context, promise) {
  let ctx = context;
  try {
    if (typeof ctx?.waitUntil !== 'function') ctx = context?.executionCtx;
  } catch {
    return;
  }
  if (typeof ctx?.waitUntil === 'function') ctx.waitUntil(promise);
}

/** The LocalLimits of `local`; null when off. */
function localLimits(local) {
  if (local === false) return null;
  if (local === true) return (sharedLocal ??= new LocalLimits());
  if (local instanceof LocalLimits) return local;
  const { marginMs, maxLease, clock, shares, maxHoldMs, ...rest } = local;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw new TypeError(`options.local has no field "${unknown}" (the fields are marginMs, maxLease, clock, shares, maxHoldMs)`);
  }
  return new LocalLimits({ marginMs, maxLease, clock, shares, maxHoldMs });
}

function logFailure(error, request) {
  console.error(`rate limiter unavailable for ${request.method} ${request.url}:`, error);
}

function isNamespace(value) {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof value.idFromName === 'function' &&
    typeof value.get === 'function'
  );
}

function namespace(binding, env) {
  const found = typeof binding === 'string' ? env?.[binding] : typeof binding === 'function' ? binding(env) : binding;
  if (!isNamespace(found)) {
    const what = typeof binding === 'string' ? `env.${binding}` : 'options.binding(env)';
    throw new TypeError(`${what} is not a Durable Object namespace, got ${describe(found)}`);
  }
  return found;
}

/**
 * One rate-limit decision for `request`: `{ response, headers, decision, error, skipped, refund }`.
 * `response` is what to answer instead of running the handler (the 429, or the 503 when the
 * limiter failed and failOpen is off), else null; `headers` go on the handler's response.
 */
export async function checkRateLimit(request, env, options, context) {
  return check(compile(options), request, env, context, true);
}

// The steps below are plain functions that return a result, or a promise of it only when
// something must be awaited (a skip, a key or cost that is a promise, a call): a request that
// this isolate's lease decides makes no promise and no closure. (Bundlers that keep function
// names, as wrangler's does, pay a property definition for every closure made.)

/**
 * checkRateLimit on compiled options `o`. `withRefund`: the result's `refund` works (else,
 * for rateLimit and honoRateLimit without the skip options, nothing is ever refunded, and
 * the function is not made).
 */
function check(o, request, env, context, withRefund) {
  if (o.skip !== undefined) return checkUnlessSkipped(o, request, env, context, withRefund);
  return checkKey(o, request, env, context, withRefund);
}

async function checkUnlessSkipped(o, request, env, context, withRefund) {
  const skipped = await o.skip(request, env, context);
  if (typeof skipped !== 'boolean') {
    throw new TypeError(`options.skip must return a boolean, got ${describe(skipped)}`);
  }
  if (skipped) return { response: null, headers: {}, decision: null, error: undefined, skipped: true, refund: nothingToRefund, release: nothingToRelease };
  return checkKey(o, request, env, context, withRefund);
}

function checkKey(o, request, env, context, withRefund) {
  const key = o.key(request, env, context);
  if (typeof key !== 'string') return awaitKey(o, request, env, context, withRefund, key);
  return checkCost(o, request, env, context, withRefund, key);
}

async function awaitKey(o, request, env, context, withRefund, pending) {
  const key = await pending;
  if (typeof key !== 'string') {
    throw new TypeError(`options.key must return a string, got ${describe(key)}`);
  }
  return checkCost(o, request, env, context, withRefund, key);
}

function checkCost(o, request, env, context, withRefund, key) {
  let cost = o.cost;
  if (typeof cost === 'function') {
    cost = cost(request, env, context);
    if (typeof cost !== 'number') return awaitCost(o, request, env, context, withRefund, key, cost);
  }
  return decide(o, request, env, context, withRefund, key, cost);
}

async function awaitCost(o, request, env, context, withRefund, key, pending) {
  return decide(o, request, env, context, withRefund, key, await pending);
}

function decide(o, request, env, context, withRefund, key, cost) {
  const ns = namespace(o.binding, env);
  // A request this isolate's lease (or held denial) decides: no call, no promise, no stub.
  if (o.single && o.local !== null) {
    const first = o.policies[0];
    const here = localDecision(o.local, ns, key, first.name, cost, first.limits);
    if (here !== null) {
      // Now and then (half a lease spent), the next lease is asked for in the background.
      if (renewalDue(o.local)) renewLease(o.local, () => ns.get(ns.idFromName(key)), (promise) => keepAlive(context, promise));
      return decided(o, here, true, request, env, context, ns, key, cost, withRefund);
    }
  }
  return decideByCall(o, request, env, context, withRefund, ns, key, cost);
}

async function decideByCall(o, request, env, context, withRefund, ns, key, cost) {
  let decision;
  try {
    const stub = () => ns.get(ns.idFromName(key));
    const first = o.policies[0];
    // Several policies are one all-or-nothing limitAll call: never decided locally.
    decision = o.gate !== null
      ? await stub().limitAll(o.policies.map((p, i) => limitRequest(o, p, i, cost)), o.gate.permit)
      : !o.single
      ? await stub().limitAll(o.policies.map((p, i) => limitRequest(o, p, i, cost)))
      : o.local !== null
        ? await o.local.limit(ns, key, stub, first.name, cost, first.limits, (promise) => keepAlive(context, promise))
        : await stub().limit(first.name, cost, first.limits);
  } catch (error) {
    if (PROGRAMMING_ERRORS.has(error?.name)) throw error;
    o.onError(error, request);
    // A shadow limit never blocks, not even when it cannot decide.
    const passes = o.failOpen || o.shadow;
    if (o.onDecision !== undefined) report(o, failedEvent(o, key, cost, passes, error), request, env, context);
    return { response: passes ? null : unavailable(), headers: {}, decision: null, error, skipped: false, refund: nothingToRefund, release: nothingToRelease };
  }
  return decided(o, decision, false, request, env, context, ns, key, cost, withRefund);
}

/** The result of `decision` (`here`: made in this isolate, without a call). */
function decided(o, decision, here, request, env, context, ns, key, cost, withRefund) {
  // (Events are made only for a hook: most middlewares have none, and this is every request.)
  if (o.onDecision !== undefined) report(o, decisionEvent(o, decision, here, key, cost), request, env, context);
  // A shadow limit decides and counts as if enforced, but sends no headers and blocks nothing;
  // a policy on trial beside enforced ones is left out of the headers and the 429.
  const shown = o.partialTrial || o.gate !== null ? enforcedPart(o, decision) : decision;
  const headers = o.shadow ? {} : rateLimitHeaders(shown, o.headers);
  if (o.gate !== null && !o.shadow) addGateHeaders(o, headers, decision, shown);
  if (!decision.allowed) {
    if (o.denied !== undefined && !o.shadow) return deniedBy(o, decision, headers, request, env, context);
    const response = o.shadow ? null : problem(429, quotaExceeded(violatedOf(o, shown, decision), headers), headers);
    return { response, headers, decision, error: undefined, skipped: false, refund: nothingToRefund, release: nothingToRelease };
  }
  const refund = withRefund || settles(o) ? refunder(o, decision, ns, key, cost) : nothingToRefund;
  const release = o.gate !== null && decision.permit.id !== null ? releaser(o, decision.permit.id, ns, key) : nothingToRelease;
  return { response: null, headers, decision, error: undefined, skipped: false, refund, release };
}

/** The concurrency option, checked: null, or the gate's name and the permit each call asks for. */
function gateOf(concurrency) {
  if (concurrency === undefined) return null;
  if (typeof concurrency !== 'object' || concurrency === null || Array.isArray(concurrency)) {
    throw new TypeError(`options.concurrency must be an object, got ${describe(concurrency)}`);
  }
  // max_in_flight and ttl_seconds go to the limiter as they are: it checks them (a typo too).
  const { name = 'concurrency', ...policy } = concurrency;
  if (typeof name !== 'string' || !/^[\x20-\x7e]+$/.test(name)) {
    throw new TypeError(`options.concurrency.name must be non-empty printable ASCII text, got ${describe(name)}`);
  }
  return { name, quoted: `"${name.replace(/[\\"]/g, '\\$&')}"`, permit: { key: name, cost: 1, policy } };
}

// The wait a denied permit reports, in seconds: releases come at any time, so there is no
// exact one.
const GATE_WAIT = 1;

/**
 * Adds the gate to the headers: a `RateLimit-Policy` member in the `concurrent-requests` quota
 * unit and a `RateLimit` member with the free slots; on a request the gate denied, `r=0;t=1`,
 * `Retry-After: 1` unless a rate limit asks for longer, and the `X-RateLimit-*` of the gate
 * unless such a rate limit binds: no header of its 429 shows a bucket with room (8.3, 12.8).
 */
function addGateHeaders(o, headers, decision, shown) {
  const permit = decision.permit;
  const denied = !permit.allowed;
  const never = permit.retry_after_ms === null;
  if (o.headers.standardHeaders) {
    const policy = `${o.gate.quoted};q=${permit.limit};qu="concurrent-requests"`;
    const left = denied
      ? `${o.gate.quoted};r=0${never ? '' : `;t=${GATE_WAIT}`}`
      : `${o.gate.quoted};r=${Math.max(0, permit.limit - permit.in_flight)}`;
    headers['RateLimit-Policy'] = headers['RateLimit-Policy'] === undefined ? policy : `${headers['RateLimit-Policy']}, ${policy}`;
    headers['RateLimit'] = headers['RateLimit'] === undefined ? left : `${headers['RateLimit']}, ${left}`;
  }
  // (A gate alone has no X-RateLimit-* headers, as on the requests it admits.)
  if (denied && o.headers.legacyHeaders && shown.results.length > 0 && gateBinds(shown, never)) {
    headers['X-RateLimit-Limit'] = String(permit.limit);
    headers['X-RateLimit-Remaining'] = '0';
    headers['X-RateLimit-Reset'] = String(never ? 0 : GATE_WAIT);
  }
  if (denied && !never && headers['Retry-After'] === undefined) headers['Retry-After'] = String(GATE_WAIT);
  if (never) delete headers['Retry-After'];
}

/** Whether a denied gate outwaits every rate limit that denied with it (the binding limit, 8.2). */
function gateBinds(shown, never) {
  if (never) return true;
  const denied = shown.results.filter((d) => !d.allowed);
  return denied.every((d) => d.retry_after_ms !== null && d.retry_after_ms < GATE_WAIT * 1_000);
}

/** The names of the enforced limits (and the gate) that had no room. */
function violatedOf(o, shown, decision) {
  const violated = Array.isArray(shown.results) ? o.shownNames.filter((_, i) => !shown.results[i].allowed) : [...o.names];
  if (o.gate !== null && !decision.permit.allowed) violated.push(o.gate.name);
  return violated;
}

/** Releases the permit `id` of the request's gate, once. */
function releaser(o, id, ns, key) {
  return once(() => ns.get(ns.idFromName(key)).release(o.gate.name, id));
}

/** A request that holds no permit has nothing to release. */
async function nothingToRelease() {}

/** `result`'s permit released; a release that fails is a limiter failure (onError). */
function releaseOf(o, result, request) {
  return () => result.release().catch((error) => o.onError(error, request));
}

/** The result of a denial that options.denied answers. */
async function deniedBy(o, decision, headers, request, env, context) {
  const response = addHeaders(await o.denied(request, decision, env, context), headers, 'options.denied must return');
  return { response, headers, decision, error: undefined, skipped: false, refund: nothingToRefund, release: nothingToRelease };
}

/**
 * Gives the cost back to every policy that took it, once: one refund call per policy, or none
 * when this isolate's lease or share on the bucket can take it back (local).
 */
function refunder(o, decision, ns, key, cost) {
  let refunded = false;
  return async () => {
    if (refunded || cost === 0) return;
    refunded = true;
    const stub = () => ns.get(ns.idFromName(key));
    const first = o.policies[0];
    if (o.local !== null && o.single) return o.local.refund(ns, key, stub, first.name, cost, first.limits);
    const s = stub();
    // (A policy on trial that had no room took nothing.)
    const took = o.single ? o.policies : o.policies.filter((_, i) => decision.results[i].allowed);
    await Promise.all(took.map((p) => s.refund(p.name, cost)));
  };
}

/** One member of the limitAll call of several policies; a trial's is marked `shadow`. */
function limitRequest(o, p, i, cost) {
  const request = { key: p.name, cost, policy: p.limits };
  if (!o.enforced[i]) request.shadow = true;
  return request;
}

/**
 * A limitAll decision with the results of its enforced members only, for headers and the 429;
 * its wait is theirs (a gate's has no exact wait), or none when the gate can never admit.
 */
function enforcedPart(o, decision) {
  const results = decision.results.filter((_, i) => o.enforced[i]);
  if (o.gate === null) return { ...decision, results };
  const waits = decision.permit.retry_after_ms === null ? [null] : results.map((d) => d.retry_after_ms);
  const retry_after_ms = waits.reduce((most, w) => (most === null || w === null ? null : Math.max(most, w)), 0);
  return { ...decision, results, retry_after_ms };
}

/** The event of a decision that failed (section 9.12 of docs/SPEC.md). */
function failedEvent(o, key, cost, passed, error) {
  const policies = o.gate === null ? [...o.names] : [...o.names, o.gate.name];
  const event = { outcome: 'failed', shadow: o.shadow, passed, local: false, key, policies, shadowPolicies: [...o.trial] };
  return { ...event, violated: [], cost, remaining: null, retryAfterMs: null, error };
}

/** The event of `decision` (section 9.12 of docs/SPEC.md); its arrays are the hook's own. */
function decisionEvent(o, decision, here, key, cost) {
  const results = o.single ? [decision] : decision.results;
  const violated = o.single ? (decision.allowed ? [] : [...o.names]) : o.names.filter((_, i) => !results[i].allowed);
  const left = results.filter((_, i) => o.single || o.enforced[i]).map((d) => Math.floor(d.remaining));
  if (o.gate !== null) {
    if (!decision.permit.allowed) violated.push(o.gate.name);
    left.push(Math.max(0, decision.permit.limit - decision.permit.in_flight));
  }
  return {
    outcome: decision.allowed ? 'allowed' : 'denied',
    shadow: o.shadow,
    passed: decision.allowed || o.shadow,
    local: here || (o.local !== null && o.single && decidedHere(decision)),
    key,
    policies: o.gate === null ? [...o.names] : [...o.names, o.gate.name],
    shadowPolicies: [...o.trial],
    violated,
    cost,
    remaining: Math.min(...left),
    retryAfterMs: decision.retry_after_ms,
    error: undefined,
  };
}

/**
 * Hands `event` to onDecision, off the response's path: a promise it returns goes to
 * waitUntil, and what it throws or rejects with is logged, never changing the answer.
 */
function report(o, event, request, env, context) {
  const logged = (error) => console.error(`options.onDecision failed for ${request.method} ${request.url}:`, error);
  try {
    const result = o.onDecision(event, request, env, context);
    if (typeof result?.then === 'function') keepAlive(context, Promise.resolve(result).catch(logged));
  } catch (error) {
    logged(error);
  }
}

/** Whether some outcome is given back after the handler (settleOutcome has work to do). */
const settles = (o) => o.skipSuccessfulRequests || o.skipFailedRequests;

/** A denied, skipped or failed request took nothing. */
async function nothingToRefund() {}

/**
 * After the handler (`response`, or `thrown` when it threw): gives the request's cost back in
 * the background when its outcome is one that does not count. A refund that fails is a
 * limiter failure (onError); the request then stays counted.
 */
async function settleOutcome(o, result, request, env, context, response, thrown) {
  if (!o.skipSuccessfulRequests && !o.skipFailedRequests) return;
  let successful = false;
  if (!thrown) {
    successful = await o.requestWasSuccessful(request, response, env, context);
    if (typeof successful !== 'boolean') {
      throw new TypeError(`options.requestWasSuccessful must return a boolean, got ${describe(successful)}`);
    }
  }
  if (successful ? o.skipSuccessfulRequests : o.skipFailedRequests) {
    keepAlive(context, result.refund().catch((error) => o.onError(error, request)));
  }
}

function quotaExceeded(violated, headers) {
  const which = `${violated.length === 1 ? 'policy' : 'policies'} ${violated.map((n) => `"${n}"`).join(', ')}`;
  const retry = headers['Retry-After'];
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: QUOTA_EXCEEDED_TITLE,
    status: 429,
    detail:
      retry === undefined
        ? `This request costs more than ${which} can ever allow; retrying will not help.`
        : `Quota exceeded for ${which}; retry after ${retry} second${retry === '1' ? '' : 's'}.`,
    'violated-policies': violated,
  };
}

// The limiter did not answer: no decision, so no rate-limit headers. `about:blank` because
// the status says it all (RFC 9457); retry soon, as overload and lost connections pass.
function unavailable() {
  return problem(
    503,
    {
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The rate limiter could not be reached; retry shortly.',
    },
    { 'Retry-After': '1' },
  );
}

function problem(status, body, headers) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { ...headers, 'Content-Type': 'application/problem+json' },
  });
}

/**
 * `response` with the rate-limit headers added, as a new Response (a fetch() response's
 * headers are immutable). RateLimit and RateLimit-Policy are lists: appended, so stacked
 * limits all show. Other headers the response already has are kept (the inner one wins).
 */
export function withHeaders(response, headers) {
  return addHeaders(response, headers, 'withHeaders needs');
}

function addHeaders(response, headers, needs) {
  if (!(response instanceof Response)) {
    throw new TypeError(`${needs} a Response, got ${describe(response)}`);
  }
  const names = Object.keys(headers);
  if (names.length === 0) return response;
  try {
    // The handler's own response: its headers take the new ones in place, without a copy.
    putHeaders(response.headers, headers, names);
    return response;
  } catch {
    // Immutable headers (a response from fetch(), say): the first change throws, so
    // nothing was changed; a copy takes them.
  }
  const out = new Response(response.body, response);
  putHeaders(out.headers, headers, names);
  return out;
}

function putHeaders(target, headers, names) {
  for (const name of names) {
    if (name === 'RateLimit' || name === 'RateLimit-Policy') target.append(name, headers[name]);
    else if (!target.has(name)) target.set(name, headers[name]);
  }
}

/**
 * Wraps a fetch handler: `export default { fetch: rateLimit(options)(handler) }`.
 * Denied requests get the 429 and never reach the handler; allowed ones get the headers.
 */
export function rateLimit(options) {
  const o = compile(options);
  return (handler) => {
    if (typeof handler !== 'function') {
      throw new TypeError(`rateLimit(options) wraps a fetch handler function, got ${describe(handler)}`);
    }
    return async function rateLimited(request, env, ctx) {
      let result = check(o, request, env, ctx, false);
      if (result instanceof Promise) result = await result;
      if (result.response !== null) return result.response;
      let response;
      try {
        response = addHeaders(await handler.call(this, request, env, ctx), result.headers, 'the handler must return');
      } catch (error) {
        if (o.gate !== null) keepAlive(ctx, releaseOf(o, result, request)());
        if (settles(o)) await settleOutcome(o, result, request, env, ctx, undefined, true);
        throw error;
      }
      if (settles(o)) await settleOutcome(o, result, request, env, ctx, response, false);
      // The permit is held until the response has been sent (its body read or cancelled).
      if (o.gate !== null) return releasedWhenFinished(response, releaseOf(o, result, request), (p) => keepAlive(ctx, p));
      return response;
    };
  };
}

/**
 * Hono middleware: `app.use('/api/*', honoRateLimit(options))`. Uses c.req.raw, c.env,
 * c.res and c.header only, so it needs nothing from hono itself.
 */
export function honoRateLimit(options) {
  const o = compile(options);
  return async function rateLimitMiddleware(c, next) {
    let result = check(o, c.req.raw, c.env, c, false);
    if (result instanceof Promise) result = await result;
    if (result.response !== null) return result.response;
    await next();
    // A route that threw has become app.onError's response (c.error is set).
    if (settles(o)) await settleOutcome(o, result, c.req.raw, c.env, c, c.res, c.error !== undefined);
    // c.header copies the response first when it is final or immutable.
    for (const [name, value] of Object.entries(result.headers)) {
      if (name === 'RateLimit' || name === 'RateLimit-Policy') c.header(name, value, { append: true });
      else if (!c.res.headers.has(name)) c.header(name, value);
    }
    if (o.gate !== null) c.res = releasedWhenFinished(c.res, releaseOf(o, result, c.req.raw), (p) => keepAlive(c, p));
  };
}

function describe(value) {
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${String(value)}${typeof value === 'bigint' ? 'n' : ''}`;
  }
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  return Array.isArray(value) ? 'an array' : 'an object';
}
