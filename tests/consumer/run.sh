#!/usr/bin/env bash
# Consumer test: proves the published package works for a user who follows the Quickstart
# and nothing more. Packs pkg/ with `npm pack`, installs the tarball into the fresh
# TypeScript Worker in this directory, type-checks it with tsc, bundles it with
# `wrangler deploy --dry-run` and runs the bundle in Miniflare (workerd).
# The root's tsc, wrangler and miniflare are used; nothing else is installed here.
# Runnable from any cwd; exits non-zero on the first failed check.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$root/node_modules/.bin"
pkg_name="@delightstack/rate-limiter"
installed="$here/node_modules/$pkg_name"
export WRANGLER_SEND_METRICS=false

started=$(date +%s%N)
checks=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

ok() { checks=$((checks + 1)); echo "  ok   $*"; }
fail() { echo "  FAIL $*" >&2; echo "consumer: FAILED after $checks checks passed" >&2; exit 1; }
step() { echo "== $*"; }
# Runs a command quietly; shows its output only when it fails.
quiet() { local log="$tmp/log"; if ! "$@" >"$log" 2>&1; then cat "$log" >&2; return 1; fi; }

for tool in tsc wrangler; do
  [ -x "$bin/$tool" ] || fail "$bin/$tool is missing: run npm ci at the repository root"
done
[ -d "$root/node_modules/miniflare" ] || fail "miniflare is missing from $root/node_modules: run npm ci"
if [ ! -f "$root/pkg/package.json" ]; then
  step "pkg/ is missing: building it with scripts/build.sh"
  bash "$root/scripts/build.sh"
fi

step "0. clean state: remove node_modules, dist and .wrangler of the consumer"
rm -rf "$here/node_modules" "$here/dist" "$here/.wrangler" "$here"/*.tgz
ok "tests/consumer has no node_modules, dist or tarball"

step "1. npm pack ./pkg"
(cd "$root" && npm pack ./pkg --pack-destination "$tmp" --json >"$tmp/pack.json" 2>"$tmp/pack.err") \
  || { cat "$tmp/pack.err" >&2; fail "npm pack ./pkg"; }
tarball="$tmp/$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1]))[0].filename)' "$tmp/pack.json")"
[ -f "$tarball" ] || fail "npm pack wrote no tarball"
ok "npm pack wrote $(basename "$tarball") ($(wc -c <"$tarball") bytes)"
if grep -iE 'npm (warn|err)' "$tmp/pack.err"; then fail "npm pack printed warnings (above)"; fi
ok "npm pack printed no warning"
# Every file that package.json names (files, exports, types) is in the tarball, and nothing else.
node - "$tmp/pack.json" "$root/pkg/package.json" <<'JS' || fail "tarball contents (above)"
const fs = require('fs');
const packed = new Set(JSON.parse(fs.readFileSync(process.argv[2]))[0].files.map((f) => f.path));
const manifest = JSON.parse(fs.readFileSync(process.argv[3]));
const targets = (e) => (typeof e === 'string' ? [e] : Object.values(e).flatMap(targets));
const named = new Set(['package.json', ...manifest.files,
  ...[...targets(manifest.exports), manifest.types].map((p) => p.replace(/^\.\//, ''))]);
// A `files` entry ending in "/" names a directory: every file under it, at least one.
const dirs = [...named].filter((f) => f.endsWith('/'));
const inDir = (f) => dirs.some((d) => f.startsWith(d));
const missing = [...named].filter((f) =>
  f.endsWith('/') ? ![...packed].some((p) => p.startsWith(f)) : !packed.has(f));
const extra = [...packed].filter((f) => !named.has(f) && !inDir(f));
if (missing.length || extra.length) {
  console.error(`missing from tarball: ${missing.join(', ') || '-'}; not named by package.json: ${extra.join(', ') || '-'}`);
  process.exit(1);
}
console.log(`  ok   tarball holds exactly the ${packed.size} files package.json names: ${[...packed].sort().join(' ')}`);
JS
checks=$((checks + 1))

step "1b. npm publish --dry-run in pkg/ (publishes nothing, needs no login)"
# pkg/ has no scripts to run. npm also asks the registry whether this version is already
# published and refuses if it is: then the same check runs on a copy of pkg/ with a
# prerelease version, so that a released version does not fail every run until the next bump.
publish_dir="$root/pkg"
if ! (cd "$publish_dir" && npm publish --dry-run >"$tmp/publish.out" 2>"$tmp/publish.err"); then
  grep -q 'previously published version' "$tmp/publish.err" \
    || { cat "$tmp/publish.err" >&2; fail "npm publish --dry-run"; }
  publish_dir="$tmp/publish-copy"
  cp -r "$root/pkg" "$publish_dir"
  (cd "$publish_dir" && npm version --no-git-tag-version "$(node -p 'require("./package.json").version')-publish-check.0" >/dev/null)
  (cd "$publish_dir" && npm publish --dry-run >"$tmp/publish.out" 2>"$tmp/publish.err") \
    || { cat "$tmp/publish.err" >&2; fail "npm publish --dry-run (prerelease copy of pkg/)"; }
fi
ok "npm publish --dry-run exits 0 (in ${publish_dir#"$root/"})"
# Without a login npm warns that a real publish would need one: about this machine, not
# the package. Any other warning (a field npm auto-corrects, a bad bin) fails.
if grep -iE 'npm (warn|err)' "$tmp/publish.err" | grep -vF 'This command requires you to be logged in'; then
  fail "npm publish --dry-run printed warnings (above)"
fi
ok "npm publish --dry-run printed no warning: npm corrected nothing in pkg/package.json"

step "2-3. install the tarball into the fresh Worker project (tests/consumer)"
manifest_sum="$(sha256sum "$here/package.json")"
quiet npm install --prefix "$here" --no-save --no-package-lock --ignore-scripts --prefer-offline \
  --no-audit --no-fund "$tarball" || fail "npm install $(basename "$tarball")"
[ -f "$installed/package.json" ] && [ ! -L "$installed" ] \
  || fail "$pkg_name is not a real directory in tests/consumer/node_modules"
want_version="$(node -p 'require(process.argv[1]).version' "$root/pkg/package.json")"
got_version="$(node -p 'require(process.argv[1]).version' "$installed/package.json")"
[ "$got_version" = "$want_version" ] || fail "installed version $got_version, pkg/ has $want_version"
ok "$pkg_name@$got_version installed from the tarball into tests/consumer/node_modules"
[ "$(sha256sum "$here/package.json")" = "$manifest_sum" ] && [ ! -e "$here/package-lock.json" ] \
  || fail "npm install changed package.json or wrote package-lock.json"
ok "package.json unchanged, no package-lock.json"
# Plain Node (a consumer's unit tests) resolves the `node` entry of the installed copy, and
# the class is constructed and driven synchronously there.
(cd "$here" && node --input-type=module -e '
  const url = import.meta.resolve("@delightstack/rate-limiter");
  const want = new URL("node_modules/@delightstack/rate-limiter/node.js", `file://${process.cwd()}/`).href;
  if (url !== want) throw new Error(`resolved ${url}, want ${want}`);
  const { RateLimiterServer } = await import("@delightstack/rate-limiter");
  const server = new RateLimiterServer({}, {});
  const ok = server.consume("k");
  const s = server.getStatus("k");
  if (ok !== true || s.remaining !== 9 || s.limit !== 10) throw new Error(`consume ${ok}, status ${JSON.stringify(s)}`);
') || fail "the node entry of the installed package"
ok "under plain Node the package resolves to node_modules/$pkg_name/node.js and consume()/getStatus() work"
(cd "$here" && node --input-type=module -e '
  const url = import.meta.resolve("@delightstack/rate-limiter/middleware");
  const want = new URL("node_modules/@delightstack/rate-limiter/middleware.js", `file://${process.cwd()}/`).href;
  if (url !== want) throw new Error(`resolved ${url}, want ${want}`);
  const { clientKey } = await import("@delightstack/rate-limiter/middleware");
  const key = clientKey(new Request("https://x/", { headers: { "CF-Connecting-IP": "2001:db8::1" } }));
  if (key !== "2001:db8:0:0::/64") throw new Error(`clientKey gave ${key}`);
') || fail "the /middleware subpath of the installed package"
ok "@delightstack/rate-limiter/middleware resolves to node_modules/$pkg_name/middleware.js and loads without the wasm"

step "4. tsc --noEmit -p tests/consumer (root's tsc; @cloudflare/workers-types found by walking up)"
"$bin/tsc" --noEmit -p "$here" --listFiles >"$tmp/tsc.out" 2>&1 \
  || { grep -v '^/' "$tmp/tsc.out" >&2; fail "tsc --noEmit -p tests/consumer"; }
ok "tsc: no type error, and every @ts-expect-error is needed ($(cat "$here"/src/*.ts | grep -c '@ts-expect-error') of them in src/typecheck.ts and src/middleware.ts)"
for types in index.d.ts middleware.d.ts; do
  grep -qxF "$installed/$types" "$tmp/tsc.out" \
    || fail "tsc did not take $types from tests/consumer/node_modules: $(grep rate-limiter "$tmp/tsc.out" | tr '\n' ' ')"
  ok "tsc took the package types from tests/consumer/node_modules/$pkg_name/$types"
done
grep -qxF "$(realpath "$root/node_modules/@cloudflare/workers-types")/index.d.ts" "$tmp/tsc.out" \
  || fail "tsc did not load the root's @cloudflare/workers-types"
ok "tsc found @cloudflare/workers-types in the root node_modules through \"types\" in tsconfig.json"

step "4b. every TypeScript block of the user README compiles under strict; the Options table is middleware.d.ts's"
# The fence convention is at the top of readme.mjs. It also runs broken blocks through the same
# steps and requires tsc to reject them.
node "$here/readme.mjs" "$here" "$root/pkg-template/README.md" "$bin/tsc" | tee "$tmp/readme.out" \
  || fail "README TypeScript blocks or Options table (above)"
readme_checks="$(sed -n 's/^readme: \([0-9]*\) checks passed$/\1/p' "$tmp/readme.out")"
[ -n "$readme_checks" ] || fail "readme.mjs reported no check count"
checks=$((checks + readme_checks))

step "5. wrangler deploy --dry-run --outdir dist (root's wrangler, default module rules)"
(cd "$here" && "$bin/wrangler" deploy --dry-run --outdir dist --metafile dist/bundle-meta.json) \
  >"$tmp/wrangler.out" 2>&1 || { cat "$tmp/wrangler.out" >&2; fail "wrangler deploy --dry-run"; }
ok "wrangler bundled the Worker"
if grep -E '\[(WARNING|ERROR)\]' "$tmp/wrangler.out"; then fail "wrangler printed warnings (above)"; fi
ok "wrangler printed no warning"
shopt -s nullglob
wasm_files=("$here"/dist/*.wasm)
shopt -u nullglob
[ "${#wasm_files[@]}" -eq 1 ] || fail "dist holds ${#wasm_files[@]} .wasm files, want 1"
cmp -s "${wasm_files[0]}" "$installed/rate_limiter_bg.wasm" || fail "the bundled .wasm differs from the package's"
wasm_name="$(basename "${wasm_files[0]}")"
ok "dist holds one .wasm, byte-identical to the package's rate_limiter_bg.wasm ($wasm_name)"
[ -f "$here/dist/index.js" ] || fail "dist/index.js is missing"
# The import statements of the bundled JS: only cloudflare:workers and the wasm module.
node - "$here/dist/index.js" "$wasm_name" <<'JS' || fail "imports of dist/index.js"
const src = require('fs').readFileSync(process.argv[2], 'utf8');
const found = new Set();
for (const m of src.matchAll(/(?:^|[;\n])\s*(?:import|export)\b[^;'"]*?\bfrom\s*(['"])(.*?)\1/g)) found.add(m[2]);
for (const m of src.matchAll(/(?:^|[;\n])\s*import\s*(['"])(.*?)\1/g)) found.add(m[2]);
const want = ['cloudflare:workers', `./${process.argv[3]}`];
const dynamic = src.match(/\bimport\s*\(|\brequire\s*\(/g) ?? [];
const got = [...found].sort();
if (got.join() !== want.sort().join() || dynamic.length) {
  console.error(`imports: ${got.join(', ')}; dynamic import()/require(): ${dynamic.length}`);
  process.exit(1);
}
console.log(`  ok   dist/index.js imports only: ${got.join(', ')} (no dynamic import or require)`);
JS
checks=$((checks + 1))
# esbuild's metafile agrees, and shows the bundle took the workerd entry of the local install.
node - "$here/dist/bundle-meta.json" "$wasm_name" <<'JS' || fail "wrangler's metafile"
const meta = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const out = meta.outputs['dist/index.js'];
const externals = out.imports.filter((i) => i.external).map((i) => i.path).sort();
const inputs = Object.keys(out.inputs).sort();
const want = ['cloudflare:workers', `./${process.argv[3]}`].sort();
const pkgInputs = inputs.filter((p) => p.includes('rate-limiter'));
const problems = [];
if (externals.join() !== want.join()) problems.push(`external imports ${externals.join(', ')}`);
if (!pkgInputs.includes('node_modules/@delightstack/rate-limiter/workerd.js')) problems.push('workerd.js not bundled');
if (pkgInputs.some((p) => !p.startsWith('node_modules/@delightstack/rate-limiter/') || p.endsWith('/node.js')))
  problems.push(`package inputs ${pkgInputs.join(', ')}`);
if (out.exports.sort().join() !== 'DurableRateLimiterServer,RateLimiterServer,default') problems.push(`exports ${out.exports.join(', ')}`);
if (problems.length) { console.error(problems.join('; ')); process.exit(1); }
console.log(`  ok   metafile: bundled ${pkgInputs.map((p) => p.split('/').pop()).join(', ')} from tests/consumer/node_modules (workerd entry), exports DurableRateLimiterServer, RateLimiterServer and default`);
JS
checks=$((checks + 1))

step "5b. the upgrade cases of the README's \"Upgrading from 1.x\": this wrangler accepts every one"
node --input-type=module -e '
  const [dir, wrangler, upgrade] = process.argv.slice(1);
  const { checkUpgrade } = await import(upgrade);
  let passed = 0;
  await checkUpgrade({ dir, wrangler, env: process.env, checksMigrations: false, ok: (m) => { passed++; console.log(`  ok   ${m}`); } });
  console.log(`upgrade: ${passed} cases`);
' "$here" "$bin/wrangler" "$root/tests/matrix/upgrade.mjs" | tee "$tmp/upgrade.out" || fail "upgrade cases"
checks=$((checks + $(sed -n 's/^upgrade: \([0-9]*\) cases$/\1/p' "$tmp/upgrade.out")))
rm -rf "$here/upgrade"

step "6. run the bundle in Miniflare: 10 x 200, then 429; another IP still 200; /login survives a restart"
node "$here/run-bundle.mjs" "$here/dist" | tee "$tmp/run.out" || fail "run-bundle.mjs"
run_checks="$(sed -n 's/^run-bundle: \([0-9]*\) checks passed$/\1/p' "$tmp/run.out")"
[ -n "$run_checks" ] || fail "run-bundle.mjs reported no check count"
checks=$((checks + run_checks))

elapsed=$(( ($(date +%s%N) - started) / 1000000 ))
echo "consumer: $checks checks passed in $(printf '%d.%01d' $((elapsed / 1000)) $((elapsed % 1000 / 100)))s"
