// The load generator of the workerd benchmarks (run.mjs, local.mjs): wrk (installed from
// Debian when missing, as root), else bench/e2e/load.mjs in Node. Both print one line
// `LOAD_RESULT key=value …`.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { get } from '../../tests/support/net.mjs';
import { exited, track } from '../../tests/support/workerd.mjs';

const HERE = new URL('.', import.meta.url).pathname;

/** The knobs the workerd benchmarks share, from the environment (seconds, counts). */
export const KNOBS = {
  duration: Number(process.env.DURATION ?? 10),
  warmup: Number(process.env.WARMUP ?? 2),
  rounds: Number(process.env.ROUNDS ?? 1),
  connections: Number(process.env.CONNECTIONS ?? 32),
  threads: Number(process.env.WRK_THREADS ?? 1),
};
const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

/** `{ name, version }` of the generator to use: `wanted` ('wrk' or 'node') when it can run. */
function chooseLoadGenerator(wanted, log) {
  let name = wanted;
  if (name === 'wrk' && !has('wrk')) {
    if (process.getuid?.() === 0 && has('apt-get')) {
      log('installing wrk with apt-get');
      const apt = (...args) =>
        spawnSync('apt-get', ['-qq', ...args], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
          .status === 0;
      if (!apt('install', '-y', 'wrk')) apt('update') && apt('install', '-y', 'wrk');
    }
    if (!has('wrk')) {
      log('wrk unavailable: falling back to the Node load generator');
      name = 'node';
    }
  }
  if (name === 'wrk') {
    const v = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
    return { name, version: `${v.stdout}${v.stderr}`.split('\n')[0].split(/\s+/).slice(0, 2).join(' ') };
  }
  if (name === 'node') return { name, version: `node ${process.version} (bench/e2e/load.mjs)` };
  throw new Error('LOADGEN must be wrk or node');
}

/**
 * Runs `generator` against `base` + `path` for `seconds` on `connections` connections, as
 * `clients` simulated clients, with run tag `tag`; its output goes to `outFile` and is
 * returned. Throws when it fails.
 */
async function runLoadGenerator({ generator, base, path, seconds, connections, clients, threads, tag, outFile }) {
  const out = openSync(outFile, 'w');
  const child =
    generator.name === 'wrk'
      ? spawn(
          'wrk',
          ['-t', String(threads), '-c', String(connections), '-d', `${seconds}s`, '--latency', '--timeout', '10s', '-s', join(HERE, 'load.lua'), base],
          { stdio: ['ignore', out, out], env: { ...process.env, E2E_VARIANT: path, E2E_CLIENTS: String(clients), E2E_TAG: tag } },
        )
      : spawn(process.execPath, [join(HERE, 'load.mjs'), base, path, String(clients), String(connections), String(seconds), tag], {
          stdio: ['ignore', out, out],
        });
  closeSync(out); // the child has its own copy
  track(child);
  const { code, signal } = await exited(child);
  const text = readFileSync(outFile, 'utf8');
  if (code !== 0) throw new Error(`load generator failed (${code ?? signal}):\n${text}`);
  return text;
}

/** The `LOAD_RESULT` line of a generator's output as numbers, or null. */
export function parseLoadResult(text) {
  const line = text.split('\n').find((l) => l.startsWith('LOAD_RESULT '));
  if (!line) return null;
  return Object.fromEntries(line.split(/\s+/).slice(1).filter(Boolean).map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
}

/** `log` prefixed with the script's name, and `fail`, which logs and ends the process. */
export function scriptLog(name) {
  const log = (...args) => console.error(`[${name}]`, ...args);
  const fail = (message) => {
    log(message);
    process.exit(1);
  };
  return { log, fail };
}

/**
 * The load of one benchmark against the workerd at `base`: the generator LOADGEN names (wrk
 * by default), and `run(path, seconds, outFile, tag)`, which runs it with the KNOBS'
 * connections and threads as `clients` simulated clients and returns its output. Every
 * failure ends the process through `fail`.
 */
export function loadRunner({ base, clients, log, fail }) {
  let generator;
  try {
    generator = chooseLoadGenerator(process.env.LOADGEN ?? 'wrk', log);
  } catch (error) {
    fail(error.message);
  }
  const { connections, threads } = KNOBS;
  const run = async (path, seconds, outFile, tag) => {
    try {
      return await runLoadGenerator({ generator, base, path, seconds, connections, clients, threads, tag, outFile });
    } catch (error) {
      fail(error.message);
    }
  };
  return { version: generator.version, run };
}

/** Fails unless each of `paths` answers 'ok' with 200 to one request with `query`. */
export async function smokeTest({ base, paths, query, workerd, fail }) {
  for (const path of paths) {
    let res;
    try {
      res = await get(base, `/${path}?${query}`);
    } catch (error) {
      fail(`request to /${path} failed: ${error.message}`);
    }
    if (res.status !== 200 || res.text !== 'ok') {
      fail(`/${path} answered '${res.text.slice(0, 300)} ${res.status}' instead of 'ok 200'\n${workerd.log()}`);
    }
  }
}
