#!/usr/bin/env bash
# Fuzzes the engine (fuzz/fuzz_targets/engine.rs) for a number of seconds, default 30:
#
#   scripts/fuzz.sh [seconds] [libFuzzer flags...]
#
# Installs cargo-fuzz from crates.io if it is missing. If cargo-fuzz cannot be installed, or
# the toolchain cannot build a fuzz target at all (no C++ compiler for libFuzzer, no sanitizer
# support when one is asked for), it says so and exits 0: the run is skipped, not failed.
# Once the tools work, a build error or a crash exits non-zero; a crash leaves its input in
# fuzz/artifacts/engine/.
#
# FUZZ_SANITIZER (default none) picks cargo-fuzz's sanitizer: the engine is safe Rust, so
# AddressSanitizer finds little there and runs ~7x slower; overflow checks and debug
# assertions are on either way. Without a sanitizer the stable toolchain suffices; with one
# (FUZZ_SANITIZER=address) nightly flags are needed and RUSTC_BOOTSTRAP=1 enables them.
#
# Seeds come from fuzz/corpus/engine/ (committed, read only); the corpus the run grows goes
# to fuzz/corpus-work/engine/ (ignored by git) and is reused by the next run.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "usage: scripts/fuzz.sh [seconds] [libFuzzer flags...]" >&2
  exit 2
fi

skip() {
  echo "fuzz: skipped: $*"
  exit 0
}

command -v cargo >/dev/null || skip "cargo is not installed"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io..."
  cargo install cargo-fuzz >/dev/null 2>&1 || skip "cargo-fuzz could not be installed"
  cargo fuzz --version >/dev/null 2>&1 || skip "cargo-fuzz was installed but does not run"
fi

sanitizer="${FUZZ_SANITIZER:-none}"
# A sanitizer needs the nightly-only -Zsanitizer: a stable compiler accepts it with
# RUSTC_BOOTSTRAP=1. Without one, cargo-fuzz builds with stable flags only.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
if [ "$sanitizer" != none ]; then
  if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
  fi
  echo 'fn main() {}' >"$probe/probe.rs"
  rustc -Zsanitizer="$sanitizer" -Cpasses=sancov-module -o "$probe/probe" "$probe/probe.rs" \
    >"$probe/log" 2>&1 ||
    skip "rustc cannot build with -Zsanitizer=$sanitizer here: $(head -n 3 "$probe/log")"
fi
command -v c++ >/dev/null || command -v clang++ >/dev/null || command -v g++ >/dev/null ||
  skip "no C++ compiler to build libFuzzer"

corpus=fuzz/corpus-work/engine
seeds=fuzz/corpus/engine
mkdir -p "$corpus" fuzz/target
log=fuzz/target/fuzz-engine.log

echo "fuzz: building the target..."
if ! cargo fuzz build --sanitizer "$sanitizer" engine >"$log" 2>&1; then
  tail -n 30 "$log"
  echo "fuzz: FAILED to build fuzz/fuzz_targets/engine.rs (full log: $log)"
  exit 1
fi

echo "fuzz: running the engine target for ${seconds}s, sanitizer $sanitizer (seeds: $seeds, corpus: $corpus)"
start=$(date +%s)
# libFuzzer writes new inputs to the first corpus directory only.
cargo fuzz run --sanitizer "$sanitizer" engine "$corpus" "$seeds" -- \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 "$@" \
  >"$log" 2>&1 &
pid=$!
# Show progress (libFuzzer's periodic lines, crashes), not every new input.
tail -n +1 -f "$log" --pid="$pid" | grep --line-buffered -Ev '^#[0-9]+[[:space:]]+(NEW|REDUCE)' &
shown=$!
wait "$pid"
status=$?
wait "$shown"
elapsed=$(($(date +%s) - start))

execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
inmem=$(grep -Eo 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -n 1 | cut -d' ' -f2)
files=$(find "$corpus" -type f | wc -l)
bytes=$(du -sb "$corpus" | cut -f1)
echo
echo "fuzz: wall time: ${elapsed}s"
echo "fuzz: executions: ${execs:-unknown} (${speed:-?}/s)"
echo "fuzz: corpus: ${inmem:-unknown} (inputs/bytes in memory); $files files, $bytes bytes in $corpus"
if [ "$status" -ne 0 ]; then
  grep -E 'panicked at|^thread|Test unit written to|SUMMARY' "$log" | head -n 10
  echo "fuzz: FAILED (exit $status); the crashing input is in fuzz/artifacts/engine/, full log: $log"
  echo "fuzz: reproduce: cargo fuzz run -s $sanitizer engine fuzz/artifacts/engine/<file>"
  exit 1
fi
echo "fuzz: no crash"
