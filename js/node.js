// Entry for plain Node (a consumer's unit tests): reads the .wasm from disk. Extends
// DurableObject when `cloudflare:workers` resolves, else a stand-in with the same constructor.
import { readFileSync } from 'node:fs';
import { initSync } from './rate_limiter.js';
import { defineRateLimiterServer } from './server.js';

export { rateLimitHeaders } from './headers.js';

class DurableObjectStandIn {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

const Base = await import('cloudflare:workers').then(
  (workers) => workers.DurableObject ?? DurableObjectStandIn,
  () => DurableObjectStandIn,
);

const wasmModule = new WebAssembly.Module(
  readFileSync(new URL('./rate_limiter_bg.wasm', import.meta.url)),
);

export const RateLimiterServer = defineRateLimiterServer(Base, () =>
  initSync({ module: wasmModule }),
);
