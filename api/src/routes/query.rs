//! Query strings read strictly: unknown or repeated parameters are refused,
//! as unknown body fields are, and so is a percent-encoding that is not
//! UTF-8 (it is not read as U+FFFD, which would be a valid name).

use std::borrow::Cow;
use std::collections::HashMap;

use percent_encoding::percent_decode_str;
use tally_ledger::fields::ValidationErrors;

use super::path::{PathText, NOT_UTF8};
use crate::problem::ApiError;

/// One `application/x-www-form-urlencoded` component: `+` is a space, then
/// percent-decoding; `None` when the bytes are not UTF-8.
fn decode(component: &str) -> Option<String> {
    let spaced: Cow<str> = if component.contains('+') {
        Cow::Owned(component.replace('+', " "))
    } else {
        Cow::Borrowed(component)
    };
    percent_decode_str(&spaced)
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

/// The `name=value` pairs of a query string, in order; empty pairs skipped
/// (as browsers do).
fn pairs(raw: &str) -> Result<Vec<(String, String)>, ValidationErrors> {
    let mut out = Vec::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let Some(name) = decode(name) else {
            return Err(ValidationErrors::single(
                "query",
                format!("has a parameter name that is not UTF-8 once percent-decoded ({name})"),
            ));
        };
        let Some(value) = decode(value) else {
            return Err(ValidationErrors::single(name, NOT_UTF8));
        };
        out.push((name, value));
    }
    Ok(out)
}

pub struct QueryParams {
    params: HashMap<String, String>,
    errors: ValidationErrors,
}

impl QueryParams {
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let pairs = pairs(raw.unwrap_or("")).map_err(ApiError::Invalid)?;
        let mut params = HashMap::new();
        let mut errors = ValidationErrors::default();
        for (k, v) in pairs {
            if !allowed.contains(&k.as_str()) {
                errors.push(k, "is not a known parameter");
            } else if let std::collections::hash_map::Entry::Vacant(slot) = params.entry(k.clone())
            {
                slot.insert(v);
            } else {
                errors.push(k, "is given more than once");
            }
        }
        Ok(Self { params, errors })
    }

    /// Parses with the parameters the endpoint's OpenAPI query type `P`
    /// documents as the known ones, so what is accepted and what is
    /// documented are one list.
    pub fn documented<P: utoipa::IntoParams>(raw: Option<&str>) -> Result<Self, ApiError> {
        let names: Vec<String> = P::into_params(|| None)
            .into_iter()
            .map(|p| p.name)
            .collect();
        let allowed: Vec<&str> = names.iter().map(String::as_str).collect();
        Self::parse(raw, &allowed)
    }

    pub fn text(&mut self, name: &str) -> Option<String> {
        self.params.remove(name)
    }

    /// A parameter naming something (an account, a unit, a meter), checked
    /// by its rule from `tally_ledger::names` before any database call.
    pub fn name(
        &mut self,
        name: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Option<String> {
        let raw = self.params.remove(name)?;
        match check(&raw) {
            Ok(()) => Some(raw),
            Err(message) => {
                self.errors.push(name, message);
                None
            }
        }
    }

    /// The route's path parameter, checked by `check`; a problem is
    /// reported with the query's (the text is returned either way, and
    /// `finish` refuses the request).
    pub fn path(
        &mut self,
        text: PathText,
        name: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> String {
        let text = text.into_inner();
        if let Err(message) = check(&text) {
            self.errors.push(name, message);
        }
        text
    }

    pub fn int(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        let raw = self.params.remove(name)?;
        match raw.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.errors
                    .push(name, format!("must be an integer from {min} to {max}"));
                None
            }
        }
    }

    pub fn timestamp(&mut self, name: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        let raw = self.params.remove(name)?;
        match chrono::DateTime::parse_from_rfc3339(&raw) {
            Ok(t) => Some(t.with_timezone(&chrono::Utc)),
            Err(_) => {
                self.errors.push(name, "must be an RFC 3339 timestamp");
                None
            }
        }
    }

    pub fn error(&mut self, name: &str, message: impl Into<String>) {
        self.errors.push(name, message);
    }

    /// Whether an error was already recorded for `name`.
    pub fn has_error(&self, name: &str) -> bool {
        self.errors.errors.iter().any(|e| e.field == name)
    }

    pub fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Invalid(self.errors))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_a_form_and_refuses_what_is_not_utf8() {
        assert_eq!(
            pairs("a=1&&b=x+y%2B%C3%A9&c&d=").unwrap(),
            vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x y+é".to_owned()),
                ("c".to_owned(), String::new()),
                ("d".to_owned(), String::new()),
            ]
        );
        assert_eq!(pairs("account=a%00b").unwrap()[0].1, "a\0b");
        assert_eq!(pairs("account=%FF").unwrap_err().errors[0].field, "account");
        assert_eq!(
            pairs("account=a%C3").unwrap_err().errors[0].field,
            "account"
        );
        assert_eq!(pairs("%FF=1").unwrap_err().errors[0].field, "query");
    }
}
