//! Exact arithmetic for the totals the ledger stores.
//!
//! Every total of an account (`debits`, `credits`, `held`, and the `posted`
//! and `available` derived from them) and a payment's refunded total stays
//! inside the domain of one amount: at most [`MAX_SIGNIFICANT_DIGITS`]
//! significant digits, at most [`MAX_FRACTIONAL_DIGITS`] fractional ones
//! (docs/ledger-rules.md, "Limits"). Then every stored total reads back as
//! an amount, and a `Decimal` holds it exactly.
//!
//! `rust_decimal`'s own `checked_add` rounds when the exact result needs
//! more than 96 bits (`9999999999999999999999999999 + 0.000000000000000001`
//! is `9999999999999999999999999999`), so these functions add in `i128`
//! with both operands at the larger scale: either the exact result is
//! computed, or an overflow proves it is outside the domain.

use rust_decimal::Decimal;

/// Most significant digits an amount or a total may carry.
pub const MAX_SIGNIFICANT_DIGITS: u32 = 28;
/// Most fractional digits an amount or a total may carry.
pub const MAX_FRACTIONAL_DIGITS: u32 = 18;

/// 10^28: the mantissa of an in-domain value, without trailing zeros, is
/// below it.
const DIGITS_BOUND: i128 = 10_000_000_000_000_000_000_000_000_000;

/// `10^n` for `n <= 38`, `None` beyond.
fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// The value as (mantissa, scale) with the trailing fractional zeros
/// dropped: the smallest scale that holds it.
fn reduced(mut mantissa: i128, mut scale: u32) -> (i128, u32) {
    while scale > 0 && mantissa % 10 == 0 {
        mantissa /= 10;
        scale -= 1;
    }
    (mantissa, scale)
}

/// The decimal `mantissa × 10^−scale` if it lies in the domain.
fn in_domain_value(mantissa: i128, scale: u32) -> Option<Decimal> {
    let (mantissa, scale) = reduced(mantissa, scale);
    // At scale 0 a mantissa with trailing zeros counts them as significant
    // digits (`1e28` has 29), exactly as the amount parser does.
    if scale > MAX_FRACTIONAL_DIGITS || mantissa.checked_abs()? >= DIGITS_BOUND {
        return None;
    }
    Decimal::try_from_i128_with_scale(mantissa, scale).ok()
}

/// Whether `value` lies in the domain of a total.
pub fn in_domain(value: Decimal) -> bool {
    in_domain_value(value.mantissa(), value.scale()).is_some()
}

/// `a + b`, exactly, if the sum lies in the domain; `None` otherwise. The
/// operands may be any decimals.
pub fn add(a: Decimal, b: Decimal) -> Option<Decimal> {
    // Reduced first, so a trailing zero (`1.0000000000000000000000000000`)
    // cannot make the alignment overflow. Then an overflow proves the sum
    // is outside the domain: the operand at the larger scale has a
    // non-zero last digit there that the other cannot cancel, so the sum
    // keeps that scale, with a mantissa past 10^28.
    let (a, a_scale) = reduced(a.mantissa(), a.scale());
    let (b, b_scale) = reduced(b.mantissa(), b.scale());
    let scale = a_scale.max(b_scale);
    let a = a.checked_mul(pow10(scale - a_scale)?)?;
    let b = b.checked_mul(pow10(scale - b_scale)?)?;
    in_domain_value(a.checked_add(b)?, scale)
}

/// `a − b`, exactly, if the difference lies in the domain; `None` otherwise.
pub fn sub(a: Decimal, b: Decimal) -> Option<Decimal> {
    add(a, -b)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use proptest::prelude::*;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    const NINES: &str = "9999999999999999999999999999";

    #[test]
    fn sums_inside_the_domain_are_exact() {
        assert_eq!(add(d("1.5"), d("2.25")), Some(d("3.75")));
        assert_eq!(
            add(d(NINES), d("-1")),
            Some(d("9999999999999999999999999998"))
        );
        assert_eq!(
            add(d("0.999999999999999999"), d("0.000000000000000001")),
            Some(d("1"))
        );
        assert_eq!(sub(d("1"), d("1.000000000000000000")), Some(Decimal::ZERO));
        // A trailing zero of the operands is no digit of the result.
        assert_eq!(add(d("1.50"), d("0.50")).unwrap().to_string(), "2");
        assert_eq!(
            add(
                Decimal::from_i128_with_scale(10i128.pow(27), 0),
                Decimal::ZERO
            ),
            Some(Decimal::from_i128_with_scale(10i128.pow(27), 0))
        );
        let one = Decimal::from_i128_with_scale(10i128.pow(28), 28);
        assert_eq!(add(one, d("9999999999999999999999999998")), Some(d(NINES)));
    }

    #[test]
    fn sums_outside_the_domain_are_refused_not_rounded() {
        // 29 significant digits.
        assert_eq!(add(d(NINES), d("1")), None);
        assert_eq!(add(d(NINES), d(NINES)), None);
        assert_eq!(
            sub(
                Decimal::ZERO,
                Decimal::from_i128_with_scale(10i128.pow(28), 0)
            ),
            None
        );
        // rust_decimal rounds this one to NINES.
        assert_eq!(
            d(NINES).checked_add(d("0.000000000000000001")),
            Some(d(NINES))
        );
        assert_eq!(add(d(NINES), d("0.000000000000000001")), None);
        assert_eq!(sub(d("0.000000000000000001"), d(NINES)), None);
        // More than 18 fractional digits.
        assert_eq!(add(d("0.0000000000000000001"), Decimal::ZERO), None);
        assert_eq!(add(Decimal::MAX, Decimal::MAX), None);
        assert_eq!(add(Decimal::MIN, Decimal::MAX), Some(Decimal::ZERO));
        assert!(in_domain(d(NINES)));
        assert!(!in_domain(d("19999999999999999999999999998")));
    }

    /// A decimal in the amount domain: up to 28 digits at scale 0..=18.
    fn amount() -> impl Strategy<Value = Decimal> {
        (0u32..=18, 1usize..=28, any::<bool>(), any::<u64>()).prop_flat_map(
            |(scale, digits, negative, seed)| {
                prop::collection::vec(0u8..=9, digits).prop_map(move |ds| {
                    let mut m: i128 = ds.iter().fold(0, |m, &x| m * 10 + i128::from(x));
                    if seed % 7 == 0 {
                        // Exercise the edge: all nines.
                        m = 10i128.pow(digits as u32) - 1;
                    }
                    if negative {
                        m = -m;
                    }
                    Decimal::from_i128_with_scale(m, scale)
                })
            },
        )
    }

    /// The reference: digit strings added as big integers at scale 18.
    fn reference(a: Decimal, b: Decimal) -> Option<String> {
        use num_bigint::BigInt;
        let at18 = |x: Decimal| BigInt::from(x.mantissa()) * BigInt::from(10).pow(18 - x.scale());
        let sum = at18(a) + at18(b);
        let negative = sum < BigInt::from(0);
        let digits = sum.magnitude().to_string();
        let digits = format!("{digits:0>19}");
        let (int, frac) = digits.split_at(digits.len() - 18);
        let frac = frac.trim_end_matches('0');
        let int = int.trim_start_matches('0');
        let significant = format!("{int}{frac}");
        let significant = significant.trim_start_matches('0');
        if significant.len() > 28 {
            return None;
        }
        let int = if int.is_empty() { "0" } else { int };
        let text = if frac.is_empty() {
            int.to_owned()
        } else {
            format!("{int}.{frac}")
        };
        Some(if negative { format!("-{text}") } else { text })
    }

    proptest! {
        #[test]
        fn add_agrees_with_digit_string_arithmetic(a in amount(), b in amount()) {
            let got = add(a, b).map(|s| if s.is_zero() { "0".to_owned() } else { s.normalize().to_string() });
            prop_assert_eq!(got, reference(a, b));
        }
    }
}
