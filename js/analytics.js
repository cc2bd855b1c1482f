// Decision events into Workers Analytics Engine: one data point per decision, in the schema
// the README documents (so its SQL works on any dataset written here).

/** Analytics Engine indexes hold at most 96 bytes. */
const INDEX_BYTES = 96;
const encoder = new TextEncoder();

/**
 * An `onDecision` hook that writes each event to an Analytics Engine dataset: `dataset` is
 * the binding's name in env, the binding itself, or a function of env.
 * index1: the key (cut to 96 bytes; blob7 holds it whole). blob1 outcome (allowed, denied,
 * failed), blob2 mode (enforced, shadow), blob3 where (local, object), blob4 the policies and
 * blob5 the violated ones (comma-separated), blob6 the error's message, blob7 the key, blob8 the policies on
 * trial and blob9 those of them that would have denied (comma-separated).
 * double1 cost, double2 remaining (-1 when failed), double3 retryAfterMs (-1 when none),
 * double4 1 when the request went on to the handler, else 0.
 */
export function analyticsEngineEvents(dataset) {
  if (typeof dataset !== 'string' && typeof dataset !== 'function' && !isDataset(dataset)) {
    throw new TypeError(
      `analyticsEngineEvents needs the name of an Analytics Engine binding, the binding or a function of env, got ${typeof dataset}`,
    );
  }
  return function writeDecision(event, request, env) {
    const target = typeof dataset === 'string' ? env?.[dataset] : typeof dataset === 'function' ? dataset(env) : dataset;
    if (!isDataset(target)) {
      const what = typeof dataset === 'string' ? `env.${dataset}` : 'the dataset of analyticsEngineEvents';
      throw new TypeError(`${what} is not an Analytics Engine dataset (it has no writeDataPoint)`);
    }
    target.writeDataPoint({
      indexes: [indexOf(event.key)],
      blobs: [
        event.outcome,
        event.shadow ? 'shadow' : 'enforced',
        event.local ? 'local' : 'object',
        event.policies.join(','),
        event.violated.join(','),
        event.error === undefined ? '' : String(event.error?.message ?? event.error),
        event.key,
        event.shadowPolicies.join(','),
        event.shadowPolicies.filter((name) => event.violated.includes(name)).join(','),
      ],
      doubles: [event.cost, event.remaining ?? -1, event.retryAfterMs ?? -1, event.passed ? 1 : 0],
    });
  };
}

function isDataset(value) {
  return typeof value === 'object' && value !== null && typeof value.writeDataPoint === 'function';
}

/** `key` cut to at most INDEX_BYTES of UTF-8, at a character boundary. */
function indexOf(key) {
  if (encoder.encode(key).length <= INDEX_BYTES) return key;
  let cut = '';
  for (const char of key) {
    if (encoder.encode(cut + char).length > INDEX_BYTES) break;
    cut += char;
  }
  return cut;
}
