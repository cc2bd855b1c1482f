// Shared by the workerd suite's test files (both projects).
import { env } from 'cloudflare:workers';

/** The stub of the LIMITER Durable Object named `name` (its class depends on the project). */
export const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));

/** What `limiter` returns. */
export type Stub = ReturnType<typeof limiter>;

/**
 * The error `promise` rejects with, or null. Rejections are caught this way because
 * `expect(...).rejects` can report a spurious unhandled rejection in pool-workers.
 */
export const rejection = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (e: unknown) => e as Error,
  );

/**
 * An ExecutionContext whose waitUntil keeps the promises it is given; `settled()` awaits those
 * handed over so far (the middleware's background refunds, releases and hooks).
 */
export function collectingContext() {
  const pending: Promise<unknown>[] = [];
  const context = {
    waitUntil: (promise: Promise<unknown>) => void pending.push(promise),
    passThroughOnException: () => {},
    props: {},
  } as unknown as ExecutionContext;
  return { context, settled: () => Promise.all(pending.splice(0)) };
}
