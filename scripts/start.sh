#!/usr/bin/env bash
# Builds the package and runs the example Worker (example/src/index.ts) under wrangler dev:
# the playground at /, a login limit at /login, the Quickstart's per-IP limiter on every other path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
port=${PORT:-8787}
cat <<MSG

Playground:      http://localhost:$port/  (drive the limiter from a browser: bursts, gauge, timeline, headers, requests in flight, blocked keys)
Login limit:     POST http://localhost:$port/login  (5 failed logins per IP, one more every 60 s; password letmein)
Example Worker:  every other path, e.g. http://localhost:$port/hello  (10 requests per IP, one more every 10 s)
Try it:  for i in \$(seq 11); do curl -s -o /dev/null -w '%{http_code} ' localhost:$port/hello; done; echo

MSG
exec node_modules/.bin/wrangler dev --ip 127.0.0.1 --port "$port"
