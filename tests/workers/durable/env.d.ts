// The bindings the durable project adds to the example's (tests/workers/durable/wrangler.toml).
import type { DurableRateLimiterServer } from '@delightstack/rate-limiter';

declare global {
  namespace Cloudflare {
    interface Env {
      WITHOUT_SQL: DurableObjectNamespace<DurableRateLimiterServer>;
    }
  }
}
