// test/env.d.ts: types `env` and `exports` of cloudflare:workers after the Worker, as
// `wrangler types` would.
type WorkerEnv = import('../src/index').Env;

declare namespace Cloudflare {
  interface Env extends WorkerEnv {}
  interface GlobalProps {
    mainModule: typeof import('../src/index');
  }
}
