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
        Some(i) if allow_exponent => {
            let exp: i64 = rest[i + 1..]
                .strip_prefix('+')
                .unwrap_or(&rest[i + 1..])
                .parse()
                .map_err(|_| bad())?;
            (&rest[..i], exp)
        }
        Some(_) => return Err(bad()),
        None => (rest, 0),
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
    if exponent.abs() > 1000 {
        return Err("is out of range".to_owned());
    }
    // value = digits × 10^exp, then strip zeros that carry no information.
    let mut digits: String = format!("{int_part}{frac_part}");
    let mut exp = exponent - frac_part.len() as i64;
    let trimmed_len = digits.trim_end_matches('0').len();
    if trimmed_len == 0 {
        return Ok(Decimal::ZERO);
    }
    exp += (digits.len() - trimmed_len) as i64;
    digits.truncate(trimmed_len);
    let digits = digits.trim_start_matches('0');
    let integer_zeros = exp.max(0) as usize;
    if digits.len() + integer_zeros > MAX_SIGNIFICANT_DIGITS {
        return Err(format!(
            "has more than {MAX_SIGNIFICANT_DIGITS} significant digits"
        ));
    }
    let scale = (-exp).max(0);
    if scale > i64::from(MAX_FRACTIONAL_DIGITS) {
        return Err(format!(
            "has more than {MAX_FRACTIONAL_DIGITS} fractional digits"
        ));
    }
    let mut mantissa: i128 = digits.parse().map_err(|_| "is out of range".to_owned())?;
    for _ in 0..integer_zeros {
        mantissa *= 10;
    }
    if negative {
        mantissa = -mantissa;
    }
    Decimal::try_from_i128_with_scale(mantissa, scale as u32)
        .map_err(|_| "is out of range".to_owned())
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
}
