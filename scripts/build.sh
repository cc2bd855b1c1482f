#!/usr/bin/env bash
# The one build of the wasm package, in three variants:
#
#   scripts/build.sh                 the publishable package in pkg/, then installed into
#                                    node_modules/@delightstack/rate-limiter the way `npm install`
#                                    would, for the example and the tests
#   scripts/build.sh --trap-switch   a test-only copy in target/pkg-trap-switch with the cargo
#                                    feature `trap-switch` (a key that makes the wasm trap), for
#                                    tests/node/trap.test.ts
#   scripts/build.sh --bench-floor   a bench-only copy in target/pkg-bench-floor with the cargo
#                                    feature `bench-floor` (`receiveKey(key)`, the floor of
#                                    bench/consume.mjs)
#
# Each variant: wasm-pack (the declared build driver; it runs cargo and wasm-bindgen), one
# wasm-opt pass, the glue + js/glue-reset.js, the .d.ts without `[Symbol.dispose]`, then every
# file that `files` in pkg-template/package.json lists, from js/, the wasm-bindgen output or
# pkg-template/. The test and bench copies are never installed or published.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

die() {
  printf 'build.sh: error: %s\n' "$1" >&2
  shift
  for line in "$@"; do printf '  %s\n' "$line" >&2; done
  exit 1
}

variant=${1:-package}
case "$variant" in
  package) out=target/wasm-pack dest=pkg features="" target_dir="" ;;
  --trap-switch) out=target/wasm-pack-trap-switch dest=target/pkg-trap-switch features=trap-switch target_dir="" ;;
  # Its own cargo target dir, so that a bench build never races with (or leaks into) a
  # package build running at the same time.
  --bench-floor) out=target/wasm-pack-bench-floor dest=target/pkg-bench-floor features=bench-floor \
    target_dir=target/bench-floor-cargo ;;
  *)
    echo "usage: scripts/build.sh [--trap-switch | --bench-floor]" >&2
    exit 2
    ;;
esac

# The one wasm-opt pass of every variant. -O3, not -Oz: speed over size, as the release
# profile's opt-level (Cargo.toml). The --enable flags are the features rustc enables by
# default for wasm32-unknown-unknown; wasm-opt must accept them.
WASM_OPT_FLAGS=(-O3 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext
  --enable-mutable-globals --enable-reference-types --enable-multivalue)

# ---- the package's file list: pkg-template/package.json `files`, checked against js/ ----
list=$(node -e '
  const files = JSON.parse(require("fs").readFileSync("pkg-template/package.json", "utf8")).files;
  if (!Array.isArray(files) || files.length === 0) throw new Error("no files array");
  for (const f of files) console.log(f);
') || die "cannot read the \"files\" array of pkg-template/package.json (see the error above)"
mapfile -t files <<< "$list"
# Made by this script, not copied: the glue with js/glue-reset.js, the trimmed .d.ts, the
# wasm-opt'd .wasm.
generated=(rate_limiter.js rate_limiter.d.ts rate_limiter_bg.wasm)
listed() {
  local f
  for f in "${files[@]}"; do [ "${f%/}" = "$1" ] && return 0; done
  return 1
}
for g in "${generated[@]}"; do
  listed "$g" || die "pkg-template/package.json \"files\" does not list $g, which every build makes." \
    "Add \"$g\" to the files array."
done
# Every shim file must ship: a js/ file missing from `files`, itself or through the folder it
# is in (js/local/ ships as "local/"), would be left out of the package (and npm would leave
# it out of the tarball). js/glue-reset.js is not a file of its own: it is appended to
# rate_limiter.js.
shipped() {
  local f
  for f in "${files[@]}"; do
    [ "${f%/}" = "$1" ] && return 0
    [[ "$1" == "${f%/}/"* ]] && return 0
  done
  return 1
}
while IFS= read -r path; do
  name=${path#js/}
  [ "$name" = glue-reset.js ] && continue
  entry=$name
  [[ "$name" == */* ]] && entry="${name%%/*}/"
  shipped "$name" || die "$path is not listed in pkg-template/package.json \"files\": it would not ship." \
    "Add \"$entry\" to the files array (or remove $path if nothing imports it)."
done < <(find js -type f ! -name '.*' | sort)

# ---- compile ----
cargo_args=()
[ -n "$features" ] && cargo_args=(-- --features "$features")
# wasm-bindgen's own --experimental-reset-state-function would make js/glue-reset.js
# unnecessary, but wasm-pack passes no extra flags to wasm-bindgen, so it stays out of reach.
CARGO_TARGET_DIR="${target_dir:-${CARGO_TARGET_DIR:-target}}" \
  wasm-pack --log-level warn build --target web --release --out-dir "$out" --out-name rate_limiter \
  --no-pack "${cargo_args[@]}"

# ---- the glue reset's assumptions ----
# js/glue-reset.js sets the glue's module-level `wasm` to undefined so that the next initSync
# instantiates afresh (trap recovery, js/server.js). That relies on wasm-bindgen internals,
# these lines of the generated glue (as wasm-bindgen 0.2.130 writes them; leading whitespace
# ignored), so the build stops when they change rather than ship a reset that does nothing:
glue_lines=(
  # the instance lives in a top-level `let` that a function appended to the module can assign
  'let wasmModule, wasmInstance, wasm;'
  # initSync (and the async init) return the current instance while there is one, and only then
  'if (wasm !== undefined) return wasm;'
  # a new instance replaces it (__wbg_finalize_init) ...
  'wasm = instance.exports;'
)
glue="$out/rate_limiter.js"
# ... and drops every memory view cached for the old instance's memory (a view still on the
# old memory would read and write the wrong buffer). Each `let cachedXMemory0 = null;` of the
# glue must be reset there, however many wasm-bindgen declares.
mapfile -t caches < <(sed -n 's/^let \(cached[A-Za-z0-9]*Memory0\) = null;$/\1/p' "$glue")
[ ${#caches[@]} -gt 0 ] || glue_lines+=('let cachedUint8ArrayMemory0 = null;')
for cache in "${caches[@]}"; do glue_lines+=("$cache = null;"); done
stripped=$(sed 's/^[[:space:]]*//' "$glue")
missing=()
for line in "${glue_lines[@]}"; do
  grep -xF -- "$line" <<< "$stripped" > /dev/null || missing+=("$line")
done
if [ ${#missing[@]} -gt 0 ]; then
  die "the wasm-bindgen glue $glue changed: js/glue-reset.js may no longer reset the instance." \
    "Lines the reset relies on, not found:" "${missing[@]/#/    }" \
    "Generated by $(wasm-bindgen --version 2>/dev/null || echo 'wasm-bindgen (version unknown)')." \
    "Re-check how the glue keeps its instance (\`wasm\`), when initSync re-instantiates and" \
    "which cached memory views a new instance resets; then update js/glue-reset.js and the" \
    "expected lines here (scripts/build.sh), and run tests/node/trap.test.ts (after" \
    "scripts/build.sh --trap-switch), which proves the recovery."
fi

# ---- where each listed file comes from ----
# From the one place that has it: js/ (the shim), the wasm-bindgen output (e.g.
# rate_limiter_bg.wasm.d.ts, and snippets/: small JS helpers of the binding, wasm-bindgen
# `inline_js`, imported by the glue), pkg-template/ (README.md). A directory is copied whole
# (js/local/ as local/). Resolved before anything is written, so that a bad list leaves the
# last build in place.
sources=() names=()
for f in "${files[@]}"; do
  name=${f%/}
  for g in "${generated[@]}"; do [ "$name" = "$g" ] && continue 2; done
  found=()
  for dir in js "$out" pkg-template; do [ -e "$dir/$name" ] && found+=("$dir/$name"); done
  [ ${#found[@]} -eq 0 ] && die "pkg-template/package.json \"files\" lists \"$f\", which exists nowhere:" \
    "not in js/, not in the wasm-bindgen output $out/, not in pkg-template/." \
    "Create it or remove it from the files array."
  [ ${#found[@]} -gt 1 ] && die "pkg-template/package.json \"files\" lists \"$f\", which exists in more than one place:" \
    "${found[@]}" "Keep one."
  sources+=("${found[0]}") names+=("$name")
done

# ---- assemble ----
rm -rf "$dest" && mkdir -p "$dest"
wasm-opt "${WASM_OPT_FLAGS[@]}" "$out/rate_limiter_bg.wasm" -o "$dest/rate_limiter_bg.wasm"
cat "$glue" js/glue-reset.js > "$dest/rate_limiter.js"
# Symbol.dispose needs lib esnext; the consumer never sees the wasm class, so drop it.
grep -v "\[Symbol.dispose\]" "$out/rate_limiter.d.ts" > "$dest/rate_limiter.d.ts"
printf '\n/** Forgets the current wasm instance; the next initSync starts a fresh one. */\nexport function resetWasmInstance(): void;\n' >> "$dest/rate_limiter.d.ts"
# npm always packs package.json; it is not in `files`.
cp pkg-template/package.json "$dest/"
for i in "${!names[@]}"; do
  mkdir -p "$(dirname "$dest/${names[$i]}")"
  cp -r "${sources[$i]}" "$dest/${names[$i]}"
done

installed=node_modules/@delightstack/rate-limiter
if [ "$variant" = package ] && [ -d node_modules ]; then
  rm -rf "$installed" && mkdir -p "$(dirname "$installed")" && cp -r pkg "$installed"
fi
raw=$(wc -c < "$dest/rate_limiter_bg.wasm")
gz=$(gzip -9 -c "$dest/rate_limiter_bg.wasm" | wc -c)
echo "built $dest/: rate_limiter_bg.wasm $raw bytes raw, $gz bytes gzip"
