#!/usr/bin/env bash
# Installs what a fresh machine lacks (Node, npm and Rust by rustup are assumed): the wasm32
# target, wasm-bindgen-cli at the version pinned in Cargo.toml, wasm-pack, the npm packages,
# with --browser Debian's Chromium + ChromeDriver, and with --matrix the consumer matrix's
# Node 22 and pnpm (from the npm registry, into tests/matrix/tools/node_modules). Each step is
# skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
say() { printf '[bootstrap] %s\n' "$*"; }

WASM_PACK_VERSION=0.15.1
BINDGEN_VERSION=$(sed -n 's/^wasm-bindgen = "=\([0-9.]*\)".*/\1/p' Cargo.toml)

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$BINDGEN_VERSION" ]; then
  # No --locked: its lockfile pins a crate version the registry here does not serve.
  say "installing wasm-bindgen-cli $BINDGEN_VERSION (about 3 minutes)"
  cargo install wasm-bindgen-cli --version "$BINDGEN_VERSION"
fi

if [ "$(wasm-pack --version 2>/dev/null | awk '{print $2}')" != "$WASM_PACK_VERSION" ]; then
  say "installing wasm-pack $WASM_PACK_VERSION (about 3 minutes)"
  cargo install wasm-pack --version "$WASM_PACK_VERSION" --locked
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages"
  npm ci --no-audit --no-fund
fi

# wants FLAG: whether FLAG is among the script's arguments.
args=" $* "
wants() { case "$args" in *" $1 "*) return 0 ;; esac; return 1; }

if wants --matrix; then
  tools=tests/matrix/tools
  if [ ! -f $tools/node_modules/.package-lock.json ] || [ $tools/package-lock.json -nt $tools/node_modules/.package-lock.json ]; then
    say "installing the consumer matrix's Node 22 and pnpm into $tools/node_modules"
    # Not `npm ci`: the registry here serves pnpm's native binary for some platforms only, so
    # the lockfile lacks the others and `npm ci` would call it out of sync.
    npm install --prefix $tools --no-audit --no-fund
    touch $tools/node_modules/.package-lock.json # an install that changed nothing leaves it old
  fi
fi

if wants --browser && ! { command -v chromium && command -v chromedriver; } >/dev/null; then
  say "installing Debian's chromium and chromium-driver"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
