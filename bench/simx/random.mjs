// Seeded randomness for the simulator. Every random choice of a run comes from streams derived
// from one seed and the name of what they drive, so a run is reproduced by its seed, and a cell
// draws the same arrivals whichever other cells (or modes) run beside it.

/** splitmix32: a tiny generator with good mixing; uniform in [0, 1) with 32 bits. */
export function splitmix32(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) | 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    return (z >>> 0) / 4294967296;
  };
}

/** FNV-1a over the UTF-16 units of `text`, then mixed: a 32-bit seed for a named stream. */
function hash32(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  return h >>> 0;
}

/** The stream `name` of run `seed`: independent of every other name. */
export const stream = (seed, name) => splitmix32(hash32(`${seed}\u0000${name}`));

/** An exponential gap with mean `mean` (any unit), for Poisson processes. */
export const exponential = (random, mean) => -Math.log(1 - random()) * mean;
