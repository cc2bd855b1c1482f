// How an isolate decides a request, one entry per mode. A mode's `build` gets the isolate's
// world and returns its decide(): () => Promise<RateLimitDecision> for one request of cost 1.
//
// The world ({ stub, clock, waitUntil, sleep, key, scope, policy, lib }):
// - stub: limit / limitLeased / settle / refund, each a Promise answered after a round trip to
//   the one simulated Durable Object (an instance of the package's RateLimiterServer);
// - clock(): this isolate's clock in ms (true time plus its skew), for LocalLimits' `clock`;
// - waitUntil(promise): work that outlives the request (kept until the isolate is evicted);
// - sleep(ms): a Promise resolved after `ms` of simulated time (dropped on eviction);
// - key, scope, policy: the bucket's name, the object's name, and the policy sent on each call;
// - lib: the loaded package ({ RateLimiterServer, LocalLimits, middleware, node }).
// Calls a decide() makes before its first await are attributed to its request: when the object
// allows one with a cost, that is when the request's token was taken.
//
// Adding a mode is one more entry here, and it is then in every sweep (`--modes name`).

export const MODES = {
  /** One `limit` RPC per request, no local decisions: what the middleware does by default. */
  request: {
    describe: 'one stub.limit call per request',
    build: ({ stub, key, policy }) => () => stub.limit(key, 1, policy),
  },

  /** LocalLimits with plain leases and the denial cache only, called as the middleware calls it. */
  leases: {
    describe: 'LocalLimits with plain leases and the denial cache (local: { shares: false })',
    build: ({ stub, clock, waitUntil, key, scope, policy, lib }) => {
      const local = new lib.LocalLimits({ clock, shares: false });
      const namespace = {}; // the isolate's binding object: LocalLimits keys its entries by it
      return () => local.limit(namespace, scope, stub, key, 1, policy, waitUntil);
    },
  },

  /**
   * LocalLimits as `local: true` makes it: plain leases while the bucket has room, shares of
   * its refill where the demand is worth one (a share, renewed in the background).
   */
  shares: {
    describe: 'LocalLimits with shares (local: true)',
    build: ({ stub, clock, waitUntil, key, scope, policy, lib }) => {
      const local = new lib.LocalLimits({ clock });
      const namespace = {};
      return () => local.limit(namespace, scope, stub, key, 1, policy, waitUntil);
    },
  },
};
