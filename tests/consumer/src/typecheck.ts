// Compiled by `tsc --noEmit`, never bundled: the package's types as a consumer sees them.
// Each @ts-expect-error must be needed: if the wrong call type-checked, tsc would fail on
// the unused directive.
import { rateLimitHeaders } from '@delightstack/rate-limiter';
import type {
  DurableRateLimiterServer,
  RateLimitLeaseDecision,
  RateLimitAllDecision,
  RateLimitDecision,
  RateLimitGatePolicy,
  RateLimitPermit,
  RateLimiterOptions,
  RateLimiterServer,
  RateLimiterStatus,
  RateLimitRequest,
} from '@delightstack/rate-limiter';
import type { Env } from './index';

export async function typedUses(env: Env): Promise<void> {
  const stub: DurableObjectStub<RateLimiterServer> = env.LIMITER.get(env.LIMITER.idFromName('1.2.3.4'));

  const ok: boolean = await stub.consume('k', 1);
  const okDefaultCost: boolean = await stub.consume('k');
  const allowed: boolean = await stub.check('k', 0.5);
  const s: RateLimiterStatus = await stub.getStatus('k');
  const fields: [number, number, number] = [s.remaining, s.limit, s.reset_in_ms];
  const options: RateLimiterOptions = { max_tokens: 5, refill_every_seconds: 0.25 };
  await stub.setOptions(options);
  await stub.setOptions({});
  await stub.reset('k');
  void [ok, okDefaultCost, allowed, fields];

  // @ts-expect-error a key must be a string
  await stub.consume(42);
  // @ts-expect-error a cost must be a number
  await stub.consume('k', '1');
  // @ts-expect-error max_tokens must be a number
  await stub.setOptions({ max_tokens: '5' });
  // @ts-expect-error an unknown option (a typo of max_tokens) is rejected
  await stub.setOptions({ max_token: 5 });
  // @ts-expect-error consume resolves to a boolean, not a status
  const notStatus: RateLimiterStatus = await stub.consume('k');
  // @ts-expect-error RPC methods return promises: the result must be awaited
  const notAwaited: boolean = stub.consume('k');
  // @ts-expect-error no such method
  await stub.consumeAll('k');
  void [notStatus, notAwaited];

  // One call that decides and reports, and several limits at once.
  const d: RateLimitDecision = await stub.limit('k', 1, { max_tokens: 5 });
  const dDefaults: RateLimitDecision = await stub.limit('k');
  const decisionFields: [boolean, number, number, number, number | null, number] = [
    d.allowed,
    d.remaining,
    d.limit,
    d.reset_in_ms,
    d.retry_after_ms,
    d.window_ms,
  ];
  const all: RateLimitAllDecision = await stub.limitAll([
    { key: 'a' },
    { key: 'b', cost: 2, policy: { refill_every_seconds: 1 } },
  ]);
  const requests: RateLimitRequest[] = [{ key: 'c', cost: 0.5 }];
  const allFields: [boolean, number | null, RateLimitDecision[]] = [
    (await stub.limitAll(requests)).allowed,
    all.retry_after_ms,
    all.results,
  ];
  const h: Record<string, string> = rateLimitHeaders(d, { name: 'api' });
  const hAll: Record<string, string> = rateLimitHeaders(all, { name: ['second', 'hour'] });
  const hDefault: Record<string, string> = rateLimitHeaders(dDefaults);
  void [decisionFields, allFields, h, hAll, hDefault];

  // @ts-expect-error a policy field must be a number
  await stub.limit('k', 1, { refill_every_seconds: '1' });
  // @ts-expect-error an unknown policy field (a typo of max_tokens) is rejected
  await stub.limit('k', 1, { max_token: 5 });
  // @ts-expect-error limitAll takes an array of { key, cost?, policy? }, not keys
  await stub.limitAll(['a', 'b']);
  // @ts-expect-error each request needs a key
  await stub.limitAll([{ cost: 1 }]);
  // @ts-expect-error limit resolves to a decision, not a boolean
  const notBoolean: boolean = await stub.limit('k');
  // @ts-expect-error rateLimitHeaders takes a decision, not a status
  rateLimitHeaders(s);
  // @ts-expect-error a policy name is a string (or one per limit)
  rateLimitHeaders(d, { name: 1 });
  void notBoolean;

  // Concurrency limits, and a limitAll member on trial.
  const gate: RateLimitGatePolicy = { max_in_flight: 4, ttl_seconds: 120 };
  const permit: RateLimitPermit = await stub.acquire('generate', 1, gate);
  const permitFields: [boolean, number | null, number, number, number, number | null] = [
    permit.allowed,
    permit.id,
    permit.in_flight,
    permit.limit,
    permit.ttl_ms,
    permit.retry_after_ms,
  ];
  if (permit.id !== null) {
    const released: boolean = (await stub.release('generate', permit.id)).released;
    void released;
  }
  const inFlight: number = (await stub.gateStatus('generate')).in_flight;
  await stub.limitAll([{ key: 'second' }, { key: 'daily', shadow: true }]);
  void [permitFields, inFlight];
  await stub.block('mallory', 900);
  const unblocked: boolean = await stub.unblock('mallory');
  const page = await stub.blocked({ limit: 10 });
  const firstBlocked: number | undefined = page.keys[0]?.blocked_for_ms;
  const next: string | null = page.next;
  void [unblocked, firstBlocked, next];
  // @ts-expect-error block takes seconds as a number
  await stub.block('mallory', '15m');
  // @ts-expect-error a gate policy needs max_in_flight
  await stub.acquire('generate', 1, { ttl_seconds: 5 });
  // @ts-expect-error a permit id is a number
  await stub.release('generate', 'id');
  // @ts-expect-error shadow is a boolean
  await stub.limitAll([{ key: 'daily', shadow: 'yes' }]);
}

// The durable class has the same methods and results, and is a RateLimiterServer.
export async function durableUses(env: Env): Promise<void> {
  const stub: DurableObjectStub<DurableRateLimiterServer> = env.LOGIN_LIMITER.get(
    env.LOGIN_LIMITER.idFromName('1.2.3.4'),
  );
  const d: RateLimitDecision = await stub.limit('login', 1, { max_tokens: 5, refill_every_seconds: 300 });
  const s: RateLimiterStatus = await stub.getStatus('login');
  const asMemory: RateLimiterServer = {} as DurableRateLimiterServer;
  // @ts-expect-error a policy has no field max_token
  await stub.limit('login', 1, { max_token: 5 });
  void [d, s, asMemory];
}

// The same class, driven directly and synchronously (as unit tests do).
export function directUses(server: RateLimiterServer): void {
  const ok: boolean = server.consume('k');
  const s: RateLimiterStatus = server.getStatus('k');
  // @ts-expect-error called directly, consume is synchronous: no promise
  const p: Promise<boolean> = server.consume('k');
  const d: RateLimitDecision = server.limit('k', 1, { max_tokens: 5 });
  const all: RateLimitAllDecision = server.limitAll([{ key: 'a' }, { key: 'b', cost: 2 }]);
  void [ok, s, p, d, all];
}

// Decisions are unions on `allowed`: checking it narrows the fields that depend on it, so the
// natural code compiles under strict, and the wrong branch is a compile error.
export async function narrowing(env: Env, ctx: ExecutionContext): Promise<Response | undefined> {
  const stub = env.LIMITER.get(env.LIMITER.idFromName('1.2.3.4'));

  const permit = await stub.acquire('generate', 1, { max_in_flight: 4, ttl_seconds: 120 });
  if (!permit.allowed) {
    const noId: null = permit.id;
    const noTtl: 0 = permit.ttl_ms;
    const wait: number | null = permit.retry_after_ms;
    // @ts-expect-error a denied permit has no id to release
    await stub.release('generate', permit.id);
    void [noId, noTtl, wait];
    return new Response('Too many in flight', { status: 429 });
  }
  ctx.waitUntil(stub.release('generate', permit.id));
  const granted: [number, 0] = [permit.id, permit.retry_after_ms];
  void granted;

  const d = await stub.limit('k', 1, { max_tokens: 5 });
  if (d.allowed) {
    const none: 0 = d.retry_after_ms;
    void none;
  } else {
    const wait: number | null = d.retry_after_ms;
    // @ts-expect-error a denied decision's wait may be null (no wait can help)
    const alwaysNumber: number = d.retry_after_ms;
    void [wait, alwaysNumber];
  }
  // @ts-expect-error without checking allowed, the wait may be null
  const unchecked: number = d.retry_after_ms;
  void unchecked;

  const all = await stub.limitAll([{ key: 'a' }], { key: 'gate', policy: { max_in_flight: 2 } });
  if (all.allowed) {
    const none: 0 = all.retry_after_ms;
    // A granted call's permit has its id.
    if (all.permit) await stub.release('gate', all.permit.id);
    void none;
  } else {
    const wait: number | null = all.retry_after_ms;
    // A denied call took no permit, whether the gate had room (allowed) or not.
    const noId: null | undefined = all.permit?.id;
    // @ts-expect-error a denied call's permit has no id to release
    if (all.permit) await stub.release('gate', all.permit.id);
    void [wait, noId];
  }

  const leased: RateLimitLeaseDecision = await stub.limitLeased('k', 1, undefined, { want: 10 });
  if (leased.allowed) {
    const none: 0 = leased.retry_after_ms;
    void none;
  }
  const lease: number | undefined = leased.lease?.tokens;
  // @ts-expect-error a lease may be null whatever the decision
  const alwaysLease: number = leased.lease.tokens;
  void [lease, alwaysLease];

  // Direct (synchronous) calls narrow alike.
  const server = {} as RateLimiterServer;
  const direct = server.acquire('generate', 1, { max_in_flight: 4 });
  if (direct.allowed) server.release('generate', direct.id);
  // @ts-expect-error without checking allowed, the id may be null
  server.release('generate', direct.id);
  return undefined;
}
