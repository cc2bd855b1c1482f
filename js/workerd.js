// Entry for workerd and bundlers targeting Workers: the .wasm is imported as a compiled
// module (Workers cannot compile wasm from bytes at run time) and instantiated synchronously.
import { DurableObject } from 'cloudflare:workers';
import wasmModule from './rate_limiter_bg.wasm';
import { initSync } from './rate_limiter.js';
import { defineRateLimiterServers } from './servers.js';
import { WasmInstance } from './wasm-instance.js';

export { rateLimitHeaders } from './headers.js';

export const { RateLimiterServer, DurableRateLimiterServer } = defineRateLimiterServers(
  DurableObject,
  new WasmInstance(() => initSync({ module: wasmModule })),
);
