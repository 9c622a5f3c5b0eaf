//! The usage terms of an entry, as the writer stores them beside its
//! params (columns `usage_meter`, `usage_day`, `usage_quantity`), and the
//! reading of those terms from params that the usage summaries' fold
//! (tally-projections) shares, so a row summed from the columns is the row
//! the fold makes of the entry.

use std::borrow::Cow;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{EntryStatus, StoredEntry};
use crate::request::EntryKind;
use crate::LedgerError;

/// The text form of a day in the database and in responses.
pub const DAY_FORMAT: &str = "%Y-%m-%d";

/// What the usage fold reads of an entry: the fold runs over whole
/// entries (the projector, the export) and over the narrow rows a rebuild
/// reads, through the same code.
#[derive(Debug, Clone, Copy)]
pub struct UsageSource<'a> {
    /// Names the entry in error messages.
    pub seq: i64,
    pub kind: EntryKind,
    pub status: EntryStatus,
    pub account: &'a str,
    pub unit: &'a str,
    pub amount: Decimal,
    pub recorded_at: DateTime<Utc>,
    pub params: &'a str,
}

impl<'a> From<&'a StoredEntry> for UsageSource<'a> {
    fn from(e: &'a StoredEntry) -> Self {
        UsageSource {
            seq: e.seq,
            kind: e.kind,
            status: e.status,
            account: &e.account,
            unit: &e.unit,
            amount: e.amount,
            recorded_at: e.recorded_at,
            params: &e.params,
        }
    }
}

/// The parameters the fold reads. A parameter that is not a JSON string is
/// treated as absent. Borrowed from the stored text when it has no escapes:
/// a rebuild parses a million of these.
#[derive(Debug, Default, Deserialize)]
pub struct UsageParams<'a> {
    #[serde(default, borrow, deserialize_with = "string_or_none")]
    pub quantity: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "string_or_none")]
    pub meter: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "string_or_none")]
    pub occurred_at: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "string_or_none")]
    pub entry_id: Option<Cow<'a, str>>,
}

/// The parameters of `source`; its params must be a JSON object.
pub fn params_of<'a>(source: &UsageSource<'a>) -> Result<UsageParams<'a>, LedgerError> {
    serde_json::from_str(source.params).map_err(|_| {
        LedgerError::Corrupt(format!(
            "params of the entry at seq {} are not JSON",
            source.seq
        ))
    })
}

/// A JSON string as `Some`, any other value (skipped unparsed) as `None`.
pub fn string_or_none<'de, D>(d: D) -> Result<Option<Cow<'de, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct StringOrNone;
    impl<'de> serde::de::Visitor<'de> for StringOrNone {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        // Objects, and numbers (serde_json's arbitrary_precision hands
        // those over as a one-key map).
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(StringOrNone)
}

/// The meter, day and quantity of a posted usage debit; its account, unit
/// and amount are the entry's.
pub fn usage_terms<'p>(
    source: &UsageSource<'_>,
    params: UsageParams<'p>,
) -> Result<(Cow<'p, str>, NaiveDate, Decimal), LedgerError> {
    let quantity = match params.quantity.as_deref() {
        None => Decimal::ZERO,
        Some(q) => crate::amount::parse_exact(q, false).map_err(|m| {
            LedgerError::Corrupt(format!(
                "quantity {q:?} of the entry at seq {} {m}",
                source.seq
            ))
        })?,
    };
    // Usage belongs to the day it happened (UTC) when the client said so,
    // else to the day it was recorded.
    let day = params
        .occurred_at
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc).date_naive())
        .unwrap_or_else(|| source.recorded_at.date_naive());
    Ok((params.meter.unwrap_or_default(), day, quantity))
}

/// The usage key and quantity of a posted usage debit, as the writer stores
/// them beside its params (columns `usage_meter`,
/// `usage_day`, `usage_quantity`), so a rebuild can add usage up in SQL.
/// Taken from the entry by [`usage_terms`], which the usage fold builds
/// its key and totals from too, so a row summed from these columns is
/// the row the fold makes of the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageColumns {
    pub meter: String,
    /// [`DAY_FORMAT`].
    pub day: String,
    pub quantity: Decimal,
}

impl UsageColumns {
    /// `None` for any entry but a posted usage debit, and for one whose
    /// params the fold could not read (the rebuild then folds it from its
    /// params, and reports it the way the fold does).
    pub fn of(entry: &StoredEntry) -> Option<UsageColumns> {
        let source = UsageSource::from(entry);
        if source.kind != EntryKind::UsageDebit || source.status != EntryStatus::Posted {
            return None;
        }
        // The writer calls this for every entry it appends: no usage key is
        // built (it would copy the account only to drop it).
        let (meter, day, quantity) = usage_terms(&source, params_of(&source).ok()?).ok()?;
        Some(UsageColumns {
            meter: meter.into_owned(),
            day: day.format(DAY_FORMAT).to_string(),
            quantity,
        })
    }
}
