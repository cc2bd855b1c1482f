// Setup file of the Node behaviour suite (setupFiles in vitest.config.ts): runs in every test
// file before its own code, and its hooks run around every test, before the file's own.
import { afterEach, beforeEach, vi } from 'vitest';
import { T0 } from './support';

// What a consumer's suite does. It does not reach inside the package (loaded by Node itself),
// whose node entry then falls back to its stand-in base class.
vi.mock('cloudflare:workers', () => ({
  DurableObject: class {
    constructor(
      public ctx: unknown,
      public env: unknown,
    ) {}
  },
}));

// Time is Date.now() under fake timers, at T0 when each test (and each file's beforeEach) starts.
beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
});

afterEach(() => {
  vi.useRealTimers();
});
