//! 128-bit division without the compiler's 128-bit division routine (about 1 KB of wasm,
//! and slow): the divisors here are nearly always below 2^32, or both numbers below 2^64.

/// `n / d` and `n % d` for `0 < d < 2^32`, by long division in 32-bit digits: four native
/// 64-bit divisions (the rest stays below `d`, so each step fits 64 bits).
pub fn div_rem_small(n: u128, d: u64) -> (u128, u64) {
    let mut quotient = 0u128;
    let mut rest = 0u64;
    for shift in [96, 64, 32, 0] {
        let digit = (rest << 32) | u64::from((n >> shift) as u32);
        quotient = (quotient << 32) | u128::from(digit / d);
        rest = digit % d;
    }
    (quotient, rest)
}

/// `n.div_ceil(d)` for `0 < d < 2^32`.
pub fn div_ceil_small(n: u128, d: u64) -> u128 {
    let (quotient, rest) = div_rem_small(n, d);
    quotient + u128::from(rest > 0)
}

/// `n / d` for any `d > 0`.
pub fn div(n: u128, d: u128) -> u128 {
    if let (Ok(n), Ok(d)) = (u64::try_from(n), u64::try_from(d)) {
        return u128::from(n / d);
    }
    if let Ok(d) = u32::try_from(d) {
        return div_rem_small(n, d.into()).0;
    }
    // Binary long division from the highest bit of `n`.
    let mut quotient = 0u128;
    let mut rest = 0u128;
    for bit in (0..128 - n.leading_zeros()).rev() {
        // `rest < d`, so when doubling it carries out, rest + 2^128 - d still fits.
        let carry = rest >> 127;
        rest = (rest << 1) | ((n >> bit) & 1);
        if carry == 1 || rest >= d {
            rest = rest.wrapping_sub(d);
            quotient |= 1 << bit;
        }
    }
    quotient
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EDGES: [u128; 12] = [
        0,
        1,
        2,
        999_999,
        1_000_000,
        (1 << 32) - 1,
        1 << 32,
        u64::MAX as u128,
        1 << 64,
        (1 << 127) - 1,
        1 << 127,
        u128::MAX,
    ];

    #[test]
    fn edges_divide_as_the_native_division() {
        for n in EDGES {
            for d in EDGES.into_iter().filter(|&d| d > 0) {
                assert_eq!(div(n, d), n / d, "{n} / {d}");
                if let Ok(small) = u32::try_from(d) {
                    let small = u64::from(small);
                    assert_eq!(
                        div_rem_small(n, small),
                        (n / d, (n % d) as u64),
                        "{n} / {d}"
                    );
                    assert_eq!(div_ceil_small(n, small), n.div_ceil(d), "{n} / {d}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn divides_as_the_native_division(n: u128, d in 1u128.., shift in 0u32..128) {
            let d = (d >> shift).max(1);
            prop_assert_eq!(div(n, d), n / d);
            prop_assert_eq!(div(n >> shift, d), (n >> shift) / d);
        }

        #[test]
        fn small_divisors_divide_as_the_native_division(n: u128, d in 1u64..1 << 32) {
            prop_assert_eq!(div_rem_small(n, d), (n / u128::from(d), (n % u128::from(d)) as u64));
            prop_assert_eq!(div_ceil_small(n, d), n.div_ceil(u128::from(d)));
        }
    }
}
