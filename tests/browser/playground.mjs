// Browser test of the playground (example/src/playground.html): Debian's Chromium, driven by
// playwright-core, against the example Worker under `wrangler dev` on 127.0.0.1, so the page
// drives the real RateLimiterServer and DurableRateLimiterServer (evicted from the page: the
// durable one keeps its bucket), a concurrency limit through the real middleware (the permits
// finished by clicking), and the block list. Real time passes here, once: one refill interval (1 s).
// Run: node tests/browser/playground.mjs   (prints one line per check, then a count line)
// Output (screenshots): tests/browser/output/ (playground.png after the burst, playground-gate.png with
// 3 requests in flight and the 4th denied, playground-phone.png at 390 px)
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

  /** The last response's headers, as the page shows them. */
  const shownHeaders = async () => Object.fromEntries(await page.locator('#headers tr').evaluateAll((rows) =>
    rows.map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent])));
  /** What an endpoint answers, asked from the page (the objects' own view, not the page's). */
  const ask = (path, body) => page.evaluate(async ([p, b]) => {
    const response = await fetch(p, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) });
    return response.json();
  }, [path, body]);
  const heldRows = () => page.locator('#permits tbody tr').count();
  const gateResult = (expected) =>
    waitFor(async () => (await text('#gate-result')) === expected, 10_000, `the gate result "${expected}"`);

  const gateKey = `gate-${Date.now()}`;
  await check('concurrency, in memory: max_in_flight 3, 3 slow requests started at once are all in flight', async () => {
    await page.locator('input[name=class][value=memory]').check();
    await set('#key', gateKey);
    await set('#max-in-flight', 3);
    await set('#ttl', 60);
    await set('#auto-finish', '');
    await set('#start-count', 3);
    equal(await text('#start-many'), 'Start 3', 'start button');
    assert((await text('#gate-call')).includes(`concurrency: { name: "${gateKey}", max_in_flight: 3, ttl_seconds: 60 }`),
      `the call shown: ${await text('#gate-call')}`);
    await page.locator('#start-many').click();
    await gateResult('3 starts: 3 held, 0 denied (429)');
    equal(await heldRows(), 3, 'held requests listed');
    equal(await page.locator('#permits tbody button', { hasText: 'Finish' }).count(), 3, 'finish buttons');
    equal(await text('#in-flight'), '3', 'in flight');
    equal(await text('#max-shown'), '3', 'max in flight');
    equal(await text('#gate-status'), '{ in_flight: 3, permits: 3 }', 'gateStatus shown');
    const gate = (await ask('/api/gate', { key: gateKey })).gate;
    equal(JSON.stringify(gate), '{"in_flight":3,"permits":3}', 'gateStatus of the object');
    return `${await text('#gate-result')}; gateStatus ${JSON.stringify(gate)}`;
  });

  await check('the 4th start is denied: a 429 in the concurrent-requests unit, Retry-After 1, as the middleware answers', async () => {
    await page.locator('#start').click();
    await gateResult('1 start: 0 held, 1 denied (429)');
    equal(await text('#last-status'), 'HTTP 429 Too Many Requests', 'status line');
    const headers = await shownHeaders();
    equal(headers['RateLimit-Policy'], `"${gateKey}";q=3;qu="concurrent-requests"`, 'RateLimit-Policy');
    equal(headers['RateLimit'], `"${gateKey}";r=0;t=1`, 'RateLimit');
    equal(headers['Retry-After'], '1', 'Retry-After');
    // A gate alone has no token bucket: no X-RateLimit-* fields.
    equal(headers['X-RateLimit-Limit'], undefined, 'X-RateLimit-Limit');
    equal(await text('#last-detail'), `Quota exceeded for policy "${gateKey}"; retry after 1 second.`, 'the problem\'s detail');
    equal(await heldRows(), 3, 'held requests listed');
    equal(await text('#gate-status'), '{ in_flight: 3, permits: 3 }', 'gateStatus shown');
    // The page at this moment: 3 permits held, the 4th start's 429 and its headers.
    await page.screenshot({ path: join(output, 'playground-gate.png'), fullPage: true });
    return Object.entries(headers).filter(([k]) => /rate|retry/i.test(k)).map(([k, v]) => `${k}: ${v}`).join('; ');
  });

  await check('finishing one (its button) frees a slot: 2 in flight, and the next start is granted', async () => {
    const first = page.locator('#permits tbody tr').last(); // the oldest
    const id = await first.getAttribute('data-permit');
    const n = await first.getAttribute('data-request');
    await first.locator('button').click();
    await gateResult(`Finished #${n}: its permit is released, 2 in flight.`);
    equal(await heldRows(), 2, 'held requests listed');
    equal(await page.locator(`#permits tbody tr[data-permit="${id}"]`).count(), 0, 'the finished row');
    equal(await text('#in-flight'), '2', 'in flight');
    equal(await text('#gate-status'), '{ in_flight: 2, permits: 2 }', 'gateStatus shown');
    await page.locator('#start').click();
    await gateResult('1 start: 1 held, 0 denied (429)');
    equal(await data('#last-status', 'status'), '200', 'status');
    const headers = await shownHeaders();
    equal(headers['RateLimit'], `"${gateKey}";r=0`, 'RateLimit');
    equal(headers['Retry-After'], undefined, 'Retry-After');
    equal(await heldRows(), 3, 'held requests listed');
    equal(await text('#gate-status'), '{ in_flight: 3, permits: 3 }', 'gateStatus shown');
    return `permit ${id} released`;
  });

  await check('"Finish all" empties the gate: gateStatus 0 in flight, as the object reports', async () => {
    await page.locator('#finish-all').click();
    await waitFor(async () => (await heldRows()) === 0 && (await text('#in-flight')) === '0', 10_000, 'no request in flight');
    equal(await text('#gate-status'), '{ in_flight: 0, permits: 0 }', 'gateStatus shown');
    const gate = (await ask('/api/gate', { key: gateKey })).gate;
    equal(JSON.stringify(gate), '{"in_flight":0,"permits":0}', 'gateStatus of the object');
  });

  await check('"Finish each after 0 s": the page\'s own timer finishes a granted request', async () => {
    await set('#auto-finish', 0);
    const before = await data('#last-status', 'request');
    await page.locator('#start').click();
    await waitFor(async () => (await data('#last-status', 'request')) !== before, 10_000, 'the start\'s answer');
    equal(await data('#last-status', 'status'), '200', 'status');
    // Granted with 1 of 3 in flight, then finished without a click.
    equal((await shownHeaders())['RateLimit'], `"${gateKey}";r=2`, 'RateLimit of the start');
    await waitFor(async () => (await heldRows()) === 0 && (await text('#gate-status')) === '{ in_flight: 0, permits: 0 }',
      10_000, 'the timer to finish it');
    await set('#auto-finish', '');
  });

  await check('durable: max_in_flight 1, 2 starts at once: 1 held and 1 denied; finishing it empties the durable gate', async () => {
    await page.locator('input[name=class][value=durable]').check();
    await set('#max-in-flight', 1);
    await set('#start-count', 2);
    await page.locator('#start-many').click();
    await gateResult('2 starts: 1 held, 1 denied (429)');
    equal(await text('#gate-status'), '{ in_flight: 1, permits: 1 }', 'gateStatus shown');
    equal(JSON.stringify((await ask('/api/gate', { class: 'durable', key: gateKey })).gate), '{"in_flight":1,"permits":1}', 'durable gate');
    equal(JSON.stringify((await ask('/api/gate', { key: gateKey })).gate), '{"in_flight":0,"permits":0}', 'in-memory gate');
    await page.locator('#permits tbody tr button').click();
    await waitFor(async () => (await heldRows()) === 0 && (await text('#in-flight')) === '0', 10_000, 'no request in flight');
    equal(JSON.stringify((await ask('/api/gate', { class: 'durable', key: gateKey })).gate), '{"in_flight":0,"permits":0}', 'durable gate');
  });

  const blockedKey = `blocked-${Date.now()}`;
  /** The block state line, once the page shows `key` blocked (or not). */
  const blockState = (blocked) => waitFor(async () => {
    const state = await page.locator('#block-state').evaluate((p) => ({ text: p.textContent, left: p.dataset.blockedForMs }));
    return (blocked ? Number(state.left) > 0 : state.left === '0') && state;
  }, 10_000, blocked ? 'the key shown blocked' : 'the key shown not blocked');

  await check('"Block this key" for 30 s: the page shows it blocked, the time left, and lists it', async () => {
    await page.locator('input[name=class][value=memory]').check();
    await set('#key', blockedKey);
    await blockState(false);
    await set('#block-seconds', 30);
    await page.locator('#block').click();
    const { text: line, left } = await blockState(true);
    assert(Number(left) > 20_000 && Number(left) <= 30_000, `time left ${left} ms is not within (20, 30] s`);
    assert(/^Key "blocked-\d+" is blocked: \d+\.\d s left\. Every call on it is denied\.$/.test(line), `block state: ${line}`);
    equal(await page.locator('#block-state.blocked').count(), 1, 'shown as blocked');
    const row = page.locator(`#blocked-list tbody tr[data-key="${blockedKey}"]`);
    await row.waitFor({ timeout: 5000 });
    assert(/^\d+\.\d s$/.test(await row.locator('td').nth(1).textContent()), 'time left in the list');
    return line;
  });

  await check('a limit() request on the blocked key: a 429 whose retry is the block\'s time left', async () => {
    await page.locator('input[name=mode][value=policy]').check();
    await set('#cost', 1);
    await set('#max-tokens', 5);
    await set('#refill', 1);
    await page.locator('#send').click();
    await waitFor(async () => (await text('#result')).startsWith('1 request: 0 allowed, 1 denied'), 10_000, 'the denial');
    const row = await page.locator('#log tbody tr').first().evaluate((tr) => [...tr.cells].map((td) => td.textContent));
    equal(row[1], '429', 'status in the log');
    equal(row[2], '5', 'remaining: the block took nothing');
    const ms = Number(row[3].replace(/ ms$/, ''));
    assert(ms > 20_000 && ms <= 30_000, `retry after ${row[3]} is not the block's time left`);
    equal((await shownHeaders())['Retry-After'], String(Math.ceil(ms / 1000)), 'Retry-After');
    return `retry after ${row[3]}`;
  });

  await check('"Unblock": not blocked, gone from the list, and the next limit() is allowed', async () => {
    await page.locator('#unblock').click();
    const { text: line } = await blockState(false);
    equal(line, `Key "${blockedKey}" is not blocked.`, 'block state');
    // The list is redrawn after the state line: wait for it, under load too.
    const row = page.locator(`#blocked-list tbody tr[data-key="${blockedKey}"]`);
    await waitFor(async () => (await row.count()) === 0, 10_000, 'the key gone from the list');
    await page.locator('#send').click();
    await waitFor(async () => (await text('#result')).startsWith('1 request: 1 allowed, 0 denied'), 10_000, 'the allowed request');
    equal(await data('#last-status', 'status'), '200', 'status');
  });

  await check('durable: a block outlives "Evict the object" (saved in storage); unblock ends it', async () => {
    await page.locator('input[name=class][value=durable]').check();
    await blockState(false);
    await set('#block-seconds', 60);
    await page.locator('#block').click();
    await blockState(true);
    await page.locator('#evict').click();
    await waitFor(async () => (await data('#result', 'evicted')) === 'durable', 10_000, 'the eviction');
    const list = await ask('/api/blocked', { class: 'durable', key: blockedKey });
    assert(list.block !== null && list.block.blocked_for_ms > 50_000, `after the eviction: ${JSON.stringify(list.block)}`);
    const { left } = await blockState(true);
    await page.locator('#unblock').click();
    await blockState(false);
    return `${left} ms left after the eviction`;
  });

  await check('the blocked list is bounded: 11 blocked keys show the first 10 and say there are more', async () => {
    await page.locator('input[name=class][value=memory]').check();
    // "!" sorts before the test's other keys: these are the first in key order.
    const keys = Array.from({ length: 11 }, (_, i) => `!bound-${String(i).padStart(2, '0')}`);
    for (const key of keys) await ask('/api/block', { key, seconds: 60 });
    await waitFor(async () => !(await page.locator('#blocked-more').isHidden()), 5000, 'the "more" line');
    const listed = await page.locator('#blocked-list tbody tr').evaluateAll((trs) => trs.map((tr) => tr.dataset.key));
    equal(listed.join(','), keys.slice(0, 10).join(','), 'listed keys');
    equal(await text('#blocked-more'), 'More blocked keys after "!bound-09": the first 10 are listed.', 'the "more" line');
    for (const key of keys) await ask('/api/unblock', { key });
    await waitFor(async () => (await page.locator('#blocked-list tbody tr').count()) === 0, 5000, 'an empty list');
    equal(await page.locator('#blocked-more').isHidden(), true, 'the "more" line hidden');
    return `${listed.length} listed`;
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
