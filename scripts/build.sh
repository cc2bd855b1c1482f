#!/usr/bin/env bash
# Assembles the publishable package in pkg/: wasm-pack output (wasm-opt'd), js/, pkg-template/.
# Then installs pkg/ into node_modules the way `npm install` would, for the example and the tests.
#
# `--trap-switch` instead builds a test-only copy in target/pkg-trap-switch with the cargo
# feature `trap-switch` (a key that makes the wasm trap), for the trap-recovery test; it is
# never installed or published.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

if [ "${1:-}" = --trap-switch ]; then
  out=target/wasm-pack-trap-switch dest=target/pkg-trap-switch cargo_args=(-- --features trap-switch)
else
  out=target/wasm-pack dest=pkg cargo_args=()
fi
wasm-pack --log-level warn build --target web --release --out-dir "$out" --out-name rate_limiter \
  --no-pack "${cargo_args[@]}"

rm -rf "$dest" && mkdir -p "$dest"
# The features rustc enables by default for wasm32-unknown-unknown; wasm-opt must accept them.
wasm-opt -O3 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  "$out/rate_limiter_bg.wasm" -o "$dest/rate_limiter_bg.wasm"
cat "$out/rate_limiter.js" js/glue-reset.js > "$dest/rate_limiter.js"
# Symbol.dispose needs lib esnext; the consumer never sees the wasm class, so drop it.
grep -v "\[Symbol.dispose\]" "$out/rate_limiter.d.ts" > "$dest/rate_limiter.d.ts"
printf '\n/** Forgets the current wasm instance; the next initSync starts a fresh one. */\nexport function resetWasmInstance(): void;\n' >> "$dest/rate_limiter.d.ts"
cp "$out/rate_limiter_bg.wasm.d.ts" js/server.js js/storage.js js/headers.js js/workerd.js js/node.js js/index.d.ts \
  js/middleware.js js/middleware.d.ts "$dest/"
cp pkg-template/package.json pkg-template/README.md "$dest/"
# Small JS helpers of the binding (wasm-bindgen `inline_js`), imported by the glue.
cp -r "$out/snippets" "$dest/snippets"

installed=node_modules/@delightstack/rate-limiter
if [ "$dest" = pkg ] && [ -d node_modules ]; then
  rm -rf "$installed" && mkdir -p "$(dirname "$installed")" && cp -r pkg "$installed"
fi
raw=$(wc -c < "$dest/rate_limiter_bg.wasm")
gz=$(gzip -9 -c "$dest/rate_limiter_bg.wasm" | wc -c)
echo "built $dest/: rate_limiter_bg.wasm $raw bytes raw, $gz bytes gzip"
