// The event queue: a binary min-heap ordered by (time, sequence number). The sequence number
// makes events at the same time run in the order they were scheduled, so a run never depends
// on how the heap happens to break ties.
//
// The heap holds numbers only, in typed arrays: each entry's time, sequence number and slot.
// The slot (reused once its event has run) holds the event's callback and drain flag, written
// once when it is scheduled. A sift then compares and moves numbers in contiguous memory, and
// never moves a reference (each such store into a long-lived array costs the garbage collector
// a remembered-set entry). With a few hundred thousand calls in flight that matters.

export class EventQueue {
  #times = new Float64Array(1024);
  #seqs = new Float64Array(1024);
  #slots = new Int32Array(1024);
  #fires = new Array(1024).fill(null);
  #drains = new Uint8Array(1024);
  #free = new Int32Array(1024); // a stack of unused slots
  #freeCount = 1024;
  #size = 0;
  #nextSeq = 0;
  /** The last popped event's time, callback and drain flag. */
  t = 0;
  fire = null;
  drain = false;

  constructor() {
    for (let k = 0; k < 1024; k++) this.#free[k] = 1023 - k;
  }

  get size() {
    return this.#size;
  }

  /** Schedules `fire` at time `t`; `drain`: whether the loop waits for microtasks after it. */
  push(t, fire, drain) {
    if (this.#size === this.#times.length) this.#grow();
    const slot = this.#free[--this.#freeCount];
    this.#fires[slot] = fire;
    this.#drains[slot] = drain ? 1 : 0;
    const times = this.#times;
    const seqs = this.#seqs;
    const slots = this.#slots;
    const seq = this.#nextSeq++;
    let i = this.#size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pt = times[parent];
      if (pt < t || (pt === t && seqs[parent] < seq)) break;
      times[i] = pt;
      seqs[i] = seqs[parent];
      slots[i] = slots[parent];
      i = parent;
    }
    times[i] = t;
    seqs[i] = seq;
    slots[i] = slot;
  }

  /** Removes the earliest event; its time, callback and drain flag are then `t`, `fire`, `drain`. */
  pop() {
    const times = this.#times;
    const seqs = this.#seqs;
    const slots = this.#slots;
    const top = slots[0];
    this.t = times[0];
    this.fire = this.#fires[top];
    this.drain = this.#drains[top] === 1;
    this.#fires[top] = null;
    this.#free[this.#freeCount++] = top;
    const n = --this.#size;
    if (n === 0) return;
    const lastT = times[n];
    const lastSeq = seqs[n];
    const lastSlot = slots[n];
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      let child = left;
      if (right < n) {
        const rt = times[right];
        const lt = times[left];
        if (rt < lt || (rt === lt && seqs[right] < seqs[left])) child = right;
      }
      const ct = times[child];
      if (lastT < ct || (lastT === ct && lastSeq < seqs[child])) break;
      times[i] = ct;
      seqs[i] = seqs[child];
      slots[i] = slots[child];
      i = child;
    }
    times[i] = lastT;
    seqs[i] = lastSeq;
    slots[i] = lastSlot;
  }

  #grow() {
    const old = this.#times.length;
    const capacity = old * 2;
    const widen = (Type, array) => {
      const wider = new Type(capacity);
      wider.set(array);
      return wider;
    };
    this.#times = widen(Float64Array, this.#times);
    this.#seqs = widen(Float64Array, this.#seqs);
    this.#slots = widen(Int32Array, this.#slots);
    this.#drains = widen(Uint8Array, this.#drains);
    for (let k = old; k < capacity; k++) this.#fires.push(null);
    // Every slot is in use when the heap is full: the new ones are all free.
    const free = new Int32Array(capacity);
    for (let k = 0; k < old; k++) free[k] = capacity - 1 - k;
    this.#free = free;
    this.#freeCount = old;
  }
}
