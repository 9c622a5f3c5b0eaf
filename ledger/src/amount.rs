//! Exact decimal parsing for money and quantities.
//!
//! `rust_decimal`'s own parser rounds inputs with too many digits; a ledger
//! must refuse them instead, so the text is checked digit by digit first.

use rust_decimal::Decimal;

/// Most significant digits an amount may carry.
pub const MAX_SIGNIFICANT_DIGITS: usize = 28;
/// Most fractional digits an amount may carry.
pub const MAX_FRACTIONAL_DIGITS: u32 = 18;

/// Parses a decimal literal exactly. `allow_exponent` admits `1.5e3`, which
/// only JSON numbers may use; strings must be plain `123.45`.
///
/// The value is `digits × 10^exponent`, read without rounding: every step is
/// checked arithmetic on the digits and on an exponent of any length (a JSON
/// number may carry `1e-9223372036854775808` or a 30-digit exponent), so an
/// input is either this exact value or refused, never another amount.
pub fn parse_exact(text: &str, allow_exponent: bool) -> Result<Decimal, String> {
    let bad = || {
        if allow_exponent {
            "must be a decimal number or a decimal string such as \"1.50\"".to_owned()
        } else {
            "must be a decimal string such as \"1.50\"".to_owned()
        }
    };
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') if !allow_exponent => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) if allow_exponent => (&rest[..i], parse_exponent(&rest[i + 1..]).ok_or_else(bad)?),
        Some(_) => return Err(bad()),
        None => (rest, Exponent::Finite(0)),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    if int_part.is_empty()
        || (mantissa.contains('.') && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    // value = significant × 10^exp, with `significant` free of leading and
    // trailing zeros (which carry no information).
    let int_trimmed = int_part.trim_start_matches('0');
    let (significant, trailing_zeros) = if int_trimmed.is_empty() {
        let frac = frac_part.trim_start_matches('0');
        let kept = frac.trim_end_matches('0');
        (kept.to_owned(), frac.len() - kept.len())
    } else if frac_part.trim_end_matches('0').is_empty() {
        let kept = int_trimmed.trim_end_matches('0');
        (
            kept.to_owned(),
            int_trimmed.len() - kept.len() + frac_part.len(),
        )
    } else {
        let frac = frac_part.trim_end_matches('0');
        (format!("{int_trimmed}{frac}"), frac_part.len() - frac.len())
    };
    if significant.is_empty() {
        // Zero times any power of ten, however large, is zero.
        return Ok(Decimal::ZERO);
    }
    let too_many_digits = || format!("has more than {MAX_SIGNIFICANT_DIGITS} significant digits");
    let too_many_fractional = || format!("has more than {MAX_FRACTIONAL_DIGITS} fractional digits");
    let exp = match exponent {
        Exponent::Finite(e) => i128::try_from(frac_part.len())
            .ok()
            .and_then(|f| e.checked_sub(f))
            .and_then(|e| e.checked_add(i128::try_from(trailing_zeros).ok()?))
            .ok_or_else(|| "is out of range".to_owned())?,
        // Beyond ±10^38: no digit string the body could hold brings the
        // value back into range.
        Exponent::Huge { negative: false } => return Err(too_many_digits()),
        Exponent::Huge { negative: true } if significant.len() > MAX_SIGNIFICANT_DIGITS => {
            return Err(too_many_digits())
        }
        Exponent::Huge { negative: true } => return Err(too_many_fractional()),
    };
    let digits = i128::try_from(significant.len()).map_err(|_| too_many_digits())?;
    let integer_zeros = exp.max(0);
    let integer_digits = digits.checked_add(integer_zeros);
    if !matches!(integer_digits, Some(n) if n <= MAX_SIGNIFICANT_DIGITS as i128) {
        return Err(too_many_digits());
    }
    let scale = exp.checked_neg().map_or(i128::MAX, |s| s.max(0));
    if scale > i128::from(MAX_FRACTIONAL_DIGITS) {
        return Err(too_many_fractional());
    }
    // At most 28 digits now: they fit an i128 and a Decimal's 96 bits.
    let out_of_range = || "is out of range".to_owned();
    let mut mantissa: i128 = significant.parse().map_err(|_| out_of_range())?;
    let power = u32::try_from(integer_zeros).map_err(|_| out_of_range())?;
    mantissa = 10i128
        .checked_pow(power)
        .and_then(|p| mantissa.checked_mul(p))
        .ok_or_else(out_of_range)?;
    if negative {
        mantissa = -mantissa;
    }
    let scale = u32::try_from(scale).map_err(|_| out_of_range())?;
    Decimal::try_from_i128_with_scale(mantissa, scale).map_err(|_| out_of_range())
}

/// The exponent of a JSON number: its value when it fits an i128, else only
/// its sign (such an exponent puts every non-zero value out of range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exponent {
    Finite(i128),
    Huge { negative: bool },
}

/// `[+-]digits`, of any length; `None` when it is not that.
fn parse_exponent(text: &str) -> Option<Exponent> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut value: i128 = 0;
    for b in digits.bytes() {
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(b - b'0')))
        {
            Some(v) => value = v,
            None => return Some(Exponent::Huge { negative }),
        }
    }
    Some(Exponent::Finite(if negative { -value } else { value }))
}

/// The canonical text of a decimal: no trailing zeros, no exponent, `0` for zero.
pub fn canonical(value: Decimal) -> String {
    if value.is_zero() {
        "0".to_owned()
    } else {
        value.normalize().to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn c(text: &str, exp: bool) -> Result<String, String> {
        parse_exact(text, exp).map(canonical)
    }

    #[test]
    fn normalises_equal_values_to_one_text() {
        assert_eq!(c("1.50", false).unwrap(), "1.5");
        assert_eq!(c("1.5", false).unwrap(), "1.5");
        assert_eq!(c("001.500", false).unwrap(), "1.5");
        assert_eq!(c("100", false).unwrap(), "100");
        assert_eq!(c("0.0125", false).unwrap(), "0.0125");
        assert_eq!(c("0.000", false).unwrap(), "0");
        assert_eq!(c("-2.50", false).unwrap(), "-2.5");
        assert_eq!(c("1.5e3", true).unwrap(), "1500");
        assert_eq!(c("15E-3", true).unwrap(), "0.015");
        assert_eq!(c("1.500000000000000000000000", false).unwrap(), "1.5");
    }

    #[test]
    fn refuses_what_it_cannot_hold_exactly() {
        assert!(c("1e3", false).is_err());
        assert!(c("", false).is_err());
        assert!(c("1.", false).is_err());
        assert!(c(".5", false).is_err());
        assert!(c("1,5", false).is_err());
        assert!(c(" 1", false).is_err());
        assert!(c("0x10", false).is_err());
        assert!(c("NaN", true).is_err());
        assert!(c("1234567890123456789012345678", false).is_ok());
        assert!(c("12345678901234567890123456789", false)
            .unwrap_err()
            .contains("significant"));
        assert!(c("0.000000000000000001", false).is_ok());
        assert!(c("0.0000000000000000001", false)
            .unwrap_err()
            .contains("fractional"));
        assert!(c("1e28", true).unwrap_err().contains("significant"));
        assert!(c("1e99999", true).is_err());
    }

    #[test]
    fn exponents_at_and_beyond_the_ends_of_i64_are_exact() {
        for text in [
            "1e-9223372036854775808",
            "123e-9223372036854775808",
            "-1e-9223372036854775808",
            "1e-9223372036854775809",
            "1e9223372036854775807",
            "1e9223372036854775808",
            "1e-170141183460469231731687303715884105728",
            "1e170141183460469231731687303715884105727",
            "1e99999999999999999999999999999999999999999999",
            "1e-99999999999999999999999999999999999999999999",
        ] {
            assert!(c(text, true).is_err(), "{text}");
        }
        for zero in [
            "0e-9223372036854775808",
            "0.000e9223372036854775807",
            "-0e99999999999999999999999999999999999999999999",
        ] {
            assert_eq!(c(zero, true).unwrap(), "0", "{zero}");
        }
        assert_eq!(c("1000e-3", true).unwrap(), "1");
        assert_eq!(c("0.001e+3", true).unwrap(), "1");
        assert_eq!(
            c("1e-0000000000000000000000000000000000000000018", true).unwrap(),
            "0.000000000000000001"
        );
        assert_eq!(
            c("100000000000000000000000000000000000000000e-41", true).unwrap(),
            "1"
        );
    }

    #[test]
    fn long_digit_strings_are_read_exactly() {
        let zeros = "0".repeat(1_000_000);
        assert_eq!(c(&format!("{zeros}1.5{zeros}"), false).unwrap(), "1.5");
        assert_eq!(c(&format!("1{zeros}e-1000000"), true).unwrap(), "1");
        assert_eq!(c(&format!("0.{zeros}1e1000001"), true).unwrap(), "1");
        assert!(c(&format!("1{zeros}"), false)
            .unwrap_err()
            .contains("significant"));
        assert!(c(&format!("0.{zeros}1"), false)
            .unwrap_err()
            .contains("fractional"));
        assert!(c(&"9".repeat(1_000_000), false)
            .unwrap_err()
            .contains("significant"));
    }
}
