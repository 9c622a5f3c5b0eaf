//! `GET /v1/accounts/{account}/statement`.

use serde::Serialize;
use tally_ledger::entry::{EntryView, StoredEntry};
use tally_projections::statement::{self, AccountStatement};
use utoipa::ToSchema;

use super::Entry;

/// A balance without its account and unit: the opening and closing
/// balances of a statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct BalanceFigures {
    #[schema(format = "decimal")]
    pub debits: String,
    #[schema(format = "decimal")]
    pub credits: String,
    #[schema(format = "decimal")]
    pub posted: String,
    #[schema(format = "decimal")]
    pub held: String,
    #[schema(format = "decimal")]
    pub available: String,
}

impl From<statement::BalanceFigures> for BalanceFigures {
    fn from(b: statement::BalanceFigures) -> Self {
        let statement::BalanceFigures {
            debits,
            credits,
            posted,
            held,
            available,
        } = b;
        Self {
            debits,
            credits,
            posted,
            held,
            available,
        }
    }
}

/// What the period's entries moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Movements {
    #[schema(format = "decimal")]
    pub debits: String,
    #[schema(format = "decimal")]
    pub credits: String,
    /// `credits − debits`: the change of `posted`.
    #[schema(format = "decimal")]
    pub net: String,
    /// The change of `held` (negative when more was released than reserved).
    #[schema(format = "decimal")]
    pub held: String,
    /// How many entries the statement lists, rejected ones included.
    pub entries: usize,
}

impl From<statement::Movements> for Movements {
    fn from(m: statement::Movements) -> Self {
        let statement::Movements {
            debits,
            credits,
            net,
            held,
            entries,
        } = m;
        Self {
            debits,
            credits,
            net,
            held,
            entries,
        }
    }
}

/// The body of `GET /v1/accounts/{account}/statement`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Statement {
    pub account: String,
    pub unit: String,
    /// Inclusive, on `recorded_at`; UTC, six fractional digits.
    #[schema(format = DateTime, example = "2026-11-01T00:00:00.000000Z")]
    pub from: String,
    /// Exclusive.
    #[schema(format = DateTime, example = "2026-12-01T00:00:00.000000Z")]
    pub to: String,
    pub opening_balance: BalanceFigures,
    pub movements: Movements,
    pub closing_balance: BalanceFigures,
    #[schema(value_type = Vec<Entry>)]
    pub entries: Vec<EntryView>,
    /// The highest seq among the account's entries recorded before `to`
    /// (0 if none): the statement's closing balance is the balance as of it.
    pub as_of_seq: i64,
}

impl From<AccountStatement> for Statement {
    fn from(s: AccountStatement) -> Self {
        let AccountStatement {
            account,
            unit,
            from,
            to,
            opening_balance,
            movements,
            closing_balance,
            entries,
            as_of_seq,
        } = s;
        Self {
            account,
            unit,
            from,
            to,
            opening_balance: opening_balance.into(),
            movements: movements.into(),
            closing_balance: closing_balance.into(),
            entries: entries.iter().map(StoredEntry::view).collect(),
            as_of_seq,
        }
    }
}
