// The README's "Upgrading from 1.x" claims about wrangler, re-checked: each config in
// upgrade/ goes through `wrangler deploy --dry-run` against the matrix Worker, and must be
// accepted or refused with the message the README quotes. The expectations are those of
// the newest wrangler (4.164.0, in the matrix); the repository's own wrangler (4.86.0, in
// the consumer layer) checks no migration and accepts every case, as the README's table says.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const cases = join(import.meta.dirname, 'upgrade');

// null: accepted. A string: refused, with that fragment in the output.
const expected = {
  '1x.toml': null,
  'add-durable.toml': null,
  'sqlite-existing.toml': 'Cannot apply new_sqlite_classes migration to existing class RateLimiterServer',
  'both-kinds.toml': 'Cannot apply new_sqlite_classes migration to existing class RateLimiterServer',
  // Dry-run reads only the file: it cannot know that v1 was deployed as new_classes.
  'rewrite-v1.toml': null,
  // Accepted, although the class then has no SQLite storage and every call throws.
  'no-migration.toml': null,
  'renamed.toml': null,
  'deleted.toml': null,
  'deleted-still-bound.toml': null,
  'deleted-without-v1.toml': 'Cannot apply deleted_classes migration to non-existent class RateLimiterServer',
  'renamed-without-v1.toml': 'Cannot apply renamed_classes migration to non-existent class RateLimiterServer',
};

// Colour codes would split the message fragments.
const plain = (text) => text.replace(/\x1b\[[0-9;]*m/g, '');

/** `checksMigrations: false` for a wrangler that accepts every case. */
export async function checkUpgrade({ dir, wrangler, env, ok, checksMigrations = true }) {
  const files = readdirSync(cases).filter((f) => f.endsWith('.toml')).sort();
  const unknown = files.filter((f) => !(f in expected));
  const missing = Object.keys(expected).filter((f) => !files.includes(f));
  if (unknown.length || missing.length) {
    throw new Error(`upgrade: configs without an expectation: ${unknown.join(', ') || '-'}; ` +
      `expectations without a config: ${missing.join(', ') || '-'}`);
  }

  // A subfolder of the project, so that each config's `main = "../src/index.ts"` resolves.
  const work = join(dir, 'upgrade');
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });

  // In the order of `expected`: the README's story, not the alphabet.
  for (const file of Object.keys(expected)) {
    copyFileSync(join(cases, file), join(work, file));
    const outdir = join(work, 'out', file.replace(/\.toml$/, ''));
    const run = spawnSync(wrangler, ['deploy', '--dry-run', '--config', file, '--outdir', outdir], {
      cwd: work,
      env: { ...env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (run.error) throw new Error(`upgrade/${file}: could not run ${wrangler}: ${run.error.message}`);
    const output = plain(`${run.stdout}\n${run.stderr}`);
    const version = output.match(/wrangler (\d+\.\d+\.\d+)/)?.[1] ?? 'of unknown version';
    const errors = output.split('\n').filter((line) => line.includes('[ERROR]')).map((l) => l.trim());
    const want = checksMigrations ? expected[file] : null;

    if (want === null) {
      if (run.status !== 0 || errors.length) {
        throw new Error(`upgrade/${file}: wrangler ${version} refused it (exit ${run.status}), ` +
          `the README says it is accepted:\n${output.trim()}`);
      }
      if (!output.includes('--dry-run: exiting now.')) {
        throw new Error(`upgrade/${file}: wrangler ${version} exited 0 without finishing the dry run:\n${output.trim()}`);
      }
      ok(`upgrade/${file}: wrangler ${version} deploy --dry-run accepts it`);
    } else {
      if (run.status === 0) {
        throw new Error(`upgrade/${file}: wrangler ${version} accepted it, the README says it is refused ` +
          `with "${want}"`);
      }
      if (!errors.some((line) => line.includes(want))) {
        throw new Error(`upgrade/${file}: wrangler ${version} refused it (exit ${run.status}), but not with ` +
          `"${want}":\n${output.trim()}`);
      }
      ok(`upgrade/${file}: wrangler ${version} deploy --dry-run refuses it: ${want}`);
    }
  }
}
