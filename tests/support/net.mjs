// Shared by the test layers that start servers of their own (tests/process, tests/browser) and
// by the workerd benchmarks (bench/e2e, through tests/support/workerd.mjs).
import http from 'node:http';
import { createServer } from 'node:net';

/** A port nothing listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * GET `base + path` on a new connection (no keep-alive: a pooled socket would keep the process
 * alive, and must not outlive a server that is restarted). Returns { status, text, json } (json
 * undefined unless the body is JSON).
 */
export function get(base, path, { timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get(base + path, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('error', reject);
      res.on('end', () => {
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, text, json });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer to ${path} in ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/** A query string from an object (undefined values left out). */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) search.set(name, String(value));
  }
  return search.toString();
}
