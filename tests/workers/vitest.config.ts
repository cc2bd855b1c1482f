/// <reference types="vite/client" />
// The workerd suite: runs inside workerd (Miniflare) with the example Worker as `main`, so
// the example and the packaged RateLimiterServer are what get tested.
// Run: npx vitest run --config tests/workers/vitest.config.ts
import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';

// The repo root, whatever the working directory (no node:url: the project has no @types/node).
const root = decodeURIComponent(new URL('../..', import.meta.url).pathname);

export default defineConfig({
  root,
  plugins: [
    cloudflareTest({
      // Both relative to `root`.
      main: './example/src/index.ts',
      wrangler: { configPath: './wrangler.toml' },
    }),
  ],
  test: {
    include: ['tests/workers/**/*.test.ts'],
  },
});
