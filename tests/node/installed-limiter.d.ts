// The types of the installed package's js/limiter.js (which ships without them), for
// idle-limiters.test.ts; vitest.config.ts maps the name to the file.
declare module '#installed-limiter' {
  /** RateLimiters alive in wasm memory where the runtime has no finalizers, else undefined. */
  export function liveLimiters(): number | undefined;
}
