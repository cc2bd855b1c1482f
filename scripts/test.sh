#!/usr/bin/env bash
# Runs every test layer on the real build and prints how many tests each ran.
# A layer that runs 0 tests fails: a browser run that silently runs nothing exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --browser --matrix
bash scripts/build.sh
bash scripts/build.sh --trap-switch # test-only copy for tests/node/trap.test.ts
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

logs=target/test-logs
mkdir -p "$logs"
summary=""

# layer NAME COUNT_PATTERN COMMAND...: runs COMMAND, then sums the numbers COUNT_PATTERN
# (an extended regex whose first number is the count) finds in its output.
layer() {
  local name=$1 pattern=$2
  shift 2
  printf '\n=== %s: %s\n' "$name" "$*"
  "$@" 2>&1 | tee "$logs/$name.log"
  local count
  count=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/$name.log" | grep -oE "$pattern" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
  if [ "$count" -eq 0 ]; then
    echo "!!! $name ran 0 tests" >&2
    exit 1
  fi
  summary+=$(printf '%-16s %5d\n' "$name" "$count")$'\n'
}

cargo_tests='test result: ok\. [0-9]+ passed'
vitest_tests='Tests +[0-9]+ passed'

printf '\n=== lint: cargo fmt, cargo clippy, tsc\n'
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
tsc --noEmit -p tsconfig.json

layer rust "$cargo_tests" cargo test
layer wasm-node "$cargo_tests" cargo test --target wasm32-unknown-unknown --test wasm_binding
layer wasm-chromium "$cargo_tests" env WASM_BINDGEN_USE_BROWSER=1 \
  cargo test --target wasm32-unknown-unknown --test wasm_binding
layer node "$vitest_tests" vitest run --config tests/node/vitest.config.ts
layer workerd "$vitest_tests" vitest run --config tests/workers/vitest.config.ts
layer process '# pass [0-9]+' node --test --test-concurrency=1 --test-reporter=tap tests/process/
layer simulation 'sim: [0-9]+ cells checked' node bench/sim/run.mjs --small
layer browser 'browser: [0-9]+ checks passed' node tests/browser/playground.mjs
layer consumer 'consumer: [0-9]+ checks passed' bash tests/consumer/run.sh
layer matrix 'matrix: [0-9]+ checks passed' node tests/matrix/run.mjs

printf '\n=== all layers passed\n%s' "$summary"
