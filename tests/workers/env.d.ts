// Types `env` and `exports` from 'cloudflare:workers' inside the workerd suite.
import type * as Example from '../../example/src/index';

declare global {
  namespace Cloudflare {
    interface Env extends Example.Env {}
    interface GlobalProps {
      mainModule: typeof Example;
    }
  }
}
