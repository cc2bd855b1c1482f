// Entry for plain Node (a consumer's unit tests): reads the .wasm from disk. Extends
// DurableObject when `cloudflare:workers` resolves (a test framework's), else a stand-in with
// the same constructor. Node has no Durable Object storage: given a ctx without one,
// DurableRateLimiterServer keeps its snapshots in memory, per ctx object.
import { readFileSync } from 'node:fs';
import { initSync } from './rate_limiter.js';
import { defineRateLimiterServers } from './servers.js';
import { WasmInstance } from './wasm-instance.js';

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

export const { RateLimiterServer, DurableRateLimiterServer } = defineRateLimiterServers(
  Base,
  new WasmInstance(() => initSync({ module: wasmModule })),
  { storageStandIn: true },
);
