// Loads the built package as a consumer's Node process gets it: the `node` condition of its
// "." export (RateLimiterServer, the real wasm engine) and its "./middleware" export
// (LocalLimits). The directory defaults to pkg/ (scripts/build.sh); `--pkg DIR` picks another.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export async function loadPackage(directory) {
  const dir = resolve(directory);
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  } catch (error) {
    throw new Error(`no built package in ${dir} (run: bash scripts/build.sh): ${error.message}`);
  }
  const entry = (name, condition) => {
    const target = manifest.exports?.[name];
    const file = typeof target === 'string' ? target : (target?.[condition] ?? target?.default);
    if (typeof file !== 'string') throw new Error(`${dir}/package.json has no ${name} export for ${condition}`);
    return pathToFileURL(join(dir, file)).href;
  };
  const node = await import(entry('.', 'node'));
  const middleware = await import(entry('./middleware', 'default'));
  // Which build ran: the package is rebuilt while the engine changes.
  let wasm = null;
  try {
    const bytes = readFileSync(join(dir, 'rate_limiter_bg.wasm'));
    wasm = `${createHash('sha256').update(bytes).digest('hex').slice(0, 12)} (${bytes.length} B)`;
  } catch {}
  return {
    dir,
    version: manifest.version,
    wasm,
    RateLimiterServer: node.RateLimiterServer,
    LocalLimits: middleware.LocalLimits,
    node,
    middleware,
  };
}
