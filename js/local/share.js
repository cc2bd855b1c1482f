// A share as its holder runs it: a token bucket of its own with a part of the bucket's
// capacity and refill, for terms the Durable Object counts (docs/SPEC.md, section 11). The
// rules here are the ones the engine's property test of shares proves the bound with:
// refill from when the answer came, stop a margin before the earliest end of the last term
// known, and between the earliest and the latest end of a term run the smaller of its terms.

const NANOS_PER_MS = 1e6;
// A renewal starts this long before the share's stop (a round trip, with room to spare).
const RENEW_LEAD_MS = 500;

// The sub-bucket refills by the holder's clock, which may run faster than the object's: its
// period is longer by this much, so a clock up to 0.1% fast never refills faster than the
// object counts (docs/SPEC.md, 11.6). Disciplined clocks drift by about 0.001%.
const CLOCK_RATE_ALLOWANCE = 1e-3;

/** `{ capacity, period }`: whole tokens, ns per token on the holder's clock (`null`: no refill). */
function termsOf(wire) {
  const period = wire.refill_every_ns ?? null;
  return {
    capacity: Math.floor(wire.capacity),
    period: period === null ? null : Math.ceil(period * (1 + CLOCK_RATE_ALLOWANCE)),
  };
}

/** The least capacity and the longest period of two terms. */
function smaller(a, b) {
  const period = a.period === null || b.period === null ? null : Math.max(a.period, b.period);
  return { capacity: Math.min(a.capacity, b.capacity), period };
}

export class HeldShare {
  /**
   * From the answer that granted it: `lease` as the object sent it, `sent` and `received`
   * the holder's clock (ms) when the call went out and the answer came, `marginMs` the
   * margin kept before a term's earliest end.
   */
  constructor(lease, sent, received, marginMs) {
    this.id = lease.id;
    this.current = termsOf(lease.share);
    this.next = lease.share.next === null ? null : termsOf(lease.share.next);
    this.termMs = lease.share.term_ms;
    // The current term's length (a share's first term is shorter than the later ones).
    this.currentMs = lease.ttl_ms;
    this.marginMs = marginMs;
    // The current term ends somewhere in [endsFrom, endsBy] (the holder's clock).
    this.endsFrom = sent + lease.ttl_ms;
    this.endsBy = received + lease.ttl_ms;
    // The current term began by then (the object granted it before the answer came).
    this.startsBy = received;
    this.tokens = Math.min(Math.floor(lease.tokens), this.current.capacity);
    this.since = received;
    this.seen = received;
    // Whether the object declined to renew it: it ends with the current term.
    this.last = false;
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
    if (this.tokens >= terms.capacity) {
      this.tokens = terms.capacity;
      this.since = t;
      return;
    }
    if (terms.period === null) return;
    const elapsed = Math.max(0, (t - this.since) * NANOS_PER_MS);
    const k = Math.floor(elapsed / terms.period);
    this.tokens += k;
    this.since += (k * terms.period) / NANOS_PER_MS;
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

  /**
   * Takes in a renewal's answer: the tokens of a top-up; and, if the object surely decided
   * during the current term, the next term, a tighter window for the current term's end,
   * and the capacity and refill the top-up raised the current term to (the faster refill
   * counts from when the answer came). `renewal`: the call reported the demand and asked for
   * the next term.
   */
  renewed(lease, sent, received, renewal) {
    // The object decided between `sent` and `received`: about the current term only if the
    // call went out after that term surely began and the answer came before it can have
    // ended. An earlier call may speak of the term before (this holder may have moved on
    // while it was in flight), a later answer of the term after. (Judged before the share
    // is brought to `received`, which may start its next term.)
    const within = sent >= this.startsBy && received < this.endsFrom;
    if (!this.advance(received)) return;
    if (within) {
      const raised = termsOf(lease.share);
      const held = this.current.period;
      const period = held === null ? raised.period : raised.period === null ? held : Math.min(held, raised.period);
      this.#rescale(held, period, received);
      this.current = { capacity: Math.max(this.current.capacity, raised.capacity), period };
      if (this.next === null && lease.share.next !== null) this.next = termsOf(lease.share.next);
      this.endsFrom = Math.max(this.endsFrom, sent + lease.ttl_ms);
      this.endsBy = Math.min(this.endsBy, received + lease.ttl_ms);
    }
    // A renewal answered without a next term: the share ends with this one.
    if (within && renewal && lease.share.next === null) this.last = true;
    this.add(lease.tokens, received);
  }

  /**
   * Whether it is time to renew at `t`: no next term yet, and the share's stop (a margin
   * before the current term's earliest end) is RENEW_LEAD_MS away, or half the time the term
   * can be spent has passed, whichever is later. Renewing late keeps short the time a next
   * term is out: an isolate evicted then holds it idle until it ends.
   */
  dueAt(t) {
    if (this.last) return false;
    const stop = this.endsFrom - this.marginMs;
    const lead = Math.min(RENEW_LEAD_MS, Math.max(0, this.currentMs - this.marginMs) / 2);
    return this.next === null && t >= stop - lead;
  }

  /**
   * Milliseconds from `t` until the bucket holds `cost` under the terms in force now, or until
   * those terms change (whichever is first): when this holder could next decide otherwise.
   */
  waitMs(cost, t) {
    const now = this.#termsAt(Math.max(t, this.seen));
    if (now === null) return 0;
    const { terms, change } = now;
    if (this.tokens >= cost) return 0;
    if (terms.period === null || cost > terms.capacity) return Math.max(1, Math.ceil(change - t));
    const ready = this.since + ((cost - this.tokens) * terms.period) / NANOS_PER_MS;
    return Math.max(1, Math.ceil(Math.min(ready, change) - t));
  }
}
