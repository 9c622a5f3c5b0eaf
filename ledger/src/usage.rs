//! Usage summaries: per tenant, account, meter, UTC day and unit, the
//! quantity, amount and number of posted usage debits, net of reversals.
//!
//! This file is the pure fold (no I/O): the projector that keeps the
//! `usage_summaries` table, `tally projections rebuild` and `tally verify`
//! all fold entries through [`UsageFold::apply`], so "a rebuild is identical"
//! holds by construction. The SQL is in `store/usage.rs`; the design is in
//! `docs/usage-summaries.md`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::entry::{EntryStatus, StoredEntry};
use crate::intent::EntryKind;
use crate::store::{Storage, UsageQuery};
use crate::wide::WideDecimal;
use crate::LedgerError;

/// The name of the usage projector's row in `projector_checkpoints`.
pub const USAGE_PROJECTOR: &str = "usage";

/// The text form of a day in the database and in responses.
pub const DAY_FORMAT: &str = "%Y-%m-%d";

/// One row of the summary: whose usage, of what, on which UTC day, in which unit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UsageKey {
    pub account: String,
    /// `""` when the entry names no meter.
    pub meter: String,
    pub day: NaiveDate,
    pub unit: String,
}

/// What one key adds up to. Deltas (a reversal) may be negative.
///
/// The sums are exact whatever their size: a day of 28-digit quantities
/// adds up past what one amount (or a `Decimal`) may hold, and a summary
/// is an aggregate the writer never decides on (docs/usage-summaries.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageTotals {
    pub quantity: WideDecimal,
    pub amount: WideDecimal,
    pub entries: i64,
}

impl UsageTotals {
    /// The totals of one usage debit.
    pub fn of_one(quantity: Decimal, amount: Decimal) -> Result<UsageTotals, LedgerError> {
        let exact = |d: Decimal, what: &str| {
            WideDecimal::from_decimal(d).ok_or_else(|| {
                LedgerError::Corrupt(format!(
                    "usage {what} {d} has more than 18 fractional digits"
                ))
            })
        };
        Ok(UsageTotals {
            quantity: exact(quantity, "quantity")?,
            amount: exact(amount, "amount")?,
            entries: 1,
        })
    }

    /// `self + other`; only the count of entries can overflow (past 2^63).
    pub fn checked_add(&self, other: &UsageTotals) -> Result<UsageTotals, LedgerError> {
        Ok(UsageTotals {
            quantity: &self.quantity + &other.quantity,
            amount: &self.amount + &other.amount,
            entries: self.entries.checked_add(other.entries).ok_or_else(|| {
                LedgerError::Corrupt("usage count of entries overflows".to_owned())
            })?,
        })
    }

    fn negated(&self) -> UsageTotals {
        UsageTotals {
            quantity: -&self.quantity,
            amount: -&self.amount,
            entries: -self.entries,
        }
    }

    /// True when every total is zero (a day whose usage was all reversed).
    pub fn is_zero(&self) -> bool {
        self.quantity.is_zero() && self.amount.is_zero() && self.entries == 0
    }
}

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

fn params_of<'a>(source: &UsageSource<'a>) -> Result<UsageParams<'a>, LedgerError> {
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

/// The key and totals a posted usage debit contributes; `None` for any
/// other entry.
pub fn usage_of(entry: &StoredEntry) -> Result<Option<(UsageKey, UsageTotals)>, LedgerError> {
    usage_of_source(&UsageSource::from(entry))
}

/// [`usage_of`] over the columns the fold reads.
pub fn usage_of_source(
    source: &UsageSource<'_>,
) -> Result<Option<(UsageKey, UsageTotals)>, LedgerError> {
    if source.kind != EntryKind::UsageDebit || source.status != EntryStatus::Posted {
        return Ok(None);
    }
    usage_with_params(source, params_of(source)?).map(Some)
}

/// The usage of a posted usage debit whose parameters were already read
/// (`source.params` is not looked at).
pub fn usage_with_params(
    source: &UsageSource<'_>,
    params: UsageParams<'_>,
) -> Result<(UsageKey, UsageTotals), LedgerError> {
    let (meter, day, quantity) = usage_terms(source, params)?;
    let totals = UsageTotals::of_one(quantity, source.amount)?;
    Ok((
        UsageKey {
            account: source.account.to_owned(),
            meter: meter.into_owned(),
            day,
            unit: source.unit.to_owned(),
        },
        totals,
    ))
}

/// The meter, day and quantity of a posted usage debit; its account, unit
/// and amount are the entry's.
fn usage_terms<'p>(
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

/// Usage being added up over a scan of the log: a hash map probed with a
/// reused key, so an entry whose key is already there costs one lookup and
/// no allocation (the ordered [`UsageFold`] cost a B-tree walk of string
/// comparisons and three allocations per entry: 18 % of a rebuild's CPU).
#[derive(Debug)]
pub struct UsageScan {
    totals: HashMap<UsageKey, UsageTotals>,
    probe: UsageKey,
}

impl Default for UsageScan {
    fn default() -> Self {
        UsageScan {
            totals: HashMap::new(),
            probe: UsageKey {
                account: String::new(),
                meter: String::new(),
                day: NaiveDate::MIN,
                unit: String::new(),
            },
        }
    }
}

impl UsageScan {
    /// Adds the usage of a posted usage debit whose parameters were already
    /// read (`source.params` is not looked at).
    pub fn add_usage(
        &mut self,
        source: &UsageSource<'_>,
        params: UsageParams<'_>,
    ) -> Result<(), LedgerError> {
        let (meter, day, quantity) = usage_terms(source, params)?;
        let totals = UsageTotals::of_one(quantity, source.amount)?;
        self.add_to_key(source.account, &meter, day, source.unit, &totals)
    }

    /// Adds `totals` to the row of one usage key, given by its parts.
    pub fn add_to_key(
        &mut self,
        account: &str,
        meter: &str,
        day: NaiveDate,
        unit: &str,
        totals: &UsageTotals,
    ) -> Result<(), LedgerError> {
        let probe = &mut self.probe;
        probe.account.clear();
        probe.account.push_str(account);
        probe.meter.clear();
        probe.meter.push_str(meter);
        probe.day = day;
        probe.unit.clear();
        probe.unit.push_str(unit);
        match self.totals.get_mut(probe) {
            Some(slot) => *slot = slot.checked_add(totals)?,
            None => {
                self.totals.insert(probe.clone(), totals.clone());
            }
        }
        Ok(())
    }

    /// Adds the usage of `source` if it is a posted usage debit.
    pub fn add_source(&mut self, source: &UsageSource<'_>) -> Result<(), LedgerError> {
        if source.kind != EntryKind::UsageDebit || source.status != EntryStatus::Posted {
            return Ok(());
        }
        self.add_usage(source, params_of(source)?)
    }

    pub fn into_fold(self) -> Result<UsageFold, LedgerError> {
        let mut fold = UsageFold::new();
        for (key, totals) in self.totals {
            fold.add(key, &totals)?;
        }
        Ok(fold)
    }
}

/// The usage key and quantity of a posted usage debit, as the writer stores
/// them beside its params (columns `usage_meter`,
/// `usage_day`, `usage_quantity`), so a rebuild can add usage up in SQL.
/// Taken from the entry by the fold's own [`usage_terms`] (what [`usage_of`]
/// builds its key and totals from), so a row summed from these columns is
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

/// The entry a posted reversal names (its `entry_id` parameter), which must
/// be looked up before the reversal can be folded. `None` for any other entry.
pub fn reversal_target(entry: &StoredEntry) -> Result<Option<String>, LedgerError> {
    reversal_target_of(&UsageSource::from(entry))
}

/// [`reversal_target`] over the columns the fold reads.
pub fn reversal_target_of(source: &UsageSource<'_>) -> Result<Option<String>, LedgerError> {
    if source.kind != EntryKind::Reversal || source.status != EntryStatus::Posted {
        return Ok(None);
    }
    Ok(params_of(source)?.entry_id.map(Cow::into_owned))
}

/// Usage summaries folded from entries, in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFold {
    totals: BTreeMap<UsageKey, UsageTotals>,
}

impl UsageFold {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one entry. `original` is the entry [`reversal_target`] named,
    /// if the entry is a reversal (ignored otherwise): a reversal of a
    /// posted usage debit takes that debit's totals back out of the
    /// debit's own key (its day and meter). Every other entry changes nothing.
    pub fn apply(
        &mut self,
        entry: &StoredEntry,
        original: Option<&StoredEntry>,
    ) -> Result<(), LedgerError> {
        if let Some((key, totals)) = usage_of(entry)? {
            return self.add(key, &totals);
        }
        if entry.kind != EntryKind::Reversal || entry.status != EntryStatus::Posted {
            return Ok(());
        }
        match original {
            Some(original) if original.tenant_id == entry.tenant_id => {
                self.take_back(entry.seq, original)
            }
            _ => Ok(()),
        }
    }

    /// Folds a posted reversal at `reversal_seq` of the same tenant as
    /// `original`, the entry it names: the original's usage, if it is a
    /// posted usage debit before the reversal, comes back out.
    pub fn take_back(
        &mut self,
        reversal_seq: i64,
        original: &StoredEntry,
    ) -> Result<(), LedgerError> {
        if original.seq >= reversal_seq {
            return Ok(());
        }
        if let Some((key, totals)) = usage_of(original)? {
            self.add(key, &totals.negated())?;
        }
        Ok(())
    }

    /// Adds `delta` to `key`'s totals. A key once touched stays in the fold
    /// even if it nets to zero, so the rows written do not depend on how
    /// the log was cut into rounds.
    pub fn add(&mut self, key: UsageKey, delta: &UsageTotals) -> Result<(), LedgerError> {
        let slot = self.totals.entry(key).or_default();
        *slot = slot.checked_add(delta)?;
        Ok(())
    }

    /// Adds every key of `other` (a fold of another part of the log: the
    /// totals are exact sums, so the split cannot change the result).
    pub fn merge(&mut self, other: UsageFold) -> Result<(), LedgerError> {
        if self.totals.is_empty() {
            self.totals = other.totals;
            return Ok(());
        }
        for (key, totals) in other.totals {
            self.add(key, &totals)?;
        }
        Ok(())
    }

    pub fn get(&self, key: &UsageKey) -> Option<&UsageTotals> {
        self.totals.get(key)
    }

    /// Sets `key`'s totals, whatever they were.
    pub fn insert(&mut self, key: UsageKey, totals: UsageTotals) {
        self.totals.insert(key, totals);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&UsageKey, &UsageTotals)> {
        self.totals.iter()
    }

    pub fn len(&self) -> usize {
        self.totals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.totals.is_empty()
    }
}

/// How `GET /v1/accounts/{account}/usage` groups days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    #[default]
    Day,
    Month,
}

impl Granularity {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "day" => Some(Granularity::Day),
            "month" => Some(Granularity::Month),
            _ => None,
        }
    }

    fn period(self, day: NaiveDate) -> String {
        match self {
            Granularity::Day => day.format(DAY_FORMAT).to_string(),
            Granularity::Month => day.format("%Y-%m").to_string(),
        }
    }
}

/// One period of one meter in one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsagePeriod {
    /// `YYYY-MM-DD` or `YYYY-MM`.
    #[cfg_attr(feature = "openapi", schema(example = "2026-11-29"))]
    pub period: String,
    /// Null for usage debits without a meter.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub meter: Option<String>,
    pub unit: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub quantity: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub amount: String,
    /// Usage debits netted into the period (a reversal counts −1).
    pub entries: i64,
}

/// The body of `GET /v1/accounts/{account}/usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Usage, example = json!({
    "account": "cust_42", "granularity": "day", "current_as_of_seq": 1041, "head_seq": 1043,
    "usage": [
        {"period": "2026-11-29", "meter": "llm-tokens", "unit": "USD",
         "quantity": "1250", "amount": "0.0125", "entries": 3},
        {"period": "2026-11-29", "meter": null, "unit": "USD",
         "quantity": "0", "amount": "1.1", "entries": 1}
    ]
})))]
pub struct UsageView {
    pub account: String,
    pub granularity: Granularity,
    /// The summaries include every entry up to this seq, none after it.
    pub current_as_of_seq: i64,
    /// The tenant's last seq when the summaries were read.
    pub head_seq: i64,
    pub usage: Vec<UsagePeriod>,
}

/// Groups stored day rows into periods, sorted by period, meter and unit.
/// Periods whose usage nets to nothing (all reversed) are left out.
pub fn summarise(
    rows: &[(UsageKey, UsageTotals)],
    granularity: Granularity,
) -> Result<Vec<UsagePeriod>, LedgerError> {
    let mut periods: BTreeMap<(String, String, String), UsageTotals> = BTreeMap::new();
    for (key, totals) in rows {
        let slot = periods
            .entry((
                granularity.period(key.day),
                key.meter.clone(),
                key.unit.clone(),
            ))
            .or_default();
        *slot = slot.checked_add(totals)?;
    }
    Ok(periods
        .into_iter()
        .filter(|(_, t)| !t.is_zero())
        .map(|((period, meter, unit), t)| UsagePeriod {
            period,
            meter: (!meter.is_empty()).then_some(meter),
            unit,
            quantity: t.quantity.to_string(),
            amount: t.amount.to_string(),
            entries: t.entries,
        })
        .collect())
}

/// Reads `account`'s usage summaries as the projector last left them.
pub async fn read_usage(
    storage: &Storage,
    tenant: &str,
    query: &UsageQuery,
    granularity: Granularity,
) -> Result<UsageView, LedgerError> {
    let read = storage.usage_rows(tenant, query).await?;
    Ok(UsageView {
        account: query.account.clone(),
        granularity,
        current_as_of_seq: read.checkpoint,
        head_seq: read.head_seq,
        usage: summarise(&read.rows, granularity)?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::str::FromStr;

    fn entry(seq: i64, kind: EntryKind, account: &str, amount: &str, params: Value) -> StoredEntry {
        StoredEntry {
            tenant_id: "t".into(),
            seq,
            id: format!("ent_{seq}"),
            kind,
            upstream_id: format!("u{seq}"),
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: account.into(),
            debit_account: account.into(),
            credit_account: "@revenue".into(),
            amount: Decimal::from_str(amount).unwrap(),
            unit: "USD".into(),
            params: params.to_string(),
            fingerprint: String::new(),
            recorded_at: DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            balance_after: Decimal::ZERO,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn key(meter: &str, day: &str) -> UsageKey {
        UsageKey {
            account: "c".into(),
            meter: meter.into(),
            day: NaiveDate::parse_from_str(day, DAY_FORMAT).unwrap(),
            unit: "USD".into(),
        }
    }

    fn w(s: &str) -> WideDecimal {
        WideDecimal::parse(s).unwrap()
    }

    #[test]
    fn folds_debits_by_utc_day_and_meter_and_takes_reversals_back_out() {
        let e1 = entry(
            1,
            EntryKind::UsageDebit,
            "c",
            "0.01",
            serde_json::json!({"meter": "tok", "quantity": "1000", "occurred_at": "2026-11-29T23:30:00-01:00"}),
        );
        let e2 = entry(
            2,
            EntryKind::UsageDebit,
            "c",
            "0.0025",
            serde_json::json!({"meter": "tok", "quantity": "250", "occurred_at": "2026-11-30T00:10:00Z"}),
        );
        let e3 = entry(3, EntryKind::UsageDebit, "c", "2", serde_json::json!({}));
        let pay = entry(4, EntryKind::Payment, "c", "5", serde_json::json!({}));
        let rev = entry(
            5,
            EntryKind::Reversal,
            "c",
            "0.0025",
            serde_json::json!({"entry_id": "ent_2", "reason": "oops"}),
        );
        let mut fold = UsageFold::new();
        for e in [&e1, &e2, &e3, &pay] {
            fold.apply(e, None).unwrap();
        }
        assert_eq!(reversal_target(&rev).unwrap().as_deref(), Some("ent_2"));
        assert_eq!(reversal_target(&e1).unwrap(), None);
        fold.apply(&rev, Some(&e2)).unwrap();
        assert_eq!(fold.len(), 2);
        // 23:30 at UTC-1 is 00:30 UTC on the 30th.
        assert_eq!(
            fold.get(&key("tok", "2026-11-30")).unwrap(),
            &UsageTotals {
                quantity: w("1000"),
                amount: w("0.01"),
                entries: 1
            }
        );
        assert_eq!(
            fold.get(&key("", "2026-12-01")).unwrap(),
            &UsageTotals {
                quantity: WideDecimal::ZERO,
                amount: w("2"),
                entries: 1
            }
        );

        let rows: Vec<_> = fold.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
        let days = summarise(&rows, Granularity::Day).unwrap();
        assert_eq!(days.len(), 2);
        assert_eq!(days[0].period, "2026-11-30");
        assert_eq!(days[0].meter.as_deref(), Some("tok"));
        assert_eq!(days[1].meter, None);
        let months = summarise(&rows, Granularity::Month).unwrap();
        assert_eq!(months[0].period, "2026-11");
        assert_eq!(months[1].period, "2026-12");
    }

    /// The fold reads parameters as JSON strings; any other value counts as
    /// absent, and escaped text is read unescaped.
    #[test]
    fn parameters_that_are_not_strings_count_as_absent() {
        let e = entry(
            1,
            EntryKind::UsageDebit,
            "c",
            "1",
            serde_json::json!({"meter": 5, "quantity": {"x": [1, "2"]}, "occurred_at": null}),
        );
        let (k, t) = usage_of(&e).unwrap().unwrap();
        assert_eq!(k, key("", "2026-12-01"));
        assert_eq!(t.quantity, WideDecimal::ZERO);
        let e = entry(
            2,
            EntryKind::UsageDebit,
            "c",
            "1",
            serde_json::json!({"meter": "a\"b\u{e9}", "quantity": "2.50"}),
        );
        let (k, t) = usage_of(&e).unwrap().unwrap();
        assert_eq!(k.meter, "a\"b\u{e9}");
        assert_eq!(t.quantity, w("2.5"));
        let bad = StoredEntry {
            params: "not json".into(),
            ..e
        };
        assert!(matches!(usage_of(&bad), Err(LedgerError::Corrupt(_))));
    }

    #[test]
    fn a_fold_does_not_depend_on_how_the_log_is_cut() {
        let entries: Vec<StoredEntry> = (1..=20)
            .map(|i| {
                entry(
                    i,
                    EntryKind::UsageDebit,
                    if i % 2 == 0 { "c" } else { "d" },
                    "0.3",
                    serde_json::json!({"meter": "m", "quantity": "3", "occurred_at": format!("2026-11-{:02}T10:00:00Z", i)}),
                )
            })
            .collect();
        let mut whole = UsageFold::new();
        for e in &entries {
            whole.apply(e, None).unwrap();
        }
        let mut stored = UsageFold::new();
        for chunk in entries.chunks(7) {
            let mut delta = UsageFold::new();
            for e in chunk {
                delta.apply(e, None).unwrap();
            }
            for (k, t) in delta.iter() {
                stored.add(k.clone(), t).unwrap();
            }
        }
        assert_eq!(whole, stored);
    }

    #[test]
    fn reversals_of_anything_but_a_posted_usage_debit_change_nothing() {
        let pay = entry(1, EntryKind::Payment, "c", "5", serde_json::json!({}));
        let rev = entry(
            2,
            EntryKind::Reversal,
            "c",
            "5",
            serde_json::json!({"entry_id": "ent_1"}),
        );
        let mut fold = UsageFold::new();
        fold.apply(&pay, None).unwrap();
        fold.apply(&rev, Some(&pay)).unwrap();
        fold.apply(&rev, None).unwrap();
        assert!(fold.is_empty());
    }

    #[test]
    fn sums_past_28_digits_are_exact() {
        let nines = "9999999999999999999999999999";
        let at = |i: i64, q: &str, day: &str| {
            entry(
                i,
                EntryKind::UsageDebit,
                "c",
                "1",
                serde_json::json!({"meter": "m", "quantity": q, "occurred_at": format!("2026-11-{day}T10:00:00Z")}),
            )
        };
        let mut fold = UsageFold::new();
        for e in [
            at(1, nines, "29"),
            at(2, nines, "29"),
            at(3, "0.000000000000000001", "29"),
            at(4, nines, "30"),
        ] {
            fold.apply(&e, None).unwrap();
        }
        let rows: Vec<_> = fold.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
        let days = summarise(&rows, Granularity::Day).unwrap();
        assert_eq!(
            days[0].quantity,
            "19999999999999999999999999998.000000000000000001"
        );
        let months = summarise(&rows, Granularity::Month).unwrap();
        assert_eq!(
            months[0].quantity,
            "29999999999999999999999999997.000000000000000001"
        );
        assert_eq!(months[0].entries, 4);
        // Taking a debit back out is exact too.
        fold.apply(
            &entry(
                5,
                EntryKind::Reversal,
                "c",
                "1",
                serde_json::json!({"entry_id": "ent_3"}),
            ),
            Some(&at(3, "0.000000000000000001", "29")),
        )
        .unwrap();
        assert_eq!(
            fold.get(&key("m", "2026-11-29")).unwrap().quantity,
            w("19999999999999999999999999998")
        );
    }
}
