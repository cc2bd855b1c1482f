// Entry of the workerd suite's `durable` project: the example Worker, with LIMITER bound to
// DurableRateLimiterServer (tests/workers/durable/wrangler.toml), so that every behaviour
// test of the suite runs against the durable class unchanged.
import { DurableRateLimiterServer } from '@delightstack/rate-limiter';

export { default } from '../../../example/src/index';
export { DurableRateLimiterServer, RateLimiterServer } from '@delightstack/rate-limiter';

/** The durable class declared the wrong way (under `new_classes`, no SQLite): must refuse. */
export class DurableWithoutSql extends DurableRateLimiterServer {}
