//! Exact sums of any size: every total the ledger stores or derives.
//!
//! An amount has at most 28 significant digits, but a total has no digit
//! limit: an account's `debits` and `credits` only grow, a usage summary
//! adds up many quantities, a statement's movements or a rebuild's partial
//! sums add up subsets of an account's entries (docs/ledger-rules.md,
//! "Limits"). [`WideDecimal`] holds them exactly: every input has at most
//! 18 fractional digits, so a value is an integer count of 10^−18, kept in
//! an `i128` while it fits (every realistic sum, up to ~1.7 × 10^20) and in
//! a big integer beyond, so the common path costs an `i128` addition.

use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};

use num_bigint::BigInt;
use rust_decimal::Decimal;

/// The fixed scale of a [`WideDecimal`]: 10^−18 is its unit (the most
/// fractional digits an amount may have, `crate::amount`).
const SCALE: u32 = 18;

/// An exact decimal of any size with at most 18 fractional digits.
///
/// One value has one representation (`Small` whenever it fits an `i128`),
/// so the derived equality and hash are the value's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WideDecimal {
    Small(i128),
    Big(BigInt),
}

impl Default for WideDecimal {
    fn default() -> Self {
        WideDecimal::ZERO
    }
}

impl WideDecimal {
    pub const ZERO: WideDecimal = WideDecimal::Small(0);

    fn from_big(big: BigInt) -> Self {
        match i128::try_from(&big) {
            Ok(small) => WideDecimal::Small(small),
            Err(_) => WideDecimal::Big(big),
        }
    }

    fn big(&self) -> BigInt {
        match self {
            WideDecimal::Small(v) => BigInt::from(*v),
            WideDecimal::Big(v) => v.clone(),
        }
    }

    /// The exact value of `d`; `None` if it has more than 18 fractional
    /// digits (no amount, quantity or stored total has).
    pub fn from_decimal(d: Decimal) -> Option<Self> {
        let (mut mantissa, mut scale) = (d.mantissa(), d.scale());
        while scale > SCALE {
            if mantissa % 10 != 0 {
                return None;
            }
            mantissa /= 10;
            scale -= 1;
        }
        let factor = 10i128.pow(SCALE - scale);
        Some(match mantissa.checked_mul(factor) {
            Some(v) => WideDecimal::Small(v),
            None => WideDecimal::Big(BigInt::from(mantissa) * factor),
        })
    }

    /// Parses the plain decimal text a database holds (`-123.4500`,
    /// `7`): an optional sign, digits, optionally a point and digits. Zeros
    /// past the 18th fractional digit are accepted; any other digit there,
    /// an exponent or anything else is `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
        if int.is_empty()
            || (rest.contains('.') && frac.is_empty())
            || !int.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let frac = frac.trim_end_matches('0');
        if frac.len() > SCALE as usize {
            return None;
        }
        // Every stored total is read through here: the common case (an
        // `i128`) is accumulated digit by digit, without allocating.
        let small = || {
            let mut v: i128 = 0;
            for b in int.bytes().chain(frac.bytes()) {
                v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
            }
            v.checked_mul(10i128.checked_pow(SCALE - frac.len() as u32)?)
        };
        let value = match small() {
            Some(v) => WideDecimal::Small(v),
            None => {
                let digits = format!("{int}{frac:0<width$}", width = SCALE as usize);
                WideDecimal::from_big(digits.parse::<BigInt>().ok()?)
            }
        };
        Some(if negative { -value } else { value })
    }

    pub fn is_zero(&self) -> bool {
        matches!(self, WideDecimal::Small(0))
    }

    pub fn is_negative(&self) -> bool {
        match self {
            WideDecimal::Small(v) => *v < 0,
            WideDecimal::Big(v) => v.sign() == num_bigint::Sign::Minus,
        }
    }
}

impl Add<&WideDecimal> for &WideDecimal {
    type Output = WideDecimal;
    fn add(self, other: &WideDecimal) -> WideDecimal {
        if let (WideDecimal::Small(a), WideDecimal::Small(b)) = (self, other) {
            if let Some(sum) = a.checked_add(*b) {
                return WideDecimal::Small(sum);
            }
        }
        WideDecimal::from_big(self.big() + other.big())
    }
}

impl Add for WideDecimal {
    type Output = WideDecimal;
    fn add(self, other: WideDecimal) -> WideDecimal {
        &self + &other
    }
}

impl AddAssign<&WideDecimal> for WideDecimal {
    fn add_assign(&mut self, other: &WideDecimal) {
        *self = &*self + other;
    }
}

impl From<i64> for WideDecimal {
    fn from(v: i64) -> Self {
        // |i64| × 10^18 < 9.3 × 10^36 < i128::MAX.
        WideDecimal::Small(i128::from(v) * 10i128.pow(SCALE))
    }
}

impl SubAssign<&WideDecimal> for WideDecimal {
    fn sub_assign(&mut self, other: &WideDecimal) {
        *self = &*self - other;
    }
}

impl Neg for WideDecimal {
    type Output = WideDecimal;
    fn neg(self) -> WideDecimal {
        match self {
            WideDecimal::Small(v) => match v.checked_neg() {
                Some(n) => WideDecimal::Small(n),
                None => WideDecimal::Big(-BigInt::from(v)),
            },
            WideDecimal::Big(v) => WideDecimal::from_big(-v),
        }
    }
}

impl Neg for &WideDecimal {
    type Output = WideDecimal;
    fn neg(self) -> WideDecimal {
        -self.clone()
    }
}

impl Sub<&WideDecimal> for &WideDecimal {
    type Output = WideDecimal;
    fn sub(self, other: &WideDecimal) -> WideDecimal {
        self + &(-other)
    }
}

impl Sub for WideDecimal {
    type Output = WideDecimal;
    fn sub(self, other: WideDecimal) -> WideDecimal {
        &self - &other
    }
}

impl PartialOrd for WideDecimal {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for WideDecimal {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (WideDecimal::Small(a), WideDecimal::Small(b)) => a.cmp(b),
            _ => self.big().cmp(&other.big()),
        }
    }
}

impl fmt::Display for WideDecimal {
    /// The canonical text: no exponent, no trailing fractional zeros, `0`
    /// for zero (the same text `amount::canonical` gives a `Decimal`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let big = match self {
            // Every stored total is written through here: the common case
            // splits the `i128` arithmetically, without allocating.
            WideDecimal::Small(v) => {
                const ONE: u128 = 10u128.pow(SCALE);
                let magnitude = v.unsigned_abs();
                let (int, mut frac) = (magnitude / ONE, magnitude % ONE);
                if *v < 0 {
                    f.write_str("-")?;
                }
                write!(f, "{int}")?;
                if frac != 0 {
                    let mut width = SCALE as usize;
                    while frac % 10 == 0 {
                        frac /= 10;
                        width -= 1;
                    }
                    write!(f, ".{frac:0width$}")?;
                }
                return Ok(());
            }
            WideDecimal::Big(v) => v,
        };
        let (negative, digits) = (
            big.sign() == num_bigint::Sign::Minus,
            big.magnitude().to_string(),
        );
        let digits = format!("{digits:0>width$}", width = SCALE as usize + 1);
        let (int, frac) = digits.split_at(digits.len() - SCALE as usize);
        let frac = frac.trim_end_matches('0');
        if negative {
            f.write_str("-")?;
        }
        f.write_str(int)?;
        if !frac.is_empty() {
            write!(f, ".{frac}")?;
        }
        Ok(())
    }
}
