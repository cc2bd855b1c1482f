#!/usr/bin/env bash
# End-to-end benchmark in workerd (issue 4, goal #5): requests/s and p50/p99 latency of a
# Worker that calls a Durable Object over RPC, with the load sent by a second process (wrk,
# else a small Node generator) over loopback. Variants, all in one Worker (bench/e2e/worker.js),
# one path each, same keys, same concurrency and duration:
#   floor       one RPC to a DO that returns `true` at once
#   plain-js    one RPC to a DO running the same token bucket in plain JS over a Map
#   consume     one RPC: RateLimiterServer.consume(key, 1) (options set once per DO)
#   three-call  setOptions(policy) + consume(key, 1) + getStatus(key): three RPCs
#   limit       one RPC: RateLimiterServer.limit(key, 1, policy)
#   durable-consume  one RPC: DurableRateLimiterServer.consume(key, 1) (options set once per
#               DO), its SQLite storage on tmpfs: the SQL work without disk I/O
#   durable-limit    one RPC: DurableRateLimiterServer.limit(key, 1, policy), storage on tmpfs
#   durable-consume-disk, durable-limit-disk   the same with the storage on the disk
#   none        no DO call at all (the "no limiter" latency baseline)
# Every request is allowed, so every durable call writes its bucket's row: the worst case.
# Prints one `E2E variant=… rps=… p50_ms=… p99_ms=… errors=… non2xx=…` line per variant and
# the goal ratios, and writes bench/out/e2e.json. A benchmark, not a test: it asserts nothing.
# Settings (environment): DURATION=10 WARMUP=2 (seconds per variant), ROUNDS=1 (>1 repeats the
# variants in alternating order and reports per-variant medians), CONNECTIONS=32,
# WRK_THREADS=1, CLIENTS=256 (simulated clients = distinct keys), SHARDS=16 (DOs per
# variant), LOADGEN=wrk|node, VARIANTS="floor plain-js …" (subset, in order), TMPFS=/dev/shm
# (a tmpfs directory for the SQLite files of durable-consume and durable-limit; their `-disk`
# twins keep theirs under TMPDIR, normally /tmp on the machine's disk).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
ROUNDS="${ROUNDS:-1}"
CONNECTIONS="${CONNECTIONS:-32}"
WRK_THREADS="${WRK_THREADS:-1}"
CLIENTS="${CLIENTS:-256}"
SHARDS="${SHARDS:-16}"
VARIANTS="${VARIANTS:-floor plain-js consume three-call limit durable-consume durable-limit durable-consume-disk durable-limit-disk none}"
TMPFS="${TMPFS:-/dev/shm}"
COMPAT_DATE="2026-04-01"
WORKERD="$ROOT/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
WRANGLER="$ROOT/node_modules/.bin/wrangler"
PKG="$ROOT/node_modules/@delightstack/rate-limiter"
OUT_DIR="$ROOT/bench/out"

log() { echo "[e2e] $*" >&2; }

path_of() {
  case "$1" in
    floor) echo floor ;; plain-js) echo plain ;; consume) echo consume ;;
    three-call) echo three ;; limit) echo limit ;; none) echo none ;;
    durable-consume) echo dconsume ;; durable-limit) echo dlimit ;;
    durable-consume-disk) echo dconsume-disk ;; durable-limit-disk) echo dlimit-disk ;;
    *) log "unknown variant: $1"; exit 2 ;;
  esac
}
for v in $VARIANTS; do path_of "$v" >/dev/null; done

[ -x "$WORKERD" ] || { log "no workerd binary at $WORKERD (run npm ci)"; exit 1; }
[ -x "$WRANGLER" ] || { log "no wrangler at $WRANGLER (run npm ci)"; exit 1; }
if [ ! -f "$PKG/rate_limiter_bg.wasm" ]; then
  log "package not installed in node_modules: running scripts/build.sh"
  bash "$ROOT/scripts/build.sh"
fi

# ---- load generator: wrk (installed from Debian when missing), else Node ----
LOADGEN="${LOADGEN:-wrk}"
if [ "$LOADGEN" = wrk ] && ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing wrk with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq wrk >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq wrk >/dev/null 2>&1; } \
      || true
  fi
  command -v wrk >/dev/null 2>&1 || { log "wrk unavailable: falling back to the Node load generator"; LOADGEN=node; }
fi
case "$LOADGEN" in
  wrk) LOADGEN_VERSION="$(wrk -v 2>&1 | head -n 1 | awk '{print $1, $2}' || true)" ;;
  node) LOADGEN_VERSION="node $(node --version) (bench/e2e/load.mjs)" ;;
  *) log "LOADGEN must be wrk or node"; exit 2 ;;
esac

# ---- cleanup: stop whatever this script started, by PID ----
TMP="$(mktemp -d "${TMPDIR:-/tmp}/rl-e2e.XXXXXX")"
TMPFS_DIR=""
WORKERD_PID=""
LOAD_PID=""
cleanup() {
  local rc=$?
  set +e
  for pid in $LOAD_PID $WORKERD_PID; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
  done
  rm -rf "$TMP" "$HERE/.wrangler" ${TMPFS_DIR:+"$TMPFS_DIR"}
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- bundle with wrangler, write the capnp config ----
log "bundling bench/e2e/worker.js with wrangler deploy --dry-run"
WRANGLER_SEND_METRICS=false "$WRANGLER" deploy --dry-run --config "$HERE/wrangler.toml" \
  --outdir "$TMP/bundle" >"$TMP/wrangler.log" 2>&1 \
  || { cat "$TMP/wrangler.log" >&2; exit 1; }
rm -rf "$HERE/.wrangler"
[ -f "$TMP/bundle/worker.js" ] || { log "bundle has no worker.js"; ls "$TMP/bundle" >&2; exit 1; }

# Durable Object storage. workerd's `inMemory` storage has no SQL API, so every worker here
# uses `localDisk`: the main worker's SQLite files on tmpfs (no disk I/O: the cost of the SQL
# work itself), the `-disk` variants' files in $TMP on the machine's disk (each commit is
# written to it). The memory-only classes never touch their storage.
mkdir -p "$TMP/do-disk"
if [ -d "$TMPFS" ] && [ -w "$TMPFS" ] && [ "$(stat -f -c %T "$TMPFS")" = tmpfs ]; then
  TMPFS_DIR="$(mktemp -d "$TMPFS/rl-e2e.XXXXXX")"
else
  log "no writable tmpfs at $TMPFS: the main worker's storage goes to the disk as well"
  TMPFS_DIR="$TMP/do-main"; mkdir -p "$TMPFS_DIR"
fi
STORAGE_DESC="localDisk: durable-* on $(df --output=fstype "$TMPFS_DIR" | tail -n 1), durable-*-disk on $(df --output=fstype "$TMP/do-disk" | tail -n 1)"

modules() {
  echo '  modules = ['
  echo '    (name = "worker.js", esModule = embed "bundle/worker.js"),'
  for f in "$TMP"/bundle/*; do
    b="$(basename "$f")"
    case "$b" in
      worker.js) ;;
      *.wasm) echo "    (name = \"$b\", wasm = embed \"bundle/$b\")," ;;
      *.js | *.mjs) echo "    (name = \"$b\", esModule = embed \"bundle/$b\")," ;;
    esac
  done
  echo '  ],'
}
PORT="$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")"
{
  echo 'using Workerd = import "/workerd/workerd.capnp";'
  echo 'const config :Workerd.Config = ('
  echo '  services = ['
  echo '    (name = "main", worker = .bench),'
  echo '    (name = "disk", worker = .benchDisk),'
  echo "    (name = \"do-tmpfs\", disk = (path = \"$TMPFS_DIR\", writable = true)),"
  echo "    (name = \"do-disk\", disk = (path = \"$TMP/do-disk\", writable = true)),"
  echo '  ],'
  echo "  sockets = [ (name = \"http\", address = \"127.0.0.1:$PORT\", http = (), service = \"main\") ],"
  echo ');'
  echo 'const bench :Workerd.Worker = ('
  echo "  compatibilityDate = \"$COMPAT_DATE\","
  modules
  echo '  durableObjectNamespaces = ['
  echo '    (className = "FloorServer", uniqueKey = "rl-e2e-floor"),'
  echo '    (className = "PlainJsServer", uniqueKey = "rl-e2e-plain"),'
  echo '    (className = "RateLimiterServer", uniqueKey = "rl-e2e-limiter"),'
  # enableSql: SQLite-backed, as new_sqlite_classes declares it in wrangler.toml
  echo '    (className = "DurableRateLimiterServer", uniqueKey = "rl-e2e-durable", enableSql = true),'
  echo '  ],'
  echo '  durableObjectStorage = (localDisk = "do-tmpfs"),'
  echo '  bindings = ['
  echo '    (name = "FLOOR", durableObjectNamespace = "FloorServer"),'
  echo '    (name = "PLAIN", durableObjectNamespace = "PlainJsServer"),'
  echo '    (name = "LIMITER", durableObjectNamespace = "RateLimiterServer"),'
  echo '    (name = "DURABLE", durableObjectNamespace = "DurableRateLimiterServer"),'
  echo '    (name = "DURABLE_DISK", durableObjectNamespace = (className = "DurableRateLimiterServer", serviceName = "disk")),'
  echo "    (name = \"SHARDS\", text = \"$SHARDS\"),"
  echo '  ],'
  echo ');'
  # The same bundle again, only to host the durable class with its storage on the disk.
  echo 'const benchDisk :Workerd.Worker = ('
  echo "  compatibilityDate = \"$COMPAT_DATE\","
  modules
  echo '  durableObjectNamespaces = ['
  echo '    (className = "DurableRateLimiterServer", uniqueKey = "rl-e2e-durable-disk", enableSql = true),'
  echo '  ],'
  echo '  durableObjectStorage = (localDisk = "do-disk"),'
  echo "  bindings = [ (name = \"SHARDS\", text = \"$SHARDS\") ],"
  echo ');'
} >"$TMP/config.capnp"

# ---- start workerd, wait until it answers, check every variant once ----
"$WORKERD" serve "$TMP/config.capnp" >"$TMP/workerd.log" 2>&1 &
WORKERD_PID=$!
BASE="http://127.0.0.1:$PORT"
for i in $(seq 200); do
  curl -fsS -o /dev/null "$BASE/none?c=0&t=smoke" 2>/dev/null && break
  if ! kill -0 "$WORKERD_PID" 2>/dev/null || [ "$i" = 200 ]; then
    log "workerd did not come up:"; cat "$TMP/workerd.log" >&2; exit 1
  fi
  sleep 0.1
done
log "workerd $("$WORKERD" --version | awk '{print $2}') pid $WORKERD_PID on $BASE"
log "Durable Object storage: $STORAGE_DESC ($TMPFS_DIR, $TMP/do-disk)"
for v in $VARIANTS; do
  p="$(path_of "$v")"
  got="$(curl -sS -w ' %{http_code}' "$BASE/$p?c=1&t=smoke")" || { log "request to /$p failed"; exit 1; }
  if [ "$got" != "ok 200" ]; then
    log "/$p answered '$got' instead of 'ok 200'"; cat "$TMP/workerd.log" >&2; exit 1
  fi
done

# ---- load ----
run_load() { # variant-path seconds outfile tag
  if [ "$LOADGEN" = wrk ]; then
    E2E_VARIANT="$1" E2E_CLIENTS="$CLIENTS" E2E_TAG="$4" wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d "${2}s" \
      --latency --timeout 10s -s "$HERE/load.lua" "$BASE" >"$3" 2>&1 &
  else
    node "$HERE/load.mjs" "$BASE" "$1" "$CLIENTS" "$CONNECTIONS" "$2" "$4" >"$3" 2>&1 &
  fi
  LOAD_PID=$!
  wait "$LOAD_PID" || { log "load generator failed:"; cat "$3" >&2; exit 1; }
  LOAD_PID=""
}

RESULTS="$TMP/results.tsv"
: >"$RESULTS"
log "load: $LOADGEN_VERSION, $CONNECTIONS connections, $CLIENTS clients over $SHARDS DOs per variant," \
  "${WARMUP}s warm-up + ${DURATION}s per variant, $ROUNDS round(s)"
for round in $(seq "$ROUNDS"); do
  order="$VARIANTS"
  # even rounds go in reverse order, so drift on a shared machine hits every variant alike
  if [ $((round % 2)) = 0 ]; then order="$(echo "$VARIANTS" | tr ' ' '\n' | tac | tr '\n' ' ')"; fi
  for v in $order; do
    p="$(path_of "$v")"
    if [ "$WARMUP" != 0 ]; then run_load "$p" "$WARMUP" "$TMP/warmup.txt" "r$round"; fi
    # same tag as the warm-up: the DOs it created are the ones measured
    run_load "$p" "$DURATION" "$TMP/load.txt" "r$round"
    line="$(grep '^LOAD_RESULT ' "$TMP/load.txt" || true)"
    [ -n "$line" ] || { log "no result from the load generator:"; cat "$TMP/load.txt" >&2; exit 1; }
    printf '%s\t%s\t%s\n' "$round" "$v" "$(echo "$line" | awk '{for (i = 2; i <= NF; i++) {split($i, a, "="); printf "%s%s", (i > 2 ? "\t" : ""), a[2]}}')" >>"$RESULTS"
    log "round $round $v: ${line#LOAD_RESULT }"
  done
done

kill -0 "$WORKERD_PID" 2>/dev/null || { log "workerd died during the run:"; cat "$TMP/workerd.log" >&2; exit 1; }

# ---- report ----
mkdir -p "$OUT_DIR"
E2E_LOADGEN="$LOADGEN_VERSION" E2E_WORKERD="$("$WORKERD" --version)" \
E2E_WRANGLER="$("$WRANGLER" --version 2>/dev/null | tail -n 1)" \
E2E_PARAMS="$(printf '{"duration_s":%s,"warmup_s":%s,"rounds":%s,"connections":%s,"wrk_threads":%s,"clients":%s,"shards":%s,"compatibility_date":"%s","do_storage":"%s"}' \
  "$DURATION" "$WARMUP" "$ROUNDS" "$CONNECTIONS" "$WRK_THREADS" "$CLIENTS" "$SHARDS" "$COMPAT_DATE" "$STORAGE_DESC")" \
  node "$HERE/report.mjs" "$RESULTS" "$OUT_DIR/e2e.json"
