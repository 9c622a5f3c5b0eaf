//! Reading a JSON object field by field, collecting every problem at once.
//!
//! Requests are read from a `serde_json::Map` rather than derived structs so
//! that unknown fields, wrong types and rule violations all come back in one
//! `errors: [{field, message}]` list, and so that amounts keep the exact text
//! the client sent.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::amount;

/// One problem with one field (or query parameter) of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field's name; a dotted path inside an object (`metadata.model`).
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ValidationErrors {
    pub errors: Vec<FieldError>,
}

impl ValidationErrors {
    pub fn single(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            errors: vec![FieldError {
                field: field.into(),
                message: message.into(),
            }],
        }
    }

    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

impl std::fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{} {}", e.field, e.message)?;
        }
        Ok(())
    }
}

/// A JSON object being read. Every accessor records its own error and
/// returns `None`, so a handler reads all fields and reports all problems.
pub struct Fields {
    map: Map<String, Value>,
    errors: ValidationErrors,
}

impl Fields {
    /// Starts reading `map`; any key not in `allowed` is reported at once.
    pub fn new(map: Map<String, Value>, allowed: &[&str]) -> Self {
        let mut errors = ValidationErrors::default();
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                errors.push(key.clone(), "is not a known field");
            }
        }
        Self { map, errors }
    }

    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(field, message);
    }

    pub fn finish(self) -> Result<(), ValidationErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(self.errors)
        }
    }

    /// `null` reads as absent: JSON clients often send it for "no value".
    fn take(&mut self, field: &str) -> Option<Value> {
        match self.map.remove(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    fn take_required(&mut self, field: &str) -> Option<Value> {
        let v = self.take(field);
        if v.is_none() {
            self.error(field, "is required");
        }
        v
    }

    fn as_string(&mut self, field: &str, value: Value) -> Option<String> {
        match value {
            Value::String(s) => Some(s),
            _ => {
                self.error(field, "must be a string");
                None
            }
        }
    }

    /// A required string checked by `check`.
    pub fn required_str(
        &mut self,
        field: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Option<String> {
        let v = self.take_required(field)?;
        let s = self.as_string(field, v)?;
        self.checked(field, s, check)
    }

    /// An optional string: `Some(None)` when absent, `None` when invalid.
    pub fn optional_str(
        &mut self,
        field: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Option<Option<String>> {
        match self.take(field) {
            None => Some(None),
            Some(v) => {
                let s = self.as_string(field, v)?;
                self.checked(field, s, check).map(Some)
            }
        }
    }

    fn checked(
        &mut self,
        field: &str,
        s: String,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Option<String> {
        match check(&s) {
            Ok(()) => Some(s),
            Err(message) => {
                self.error(field, message);
                None
            }
        }
    }

    fn decimal(&mut self, field: &str, value: Value) -> Option<Decimal> {
        let parsed = match &value {
            Value::String(s) => amount::parse_exact(s, false),
            // With serde_json's arbitrary_precision the number keeps the
            // client's literal text, so `0.1` is read as exactly 0.1.
            Value::Number(n) => amount::parse_exact(&n.to_string(), true),
            _ => Err("must be a decimal string such as \"1.50\"".to_owned()),
        };
        match parsed {
            Ok(d) => Some(d),
            Err(message) => {
                self.error(field, message);
                None
            }
        }
    }

    /// A required amount, strictly greater than zero.
    pub fn required_amount(&mut self, field: &str) -> Option<Decimal> {
        let v = self.take_required(field)?;
        let d = self.decimal(field, v)?;
        if d <= Decimal::ZERO {
            self.error(field, "must be greater than zero");
            return None;
        }
        Some(d)
    }

    /// An optional decimal that may be zero but not negative (a quantity).
    pub fn optional_non_negative(&mut self, field: &str) -> Option<Option<Decimal>> {
        match self.take(field) {
            None => Some(None),
            Some(v) => {
                let d = self.decimal(field, v)?;
                if d < Decimal::ZERO {
                    self.error(field, "must not be negative");
                    return None;
                }
                Some(Some(d))
            }
        }
    }

    /// An optional RFC 3339 timestamp, converted to UTC.
    pub fn optional_timestamp(&mut self, field: &str) -> Option<Option<DateTime<Utc>>> {
        match self.take(field) {
            None => Some(None),
            Some(v) => {
                let s = self.as_string(field, v)?;
                match DateTime::parse_from_rfc3339(&s) {
                    Ok(t) => Some(Some(t.with_timezone(&Utc))),
                    Err(_) => {
                        self.error(
                            field,
                            "must be an RFC 3339 timestamp such as \"2026-11-29T10:00:00Z\"",
                        );
                        None
                    }
                }
            }
        }
    }

    /// An optional raw value, for fields with a shape of their own
    /// (e.g. `overdraft`, a string or an object).
    pub fn optional_value(&mut self, field: &str) -> Option<Value> {
        self.take(field)
    }

    /// An optional integer within `min..=max`.
    pub fn optional_int(&mut self, field: &str, min: i64, max: i64) -> Option<Option<i64>> {
        match self.take(field) {
            None => Some(None),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) if (min..=max).contains(&i) => Some(Some(i)),
                _ => {
                    self.error(field, format!("must be an integer from {min} to {max}"));
                    None
                }
            },
            Some(_) => {
                self.error(field, format!("must be an integer from {min} to {max}"));
                None
            }
        }
    }

    /// A required string that must be one of `choices`.
    pub fn required_choice(
        &mut self,
        field: &str,
        choices: &[&'static str],
    ) -> Option<&'static str> {
        let v = self.take_required(field)?;
        let s = self.as_string(field, v)?;
        match choices.iter().find(|c| **c == s) {
            Some(c) => Some(c),
            None => {
                self.error(field, format!("must be one of {}", choices.join(", ")));
                None
            }
        }
    }

    /// Optional metadata: an object of string → string within the limits of
    /// [`crate::names::check_metadata`].
    pub fn optional_metadata(&mut self, field: &str) -> Option<Option<Map<String, Value>>> {
        match self.take(field) {
            None => Some(None),
            Some(Value::Object(m)) => match crate::names::check_metadata(&m) {
                Ok(()) => Some(Some(m)),
                Err(message) => {
                    self.error(field, message);
                    None
                }
            },
            Some(_) => {
                self.error(field, "must be an object of string values");
                None
            }
        }
    }
}
