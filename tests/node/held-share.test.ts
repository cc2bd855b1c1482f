// The holder's rules for a share (docs/SPEC.md, 11.6) on js/local/share.js alone: answers that
// arrive while the holder moves from one term to the next. Times are the holder's clock (ms);
// the object's decisions are written as the answers it sends.
import { describe, expect, it } from 'vitest';
import { HeldShare, type ShareLease } from '#held-share';

const MARGIN_MS = 1_000;
/** 4 tokens, one every 20 ms: the terms the object grants here. */
const FOUR = { capacity: 4, refill_every_ns: 20_000_000 };

/** How many single tokens the share admits from `from` to `to`, asked every millisecond. */
function admitted(share: HeldShare, from: number, to: number): number {
  let count = 0;
  for (let t = from; t < to; t += 1) if (share.take(1, t)) count += 1;
  return count;
}

describe('HeldShare', () => {
  // A share granted at 0-50 ms for 2 s, renewed at 300-350 ms (the object decided at 325 ms:
  // its first term ends at 2,000 ms by the holder's clock, the next one runs 5 s more).
  function renewedShare(): HeldShare {
    const grant: ShareLease = { id: 7, tokens: 0, ttl_ms: 2_000, share: { ...FOUR, term_ms: 5_000, next: null } };
    const share = new HeldShare(grant, 0, 50, MARGIN_MS);
    const renewal: ShareLease = { ...grant, ttl_ms: 1_675, share: { ...FOUR, term_ms: 5_000, next: FOUR } };
    share.renewed(renewal, 300, 350);
    return share;
  }

  /** A top-up's answer: one token moved, the current term raised to 7 tokens, one every 5 ms. */
  const topUp = (ttlMs: number): ShareLease => ({
    id: 7,
    tokens: 1,
    ttl_ms: ttlMs,
    share: { capacity: 7, refill_every_ns: 5_000_000, term_ms: 5_000, next: FOUR },
  });

  it('runs a next term for the length its renewal named, not the length the grant named', () => {
    // Granted at 0-50 ms for 2 s (a term of its terms would last 1 s); renewed at 300-350 ms
    // with a next term of 3 s: the next term ends 3 s after the first, from 5,000 ms, and the
    // holder stops spending it a margin before that earliest end (by the grant's 1 s: 2,000 ms).
    const grant: ShareLease = { id: 7, tokens: 0, ttl_ms: 2_000, share: { ...FOUR, term_ms: 1_000, next: null } };
    const share = new HeldShare(grant, 0, 50, MARGIN_MS);
    share.renewed({ ...grant, ttl_ms: 1_675, share: { ...FOUR, term_ms: 3_000, next: FOUR } }, 300, 350);
    expect(share.advance(3_999)).toBe(true);
    expect(share.capacityAt(3_999)).toBe(4);
    expect(share.advance(4_000)).toBe(false);
  });

  it('ignores the raised terms of a top-up decided in the term it has left meanwhile', () => {
    const share = renewedShare();
    // A top-up goes out at 1,990 ms; the object decides at 1,999 ms, 1 ms before the first
    // term ends (ttl 1 ms).
    // Before the answer comes (at 2,100 ms), the holder has moved on to the next term.
    share.advance(2_030);
    share.renewed(topUp(1), 1_990, 2_100);
    // The answer spoke of the term that has ended: the next term's 4 tokens and 50/s stay.
    expect(share.capacityAt(2_100)).toBe(4);
    expect(admitted(share, 2_100, 3_100)).toBeLessThanOrEqual(4 + 1_000 / 20);
  });

  it('takes the raised terms of a top-up decided in its current term', () => {
    const share = renewedShare();
    // Out at 600 ms and back at 700 ms: the object decided in the first term (which it says
    // ends 1,350 ms after its decision).
    share.renewed(topUp(1_350), 600, 700);
    expect(share.capacityAt(700)).toBe(7);
    expect(admitted(share, 700, 900)).toBeGreaterThan(4 + 200 / 20);
  });

  it('a holder whose clock runs 0.1% fast never refills faster than the object counts', () => {
    // One token every 20 ms by the object's clock, for a term longer than the test (room for
    // 2, so a token waiting for the next millisecond's request stops no refill).
    const lease: ShareLease = {
      id: 9,
      tokens: 0,
      ttl_ms: 100_000,
      share: { capacity: 2, refill_every_ns: 20_000_000, term_ms: 5_000, next: null },
    };
    const share = new HeldShare(lease, 0, 0, MARGIN_MS);
    // The holder's clock reads 1,001 ms for every 1,000 ms of true time.
    let taken = 0;
    for (let holder = 0; holder < 90_000; holder += 1) {
      if (share.take(1, holder)) taken += 1;
      // What the object counts as refilled into the share by this true moment (integers: exact).
      expect(taken).toBeLessThanOrEqual(Math.floor((holder * 1_000) / (1_001 * 20)));
    }
    expect(taken).toBe(Math.floor(89_999 / 20.02)); // and it still serves every token it may
  });

  it('renews 500 ms before its stop: late, so an evicted holder rarely has a next term out', () => {
    const share = renewedShare();
    // In its second term (5 s, ending from 7,000 ms): the stop is a margin before, at 6,000 ms.
    share.advance(2_100);
    expect(share.dueAt(5_499)).toBe(false);
    expect(share.dueAt(5_500)).toBe(true);
  });
});
