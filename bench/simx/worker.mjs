// A worker thread of `run.mjs --jobs N`: loads the package once, then runs the cells it is sent,
// one at a time (the parent sends the next only after the answer), and answers each with its
// figures. A cell's run does not depend on the thread it runs in.
import { parentPort, workerData } from 'node:worker_threads';
import { loadPackage } from './package.mjs';
import { simulateCell } from './simulate.mjs';

const lib = await loadPackage(workerData.pkg);
parentPort.on('message', async ({ index, cell }) => {
  try {
    const t0 = performance.now();
    const result = await simulateCell(cell, lib);
    result.wallSeconds = (performance.now() - t0) / 1000;
    parentPort.postMessage({ index, result });
  } catch (error) {
    parentPort.postMessage({ index, error: String(error?.stack ?? error) });
  }
});
parentPort.postMessage({ ready: true });
