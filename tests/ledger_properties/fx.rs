//! Exact decimals for the model, independent of `rust_decimal` and of the
//! server's parser: a big integer of 10^-18 units (every amount has at most
//! 18 fractional digits, so sums stay exact whatever their size), and a
//! reference reading of JSON decimal text done with big-integer exponents,
//! so `1e-9223372036854775808` is judged without any fixed-width arithmetic.

use std::fmt;

use num_bigint::{BigInt, Sign};

/// Fractional digits of the fixed point.
pub const SCALE: usize = 18;
/// Most significant digits an amount may carry (SPEC §2).
pub const MAX_DIGITS: usize = 28;

/// An exact decimal with at most [`SCALE`] fractional digits.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Fx(BigInt);

impl Fx {
    pub fn zero() -> Fx {
        Fx(BigInt::default())
    }

    /// Whole units (tests and generators).
    pub fn units(n: i64) -> Fx {
        Fx(BigInt::from(n) * pow10(SCALE))
    }

    /// `digits` (ASCII, may have leading zeros) × 10^-scale, scale ≤ 18.
    pub fn from_digits(negative: bool, digits: &str, scale: usize) -> Fx {
        assert!(scale <= SCALE, "scale {scale}");
        let n: BigInt = if digits.is_empty() {
            BigInt::default()
        } else {
            digits.parse().expect("ASCII digits")
        };
        let n = n * pow10(SCALE - scale);
        Fx(if negative { -n } else { n })
    }

    /// Plain decimal text as the server writes it (`-12.5`, `0`), with no
    /// exponent; `None` for anything else.
    pub fn parse(text: &str) -> Option<Fx> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
        if int.is_empty()
            || frac.len() > SCALE
            || (rest.contains('.') && frac.is_empty())
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(Fx::from_digits(
            negative,
            &format!("{int}{frac}"),
            frac.len(),
        ))
    }

    pub fn is_zero(&self) -> bool {
        self.0.sign() == Sign::NoSign
    }

    pub fn is_negative(&self) -> bool {
        self.0.sign() == Sign::Minus
    }

    pub fn add(&self, other: &Fx) -> Fx {
        Fx(&self.0 + &other.0)
    }

    pub fn sub(&self, other: &Fx) -> Fx {
        Fx(&self.0 - &other.0)
    }

    pub fn neg(&self) -> Fx {
        Fx(-&self.0)
    }

    /// (mantissa digits without trailing zeros of the fraction, scale).
    fn normalized(&self) -> (String, usize) {
        let mut digits = self.0.magnitude().to_string();
        let mut scale = SCALE;
        while scale > 0 && digits.len() > 1 && digits.ends_with('0') {
            digits.pop();
            scale -= 1;
        }
        if digits == "0" {
            scale = 0;
        }
        (digits, scale)
    }

    /// Canonical text: no trailing zeros, no exponent, `0` for zero.
    pub fn canonical(&self) -> String {
        let (digits, scale) = self.normalized();
        let sign = if self.is_negative() { "-" } else { "" };
        if scale == 0 {
            return format!("{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        format!("{sign}{int}.{frac}")
    }
}

fn pow10(n: usize) -> BigInt {
    BigInt::from(10).pow(n as u32)
}

impl fmt::Debug for Fx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// What a decimal in a request means, by SPEC §2: a string of plain
/// decimal digits, or a JSON number (which may have an exponent), exactly,
/// with at most 28 significant digits and 18 fractional digits; anything
/// else is refused. `None` means the request must be refused.
///
/// Judged on the text alone with big-integer exponent arithmetic, so it
/// shares nothing with the server's parser.
pub fn reference_value(json: &str) -> Option<Fx> {
    if let Some(inner) = json.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        // Generated strings never need escapes.
        return plain(inner);
    }
    let (negative, rest) = match json.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, json),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => {
            let e = &rest[i + 1..];
            let e = e.strip_prefix('+').unwrap_or(e);
            (&rest[..i], e.parse::<BigInt>().ok()?)
        }
        None => (rest, BigInt::default()),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty()
        || (mantissa.contains('.') && frac.is_empty())
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // value = digits × 10^(exponent − |frac|), then drop zeros that carry
    // no information.
    let all = format!("{int}{frac}");
    let significant = all.trim_start_matches('0');
    if significant.is_empty() {
        return Some(Fx::zero());
    }
    let trimmed = significant.trim_end_matches('0');
    let exp = exponent - BigInt::from(frac.len()) + BigInt::from(significant.len() - trimmed.len());
    let zero = BigInt::default();
    let integer_zeros = if exp > zero {
        exp.clone()
    } else {
        zero.clone()
    };
    if BigInt::from(trimmed.len()) + &integer_zeros > BigInt::from(MAX_DIGITS) {
        return None;
    }
    let scale = if exp < zero { -exp } else { zero };
    if scale > BigInt::from(SCALE) {
        return None;
    }
    let scale: usize = scale.to_string().parse().expect("at most 18");
    let zeros: usize = integer_zeros.to_string().parse().expect("at most 28");
    Some(Fx::from_digits(
        negative,
        &format!("{trimmed}{}", "0".repeat(zeros)),
        scale,
    ))
}

/// A decimal string: digits, optionally `.` and digits, optionally a
/// leading `-`; no exponent, no spaces.
fn plain(text: &str) -> Option<Fx> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    if rest.contains(['e', 'E', '-', '+']) {
        return None;
    }
    let value = reference_value(rest)?;
    Some(if negative { value.neg() } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Option<String> {
        reference_value(text).map(|f| f.canonical())
    }

    #[test]
    fn the_reference_reads_what_spec_section_2_allows() {
        assert_eq!(v("\"1.50\"").as_deref(), Some("1.5"));
        assert_eq!(v("15e-1").as_deref(), Some("1.5"));
        assert_eq!(v("1.5E+2").as_deref(), Some("150"));
        assert_eq!(
            v("10000000000000000000000000000000e-30").as_deref(),
            Some("10")
        );
        assert_eq!(v("1e27").as_deref(), Some("1000000000000000000000000000"));
        assert_eq!(v("1e28"), None);
        assert_eq!(v("1e-18").as_deref(), Some("0.000000000000000001"));
        assert_eq!(v("1e-19"), None);
        assert_eq!(v("1e-9223372036854775808"), None);
        assert_eq!(v("123e-9223372036854775808"), None);
        assert_eq!(v("1e9223372036854775807"), None);
        assert_eq!(v("0e-9223372036854775808").as_deref(), Some("0"));
        assert_eq!(v("\"1e3\""), None);
        assert_eq!(v("\"1.\""), None);
        assert_eq!(v("\".5\""), None);
        assert_eq!(v("\"-2\"").as_deref(), Some("-2"));
        assert_eq!(v("{\"$serde_json::private::Number\":\"2\"}"), None);
    }

    #[test]
    fn canonical_text_has_no_trailing_zeros_and_no_exponent() {
        assert_eq!(Fx::parse("-0.50").unwrap().canonical(), "-0.5");
        assert_eq!(
            Fx::parse("0.000000000000000001").unwrap().canonical(),
            "0.000000000000000001"
        );
        let nines = Fx::parse(&"9".repeat(28)).unwrap();
        assert_eq!(
            nines.add(&nines).canonical(),
            "19999999999999999999999999998"
        );
    }
}
