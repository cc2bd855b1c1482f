// The middleware's concurrency limit: the permit a request holds while it runs, given back
// when its response is finished (docs/SPEC.md, 12.8).

/**
 * `response` with a body that calls `release()` once it has been read to the end, or cancelled
 * (the client went away), or failed; a response without a body releases at once. The body
 * flows through an identity stream, so it is not copied by JavaScript; `keepAlive` gets the
 * promise that waits for the end and releases (the request's `waitUntil`).
 */
export function releasedWhenFinished(response, release, keepAlive) {
  if (response.body === null || response.webSocket) {
    // (A WebSocket's life is not the response's: its permit ends with the upgrade.)
    keepAlive(release());
    return response;
  }
  const { readable, writable } = new TransformStream();
  const finished = response.body.pipeTo(writable).catch(() => {});
  keepAlive(finished.then(release));
  return new Response(readable, response);
}

/** Calls `fn` at most once; later calls return the first call's promise. */
export function once(fn) {
  let done;
  return () => (done ??= Promise.resolve().then(fn));
}
