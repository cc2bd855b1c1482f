#!/usr/bin/env bash
# Builds the package and runs the example Worker (example/src/index.ts) under wrangler dev.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
port=${PORT:-8787}
cat <<MSG

Example Worker: http://localhost:$port  (10 requests per IP, one more every 10 s)
Try it:  for i in \$(seq 11); do curl -s -o /dev/null -w '%{http_code} ' localhost:$port; done; echo

MSG
exec node_modules/.bin/wrangler dev --ip 127.0.0.1 --port "$port"
