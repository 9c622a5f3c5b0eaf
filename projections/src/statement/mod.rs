//! Statements of an account over a period, and balances at a time
//! (docs/audit.md, "Statements and balances at a time").
//!
//! Time here is `recorded_at`, the ledger's own clock (UTC, microseconds).
//! "The balance at T" is the fold of the account's entries recorded at or
//! before T. With several `tally` processes `recorded_at` may step back
//! across `seq` by their clock skew, so the entries recorded before a time
//! need not be a seq prefix of the log. The fold below therefore gives every
//! entry an effect of its own, whatever else is in the set — a posting moves
//! `debits`/`credits`, a hold adds its amount to `held`, a capture or release
//! takes the whole hold's amount off `held` — which is exactly what
//! [`crate::fold::LogFold`] computes over a seq prefix (a test holds the two
//! to each other), and it makes the arithmetic of a statement exact:
//! opening + movements = closing, always.
//!
//! The figures are [`WideDecimal`]s: a stored total stays inside the amount
//! domain, but a set of entries that is not a seq prefix (a period's
//! movements) can add up past 28 digits, and is still answered exactly.
//!
//! Every read of one answer is bounded by the ledger head it started at, so
//! concurrent writes cannot make its parts disagree.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use crate::balance::AccountBalance;

use crate::balance_read::{pick_row, BalanceView};
use crate::entry::{format_recorded_at, EntryStatus, EntryView, StoredEntry};
use crate::fields::ValidationErrors;
use crate::fold::{moves_money, OpenHold};
use crate::intent::EntryKind;
use crate::store::{AccountRange, Storage, LOG_PAGE};
use crate::wide::WideDecimal;
use crate::LedgerError;

/// Most entries one statement lists; a longer period is refused (422).
pub const MAX_STATEMENT_ENTRIES: usize = 100_000;

/// A balance without its account and unit: the opening and closing
/// balances of a statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BalanceFigures {
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub debits: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub credits: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub posted: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub held: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub available: String,
}

impl BalanceFigures {
    pub fn new(b: &WideBalance) -> Self {
        Self {
            debits: b.debits.to_string(),
            credits: b.credits.to_string(),
            posted: b.posted().to_string(),
            held: b.held.to_string(),
            available: b.available().to_string(),
        }
    }
}

/// The totals of one account folded from any set of its entries, exact
/// whatever their size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WideBalance {
    pub debits: WideDecimal,
    pub credits: WideDecimal,
    pub held: WideDecimal,
}

impl WideBalance {
    /// `credits − debits`.
    pub fn posted(&self) -> WideDecimal {
        &self.credits - &self.debits
    }

    /// `posted − held`.
    pub fn available(&self) -> WideDecimal {
        &self.posted() - &self.held
    }
}

impl From<&AccountBalance> for WideBalance {
    fn from(b: &AccountBalance) -> Self {
        // A stored total has at most 18 fractional digits (the amount
        // domain); the fallback is never taken.
        let wide = |d| WideDecimal::from_decimal(d).unwrap_or_default();
        WideBalance {
            debits: wide(b.debits),
            credits: wide(b.credits),
            held: wide(b.held),
        }
    }
}

/// What the period's entries moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Movements {
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub debits: String,
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub credits: String,
    /// `credits − debits`: the change of `posted`.
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub net: String,
    /// The change of `held` (negative when more was released than reserved).
    #[cfg_attr(feature = "openapi", schema(format = "decimal"))]
    pub held: String,
    /// How many entries the statement lists, rejected ones included.
    pub entries: usize,
}

/// The body of `GET /v1/accounts/{account}/statement`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Statement))]
pub struct StatementView {
    pub account: String,
    pub unit: String,
    /// Inclusive, on `recorded_at`; UTC, six fractional digits.
    #[cfg_attr(feature = "openapi", schema(format = DateTime, example = "2026-11-01T00:00:00.000000Z"))]
    pub from: String,
    /// Exclusive.
    #[cfg_attr(feature = "openapi", schema(format = DateTime, example = "2026-12-01T00:00:00.000000Z"))]
    pub to: String,
    pub opening_balance: BalanceFigures,
    pub movements: Movements,
    pub closing_balance: BalanceFigures,
    pub entries: Vec<EntryView>,
    /// The highest seq among the account's entries recorded before `to`
    /// (0 if none): the statement's closing balance is the balance as of it.
    pub as_of_seq: i64,
}

/// One account's balance in one unit folded from any set of its entries,
/// as [`crate::fold::LogFold`] folds the log. Pure: the amounts of holds
/// recorded outside the set are supplied by the caller
/// ([`AccountFold::holds_outside`] names them).
#[derive(Debug)]
pub struct AccountFold {
    account: String,
    unit: String,
    balance: WideBalance,
    /// Holds open in the set, by hold id.
    open_holds: HashMap<String, OpenHold>,
    /// Holds whose hold entry this fold has folded.
    seen_holds: HashSet<String>,
    /// The highest seq folded (0 if none), rejected entries included.
    pub last_seq: i64,
    /// Entries folded, rejected ones included.
    pub entries: usize,
}

fn hold_id(e: &StoredEntry) -> Result<String, LedgerError> {
    serde_json::from_str::<serde_json::Value>(&e.params)
        .ok()
        .and_then(|p| p.get("hold_id").and_then(|v| v.as_str()).map(str::to_owned))
        .ok_or_else(|| {
            LedgerError::Corrupt(format!(
                "{} {} names no hold_id",
                e.kind.as_str(),
                e.upstream_id
            ))
        })
}

fn closes_a_hold(e: &StoredEntry) -> bool {
    e.status == EntryStatus::Posted
        && matches!(e.kind, EntryKind::HoldCapture | EntryKind::HoldRelease)
}

impl AccountFold {
    pub fn new(account: &str, unit: &str) -> Self {
        Self {
            account: account.to_owned(),
            unit: unit.to_owned(),
            balance: WideBalance::default(),
            open_holds: HashMap::new(),
            seen_holds: HashSet::new(),
            last_seq: 0,
            entries: 0,
        }
    }

    fn concerns(&self, e: &StoredEntry) -> bool {
        e.unit == self.unit && (e.debit_account == self.account || e.credit_account == self.account)
    }

    /// The holds of this account that entries of `page` close although
    /// neither this fold nor `page` holds their hold entry: their amounts
    /// must be given to [`AccountFold::apply`].
    pub fn holds_outside(&self, page: &[StoredEntry]) -> Result<Vec<String>, LedgerError> {
        let mut in_page = HashSet::new();
        let mut out = Vec::new();
        for e in page.iter().filter(|e| self.concerns(e)) {
            if e.status == EntryStatus::Posted && e.kind == EntryKind::Hold {
                in_page.insert(e.upstream_id.clone());
            } else if closes_a_hold(e) && e.account == self.account {
                let id = hold_id(e)?;
                if !self.open_holds.contains_key(&id)
                    && !self.seen_holds.contains(&id)
                    && !in_page.contains(&id)
                {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// Folds one entry; `outside` has the amounts of the holds named by
    /// [`AccountFold::holds_outside`]. Entries of other accounts or units
    /// are ignored.
    pub fn apply(
        &mut self,
        e: &StoredEntry,
        outside: &HashMap<String, Decimal>,
    ) -> Result<(), LedgerError> {
        if !self.concerns(e) {
            return Ok(());
        }
        self.last_seq = self.last_seq.max(e.seq);
        self.entries += 1;
        if e.status == EntryStatus::Posted && e.kind == EntryKind::Hold {
            self.seen_holds.insert(e.upstream_id.clone());
        } else if closes_a_hold(e) {
            let id = hold_id(e)?;
            if !self.open_holds.contains_key(&id) && !self.seen_holds.contains(&id) {
                // The hold entry is not in this set: recorded before it (a
                // period, or a time range that is not a seq prefix), or it
                // is another account's hold (this account is the capture's
                // counter account), whose `held` is not this account's.
                let amount = if e.account == self.account {
                    *outside.get(&id).ok_or_else(|| {
                        LedgerError::Corrupt(format!(
                            "{} {} closes hold {id}, whose amount is unknown",
                            e.kind.as_str(),
                            e.upstream_id
                        ))
                    })?
                } else {
                    Decimal::ZERO
                };
                self.open_holds.insert(
                    id,
                    OpenHold {
                        account: e.account.clone(),
                        unit: e.unit.clone(),
                        amount,
                    },
                );
            }
        }
        self.fold_effect(e)
    }

    /// The effect of a posted entry on this account, as
    /// [`crate::fold::LogFold::apply`] defines it.
    fn fold_effect(&mut self, e: &StoredEntry) -> Result<(), LedgerError> {
        if e.status != EntryStatus::Posted {
            return Ok(());
        }
        let amount = || {
            WideDecimal::from_decimal(e.amount).ok_or_else(|| {
                LedgerError::Corrupt(format!(
                    "amount {} of the entry at seq {} has more than 18 fractional digits",
                    e.amount, e.seq
                ))
            })
        };
        if moves_money(e.kind) {
            if e.debit_account == self.account {
                self.balance.debits += &amount()?;
            }
            if e.credit_account == self.account {
                self.balance.credits += &amount()?;
            }
        }
        match e.kind {
            EntryKind::Hold => {
                if e.account == self.account {
                    self.balance.held += &amount()?;
                }
                self.open_holds.insert(
                    e.upstream_id.clone(),
                    OpenHold {
                        account: e.account.clone(),
                        unit: e.unit.clone(),
                        amount: e.amount,
                    },
                );
            }
            EntryKind::HoldCapture | EntryKind::HoldRelease => {
                let id = hold_id(e)?;
                let hold = self.open_holds.remove(&id).ok_or_else(|| {
                    LedgerError::Corrupt(format!(
                        "{} {} closes hold {id}, which is not open",
                        e.kind.as_str(),
                        e.upstream_id
                    ))
                })?;
                if hold.account == self.account {
                    let held = WideDecimal::from_decimal(hold.amount).unwrap_or_default();
                    self.balance.held = &self.balance.held - &held;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The balance folded so far (zero if nothing moved).
    pub fn balance(&self) -> WideBalance {
        self.balance.clone()
    }
}

/// Whether `opening + movements = closing` on debits, credits and held.
pub fn adds_up(opening: &WideBalance, movements: &WideBalance, closing: &WideBalance) -> bool {
    &opening.debits + &movements.debits == closing.debits
        && &opening.credits + &movements.credits == closing.credits
        && &opening.held + &movements.held == closing.held
}

/// The smallest whole microsecond at or after `t` (entries carry whole
/// microseconds, so `recorded_at >= t` ⇔ `recorded_at >= ceil(t)`).
pub fn ceil_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    match DateTime::from_timestamp_micros(t.timestamp_micros()) {
        Some(floor) if floor < t => floor + TimeDelta::microseconds(1),
        Some(floor) => floor,
        None => t,
    }
}

/// The largest whole microsecond at or before `t`.
pub fn floor_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

/// Reads every page of `range` into `fold`, looking up the amounts of holds
/// recorded outside it (cached in `holds` across the ranges of one answer).
/// With `keep`, the entries are kept too, at most `max` of them.
async fn fold_range(
    storage: &Storage,
    tenant: &str,
    mut range: AccountRange<'_>,
    fold: &mut AccountFold,
    holds: &mut HashMap<String, Decimal>,
    mut keep: Option<&mut Vec<StoredEntry>>,
    max: usize,
) -> Result<(), LedgerError> {
    loop {
        let page = storage.account_entries(tenant, &range).await?;
        for id in fold.holds_outside(&page)? {
            if holds.contains_key(&id) {
                continue;
            }
            match storage.entry_by_key(tenant, EntryKind::Hold, &id).await? {
                Some(h) if h.status == EntryStatus::Posted => {
                    holds.insert(id, h.amount);
                }
                _ => {
                    return Err(LedgerError::Corrupt(format!(
                        "hold {id} is closed in the log but was never posted"
                    )))
                }
            }
        }
        for e in &page {
            fold.apply(e, holds)?;
        }
        let full = page.len() as i64 == range.limit;
        let last = page.last().map(|e| e.seq);
        if let Some(kept) = keep.as_deref_mut() {
            kept.extend(page);
            if kept.len() > max {
                return Err(LedgerError::Invalid(ValidationErrors::single(
                    "to",
                    format!(
                        "the period holds more than {max} entries of this account; \
                         ask for a shorter period"
                    ),
                )));
            }
        }
        match last {
            Some(seq) if full => range.after_seq = seq,
            _ => return Ok(()),
        }
    }
}

fn in_the_future(field: &str, t: DateTime<Utc>, now: DateTime<Utc>) -> Option<LedgerError> {
    (t > now).then(|| {
        LedgerError::Invalid(ValidationErrors::single(
            field,
            format!(
                "is in the future (the ledger's clock reads {}): a balance there is not known yet",
                format_recorded_at(&now)
            ),
        ))
    })
}

/// The balance of `account` in `unit` as of `as_of`: the fold of its
/// entries with `recorded_at <= as_of`. `as_of_seq` in the answer is the
/// highest seq folded (0 if none). A time after the ledger's clock is 422.
pub async fn read_balance_at(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<BalanceView, LedgerError> {
    if let Some(e) = in_the_future("as_of", as_of, Utc::now()) {
        return Err(e);
    }
    let (rows, head_seq) = storage.balance_rows(tenant, account).await?;
    let row = pick_row(&rows, unit)?;
    let range = AccountRange {
        account,
        unit: &row.unit,
        after_seq: 0,
        until_seq: head_seq,
        from: None,
        to: Some(floor_micros(as_of) + TimeDelta::microseconds(1)),
        limit: LOG_PAGE,
    };
    let mut fold = AccountFold::new(account, &row.unit);
    let mut holds = HashMap::new();
    fold_range(storage, tenant, range, &mut fold, &mut holds, None, 0).await?;
    Ok(BalanceView::of_fold(
        account,
        &row.unit,
        &fold.balance(),
        fold.last_seq,
    ))
}

/// The balance of `account` in `unit` folded from its entries with
/// `seq <= as_of_seq`: `GET …/balance?as_of_seq=`.
pub(crate) async fn fold_until_seq(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: &str,
    as_of_seq: i64,
) -> Result<WideBalance, LedgerError> {
    let range = AccountRange {
        account,
        unit,
        after_seq: 0,
        until_seq: as_of_seq,
        from: None,
        to: None,
        limit: LOG_PAGE,
    };
    let mut fold = AccountFold::new(account, unit);
    let mut holds = HashMap::new();
    fold_range(storage, tenant, range, &mut fold, &mut holds, None, 0).await?;
    Ok(fold.balance())
}

/// The statement of `account` in `unit` for `from <= recorded_at < to`.
pub async fn read_statement(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<StatementView, LedgerError> {
    read_statement_limited(
        storage,
        tenant,
        account,
        unit,
        (from, to),
        Utc::now(),
        MAX_STATEMENT_ENTRIES,
    )
    .await
}

/// [`read_statement`] with the clock and the bound given.
pub async fn read_statement_limited(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    max_entries: usize,
) -> Result<StatementView, LedgerError> {
    if let Some(e) = in_the_future("to", to, now) {
        return Err(e);
    }
    let (from, to) = (ceil_micros(from), ceil_micros(to));
    if from >= to {
        return Err(LedgerError::Invalid(ValidationErrors::single(
            "to",
            "must be later than from (from is inclusive, to exclusive)",
        )));
    }
    let (rows, head_seq) = storage.balance_rows(tenant, account).await?;
    let row = pick_row(&rows, unit)?;
    let unit = row.unit.as_str();
    let range = |from: Option<DateTime<Utc>>, to: DateTime<Utc>| AccountRange {
        account,
        unit,
        after_seq: 0,
        until_seq: head_seq,
        from,
        to: Some(to),
        limit: LOG_PAGE,
    };
    let mut holds = HashMap::new();
    let mut opening = AccountFold::new(account, unit);
    fold_range(
        storage,
        tenant,
        range(None, from),
        &mut opening,
        &mut holds,
        None,
        0,
    )
    .await?;
    let mut period = AccountFold::new(account, unit);
    let mut entries = Vec::new();
    fold_range(
        storage,
        tenant,
        range(Some(from), to),
        &mut period,
        &mut holds,
        Some(&mut entries),
        max_entries,
    )
    .await?;
    let mut closing = AccountFold::new(account, unit);
    fold_range(
        storage,
        tenant,
        range(None, to),
        &mut closing,
        &mut holds,
        None,
        0,
    )
    .await?;

    let (open, moved, close) = (opening.balance(), period.balance(), closing.balance());
    if !adds_up(&open, &moved, &close) || opening.entries + period.entries != closing.entries {
        tracing::error!(
            tenant,
            account,
            unit,
            from = %format_recorded_at(&from),
            to = %format_recorded_at(&to),
            head_seq,
            opening = ?open,
            movements = ?moved,
            closing = ?close,
            opening_entries = opening.entries,
            period_entries = period.entries,
            closing_entries = closing.entries,
            "statement does not add up: opening + movements != closing; refusing to answer"
        );
        return Err(LedgerError::Corrupt(format!(
            "statement of {account} ({unit}) does not add up"
        )));
    }
    Ok(StatementView {
        account: account.to_owned(),
        unit: unit.to_owned(),
        from: format_recorded_at(&from),
        to: format_recorded_at(&to),
        opening_balance: BalanceFigures::new(&open),
        movements: Movements {
            debits: moved.debits.to_string(),
            credits: moved.credits.to_string(),
            net: moved.posted().to_string(),
            held: moved.held.to_string(),
            entries: entries.len(),
        },
        closing_balance: BalanceFigures::new(&close),
        entries: entries.iter().map(StoredEntry::view).collect(),
        as_of_seq: closing.last_seq,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::fold::LogFold;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn entry(
        seq: i64,
        kind: EntryKind,
        upstream_id: &str,
        (account, debit, credit): (&str, &str, &str),
        amount: &str,
        params: &str,
    ) -> StoredEntry {
        StoredEntry {
            tenant_id: "t".into(),
            seq,
            id: format!("ent_{seq}"),
            kind,
            upstream_id: upstream_id.into(),
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: account.into(),
            debit_account: debit.into(),
            credit_account: credit.into(),
            amount: d(amount),
            unit: "USD".into(),
            params: params.into(),
            fingerprint: String::new(),
            recorded_at: DateTime::from_timestamp(1_764_410_400 + seq, 0).unwrap(),
            balance_after: Decimal::ZERO,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    /// A log touching `cust` and `@revenue`: payments, debits, holds
    /// captured and released, a rejected debit and a reversal.
    fn log() -> Vec<StoredEntry> {
        use EntryKind::*;
        let c = "cust";
        let mut rejected = entry(5, UsageDebit, "u2", (c, c, "@revenue"), "500", "{}");
        rejected.status = EntryStatus::Rejected;
        rejected.rejection_code = Some("insufficient_funds".into());
        vec![
            entry(1, AccountSettings, "cust#1", (c, c, c), "0", "{}"),
            entry(2, Payment, "p1", (c, "@payments", c), "100", "{}"),
            entry(3, UsageDebit, "u1", (c, c, "@revenue"), "7.5", "{}"),
            entry(4, Hold, "h1", (c, c, "@holds"), "20", "{}"),
            rejected,
            entry(
                6,
                HoldCapture,
                "cap1",
                (c, c, "@revenue"),
                "12",
                r#"{"hold_id":"h1"}"#,
            ),
            entry(7, Hold, "h2", (c, c, "@holds"), "3", "{}"),
            entry(
                8,
                Reversal,
                "r1",
                (c, "@revenue", c),
                "7.5",
                r#"{"entry_id":"ent_3"}"#,
            ),
            entry(9, Hold, "h3", (c, c, "@holds"), "4", "{}"),
            entry(
                10,
                HoldRelease,
                "rel2",
                (c, c, "@holds"),
                "3",
                r#"{"hold_id":"h2"}"#,
            ),
            entry(11, UsageDebit, "u3", (c, c, "@revenue"), "1.25", "{}"),
        ]
    }

    fn fold(account: &str, entries: &[&StoredEntry], all: &[StoredEntry]) -> AccountFold {
        let mut f = AccountFold::new(account, "USD");
        let page: Vec<StoredEntry> = entries.iter().map(|e| (*e).clone()).collect();
        let mut outside = HashMap::new();
        for id in f.holds_outside(&page).unwrap() {
            let h = all.iter().find(|e| e.upstream_id == id).unwrap();
            outside.insert(id, h.amount);
        }
        for e in &page {
            f.apply(e, &outside).unwrap();
        }
        f
    }

    #[test]
    fn a_seq_prefix_folds_as_the_log_fold_does() {
        let all = log();
        for n in 0..=all.len() {
            let mut log_fold = LogFold::new();
            for e in &all[..n] {
                log_fold.apply(e).unwrap();
            }
            let prefix: Vec<&StoredEntry> = all[..n].iter().collect();
            // @revenue's fold sees captures without their holds.
            for account in ["cust", "@revenue"] {
                let mine: Vec<&StoredEntry> = prefix
                    .iter()
                    .copied()
                    .filter(|e| e.debit_account == account || e.credit_account == account)
                    .collect();
                let f = fold(account, &mine, &all);
                let want = log_fold
                    .balances
                    .get(account, "USD")
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(
                    f.balance(),
                    WideBalance::from(&want),
                    "{account} after {n} entries"
                );
            }
        }
    }

    #[test]
    fn any_split_adds_up_even_when_time_is_not_seq_order() {
        let all = log();
        let total = fold("cust", &all.iter().collect::<Vec<_>>(), &all).balance();
        assert_eq!(total.posted().to_string(), "86.75");
        assert_eq!(total.held.to_string(), "4");
        // Every subset (by a bit mask over the entries) and its complement:
        // what a recorded_at boundary may cut when clocks are skewed.
        for mask in 0u32..(1 << all.len()) {
            let (a, b): (Vec<&StoredEntry>, Vec<&StoredEntry>) =
                all.iter().partition(|e| mask & (1 << (e.seq - 1)) != 0);
            let (fa, fb) = (fold("cust", &a, &all), fold("cust", &b, &all));
            assert!(
                adds_up(&fa.balance(), &fb.balance(), &total),
                "mask {mask:b}"
            );
            assert_eq!(fa.entries + fb.entries, all.len());
        }
    }

    #[tokio::test]
    async fn a_period_with_too_many_entries_is_refused() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        for i in 0..3 {
            let body = serde_json::json!({
                "usage_record_id": format!("u{i}"), "account": "cust", "amount": "1", "unit": "USD"
            });
            let intent =
                crate::intent::Intent::usage_debit(body.as_object().unwrap().clone()).unwrap();
            storage.commit_group("t", &[&intent]).await.unwrap();
        }
        let now = Utc::now();
        let period = (now - TimeDelta::days(1), now);
        let read = |max| read_statement_limited(&storage, "t", "cust", None, period, now, max);
        let s = read(3).await.unwrap();
        assert_eq!(s.movements.entries, 3);
        assert_eq!(s.closing_balance.posted, "-3");
        match read(2).await {
            Err(LedgerError::Invalid(v)) => assert_eq!(v.errors[0].field, "to"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn microseconds_round_the_right_way() {
        let t = DateTime::parse_from_rfc3339("2026-01-01T00:00:00.0000015Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            format_recorded_at(&ceil_micros(t)),
            "2026-01-01T00:00:00.000002Z"
        );
        assert_eq!(
            format_recorded_at(&floor_micros(t)),
            "2026-01-01T00:00:00.000001Z"
        );
        let whole = floor_micros(t);
        assert_eq!(ceil_micros(whole), whole);
    }
}
