//! The answers of the read endpoints.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{Alerts, Entry, Metadata, Overdraft};

/// `GET /v1/accounts/{account}/balance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    pub account: String,
    pub unit: String,
    pub debits: Decimal,
    pub credits: Decimal,
    /// `credits − debits`.
    pub posted: Decimal,
    /// Reserved by open holds.
    pub held: Decimal,
    /// `posted − held`.
    pub available: Decimal,
    /// The log position the balance is as of.
    pub as_of_seq: i64,
}

/// One account of `GET /v1/accounts`: its balance now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSummary {
    pub account: String,
    pub unit: String,
    pub debits: Decimal,
    pub credits: Decimal,
    /// `credits − debits`.
    pub posted: Decimal,
    /// Reserved by open holds.
    pub held: Decimal,
    /// `posted − held`.
    pub available: Decimal,
}

/// `GET /v1/accounts`: a page of customer accounts in account order (bytes).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccountPage {
    pub accounts: Vec<AccountSummary>,
    /// Pass as `after` for the next page; `None` on the last.
    pub next_after: Option<String>,
}

/// A balance without its account and unit (a statement's opening and
/// closing balances).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceFigures {
    pub debits: Decimal,
    pub credits: Decimal,
    pub posted: Decimal,
    pub held: Decimal,
    pub available: Decimal,
}

/// `GET`/`PUT /v1/accounts/{account}`: the settings and the balance.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Account {
    pub account: String,
    pub unit: String,
    pub overdraft: Overdraft,
    pub metadata: Option<Metadata>,
    /// `Alerts::default()` when no alert is set.
    #[serde(default)]
    pub alerts: Alerts,
    /// 0 until the account's settings are first set.
    pub settings_version: i64,
    /// The `account_settings` entry that set the current settings.
    pub settings_entry_id: Option<String>,
    pub balance: Balance,
}

/// What a hold is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    Open,
    Captured,
    Released,
    Expired,
    Rejected,
    /// A status this client does not know yet.
    #[serde(other)]
    Other,
}

/// `GET /v1/holds/{hold_id}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HoldInfo {
    pub hold_id: String,
    pub account: String,
    pub unit: String,
    /// The held amount.
    pub amount: Decimal,
    /// The account a capture credits.
    pub counter_account: String,
    pub expires_at: DateTime<Utc>,
    pub status: HoldStatus,
    /// The hold's own entry.
    pub entry_id: String,
    /// The entry that captured or released it; `None` while open.
    pub closed_by: Option<String>,
}

/// How `GET /v1/accounts/{account}/usage` groups days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    Day,
    Month,
}

impl Granularity {
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Day => "day",
            Granularity::Month => "month",
        }
    }
}

/// One period of one meter in one unit.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UsagePeriod {
    /// `YYYY-MM-DD` or `YYYY-MM`.
    pub period: String,
    pub meter: Option<String>,
    pub unit: String,
    pub quantity: Decimal,
    pub amount: Decimal,
    /// Usage debits netted into the period (a reversal counts −1).
    pub entries: i64,
}

/// `GET /v1/accounts/{account}/usage`, from an asynchronous projection:
/// complete up to `current_as_of_seq`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Usage {
    pub account: String,
    pub granularity: Granularity,
    pub current_as_of_seq: i64,
    pub head_seq: i64,
    pub usage: Vec<UsagePeriod>,
}

/// What a statement's entries moved.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Movements {
    pub debits: Decimal,
    pub credits: Decimal,
    /// `credits − debits`: the change of `posted`.
    pub net: Decimal,
    /// The change of `held`.
    pub held: Decimal,
    pub entries: u64,
}

/// `GET /v1/accounts/{account}/statement`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Statement {
    pub account: String,
    pub unit: String,
    /// Inclusive, on `recorded_at`.
    pub from: DateTime<Utc>,
    /// Exclusive.
    pub to: DateTime<Utc>,
    pub opening_balance: BalanceFigures,
    pub movements: Movements,
    pub closing_balance: BalanceFigures,
    pub entries: Vec<Entry>,
    pub as_of_seq: i64,
}

/// A signed checkpoint; keys and signatures are lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Signature {
    pub algorithm: String,
    pub public_key: String,
    pub signed_at: String,
    pub message: String,
    pub value: String,
}

/// `GET /v1/audit/head`: the caller's chain head.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuditHead {
    pub tenant: String,
    pub seq: i64,
    pub hash: String,
    pub checked_at: String,
    /// `on` or `off`.
    pub signing: String,
    /// `None` when signing is off.
    pub signature: Option<Signature>,
    #[serde(default)]
    pub notice: Option<String>,
}

/// A log position and its chain hash (hex).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HeadSummary {
    pub seq: i64,
    pub hash: String,
}

/// The outcome of `POST /v1/audit/verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationStatus {
    /// Every check held.
    Verified,
    /// `problems` lists what was found.
    Broken,
    /// The time budget ran out after `checked_entries`; run `tally verify`.
    Incomplete,
    /// A status this client does not know yet.
    #[serde(other)]
    Other,
}

/// One thing `POST /v1/audit/verify` found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VerificationProblem {
    /// The first entry found broken, when the problem is in the log.
    pub seq: Option<i64>,
    pub problem: String,
}

/// `POST /v1/audit/verify`: what was checked and what was found.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuditVerification {
    pub tenant: String,
    pub status: VerificationStatus,
    /// Entries whose chain, fingerprint and `balance_after` were checked.
    pub checked_entries: i64,
    /// The verified head (`None` unless the log held together).
    pub head: Option<HeadSummary>,
    /// Stored balances equal to the fold of the log.
    pub balances: u64,
    /// Rule-state records equal to the fold of the log.
    pub records: u64,
    /// Usage summary rows equal to the fold of the log.
    pub usage_rows: u64,
    pub problems: Vec<VerificationProblem>,
    pub elapsed_ms: u64,
    pub budget_ms: u64,
}

/// `GET /healthz` (`status: ok`) and `GET /readyz` (`status: ready`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Health {
    pub status: String,
    /// `sqlite` or `postgres`.
    pub engine: String,
    /// `/readyz`: the latest applied migration.
    #[serde(default)]
    pub schema_version: Option<i64>,
}
