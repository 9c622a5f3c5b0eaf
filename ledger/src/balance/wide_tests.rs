//! Tests of [`WideDecimal`]: exact sums of any size.
#![allow(clippy::unwrap_used)]
use std::str::FromStr;

use proptest::prelude::*;

use super::*;
use crate::amount::canonical;
use num_bigint::BigInt;
use rust_decimal::Decimal;

fn w(s: &str) -> WideDecimal {
    WideDecimal::parse(s).unwrap()
}

const NINES: &str = "9999999999999999999999999999";

#[test]
fn sums_of_any_size_are_exact_and_canonical() {
    let mut sum = WideDecimal::ZERO;
    for _ in 0..3 {
        sum += &w(NINES);
    }
    sum += &w("0.000000000000000001");
    assert_eq!(
        sum.to_string(),
        "29999999999999999999999999997.000000000000000001"
    );
    assert!(matches!(sum, WideDecimal::Big(_)));
    let back = &sum - &w("29999999999999999999999999997");
    assert_eq!(back, w("0.000000000000000001"));
    assert!(matches!(back, WideDecimal::Small(_)));
    assert_eq!((-w("1.50")).to_string(), "-1.5");
    assert_eq!(w("-0.000").to_string(), "0");
    assert_eq!(w("+12.3400").to_string(), "12.34");
    assert_eq!(
        WideDecimal::from_decimal(Decimal::from_str(NINES).unwrap()),
        Some(w(NINES))
    );
    assert!(matches!(w(NINES), WideDecimal::Big(_)));
    assert!(w("-5") < w("0.1"));
    assert!(w("-5").is_negative() && !w("0").is_negative());
    assert!((-(w(NINES) + w(NINES))).is_negative());
    // Rounding to 96 bits would give back NINES.
    assert_eq!(
        (w(NINES) + w("0.000000000000000001")).to_string(),
        "9999999999999999999999999999.000000000000000001"
    );
}

#[test]
fn parse_refuses_what_is_not_a_plain_decimal() {
    for bad in [
        "",
        "-",
        "1.",
        ".5",
        "1e5",
        "NaN",
        "1,5",
        " 1",
        "0.0000000000000000001",
    ] {
        assert_eq!(WideDecimal::parse(bad), None, "{bad:?}");
    }
    assert_eq!(w("0.0000000000000000010"), w("0.000000000000000001"));
}

proptest! {
    #[test]
    fn parse_and_display_round_trip_through_decimal(
        m in any::<i64>(), scale in 0u32..=18, extra in 0i128..1_000_000_000
    ) {
        let d = Decimal::new(m, scale);
        let wide = WideDecimal::from_decimal(d).unwrap();
        prop_assert_eq!(wide.to_string(), canonical(d));
        prop_assert_eq!(WideDecimal::parse(&wide.to_string()), Some(wide.clone()));
        // Adding and taking back a big value returns the same value.
        let big = w(NINES) + w(NINES) + WideDecimal::Small(extra);
        prop_assert_eq!(&(&wide + &big) - &big, wide);
    }
}

/// A decimal in the amount domain: up to 28 digits at scale 0..=18,
/// all nines now and then (the edge of the domain).
fn amount() -> impl Strategy<Value = Decimal> {
    (0u32..=18, 1usize..=28, any::<bool>(), any::<u64>()).prop_flat_map(
        |(scale, digits, negative, seed)| {
            prop::collection::vec(0u8..=9, digits).prop_map(move |ds| {
                let mut m: i128 = ds.iter().fold(0, |m, &x| m * 10 + i128::from(x));
                if seed % 7 == 0 {
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

/// The reference: the value as a big integer count of 10^−18.
fn at18(x: Decimal) -> BigInt {
    BigInt::from(x.mantissa()) * BigInt::from(10).pow(18 - x.scale())
}

proptest! {
    /// Every amount converts exactly, and prints as `canonical` does:
    /// a stored `balance_after` or total written before totals were
    /// wide hashes and reads the same.
    #[test]
    fn amounts_convert_exactly_and_print_canonically(a in amount()) {
        let wide = WideDecimal::from_decimal(a).unwrap();
        prop_assert_eq!(wide.to_string(), canonical(a));
        prop_assert_eq!(WideDecimal::parse(&canonical(a)), Some(wide));
    }

    /// Sums and differences of many amounts equal big-integer
    /// arithmetic, far past 28 digits and across the `i128` edge.
    #[test]
    fn sums_agree_with_big_integer_arithmetic(
        terms in prop::collection::vec((amount(), any::<bool>()), 1..40)
    ) {
        let mut sum = WideDecimal::ZERO;
        let mut reference = BigInt::from(0);
        for (a, subtract) in &terms {
            let x = WideDecimal::from_decimal(*a).unwrap();
            if *subtract {
                sum -= &x;
                reference -= at18(*a);
            } else {
                sum += &x;
                reference += at18(*a);
            }
            // One value, one representation: `Small` whenever it fits.
            prop_assert_eq!(
                matches!(sum, WideDecimal::Small(_)),
                i128::try_from(&reference).is_ok()
            );
        }
        let scaled = format!("{:0>19}", reference.magnitude());
        let (int, frac) = scaled.split_at(scaled.len() - 18);
        let frac = frac.trim_end_matches('0');
        let mut text = if frac.is_empty() { int.to_owned() } else { format!("{int}.{frac}") };
        if reference < BigInt::from(0) {
            text = format!("-{text}");
        }
        prop_assert_eq!(sum.to_string(), text.clone());
        prop_assert_eq!(WideDecimal::parse(&text), Some(sum.clone()));
        prop_assert_eq!(sum.is_negative(), reference < BigInt::from(0));
    }
}
