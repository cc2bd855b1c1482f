// The event queue: a binary min-heap ordered by (time, sequence number). The sequence number
// makes events at the same time run in the order they were scheduled, so a run never depends
// on how the heap happens to break ties.

export class EventQueue {
  #items = [];
  #nextSeq = 0;

  get size() {
    return this.#items.length;
  }

  /** Schedules `event` (an object with a numeric `t`) and returns it. */
  push(event) {
    event.seq = this.#nextSeq++;
    const items = this.#items;
    let i = items.length;
    items.push(event);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(event, items[parent])) break;
      items[i] = items[parent];
      i = parent;
    }
    items[i] = event;
    return event;
  }

  pop() {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0) {
      let i = 0;
      const n = items.length;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= n) break;
        const right = left + 1;
        const child = right < n && before(items[right], items[left]) ? right : left;
        if (!before(items[child], last)) break;
        items[i] = items[child];
        i = child;
      }
      items[i] = last;
    }
    return top;
  }
}

const before = (a, b) => a.t < b.t || (a.t === b.t && a.seq < b.seq);
