//! Query strings read strictly: unknown or repeated parameters are refused,
//! as unknown body fields are.

use std::collections::HashMap;

use tally_ledger::fields::ValidationErrors;

use crate::problem::ApiError;

pub struct QueryParams {
    params: HashMap<String, String>,
    errors: ValidationErrors,
}

impl QueryParams {
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.unwrap_or(""))
            .map_err(|e| ApiError::Invalid(ValidationErrors::single("query", e.to_string())))?;
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
