// Browser test of the playground (example/src/playground.html): Debian's Chromium, driven by
// playwright-core, against the example Worker under `wrangler dev` on 127.0.0.1, so the page
// drives the real RateLimiterServer and DurableRateLimiterServer (evicted from the page: the
// durable one keeps its bucket). Real time passes here, once: one refill interval (1 s).
// Run: node tests/browser/playground.mjs   (prints one line per check, then a count line)
// Output (screenshots): tests/browser/output/
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { freePort, sleep } from '../support/net.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const output = join(root, 'tests/browser/output');
const CHROMIUM = '/usr/bin/chromium';
// TOOLCHAIN.md: without the background-networking flags Chromium floods the closed network.
const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

let passed = 0;
async function check(name, fn) {
  try {
    const detail = await fn();
    passed += 1;
    console.log(`ok ${passed} - ${name}${detail ? ` (${detail})` : ''}`);
  } catch (error) {
    console.log(`not ok ${passed + 1} - ${name}`);
    throw error;
  }
}

function assert(condition, message) {
  if (!condition) throw new Error(message);
}

function equal(actual, expected, what) {
  assert(Object.is(actual, expected), `${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

/** `wrangler dev` in its own process group, so stop() ends it and the workerd it starts. */
async function startWrangler() {
  const [port, inspectorPort] = [await freePort(), await freePort()];
  const persist = mkdtempSync(join(tmpdir(), 'playground-state-'));
  const child = spawn(
    join(root, 'node_modules/.bin/wrangler'),
    ['dev', '--ip', '127.0.0.1', '--port', String(port), '--inspector-port', String(inspectorPort),
      '--persist-to', persist, '--show-interactive-dev-session=false'],
    { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: '1' } },
  );
  let log = '';
  child.stdout.on('data', (chunk) => (log += chunk));
  child.stderr.on('data', (chunk) => (log += chunk));
  let exited = null;
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve((exited = { code, signal }))));

  const stop = async () => {
    if (exited === null) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {}
      if ((await Promise.race([exit, sleep(5000).then(() => 'timeout')])) === 'timeout') {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {}
        await exit;
      }
    }
    rmSync(persist, { recursive: true, force: true });
  };

  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (exited !== null) {
      await stop();
      throw new Error(`wrangler dev exited (${JSON.stringify(exited)}) before answering:\n${log}`);
    }
    try {
      const response = await fetch(`${base}/`);
      await response.arrayBuffer();
      if (response.ok) break;
    } catch {}
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`wrangler dev did not answer on ${base} within 90 s:\n${log}`);
    }
    await sleep(250);
  }
  return { base, port, stop, log: () => log };
}

/** Polls `fn` until it returns a truthy value; throws with the last value after `ms`. */
async function waitFor(fn, ms, what) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    await sleep(50);
  }
}

async function main() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: the browser test needs Debian's chromium ` +
      '(bash scripts/bootstrap.sh --browser installs it)');
  }
  if (!existsSync(join(root, 'node_modules/@delightstack/rate-limiter/package.json'))) {
    throw new Error('node_modules/@delightstack/rate-limiter is missing: run bash scripts/build.sh');
  }
  mkdirSync(output, { recursive: true });

  const server = await startWrangler();
  const profile = mkdtempSync(join(tmpdir(), 'playground-chromium-'));
  let context;
  const onSignal = () => {
    server.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1280, height: 900 },
    });
    await run(context, server);
  } finally {
    await context?.close().catch(() => {});
    await server.stop();
    rmSync(profile, { recursive: true, force: true });
  }
  console.log(`browser: ${passed} checks passed`);
}

async function run(context, { base, port }) {
  const requests = [];
  context.on('request', (request) => requests.push(request.url()));
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));

  const text = (selector) => page.locator(selector).textContent();
  const data = (selector, name) => page.locator(selector).getAttribute(`data-${name}`);
  const set = async (selector, value) => page.locator(selector).fill(String(value));

  await check('the page loads from the Worker at / and its gauge reads the Durable Object', async () => {
    const response = await page.goto(`${base}/`);
    equal(response.status(), 200, 'status of /');
    equal(await page.title(), 'Rate limiter playground', 'title');
    await page.locator('#live', { hasText: 'live' }).waitFor({ timeout: 5000 });
    await waitFor(async () => (await text('#capacity')) === '5', 5000, 'the gauge to show capacity 5');
    equal(await text('#tokens'), '5', 'tokens of an untouched key');
  });

  await check('a limiter RangeError (max_tokens 0) shows as a message, and the page keeps working', async () => {
    await set('#key', `bad-${Date.now()}`);
    await set('#max-tokens', 0);
    await page.locator('#send').click();
    const error = page.locator('#error');
    await error.waitFor({ state: 'visible', timeout: 5000 });
    const message = await error.textContent();
    equal(message, 'RangeError: policy.max_tokens must be a whole number from 1 to 9007199254740991, got 0', 'message');
    await waitFor(async () => (await data('#result', 'failed')) === '1', 5000, 'the result line');
    equal(await text('#result').then((t) => t.replace(/ \(\d+ ms\)$/, '')), '1 request: 0 allowed, 0 denied, 1 failed', 'result');
    return message;
  });

  const key = `browser-${Date.now()}`;
  let burstDone;
  await check('max_tokens 5, refill 1 s, cost 1, a burst of 7: the UI shows 5 allowed and 2 denied', async () => {
    await set('#key', key);
    await set('#cost', 1);
    await page.locator('input[name=mode][value=policy]').check();
    await set('#max-tokens', 5);
    await set('#refill', 1);
    await set('#burst-size', 7);
    equal(await text('#burst'), 'Send burst of 7', 'burst button');
    equal(await text('#call'), `await stub.limit("${key}", 1, { max_tokens: 5, refill_every_seconds: 1 })`, 'the call shown');
    await page.locator('#burst').click();
    const result = await waitFor(async () => {
      const t = await text('#result');
      return t.startsWith('7 requests:') && t;
    }, 10_000, 'the burst result');
    burstDone = Date.now();
    equal(result.replace(/ \(\d+ ms\)$/, ''), '7 requests: 5 allowed, 2 denied', 'result');
    equal(await data('#result', 'allowed'), '5', 'allowed');
    equal(await data('#result', 'denied'), '2', 'denied');
    equal(await text('#allowed-count'), '5', 'allowed since the page opened');
    equal(await text('#denied-count'), '2', 'denied since the page opened');
    equal(await page.locator('#error').isVisible(), false, 'error box visible');
    return result;
  });

  let log;
  await check('the request log: five 200s leaving 4, 3, 2, 1, 0 tokens, two 429s with a retry within 1 s', async () => {
    const rows = await page.locator('#log tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    // Newest first: the burst, then the failed request of the previous check.
    equal(rows.length, 8, 'rows');
    equal(rows[7][1], 'error', 'status of the first request');
    log = rows.slice(0, 7);
    const ok = log.filter((r) => r[1] === '200');
    const denied = log.filter((r) => r[1] === '429');
    equal(ok.map((r) => r[2]).sort().join(','), '0,1,2,3,4', 'remaining after the allowed ones');
    equal(denied.length, 2, 'denied rows');
    for (const r of denied) {
      equal(r[2], '0', 'remaining after a denied one');
      const ms = Number(r[3].replace(/ ms$/, ''));
      assert(ms > 0 && ms <= 1000, `retry after ${r[3]} is not within (0, 1000] ms`);
    }
    return denied.map((r) => `${r[0]} retry ${r[3]}`).join(', ');
  });

  await check('the timeline marks 5 allowed and 2 denied requests and draws the tokens line', async () => {
    await sleep(250); // the chart redraws 5 times a second
    equal(await page.locator('#chart rect.mark-allowed').count(), 5, 'allowed marks');
    equal(await page.locator('#chart rect.mark-denied').count(), 2, 'denied marks');
    const path = await page.locator('#chart path.tokens').getAttribute('d');
    assert(path !== null && path.startsWith('M') && path.includes('V'), `tokens line: ${path}`);
  });

  await check('the last response shows its real status and rate-limit headers, matching its decision', async () => {
    const status = await data('#last-status', 'status');
    const n = await data('#last-status', 'request');
    const headers = Object.fromEntries(await page.locator('#headers tr').evaluateAll((rows) =>
      rows.map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent])));
    const row = log.find((r) => r[0] === `#${n}`);
    assert(row !== undefined, `no log row for request #${n}`);
    equal(row[1], status, `status of #${n} in the log`);
    equal(headers['X-RateLimit-Limit'], '5', 'X-RateLimit-Limit');
    equal(headers['RateLimit-Policy'], '"playground";q=5;w=5', 'RateLimit-Policy');
    equal(headers['X-RateLimit-Reset'], '1', 'X-RateLimit-Reset');
    if (status === '429') {
      // Concurrent responses arrive in any order; the last one is nearly always a denied one.
      equal(await text('#last-status'), 'HTTP 429 Too Many Requests', 'status line');
      equal(headers['X-RateLimit-Remaining'], '0', 'X-RateLimit-Remaining');
      equal(headers['Retry-After'], '1', 'Retry-After');
      equal(headers['RateLimit'], '"playground";r=0;t=1', 'RateLimit');
    } else {
      equal(status, '200', 'status');
      equal(headers['X-RateLimit-Remaining'], row[2], 'X-RateLimit-Remaining');
      equal(headers['Retry-After'], undefined, 'Retry-After');
      equal(headers['RateLimit'], `"playground";r=${row[2]};t=1`, 'RateLimit');
    }
    return `#${n}: ${status}, ${Object.entries(headers).filter(([k]) => /rate|retry/i.test(k)).map(([k, v]) => `${k}: ${v}`).join('; ')}`;
  });

  await check('right after the burst the gauge shows 0 / 5 and the next token within 1 s', async () => {
    equal(await text('#tokens'), '0', 'tokens');
    equal(await text('#capacity'), '5', 'capacity');
    const next = Number(await data('#next', 'next-ms'));
    assert(next > 0 && next <= 1000, `next token in ${next} ms`);
    assert(/^Next token in 0\.\d\d s$|^Next token in 1\.00 s$/.test(await text('#next')), `next: ${await text('#next')}`);
    return `next token in ${next} ms`;
  });

  await check('one refill interval (1 s) of real time later, the gauge shows a token back: 1 / 5', async () => {
    await waitFor(async () => (await text('#tokens')) === '1', 3000, 'the gauge to show 1 token');
    const waited = Date.now() - burstDone;
    equal(await text('#capacity'), '5', 'capacity');
    // The Durable Object agrees (the gauge is also projected between polls).
    const status = await page.evaluate(async (k) => {
      const response = await fetch('/api/status', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ key: k, policy: { max_tokens: 5, refill_every_seconds: 1 } }),
      });
      return (await response.json()).status;
    }, key);
    assert(status.remaining >= 1 && status.limit === 5, `status from the Durable Object: ${JSON.stringify(status)}`);
    return `after ${waited} ms; the Durable Object reports ${JSON.stringify(status)}`;
  });

  await check('a screenshot of the page is saved', async () => {
    const file = join(output, 'playground.png');
    rmSync(file, { force: true });
    await page.screenshot({ path: file, fullPage: true });
    assert(statSync(file).size > 10_000, `${file} is only ${statSync(file).size} bytes`);
    return file.slice(root.length);
  });

  /** Sends a burst of 5 on a slow refill (60 s) to a new key of `cls`, then evicts that object. */
  const drainThenEvict = async (cls) => {
    const k = `evict-${cls}-${Date.now()}`;
    await page.locator(`input[name=class][value=${cls}]`).check();
    await set('#key', k);
    await set('#cost', 1);
    await page.locator('input[name=mode][value=policy]').check();
    await set('#max-tokens', 5);
    await set('#refill', 60);
    await set('#burst-size', 5);
    await page.locator('#burst').click();
    const burst = await waitFor(async () => {
      const t = await text('#result');
      return t.startsWith('5 requests:') && t;
    }, 10_000, 'the burst result');
    equal(burst.replace(/ \(\d+ ms\)$/, ''), '5 requests: 5 allowed, 0 denied', 'result');
    equal(await text('#tokens'), '0', 'tokens after the burst');
    await page.locator('#evict').click();
    await waitFor(async () => (await data('#result', 'evicted')) === cls, 10_000, `the ${cls} eviction`);
    const row = await page.locator('#log tbody tr').first().evaluate((tr) => [...tr.cells].map((td) => td.textContent));
    equal(row[1], 'evicted', 'the log row of the eviction');
    equal(await page.locator('#error').isVisible(), false, 'error box visible');
    // A few polls later, the gauge still reads the same bucket from the new object.
    await sleep(1000);
    equal(await text('#capacity'), '5', 'capacity');
    return { tokens: await text('#tokens'), result: await text('#result'), remaining: row[2] };
  };

  await check('durable: a burst drains the bucket; after "Evict the object" the gauge still shows it drained', async () => {
    const { tokens, result, remaining } = await drainThenEvict('durable');
    equal(tokens, '0', 'tokens after the eviction');
    equal(remaining, '0', 'remaining in the log row');
    return result;
  });

  await check('in memory: a burst drains the bucket; after "Evict the object" the gauge shows it full', async () => {
    const { tokens, result, remaining } = await drainThenEvict('memory');
    equal(tokens, '5', 'tokens after the eviction');
    equal(remaining, '5', 'remaining in the log row');
    equal(await text('#next'), 'Full: no refill pending.', 'next token');
    return result;
  });

  await check('readable on a phone (390 px wide): nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await sleep(300); // the chart redraws for the new width
    const widths = await page.evaluate(() => ({
      page: document.documentElement.scrollWidth,
      chart: document.getElementById('chart').getBoundingClientRect().right,
    }));
    assert(widths.page <= 390 && widths.chart <= 390, `wider than 390 px: ${JSON.stringify(widths)}`);
    const file = join(output, 'playground-phone.png');
    await page.screenshot({ path: file, fullPage: true });
    return file.slice(root.length);
  });

  await check('no request left 127.0.0.1 (works offline: no CDN, fonts or analytics)', async () => {
    const local = `http://127.0.0.1:${port}/`;
    const elsewhere = requests.filter((url) => !url.startsWith(local) && !url.startsWith('data:'));
    assert(requests.length > 10, `only ${requests.length} requests were seen`);
    assert(elsewhere.length === 0, `requests elsewhere: ${elsewhere.join(', ')}`);
    equal(pageErrors.length, 0, `uncaught page errors (${pageErrors.join('; ')})`);
    return `${requests.length} requests, all to ${local}`;
  });
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
