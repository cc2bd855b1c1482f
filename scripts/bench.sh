#!/usr/bin/env bash
# Benchmarks (not tests: they assert nothing and CI does not run them). `npm run bench`.
#   1. builds the package if missing or older than its sources (scripts/build.sh)
#   2. builds the floor wasm (`--features bench-floor`, its own cargo target dir, wasm-opt'd)
#   3. cargo bench --bench engine            -> bench/out/engine.log        (goal #1)
#   4. Node benches (node --expose-gc):
#        bench/consume.mjs -> consume.json (#2)   bench/memory.mjs  -> memory.json  (#3)
#        bench/latency.mjs -> latency.json (#4)   bench/size.mjs    -> size.json    (#6)
#   5. bench/e2e/run.sh, if present           -> bench/out/e2e.log, e2e.json (#5)
#      bench/e2e/wake.mjs (wake-up of the durable class) -> bench/out/wake.log, wake.json
#   6. node bench/report.mjs                  -> bench/RESULTS.md, bench/keys.svg
# A part that fails does not stop the others; the report says so and the script exits 1.
# Environment: BENCH_SKIP="engine e2e" skips parts (engine, floor, consume, memory, latency,
# size, e2e, wake); BENCH_NO_BUILD=1 never rebuilds the package (only builds it when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

OUT=bench/out
mkdir -p "$OUT"
# Results of an earlier run must not pass for this one's.
rm -f "$OUT"/{consume,memory,latency,size,e2e,churn,wake}.json "$OUT"/{floor-build,engine,consume,memory,latency,size,e2e,workerd-loop,wake}.log "$OUT"/status.txt
STATUS="$OUT/status.txt"
START=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
FAILED=()

log() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
skipped() { [[ " ${BENCH_SKIP:-} " == *" $1 "* ]]; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$STATUS"; }

# part NAME LOGFILE COMMAND...: runs COMMAND, output to the terminal and LOGFILE.
part() {
  local name=$1 logfile=$2
  shift 2
  if skipped "$name"; then
    log "$name: skipped (BENCH_SKIP)"
    record "$name" skipped 0 "BENCH_SKIP"
    return 0
  fi
  log "$name: $*"
  local t0 rc
  t0=$(date +%s)
  set +e
  "$@" 2>&1 | tee "$logfile"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -eq 0 ]; then
    record "$name" ok $(($(date +%s) - t0))
  else
    record "$name" failed $(($(date +%s) - t0)) "exit $rc, see $logfile"
    FAILED+=("$name")
  fi
}

# 1. The package, as the Node benches import it from node_modules.
wasm=pkg/rate_limiter_bg.wasm
installed=node_modules/@delightstack/rate-limiter/rate_limiter_bg.wasm
if [ ! -f "$wasm" ] || [ ! -f "$installed" ]; then
  log "package missing: scripts/build.sh"
  bash scripts/build.sh
elif [ -z "${BENCH_NO_BUILD:-}" ] &&
  { [ -n "$(find src js pkg-template Cargo.toml Cargo.lock -newer "$wasm" -type f 2>/dev/null | head -n 1)" ] ||
    ! cmp -s "$wasm" "$installed"; }; then
  t0=$(date +%s)
  log "package older than its sources (or not installed): scripts/build.sh"
  if bash scripts/build.sh; then
    record build ok $(($(date +%s) - t0)) "rebuilt: pkg/ was older than its sources"
  else
    # Benchmark what is installed, but say so and fail at the end.
    record build failed $(($(date +%s) - t0)) "scripts/build.sh failed: the installed package was benchmarked"
    FAILED+=(build)
  fi
fi

# 2. The floor of goal #2: same crate with an export that only receives a key string. Own
#    target dir, so that it never races with (or leaks into) the package build.
floor() {
  CARGO_TARGET_DIR=target/bench-floor-cargo wasm-pack --log-level warn build --target web --release \
    --out-dir target/wasm-bench --out-name floor --no-pack -- --features bench-floor
  # The same wasm-opt pass as the package (scripts/build.sh).
  wasm-opt -O3 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    target/wasm-bench/floor_bg.wasm -o target/wasm-bench/floor_bg.wasm
}
part floor "$OUT/floor-build.log" floor

# 3. Native engine vs governor (criterion), if the bench exists.
if [ -f benches/engine.rs ]; then
  part engine "$OUT/engine.log" cargo bench --bench engine
else
  record engine skipped 0 "benches/engine.rs not present"
fi

# 4. Node benches.
part consume "$OUT/consume.log" node --expose-gc bench/consume.mjs
part memory "$OUT/memory.log" node --expose-gc bench/memory.mjs
part latency "$OUT/latency.log" node --expose-gc bench/latency.mjs
part size "$OUT/size.log" node --expose-gc bench/size.mjs
part churn "$OUT/churn.log" node bench/churn.mjs

# 5. End to end in workerd, if present.
if [ -f bench/e2e/run.sh ]; then
  # Three interleaved rounds (medians): single runs on a 2-core machine swing by ±10%.
  part e2e "$OUT/e2e.log" env ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-6}" bash bench/e2e/run.sh
  part workerd-loop "$OUT/workerd-loop.log" node bench/workerd-loop/run.mjs
  part wake "$OUT/wake.log" node bench/e2e/wake.mjs
else
  record e2e skipped 0 "bench/e2e/run.sh not present"
fi

# 6. The report.
record total "$([ ${#FAILED[@]} -eq 0 ] && echo ok || echo failed)" $(($(date +%s) - START)) \
  "load average at start ${LOAD_START}"
log "report"
node bench/report.mjs
echo "bench: $(($(date +%s) - START)) s in total" >&2
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "bench: failed parts: ${FAILED[*]} (see bench/out/*.log)" >&2
  exit 1
fi
