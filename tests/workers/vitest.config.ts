/// <reference types="vite/client" />
// The workerd suite: runs inside workerd (Miniflare) in two projects.
// - `memory`: the example Worker (example/src/index.ts, wrangler.toml) as `main`, so the
//   example and the packaged RateLimiterServer are what get tested.
// - `durable`: the same Worker with LIMITER bound to DurableRateLimiterServer on SQLite
//   storage (tests/workers/durable/), running every behaviour test again unchanged, plus
//   the durable class's own tests (tests/workers/durable/*.test.ts).
// - `memory-2024-04-03`: the behaviour and middleware tests of `memory` again, on the oldest
//   compatibility date the package supports (the first with Durable Object RPC), whose
//   runtime lacks globals that newer dates have (FinalizationRegistry, WeakRef).
// Run: npx vitest run --config tests/workers/vitest.config.ts [--project memory|durable|memory-2024-04-03]
import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';

// The repo root, whatever the working directory (no node:url: the project has no @types/node).
const root = decodeURIComponent(new URL('../..', import.meta.url).pathname);

/** Tests of the limiter's behaviour over RPC, which both classes must pass alike. */
const BEHAVIOUR = ['rpc', 'limit', 'adversarial', 'concurrency', 'local', 'gates', 'blocks'].map((name) => `tests/workers/${name}.test.ts`);

/** The oldest compatibility date the package supports: the first with Durable Object RPC. */
const OLDEST_DATE = '2024-04-03';

// The concurrency tests make thousands of RPC calls: about 2–3 s on an idle 2-core machine,
// over vitest's default 5 s when the machine is busy. They test counts, not speed.
const TIMEOUT_MS = 30_000;

export default defineConfig({
  root,
  test: {
    projects: [
      {
        root,
        plugins: [
          // Both relative to `root`.
          cloudflareTest({
            main: './example/src/index.ts',
            // (wrangler.toml's RATE_LIMIT_EVENTS is Miniflare's real local Analytics Engine
            // binding: it accepts writes and keeps none.)
            wrangler: { configPath: './wrangler.toml' },
          }),
        ],
        test: { name: 'memory', include: ['tests/workers/*.test.ts'], testTimeout: TIMEOUT_MS },
      },
      {
        root,
        plugins: [
          cloudflareTest({
            main: './example/src/index.ts',
            wrangler: { configPath: './wrangler.toml' },
            miniflare: { compatibilityDate: OLDEST_DATE },
          }),
        ],
        test: {
          name: `memory-${OLDEST_DATE}`,
          include: [...BEHAVIOUR, ...['middleware', 'fetch', 'in-flight'].map((name) => `tests/workers/${name}.test.ts`)],
          testTimeout: TIMEOUT_MS,
        },
      },
      {
        root,
        plugins: [
          cloudflareTest({
            main: './tests/workers/durable/entry.ts',
            wrangler: { configPath: './tests/workers/durable/wrangler.toml' },
          }),
        ],
        test: {
          name: 'durable',
          include: [...BEHAVIOUR, 'tests/workers/durable/*.test.ts'],
          testTimeout: TIMEOUT_MS,
        },
      },
    ],
  },
});
