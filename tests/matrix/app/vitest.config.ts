// vitest.config.ts: two projects, one in plain Node and one in workerd.
import { cloudflareTest } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      { test: { name: 'node', include: ['test/node/**/*.test.ts'] } },
      {
        plugins: [cloudflareTest({ main: './src/index.ts', wrangler: { configPath: './wrangler.toml' } })],
        test: { name: 'workerd', include: ['test/workerd/**/*.test.ts'] },
      },
    ],
  },
});
