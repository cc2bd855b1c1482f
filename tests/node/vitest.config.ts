/// <reference types="vite/client" />
// The Node behaviour suite: drives the installed package (`@delightstack/rate-limiter`, its
// `node` export condition) synchronously in plain Node, the way a consumer's unit tests do.
// Run: npx vitest run --config tests/node/vitest.config.ts
import { defineConfig } from 'vitest/config';

// The repo root, whatever the working directory (no node:url: the project has no @types/node).
const root = decodeURIComponent(new URL('../..', import.meta.url).pathname);

export default defineConfig({
  root,
  // The shim's share bucket (js/share.js, shipped as is), for the tests of its rules alone.
  resolve: { alias: { '#held-share': `${root}js/share.js` } },
  test: {
    environment: 'node',
    include: ['tests/node/**/*.test.ts'],
    // The cloudflare:workers stand-in and the fake clock at T0, around every test.
    setupFiles: ['tests/node/setup.ts'],
  },
});
