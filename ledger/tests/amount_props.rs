//! Property test of exact decimal parsing (`amount::parse_exact`) against an
//! independent reference: digit strings and exponents held as arbitrary
//! size integers (num-bigint), so no step of the reference can overflow.
//! Mantissas of up to 60 digits with leading and trailing zeros, exponents
//! anywhere from small to the ends of i64 and beyond (`1e-9223372036854775808`,
//! 40-digit exponents), zeros with huge exponents, and values that are legal
//! only once normalised (`1000e-3`). Every input is either read as exactly
//! the reference's value or refused when the reference says it is out of
//! range — never another amount, never a panic.
//!
//! The property prints how many cases it ran (`-- --nocapture`);
//! `PROPTEST_CASES` raises the count for a longer run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use num_bigint::{BigInt, BigUint};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tally_ledger::amount::{canonical, parse_exact, MAX_FRACTIONAL_DIGITS, MAX_SIGNIFICANT_DIGITS};

/// One literal: sign, integer digits, fractional digits (None: no point),
/// and the exponent's text (None: no exponent).
#[derive(Debug, Clone)]
struct Literal {
    negative: bool,
    int: String,
    frac: Option<String>,
    exponent: Option<String>,
}

impl Literal {
    fn text(&self) -> String {
        let mut s = String::new();
        if self.negative {
            s.push('-');
        }
        s.push_str(&self.int);
        if let Some(f) = &self.frac {
            s.push('.');
            s.push_str(f);
        }
        if let Some(e) = &self.exponent {
            s.push('e');
            s.push_str(e);
        }
        s
    }
}

/// The canonical text of the literal's value, or `None` when it is out of
/// range (more than 28 significant or 18 fractional digits).
fn reference(l: &Literal) -> Option<String> {
    let frac = l.frac.clone().unwrap_or_default();
    let digits = format!("{}{}", l.int, frac);
    let mut n = BigUint::parse_bytes(digits.as_bytes(), 10).unwrap();
    let zero = BigUint::from(0u32);
    if n == zero {
        return Some("0".to_owned());
    }
    let exponent = match &l.exponent {
        None => BigInt::from(0),
        Some(e) => e.trim_start_matches('+').parse::<BigInt>().unwrap(),
    };
    // value = n × 10^e
    let mut e = exponent - BigInt::from(frac.len());
    let ten = BigUint::from(10u32);
    while &n % &ten == zero {
        n /= &ten;
        e += 1;
    }
    let d = n.to_string();
    let text = if e >= BigInt::from(0) {
        if BigInt::from(d.len()) + &e > BigInt::from(MAX_SIGNIFICANT_DIGITS) {
            return None;
        }
        let zeros: usize = e.try_into().unwrap();
        format!("{d}{}", "0".repeat(zeros))
    } else {
        let scale = -e;
        if d.len() > MAX_SIGNIFICANT_DIGITS || scale > BigInt::from(MAX_FRACTIONAL_DIGITS) {
            return None;
        }
        let scale: usize = scale.try_into().unwrap();
        let padded = format!("{d:0>width$}", width = scale + 1);
        let (i, f) = padded.split_at(padded.len() - scale);
        format!("{i}.{f}")
    };
    Some(if l.negative { format!("-{text}") } else { text })
}

fn digits(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::string::string_regex(&format!("[0-9]{{1,{max}}}")).unwrap(),
        // Significant digits padded with zeros on both sides.
        2 => ("0{0,5}", "[1-9][0-9]{0,30}", 0usize..40).prop_map(|(lead, d, zeros)| {
            format!("{lead}{d}{}", "0".repeat(zeros))
        }),
        1 => "0{1,40}",
    ]
}

/// Exponents that matter: small, at and around the ends of i64, past them,
/// and of any length.
fn exponent() -> impl Strategy<Value = String> {
    let min = i128::from(i64::MIN);
    let max = i128::from(i64::MAX);
    let edges: Vec<i128> = vec![
        min,
        min - 1,
        min + 1,
        max,
        max + 1,
        max - 1,
        min - 2,
        max + 2,
    ];
    prop_oneof![
        4 => (-60i64..60).prop_map(|e| e.to_string()),
        3 => proptest::sample::select(edges).prop_map(|e| e.to_string()),
        1 => any::<i64>().prop_map(|e| e.to_string()),
        1 => ("[+-]?", "[1-9][0-9]{19,45}").prop_map(|(s, d)| format!("{s}{d}")),
        1 => ("[+-]?", "0{1,30}", "[0-9]{1,3}").prop_map(|(s, z, d)| format!("{s}{z}{d}")),
        1 => (-60i64..60).prop_map(|e| format!("{e:+}")),
    ]
}

fn literal() -> impl Strategy<Value = Literal> {
    (
        any::<bool>(),
        digits(40),
        proptest::option::of(digits(40)),
        proptest::option::weighted(0.8, exponent()),
    )
        .prop_map(|(negative, int, frac, exponent)| Literal {
            negative,
            int,
            frac,
            exponent,
        })
}

/// Trailing zeros taken back by the exponent: `d000…e-k` in range or not.
fn balanced() -> impl Strategy<Value = Literal> {
    ("[1-9][0-9]{0,30}", 0usize..200, -25i64..25, any::<bool>()).prop_map(
        |(d, zeros, offset, negative)| Literal {
            negative,
            int: format!("{d}{}", "0".repeat(zeros)),
            frac: None,
            exponent: Some((offset - zeros as i64).to_string()),
        },
    )
}

fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(5_000);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn every_literal_is_its_exact_value_or_refused() {
    let mut runner = runner();
    let ran = std::cell::Cell::new(0u32);
    let (in_range, refused) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    runner
        .run(&prop_oneof![3 => literal(), 1 => balanced()], |l| {
            ran.set(ran.get() + 1);
            let text = l.text();
            let want = reference(&l);
            let got = parse_exact(&text, true).map(canonical);
            match &want {
                Some(_) => in_range.set(in_range.get() + 1),
                None => refused.set(refused.get() + 1),
            }
            prop_assert_eq!(got.as_ref().ok(), want.as_ref(), "{} gave {:?}", text, got);
            // Without an exponent the same digits are a valid string too.
            if l.exponent.is_none() {
                let got = parse_exact(&text, false).map(canonical);
                prop_assert_eq!(got.as_ref().ok(), want.as_ref(), "string {}", text);
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "every_literal_is_its_exact_value_or_refused: {} cases ({} in range, {} refused)",
        ran.get(),
        in_range.get(),
        refused.get()
    );
    // The generator reaches both outcomes often.
    assert!(in_range.get() > ran.get() / 10, "{}", in_range.get());
    assert!(refused.get() > ran.get() / 10, "{}", refused.get());
}

/// Strings never take an exponent, whatever its size.
#[test]
fn strings_refuse_exponents() {
    for text in ["1e0", "1e-9223372036854775808", "0e5", "1E+2"] {
        assert!(parse_exact(text, false).is_err(), "{text}");
    }
}
