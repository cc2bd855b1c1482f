#!/usr/bin/env bash
# Compares the per-call cost of two builds of the engine, old (the baseline) and new, in the
# same run: a benchmark, not a test (it asserts nothing). bench/README.md, "before and after".
#
#   bash scripts/bench-compare.sh <old-rev> [<new-rev>]      (new: HEAD)
#
# Each revision is checked out into its own git worktree under $COMPARE_DIR and built there
# with its own scripts/build.sh: its own cargo target dir, and its own node_modules (links to
# this checkout's packages, except @delightstack, a directory of its own, so that the build's
# install step never replaces this checkout's installed package). This checkout's working
# tree, pkg/, target/ and node_modules/@delightstack are never touched; uncommitted changes
# are not measured (commit them, or pass a revision that has them).
#
# Parts (COMPARE_SKIP="engine native shim" leaves any out):
#   engine  each tree's own benches/engine.rs (criterion, against governor), old then new in
#           one criterion home: the new run reports its change against the old one as a saved
#           baseline, and the ENGINE_BENCH lines of both are printed side by side
#   native  bench/compare/native.rs: both engines linked into one native binary, the same
#           calls on both, taking turns within each round (consume, check, limit; the block
#           branch)
#   shim    bench/compare.mjs: both built packages loaded into one Node process, the same
#           calls through RateLimiterServer, taking turns within each round (same rows)
#
# Environment: COMPARE_DIR (default ${TMPDIR:-/tmp}/rate-limiter-bench-compare: worktrees,
# which are removed at the end, and the cargo target dirs, kept so that a second run builds
# incrementally); COMPARE_ROUNDS (default 7: rounds per figure, medians printed; passed to
# the shim as BENCH_ROUNDS); COMPARE_KEYS (default 1,10000,1000000) for native and shim;
# ENGINE_BENCH_KEYS for the engine part (as benches/engine.rs).
# Output: the terminal, and bench/out/compare-{engine,native,shim}.log, bench/out/compare-shim.json.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$ROOT/node_modules/.bin:$HOME/.cargo/bin:$PATH"

die() {
  echo "bench-compare.sh: $*" >&2
  exit 1
}
log() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
skipped() { [[ " ${COMPARE_SKIP:-} " == *" $1 "* ]]; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/bench-compare.sh <old-rev> [<new-rev>]"
OLD_SHA=$(git rev-parse --verify --quiet "$1^{commit}") || die "not a revision: $1"
NEW_SHA=$(git rev-parse --verify --quiet "${2:-HEAD}^{commit}") || die "not a revision: ${2:-HEAD}"
ROUNDS=${COMPARE_ROUNDS:-7}

DIR=${COMPARE_DIR:-${TMPDIR:-/tmp}/rate-limiter-bench-compare}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
# One run at a time per directory: two would share worktrees and target dirs.
exec 9> "$DIR/lock"
flock -n 9 || die "another bench-compare run holds $DIR/lock (set COMPARE_DIR for a second one)"

OUT=$ROOT/bench/out
mkdir -p "$OUT"
rm -f "$OUT"/compare-{engine,native,shim}.log "$OUT"/compare-shim.json

WORKTREES=()
cleanup() {
  local wt
  for wt in "${WORKTREES[@]}"; do
    git -C "$ROOT" worktree remove --force "$wt" 2> /dev/null || rm -rf "$wt"
  done
  git -C "$ROOT" worktree prune
}
trap cleanup EXIT

# checkout LABEL SHA: a fresh worktree at $DIR/LABEL, with its own node_modules.
checkout() {
  local label=$1 sha=$2 wt=$DIR/$1 entry name
  git -C "$ROOT" worktree remove --force "$wt" 2> /dev/null || rm -rf "$wt"
  git -C "$ROOT" worktree prune
  git -C "$ROOT" worktree add --quiet --detach "$wt" "$sha"
  WORKTREES+=("$wt")
  # Links to this checkout's packages (the build needs binaryen's wasm-opt); @delightstack is a
  # real directory, since scripts/build.sh deletes and rewrites node_modules/@delightstack/
  # rate-limiter: through a link it would replace this checkout's installed package.
  mkdir -p "$wt/node_modules/@delightstack"
  for entry in "$ROOT"/node_modules/* "$ROOT"/node_modules/.bin; do
    name=$(basename "$entry")
    [ "$name" = @delightstack ] && continue
    ln -s "$entry" "$wt/node_modules/$name"
  done
  for entry in "$ROOT"/node_modules/@delightstack/*; do
    [ -e "$entry" ] || continue
    name=$(basename "$entry")
    [ "$name" = rate-limiter ] && continue
    ln -s "$entry" "$wt/node_modules/@delightstack/$name"
  done
}

# build LABEL: the package of the worktree, by its own scripts/build.sh, in its own target dir.
build() {
  local label=$1 wt=$DIR/$1
  log "$label: scripts/build.sh in $wt (cargo target $DIR/target-$label)"
  (cd "$wt" && CARGO_TARGET_DIR="$DIR/target-$label" bash scripts/build.sh)
  [ -f "$wt/pkg/node.js" ] && [ -f "$wt/pkg/rate_limiter_bg.wasm" ] ||
    die "$label: scripts/build.sh made no pkg/node.js and pkg/rate_limiter_bg.wasm"
}

log "old $(git log -1 --format='%h %s' "$OLD_SHA" | cut -c1-100)"
log "new $(git log -1 --format='%h %s' "$NEW_SHA" | cut -c1-100)"
checkout old "$OLD_SHA"
checkout new "$NEW_SHA"
if ! skipped shim; then
  build old
  build new
fi

# Whether the new tree's engine has blocks (docs/SPEC.md section 13): the block rows then run.
has_blocks() { grep -qs 'pub fn block(&mut self' "$1"/src/engine/*.rs; }

# side_by_side OLD_LOG NEW_LOG: the ENGINE_BENCH lines of two runs of benches/engine.rs, one
# row per size. Governor is the same code in both runs, so its new/old is the drift of the
# machine between them, and "normalized" (new ours/governor over old ours/governor) is the
# change with that drift taken out.
side_by_side() {
  echo
  echo "# engine: benches/engine.rs of each tree, run one after the other; ns per consume (median of its rounds)"
  echo "| live keys | old ns | new ns | new/old | governor old ns | governor new ns | governor new/old | normalized new/old |"
  echo "|---|---|---|---|---|---|---|---|"
  awk '
    function field(name,   i, kv) {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
      return ""
    }
    $1 == "ENGINE_BENCH" {
      k = field("keys")
      if (FILENAME == ARGV[1]) { old[k] = field("ours_ns"); oldg[k] = field("governor_ns"); order[++n] = k }
      else { new[k] = field("ours_ns"); newg[k] = field("governor_ns") }
    }
    END {
      for (i = 1; i <= n; i++) {
        k = order[i]
        if (!(k in new)) continue
        printf "| %s | %.2f | %.2f | %.3f× | %.2f | %.2f | %.3f× | %.3f× |\n", k, old[k], new[k], new[k] / old[k],
          oldg[k], newg[k], newg[k] / oldg[k], (new[k] / newg[k]) / (old[k] / oldg[k])
      }
    }
  ' "$1" "$2"
}

FAILED=()

# 1. Each tree's own benches/engine.rs, old then new, in one criterion home.
if ! skipped engine; then
  log "engine: benches/engine.rs of old, then of new (criterion baseline \"old\")"
  rm -rf "$DIR/criterion"
  if (
    set -o pipefail
    for label in old new; do
      wt=$DIR/$label
      [ -f "$wt/benches/engine.rs" ] || { echo "$label has no benches/engine.rs"; exit 1; }
      if [ $label = old ]; then args=(--save-baseline old); else args=(--baseline old); fi
      echo "# $label: cargo bench --bench engine -- ${args[*]}"
      (cd "$wt" && CRITERION_HOME="$DIR/criterion" CARGO_TARGET_DIR="$DIR/target-native" \
        cargo bench --quiet --bench engine -- "${args[@]}") | tee "$DIR/engine-$label.log"
    done
    side_by_side "$DIR/engine-old.log" "$DIR/engine-new.log"
  ) 2>&1 | tee "$OUT/compare-engine.log"; then :; else FAILED+=(engine); fi
fi

# 2. Both engines in one native binary, interleaved.
if ! skipped native; then
  log "native: bench/compare/native.rs, old and new engines interleaved"
  crate=$DIR/native
  mkdir -p "$crate"
  rm -rf "${crate:?}/src" # (an older layout copied the harness in)
  # The lock file of the new tree: the same dependency versions the package is built with.
  git -C "$ROOT" show "$NEW_SHA:Cargo.lock" > "$crate/Cargo.lock"
  # Each tree's crate as a package of its own name (cargo takes no two packages of one name
  # and version in one lock file): its Cargo.toml and src/, the package renamed
  # rate_limiter_old / rate_limiter_new, without the [[bench]] targets it has no files for.
  # Extracted again only when the revision changed, and then with fresh mtimes (tar -m): cargo
  # tells a path dependency's changes by mtime, and a commit's files must not look older than
  # the build of another commit's.
  for label in old new; do
    sha=$([ $label = old ] && echo "$OLD_SHA" || echo "$NEW_SHA")
    [ "$(cat "$crate/$label/.rev" 2> /dev/null)" = "$sha" ] && continue
    rm -rf "${crate:?}/$label" && mkdir -p "$crate/$label"
    git -C "$ROOT" archive "$sha" Cargo.toml src | tar -x -m -C "$crate/$label"
    awk -v name="rate_limiter_$label" '
      /^\[/ { section = $0 }
      section == "[package]" && /^name *=/ { print "name = \"" name "\""; next }
      section == "[[bench]]" { next }
      { print }
    ' "$crate/$label/Cargo.toml" > "$crate/$label/Cargo.toml.new"
    mv "$crate/$label/Cargo.toml.new" "$crate/$label/Cargo.toml"
    echo "$sha" > "$crate/$label/.rev"
  done
  features=()
  has_blocks "$crate/new" && features=(--features blocks)
  cat > "$crate/Cargo.toml" << EOF
[package]
name = "rate-limiter-bench-compare"
version = "0.0.0"
edition = "2021"
publish = false

# Built where it lies, so that its `#[path]` module (the keys shared with benches/engine.rs)
# resolves.
[[bin]]
name = "rate-limiter-bench-compare"
path = "$ROOT/bench/compare/native.rs"

[workspace]

[dependencies]
old = { package = "rate_limiter_old", path = "old" }
new = { package = "rate_limiter_new", path = "new" }

[features]
# The new engine has blocks: the block rows run.
blocks = []

# As the package's [profile.release], which cargo bench uses for benches/engine.rs.
[profile.release]
opt-level = 3
lto = true
codegen-units = 1
panic = "abort"
EOF
  if (
    cd "$crate" &&
      CARGO_TARGET_DIR="$DIR/target-native" cargo build --quiet --release "${features[@]}" &&
      COMPARE_ROUNDS=$ROUNDS "$DIR/target-native/release/rate-limiter-bench-compare"
  ) 2>&1 | tee "$OUT/compare-native.log"; then :; else FAILED+=(native); fi
fi

# 3. Both packages in one Node process, interleaved.
if ! skipped shim; then
  log "shim: bench/compare.mjs, old and new packages interleaved"
  if BENCH_ROUNDS=$ROUNDS COMPARE_OLD_PKG="$DIR/old/pkg" COMPARE_NEW_PKG="$DIR/new/pkg" \
    COMPARE_OLD_REV="$(git rev-parse --short "$OLD_SHA")" COMPARE_NEW_REV="$(git rev-parse --short "$NEW_SHA")" \
    node --expose-gc "$ROOT/bench/compare.mjs" 2>&1 | tee "$OUT/compare-shim.log"; then :; else FAILED+=(shim); fi
fi

if [ ${#FAILED[@]} -gt 0 ]; then
  echo "bench-compare: failed parts: ${FAILED[*]} (see bench/out/compare-*.log)" >&2
  exit 1
fi
