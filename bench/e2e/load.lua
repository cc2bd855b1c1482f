-- wrk script of bench/e2e/run.mjs. Each request names the next simulated client (`?c=<n>`,
-- n cycling over E2E_CLIENTS) and the run tag (`&t=E2E_TAG`) on the variant's path
-- (E2E_VARIANT); done() prints one
-- machine-readable line with the exact latency percentiles in microseconds.
local variant = os.getenv("E2E_VARIANT") or "none"
local clients = tonumber(os.getenv("E2E_CLIENTS") or "256")
local tag = os.getenv("E2E_TAG") or ""

local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local n = 0
function init(args)
  -- spread the threads over the clients (tid is set by setup before init runs)
  n = ((tid or 0) * 7919) % clients
end

function request()
  n = n + 1
  if n >= clients then n = 0 end
  return wrk.format("GET", "/" .. variant .. "?c=" .. n .. "&t=" .. tag)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "LOAD_RESULT requests=%d duration_us=%d p50_us=%.1f p99_us=%.1f mean_us=%.1f max_us=%.1f errors=%d non2xx=%d\n",
    summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
    e.connect + e.read + e.write + e.timeout, e.status))
end
