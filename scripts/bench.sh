#!/usr/bin/env bash
# Benchmarks (not tests: they assert nothing and CI does not run them).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f pkg/rate_limiter_bg.wasm ] || bash scripts/build.sh
node bench/consume.mjs
