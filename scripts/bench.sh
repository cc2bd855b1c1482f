#!/usr/bin/env bash
# Benchmarks (not tests: they assert nothing and CI does not run them). `npm run bench`.
# bench/README.md says what each one measures, its baseline and its goal.
#   1. builds the package if missing or older than its sources (scripts/build.sh)
#   2. builds the floor of "shim speed" (scripts/build.sh --bench-floor -> target/pkg-bench-floor)
#   3. cargo bench --bench engine       -> bench/out/engine.log            (native speed)
#   4. Node benches (node --expose-gc):
#        bench/consume.mjs -> consume.json (shim speed)
#        bench/memory.mjs  -> memory.json  (memory per bucket)
#        bench/latency.mjs -> latency.json (tail latency)
#        bench/size.mjs    -> size.json    (size)
#        bench/wasm-parts.mjs -> wasm-parts.json (what the .wasm is made of)
#        bench/churn.mjs   -> churn.json   (key churn)
#        bench/leases.mjs  -> leases.json  (crowded key)
#   5. in workerd, if bench/e2e/run.mjs is present:
#        bench/e2e/run.mjs -> bench/out/e2e.log, e2e.json (end-to-end throughput, durable overhead)
#        bench/workerd-loop/run.mjs -> bench/out/workerd-loop.log (per call inside workerd)
#        bench/e2e/wake.mjs -> bench/out/wake.log, wake.json (wake-up cost)
#        bench/e2e/local.mjs -> bench/out/local.log, local.json (local decisions)
#   6. bench/sim/run.mjs + charts.mjs   -> bench/out/sim.log, sim.json, bench/sim/*.svg (simulation)
#   7. only with BENCH_COMPARE=<rev>: scripts/bench-compare.sh <rev> -> bench/out/compare.log
#        (before and after: that revision's build beside HEAD's, per call, same run)
#   8. node bench/report.mjs            -> bench/RESULTS.md, bench/keys.svg
# A part that fails does not stop the others; the report says so and the script exits 1.
# Environment: BENCH_SKIP="engine e2e" skips parts (floor, engine, consume, memory, latency,
# size, wasm-parts, churn, leases, e2e, workerd-loop, wake, local, sim, compare); BENCH_NO_BUILD=1 never rebuilds the
# package (only builds it when missing); ROUNDS=3 DURATION=6 for bench/e2e/run.mjs and
# bench/e2e/local.mjs; BENCH_COMPARE=<rev> adds part 7 (a few minutes more; off by default).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

OUT=bench/out
mkdir -p "$OUT"
# Results of an earlier run must not pass for this one's.
rm -f "$OUT"/{consume,memory,latency,size,e2e,churn,wake,local,sim}.json "$OUT"/{floor-build,engine,consume,memory,latency,size,e2e,workerd-loop,wake,local,sim,compare}.log "$OUT"/status.txt
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

# 2. The floor of "shim speed": the same crate with an export that only receives a key string
#    (cargo feature bench-floor), built and wasm-opt'd like the package, in its own cargo
#    target dir (see scripts/build.sh).
part floor "$OUT/floor-build.log" bash scripts/build.sh --bench-floor

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
# (size also times start-up in the consumer matrix's Node 22, whose V8 is closer to workerd's:
# bootstrap installs it when missing.)
part size "$OUT/size.log" bash -c 'bash scripts/bootstrap.sh --matrix && node --expose-gc bench/size.mjs'
part wasm-parts "$OUT/wasm-parts.log" node bench/wasm-parts.mjs
part churn "$OUT/churn.log" node bench/churn.mjs
part leases "$OUT/leases.log" node bench/leases.mjs

# 5. End to end in workerd, if present.
if [ -f bench/e2e/run.mjs ]; then
  # Three interleaved rounds (medians): single runs on a 2-core machine swing by ±10%.
  part e2e "$OUT/e2e.log" env ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-6}" node bench/e2e/run.mjs
  part workerd-loop "$OUT/workerd-loop.log" node bench/workerd-loop/run.mjs
  part wake "$OUT/wake.log" node bench/e2e/wake.mjs
  # The middleware's `local` option beside per-request RPC and no limiter, far from and at the
  # limit; interleaved rounds like e2e.
  part local "$OUT/local.log" env ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-6}" node bench/e2e/local.mjs
else
  record e2e skipped 0 "bench/e2e/run.mjs not present"
fi

# 6. The simulation of many isolates sharing one bucket (bench/sim/README.md): the full sweep
#    of modes x isolates x demand x round trip x limit x split (about 6.5 hours of one core,
#    run on both: about 3.3 hours), then its charts.
part sim "$OUT/sim.log" sh -c 'node bench/sim/run.mjs --jobs 2 && node bench/sim/charts.mjs'

# 7. Before and after, only when asked: the build of revision $BENCH_COMPARE beside HEAD's, in
#    worktrees and target dirs of its own (scripts/bench-compare.sh, bench/README.md).
if [ -n "${BENCH_COMPARE:-}" ]; then
  part compare "$OUT/compare.log" bash scripts/bench-compare.sh "$BENCH_COMPARE"
fi

# 8. The report.
record total "$([ ${#FAILED[@]} -eq 0 ] && echo ok || echo failed)" $(($(date +%s) - START)) \
  "load average at start ${LOAD_START}"
log "report"
node bench/report.mjs
echo "bench: $(($(date +%s) - START)) s in total" >&2
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "bench: failed parts: ${FAILED[*]} (see bench/out/*.log)" >&2
  exit 1
fi
