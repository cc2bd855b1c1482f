/// <reference types="vite/client" />
// The Node behaviour suite: drives the installed package (`@delightstack/rate-limiter`, its
// `node` export condition) synchronously in plain Node, the way a consumer's unit tests do.
// It runs twice: as Node is, and without FinalizationRegistry, as Workers on compatibility
// dates before 2025-05-05 run the package. Each test file runs in a process of its own, so
// the package loads afresh in each.
// Run: npx vitest run --config tests/node/vitest.config.ts
import { defineConfig } from 'vitest/config';

// The repo root, whatever the working directory (no node:url: the project has no @types/node).
const root = decodeURIComponent(new URL('../..', import.meta.url).pathname);

const suite = {
  environment: 'node' as const,
  include: ['tests/node/**/*.test.ts'],
  // The cloudflare:workers stand-in and the fake clock at T0, around every test.
  setupFiles: ['tests/node/setup.ts'],
};

export default defineConfig({
  root,
  resolve: {
    alias: {
      // The shim's share bucket (js/local/share.js, shipped as is), for the tests of its rules alone.
      '#held-share': `${root}js/local/share.js`,
      // The installed package's own limiter module (the one its classes use), for the count
      // of live limiters that idle-limiters.test.ts watches.
      '#installed-limiter': `${root}node_modules/@delightstack/rate-limiter/limiter.js`,
    },
  },
  test: {
    pool: 'forks',
    isolate: true,
    projects: [
      { extends: true, test: { ...suite, name: 'finalizers' } },
      {
        extends: true,
        test: { ...suite, name: 'no-finalizers', setupFiles: ['tests/node/no-finalizers.ts', ...suite.setupFiles] },
      },
    ],
  },
});
