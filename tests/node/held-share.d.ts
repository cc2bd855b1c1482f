// The types of js/local/share.js (the shim's share bucket, which ships without them), for
// held-share.test.ts; vitest.config.ts maps the name to the file.
declare module '#held-share' {
  /** A share as the object sends it (`lease` of a `limitLeased` answer with a share). */
  export interface ShareLease {
    id: number;
    tokens: number;
    ttl_ms: number;
    share: {
      capacity: number;
      refill_every_ns: number | null;
      term_ms: number;
      next: { capacity: number; refill_every_ns: number | null } | null;
    };
  }
  export class HeldShare {
    constructor(lease: ShareLease, sent: number, received: number, marginMs: number);
    tokens: number;
    advance(t: number): boolean;
    take(cost: number, t: number): boolean;
    capacityAt(t: number): number;
    dueAt(t: number): boolean;
    renewed(lease: ShareLease, sent: number, received: number): void;
  }
}
