// A share as its holder runs it: a token bucket with part of the bucket's capacity and refill, for terms
// the object counts (docs/SPEC.md, section 11). As the engine's property test: refill from the answer, stop
// a margin before the last known term's earliest end, between a term's two possible ends run the smaller.

const NANOS_PER_MS = 1e6;
// A renewal starts this long before the share's stop (a round trip, with room to spare).
const RENEW_LEAD_MS = 500;
// Periods are 0.1% longer: a holder's clock that fast never refills faster than the object counts
// (docs/SPEC.md, 11.6).
const SLOWER = 1 + 1e-3;

/** `{ capacity, period }`: whole tokens, ns per token on the holder's clock (`null`: no refill). */
function termsOf(wire) {
  const period = wire.refill_every_ns ?? null;
  return { capacity: Math.floor(wire.capacity), period: period === null ? null : Math.ceil(period * SLOWER) };
}

/** The least capacity and the longest period of two terms. */
function smaller(a, b) {
  const period = a.period === null || b.period === null ? null : Math.max(a.period, b.period);
  return { capacity: Math.min(a.capacity, b.capacity), period };
}

export class HeldShare {
  /** From the granting answer's `lease`, `sent` and `received` on the holder's clock (ms), and `marginMs`. */
  constructor(lease, sent, received, marginMs) {
    this.id = lease.id;
    this.current = termsOf(lease.share);
    this.next = lease.share.next === null ? null : termsOf(lease.share.next);
    this.termMs = lease.share.term_ms;
    this.currentMs = lease.ttl_ms; // the current term's length (a first term is shorter)
    this.marginMs = marginMs;
    // The current term ends somewhere in [endsFrom, endsBy], and began by `startsBy`.
    this.endsFrom = sent + lease.ttl_ms;
    this.endsBy = received + lease.ttl_ms;
    this.startsBy = received;
    this.tokens = Math.min(Math.floor(lease.tokens), this.current.capacity);
    this.since = received;
    this.seen = received;
    this.last = false; // the object declined to renew it: it ends with the current term
  }

  /** The terms in force at `t` and when they next change; null when the share is over. */
  #termsAt(t) {
    const stop = this.endsFrom - this.marginMs;
    if (t < stop) return { terms: this.current, change: stop };
    if (this.next === null) return null;
    if (t < this.endsBy) return { terms: smaller(this.current, this.next), change: this.endsBy };
    return { terms: this.next, change: this.endsBy + this.termMs - this.marginMs };
  }

  /** Brings the bucket to `t` through every change of terms; false when the share is over. */
  advance(t) {
    t = Math.max(t, this.seen);
    for (;;) {
      const now = this.#termsAt(this.seen);
      if (now === null) return false;
      const until = Math.min(now.change, t);
      this.#refill(now.terms, until);
      this.seen = until;
      if (now.change > t) return true;
      if (this.next !== null && until >= this.endsBy) {
        // The next term has begun for sure: it is the current one now.
        this.current = this.next;
        this.next = null;
        this.startsBy = this.endsBy;
        this.endsFrom += this.termMs;
        this.endsBy += this.termMs;
        this.currentMs = this.termMs;
      }
      const after = this.#termsAt(until);
      if (after === null) return false;
      this.#rescale(now.terms.period, after.terms.period, until);
      this.tokens = Math.min(this.tokens, after.terms.capacity);
    }
  }

  #refill(terms, t) {
    if (this.tokens < terms.capacity && terms.period !== null) {
      const elapsed = Math.max(0, (t - this.since) * NANOS_PER_MS);
      const k = Math.floor(elapsed / terms.period);
      this.tokens += k;
      this.since += (k * terms.period) / NANOS_PER_MS;
    }
    if (this.tokens >= terms.capacity) {
      this.tokens = terms.capacity;
      this.since = t;
    }
  }

  /** Progress towards the next token, counted in a new period: scaled down, never gained. */
  #rescale(old, period, at) {
    if (old === period) return;
    const elapsed = Math.max(0, (at - this.since) * NANOS_PER_MS);
    const kept = old === null || period === null ? 0 : Math.floor((elapsed * period) / old);
    this.since = at - kept / NANOS_PER_MS;
  }

  /** Takes `cost` whole tokens at `t` if the bucket holds them. */
  take(cost, t) {
    if (!this.advance(t) || this.tokens < cost) return false;
    this.tokens -= cost;
    return true;
  }

  /** The capacity in force at `t` (0 once the share is over). */
  capacityAt(t) {
    return this.#termsAt(Math.max(t, this.seen))?.terms.capacity ?? 0;
  }

  /** Adds tokens the object moved into the share, up to its capacity. */
  add(tokens, t) {
    if (this.advance(t)) this.tokens = Math.min(this.tokens + Math.floor(tokens), this.capacityAt(t));
  }

  /** Takes in a renewal's answer: its tokens, and its terms if the object surely decided in this term. */
  renewed(lease, sent, received, renewal) {
    // Only a call sent after the current term surely began and answered before it can have ended
    // speaks of it; judged before advancing to `received`, which may start the next term.
    const within = sent >= this.startsBy && received < this.endsFrom;
    if (!this.advance(received)) return;
    if (within) {
      const raised = termsOf(lease.share);
      const held = this.current.period;
      const period = held === null ? raised.period : raised.period === null ? held : Math.min(held, raised.period);
      this.#rescale(held, period, received);
      this.current = { capacity: Math.max(this.current.capacity, raised.capacity), period };
      if (this.next === null && lease.share.next !== null) {
        this.next = termsOf(lease.share.next);
        this.termMs = lease.share.term_ms; // the next term's length
      }
      this.endsFrom = Math.max(this.endsFrom, sent + lease.ttl_ms);
      this.endsBy = Math.min(this.endsBy, received + lease.ttl_ms);
    }
    // A renewal answered without a next term: the share ends with this one.
    if (within && renewal && lease.share.next === null) this.last = true;
    this.add(lease.tokens, received);
  }

  /** Whether a top-up at `t` may renew too: no next term yet, and past the middle of the current term. */
  renewsAt(t) {
    return !this.last && this.next === null && t >= this.endsFrom - this.marginMs - this.currentMs / 2;
  }

  /** Whether to renew at `t`: no next term yet, and the stop RENEW_LEAD_MS (or half the term) away. */
  dueAt(t) {
    // Late: a next term is held idle by a holder evicted meanwhile until it ends.
    if (this.last) return false;
    const stop = this.endsFrom - this.marginMs;
    const lead = Math.min(RENEW_LEAD_MS, Math.max(0, this.currentMs - this.marginMs) / 2);
    return this.next === null && t >= stop - lead;
  }

  /** Ms from `t` until the bucket holds `cost` under the terms in force, or until they change. */
  waitMs(cost, t) {
    const now = this.#termsAt(Math.max(t, this.seen));
    if (now === null || this.tokens >= cost) return 0;
    const { terms, change } = now;
    if (terms.period === null || cost > terms.capacity) return Math.max(1, Math.ceil(change - t));
    const ready = this.since + ((cost - this.tokens) * terms.period) / NANOS_PER_MS;
    return Math.max(1, Math.ceil(Math.min(ready, change) - t));
  }
}
