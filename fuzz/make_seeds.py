#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/engine/ in the input format of fuzz_targets/engine.rs
(described in fuzz/README.md). Each seed is a short scenario the fuzzer mutates from.

    python3 fuzz/make_seeds.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "engine")

# Alphabet indexes (key tags below 0xE0).
EMPTY, A, B, USER, NUL, LONE, CAP_A, LONG = range(8)

# Op codes (the first byte of an op, taken modulo 16).
CONSUME, CHECK, STATUS, RESET, SET_OPTIONS, LIMIT, LIMIT_ALL, ADVANCE_MS, CLOCK = (
    0, 4, 5, 6, 7, 8, 10, 11, 14)

# Indexes into SPECIAL (tags 192..=223).
SPECIAL = {
    "nan": 0, "-nan": 1, "inf": 2, "-inf": 3, "-0": 4, "-1": 5, "-1e-9": 6, "1e-9": 7,
    "1e-12": 8, "0.1": 9, "1/3": 10, "0.001": 11, "max_safe": 12, "max_safe+1": 13,
    "cap_billionths": 14, "cap_billionths+1": 15, "cap_billionths+0.5": 16, "1e300": 17,
    "-1e300": 18, "f64_max": 19, "min_positive": 20, "denormal": 21, "1e21": 22,
    "u64max/1e9": 23, "i64max/1e9": 24, "1e-300": 25, "1e10": 26, "0.9999999999": 27,
    "1.0000000001": 28, "2^63": 29, "2^52+0.5": 30, "1e-6": 31,
}


def key(k):
    """An alphabet index, or bytes for an arbitrary key."""
    if isinstance(k, int):
        return bytes([k])
    return bytes([0xE0, len(k)]) + k


def num(x):
    """A number: whole 0..=15, eighths below 8, a named special, or raw bits."""
    if isinstance(x, str):
        return bytes([192 + SPECIAL[x]])
    if isinstance(x, int) and 0 <= x <= 15:
        return bytes([x])
    if isinstance(x, float) and 0 <= x < 8 and (x * 8).is_integer():
        return bytes([128 + int(x * 8)])
    return bytes([0xFF]) + struct.pack("<d", float(x))


def patch(max_tokens=None, refill=None):
    flags = (1 if max_tokens is not None else 0) | (2 if refill is not None else 0)
    out = bytes([flags])
    if max_tokens is not None:
        out += num(max_tokens)
    if refill is not None:
        out += num(refill)
    return out


def policy(p=None):
    return bytes([0]) if p is None else bytes([1]) + p


def consume(k, cost=1):
    return bytes([CONSUME]) + key(k) + num(cost)


def check(k, cost=1):
    return bytes([CHECK]) + key(k) + num(cost)


def status(k):
    return bytes([STATUS]) + key(k)


def reset(k):
    return bytes([RESET]) + key(k)


def set_options(**kw):
    return bytes([SET_OPTIONS]) + patch(**kw)


def limit(k, cost=1, p=None):
    return bytes([LIMIT]) + key(k) + num(cost) + policy(p)


def limit_all(*members):
    out = bytes([LIMIT_ALL, len(members)])
    for k, cost, p in members:
        out += key(k) + num(cost) + policy(p)
    return out


def advance_ms(ms):
    return bytes([ADVANCE_MS]) + struct.pack("<H", ms)


def clock(kind, *payload):
    """kind: 0 +ms u16, 1 +ns u32, 2 +ns u64, 3 -ms u16, 4 -ns u64, 5 to 0, 6 to u64::MAX,
    7 to from_millis(number), 8 to nanos u64, 9 +seconds u8."""
    out = bytes([CLOCK, kind])
    for p in payload:
        out += p
    return out


def acquire(k, cost=1, max_in_flight=1, ttl_seconds=None):
    """A gate op (op 15, its sub-op 7): a permit of `cost` under `max_in_flight`; the time to
    live in hundredths of a second, or the default."""
    ttl = bytes([0]) if ttl_seconds is None else bytes([2]) + struct.pack("<H", round(ttl_seconds * 100))
    return bytes([15, 7]) + key(k) + bytes([1]) + num(cost) + num(max_in_flight) + ttl


def block(k, ms, cost=1):
    """A block of `ms` on a copy of the limiter, then a call of `cost` (op 15, sub-op 7, 3)."""
    return bytes([15, 7]) + key(k) + bytes([3]) + struct.pack("<H", ms) + num(cost)


def release(k, pick):
    """A gate op releasing a granted id (picked by `pick`), or a made-up one when pick % 4 == 0."""
    return bytes([15, 7]) + key(k) + bytes([0]) + struct.pack("<Q", pick)


def seed(n=1):
    return struct.pack("<Q", n)


SEEDS = {
    "drain_and_refill": seed() + set_options(max_tokens=3, refill=1)
    + consume(A) * 4 + advance_ms(999) + consume(A) + advance_ms(1) + consume(A) * 2
    + advance_ms(2500) + consume(A, 3) + status(A),
    "defaults_burst": seed(2) + consume(B) * 11 + advance_ms(10000) + consume(B) * 2 + status(B),
    "fractional_costs": seed(3) + set_options(max_tokens=2, refill=0.5)
    + consume(USER, "0.1") * 5 + consume(USER, "1/3") * 3 + consume(USER, 1.5)
    + consume(USER, "1e-9") + advance_ms(250) + consume(USER, "0.9999999999") + status(USER),
    "invalid_costs": seed(4) + consume(A, "nan") + consume(A, "-nan") + consume(A, "inf")
    + consume(A, "-inf") + consume(A, "-1") + consume(A, "-1e-9") + consume(A, "-0")
    + consume(A, "1e300") + check(A, "-inf") + limit(A, "nan") + consume(A, 11) + status(A),
    "invalid_options": seed(5) + set_options(max_tokens=0) + set_options(max_tokens=1.5)
    + set_options(max_tokens="max_safe+1") + set_options(max_tokens="nan")
    + set_options(refill=0) + set_options(refill="-0") + set_options(refill="inf")
    + set_options(max_tokens=5, refill="-1") + set_options(max_tokens="-1", refill=1)
    + consume(A) + set_options(max_tokens="inf") + status(A),
    "set_options_grow_shrink": seed(6) + consume(A, 5) + consume(B, 10)
    + set_options(max_tokens=15) + status(A) + status(B)
    + set_options(max_tokens=3) + status(A) + set_options(refill=60) + consume(A)
    + set_options(refill=0.001) + advance_ms(2) + status(A),
    "huge_capacity": seed(7) + set_options(max_tokens="max_safe", refill="1e-9")
    + consume(A, "1e10") + consume(A, "0.1") + consume(A, "cap_billionths+0.5")
    + set_options(max_tokens="cap_billionths") + status(A)
    + set_options(max_tokens="cap_billionths+1") + consume(A, "1e10") + status(A)
    + consume(A, "max_safe") + consume(A, "max_safe+1"),
    "tiny_and_huge_intervals": seed(8) + set_options(max_tokens=1, refill="1e-300")
    + consume(A) * 3 + set_options(refill="1e21") + consume(B) * 2
    + clock(6) + consume(B) + status(B) + set_options(refill="1e-6") + consume(A) * 2,
    "clock_back_and_forth": seed(9) + consume(A, 10) + clock(3, struct.pack("<H", 5000))
    + consume(A) + clock(0, struct.pack("<H", 20000)) + consume(A) + clock(5) + status(A)
    + consume(A) + clock(6) + consume(A, 10) + clock(4, struct.pack("<Q", 2**63))
    + status(A) + consume(A),
    "clock_from_millis": seed(10) + clock(7, num("nan")) + consume(A) + clock(7, num("inf"))
    + consume(A) + clock(7, num("-1")) + clock(7, num(1.8e12)) + consume(A, 9)
    + clock(7, num(1.8e12 + 0.5)) + clock(8, struct.pack("<Q", 2**64 - 1)) + status(A),
    "big_jumps": seed(11) + set_options(refill="1e10") + consume(A, 10)
    + clock(2, struct.pack("<Q", 2**62)) + consume(A) + clock(1, struct.pack("<I", 2**32 - 1))
    + clock(9, b"\xff") + status(A) + clock(2, struct.pack("<Q", 2**64 - 1)) + consume(A),
    "reset": seed(12) + consume(A, 10) + reset(A) + status(A) + limit(A, 1, patch(max_tokens=2))
    + reset(A) + status(A) + reset(B) + consume(B),
    "limit_policies": seed(13) + limit(A, 1, patch(max_tokens=2, refill=60))
    + limit(A, 1) + limit(A, 1) + limit(A, 1, patch(max_tokens=5))
    + limit(A, 3, patch(refill=0.25)) + advance_ms(300) + limit(A, 1) + status(A)
    + consume(A) + limit(A, 10, patch(max_tokens=1)) + limit(A, 0, patch(max_tokens=1)),
    "limit_invalid_policies": seed(14) + limit(A, 1, patch(max_tokens=0))
    + limit(A, 1, patch(refill="nan")) + limit(A, 1, patch(max_tokens="max_safe+1"))
    + limit(A, 1, patch()) + limit(A, 1, patch(max_tokens=2.5)) + limit(A, "-1", patch())
    + status(A),
    "limit_remembered_policy_retry": seed(15) + set_options(max_tokens=3, refill=1)
    + limit(B, 5, patch(max_tokens=8, refill=10)) + limit(B, 5) + advance_ms(1000)
    + limit(B, 5) + advance_ms(60000) + limit(B, 5) + consume(B, 3),
    "limit_all_allowed": seed(16) + limit_all((A, 1, None), (B, 2, None), (USER, 3, patch(max_tokens=5)))
    + limit_all((A, 1, None), (B, 1, patch(max_tokens=2))) + status(A) + status(B),
    "limit_all_denied": seed(17) + consume(B, 9)
    + limit_all((A, 1, None), (B, 2, None), (USER, 1, patch(max_tokens=3)))
    + limit_all((A, 1, None), (B, 11, None)) + limit_all((A, 5, patch(max_tokens=4)), (B, 1, None))
    + status(A) + status(B) + status(USER),
    "limit_all_invalid": seed(18) + limit_all((A, 1, None), (A, 1, None))
    + limit_all((A, 1, None), (B, 1, patch(refill="-inf")))
    + limit_all((A, "nan", None), (B, 1, None)) + limit_all() + status(A),
    "many_keys_sweep": seed(19) + b"".join(
        consume(bytes([i]) * (1 + i % 30)) for i in range(40))
    + advance_ms(60000) + b"".join(consume(b"k%d" % i, 3) for i in range(40)) + status(LONG),
    "odd_keys": seed(20) + consume(EMPTY) + consume(NUL) + consume(LONE) + consume(CAP_A)
    + consume(LONG) + consume(b"\x00" * 23) + consume(b"\xff" * 47) + consume(b"a")
    + consume(A) + status(b"a") + reset(b"\x00" * 23) + status(NUL),
    "whole_cost_bound": seed(21) + set_options(max_tokens=4, refill=1.5)
    + (consume(A, 2) + advance_ms(700)) * 12 + (consume(A) + advance_ms(1499)) * 6
    + consume(A, 4),
    "gates": seed(23) + acquire(A, 1, 2, 5) * 3 + release(A, 5) + release(A, 5) + acquire(A, 2, 3, 1)
    + advance_ms(1500) + acquire(A, 1, 2) + release(A, 8) + acquire(A, "nan", 2) + acquire(A, 1, 0)
    + acquire(B, 3, 2) + release(B, 4) + acquire(LONE, 1, "max_safe", 600) + status(A)
    + block(A, 1500) + consume(A, 2) + block(B, 1, "nan") + block(USER, 60000, 11),
    "check_then_consume": seed(22) + set_options(max_tokens=2) + check(A, 2) + consume(A, 2)
    + check(A) + consume(A) + check(A, 0) + consume(A, 0) + check(A, 3) + consume(A, 3),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        assert len(data) <= 4096, name
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
