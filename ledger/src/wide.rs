//! [`WideDecimal`]: exact sums of any size (defined beside the balance
//! arithmetic, [`crate::balance::wide`], whose sums need it too).

pub use crate::balance::wide::WideDecimal;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use proptest::prelude::*;

    use super::*;
    use crate::amount::MAX_SIGNIFICANT_DIGITS as AMOUNT_SIGNIFICANT_DIGITS;
    use crate::amount::{canonical, MAX_FRACTIONAL_DIGITS as AMOUNT_FRACTIONAL_DIGITS};
    use rust_decimal::Decimal;

    fn w(s: &str) -> WideDecimal {
        WideDecimal::parse(s).unwrap()
    }

    const NINES: &str = "9999999999999999999999999999";

    #[test]
    fn the_domains_of_amounts_and_totals_are_one() {
        use crate::balance::total;
        assert_eq!(total::MAX_FRACTIONAL_DIGITS, AMOUNT_FRACTIONAL_DIGITS);
        assert_eq!(
            total::MAX_SIGNIFICANT_DIGITS as usize,
            AMOUNT_SIGNIFICANT_DIGITS
        );
    }

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
        assert_eq!(sum.to_decimal(), None);
        let back = &sum - &w("29999999999999999999999999997");
        assert_eq!(back, w("0.000000000000000001"));
        assert!(matches!(back, WideDecimal::Small(_)));
        assert_eq!(back.to_decimal(), Some(Decimal::new(1, 18)));
        assert_eq!((-w("1.50")).to_string(), "-1.5");
        assert_eq!(w("-0.000").to_string(), "0");
        assert_eq!(w("+12.3400").to_string(), "12.34");
        assert_eq!(
            w(NINES).to_decimal(),
            Some(Decimal::from_str(NINES).unwrap())
        );
        let big_but_in_domain = w("1000000000000000000000000000");
        assert!(matches!(big_but_in_domain, WideDecimal::Big(_)));
        assert!(big_but_in_domain.to_decimal().is_some());
        assert!(w("-5") < w("0.1"));
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
}
