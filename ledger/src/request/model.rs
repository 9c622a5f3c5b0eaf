//! What an entry request is: its kind, its action, the fields its body may
//! carry, and how its parameters are fingerprinted.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields::Fields;
use crate::fingerprint::{canonical_params, Fingerprint};
use crate::names::{self, ADJUSTMENTS_ACCOUNT};
use crate::rule_state::Overdraft;

/// The fields each request body may carry; any other is refused with "is
/// not a known field". The OpenAPI request schemas of tally-api are checked
/// against these lists (tests/openapi.rs).
pub mod request_fields {
    /// `POST /v1/usage-debits`.
    pub const USAGE_DEBIT: &[&str] = &[
        "usage_record_id",
        "account",
        "amount",
        "unit",
        "meter",
        "quantity",
        "occurred_at",
        "counter_account",
        "metadata",
    ];
    /// `POST /v1/payments`.
    pub const PAYMENT: &[&str] = &[
        "payment_id",
        "account",
        "amount",
        "unit",
        "processor",
        "occurred_at",
        "counter_account",
        "metadata",
    ];
    /// `POST /v1/holds`.
    pub const HOLD: &[&str] = &[
        "hold_id",
        "account",
        "amount",
        "unit",
        "expires_at",
        "ttl_seconds",
        "counter_account",
        "metadata",
    ];
    /// `POST /v1/holds/{hold_id}/capture`.
    pub const CAPTURE: &[&str] = &["capture_id", "amount", "metadata"];
    /// `POST /v1/holds/{hold_id}/release`.
    pub const RELEASE: &[&str] = &["release_id", "metadata"];
    /// `POST /v1/refunds`.
    pub const REFUND: &[&str] = &["refund_id", "payment_id", "amount", "reason", "metadata"];
    /// `POST /v1/reversals`.
    pub const REVERSAL: &[&str] = &["reversal_id", "entry_id", "reason", "metadata"];
    /// `POST /v1/adjustments`.
    pub const ADJUSTMENT: &[&str] = &[
        "adjustment_id",
        "account",
        "amount",
        "unit",
        "direction",
        "reason",
        "metadata",
    ];
    /// `PUT /v1/accounts/{account}`.
    pub const SETTINGS: &[&str] = &["unit", "overdraft", "metadata", "alerts"];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    UsageDebit,
    Payment,
    /// A change of an account's settings (unit, overdraft, metadata).
    AccountSettings,
    Hold,
    HoldCapture,
    HoldRelease,
    Refund,
    Reversal,
    Adjustment,
    /// A claim of an intent (`POST /v1/intents`): no amount, no account.
    IntentClaimed,
    /// A claim let go without an outcome (a retryable failure).
    IntentReleased,
    IntentSucceeded,
    IntentFailed,
}

impl EntryKind {
    pub const ALL: [EntryKind; 13] = [
        EntryKind::UsageDebit,
        EntryKind::Payment,
        EntryKind::AccountSettings,
        EntryKind::Hold,
        EntryKind::HoldCapture,
        EntryKind::HoldRelease,
        EntryKind::Refund,
        EntryKind::Reversal,
        EntryKind::Adjustment,
        EntryKind::IntentClaimed,
        EntryKind::IntentReleased,
        EntryKind::IntentSucceeded,
        EntryKind::IntentFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::UsageDebit => "usage_debit",
            EntryKind::Payment => "payment",
            EntryKind::AccountSettings => "account_settings",
            EntryKind::Hold => "hold",
            EntryKind::HoldCapture => "hold_capture",
            EntryKind::HoldRelease => "hold_release",
            EntryKind::Refund => "refund",
            EntryKind::Reversal => "reversal",
            EntryKind::Adjustment => "adjustment",
            EntryKind::IntentClaimed => "intent_claimed",
            EntryKind::IntentReleased => "intent_released",
            EntryKind::IntentSucceeded => "intent_succeeded",
            EntryKind::IntentFailed => "intent_failed",
        }
    }

    /// The kinds of an intent's entries (docs/intents.md).
    pub fn is_intent(self) -> bool {
        matches!(
            self,
            EntryKind::IntentClaimed
                | EntryKind::IntentReleased
                | EntryKind::IntentSucceeded
                | EntryKind::IntentFailed
        )
    }

    /// Whether a request of this kind is answered by the entry its own
    /// upstream ID holds (a replay or a conflict). Settings are keyed by
    /// their account and decided against the current ones; intent
    /// operations are decided against the intent's record.
    pub fn keyed_by_request(self) -> bool {
        self != EntryKind::AccountSettings && !self.is_intent()
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// The request field that carries the upstream ID of this kind.
    pub fn key_field(self) -> &'static str {
        match self {
            EntryKind::UsageDebit => "usage_record_id",
            EntryKind::Payment => "payment_id",
            EntryKind::AccountSettings => "account",
            EntryKind::Hold => "hold_id",
            EntryKind::HoldCapture => "capture_id",
            EntryKind::HoldRelease => "release_id",
            EntryKind::Refund => "refund_id",
            EntryKind::Reversal => "reversal_id",
            EntryKind::Adjustment => "adjustment_id",
            EntryKind::IntentClaimed
            | EntryKind::IntentReleased
            | EntryKind::IntentSucceeded
            | EntryKind::IntentFailed => "intent_id",
        }
    }
}

/// A validated request, not yet decided: its key, its fingerprinted
/// parameters, and what it asks the ledger to do.
#[derive(Debug, Clone)]
pub struct EntryRequest {
    pub kind: EntryKind,
    pub upstream_id: String,
    pub action: Action,
    /// Normalised business parameters, as canonical JSON text.
    pub params: String,
    pub params_map: Map<String, Value>,
    pub fingerprint: Fingerprint,
}

/// What an entry request asks for. Kinds whose accounts are fixed by the request
/// are a [`Transfer`]; the others name something already in the ledger (a
/// hold, a payment, an entry) that the writer looks up under its lock.
#[derive(Debug, Clone)]
pub enum Action {
    Transfer(Transfer),
    Settings(SettingsChange),
    Hold(HoldRequest),
    Capture {
        hold_id: String,
        amount: Decimal,
    },
    /// `expiry` is the server's own release of an expired hold.
    Release {
        hold_id: String,
        expiry: bool,
    },
    Refund {
        payment_id: String,
        amount: Decimal,
    },
    Reversal {
        entry_id: String,
    },
    Adjustment(AdjustmentRequest),
    /// An operation on an intent (`crate::intents`).
    Intent(Box<crate::intents::IntentOp>),
}

/// Money moved between two accounts named by the request.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// The customer account the request is about.
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    pub amount: Decimal,
    pub unit: String,
}

impl EntryRequest {
    /// Every account the request itself names (the writer loads their
    /// balances and settings; referenced objects add theirs later).
    pub fn named_accounts(&self) -> Vec<&str> {
        match &self.action {
            Action::Transfer(t) => vec![&t.debit_account, &t.credit_account],
            Action::Settings(s) => vec![&s.account],
            Action::Hold(h) => vec![&h.account],
            Action::Adjustment(a) => vec![&a.account, ADJUSTMENTS_ACCOUNT],
            Action::Capture { .. }
            | Action::Intent(_)
            | Action::Release { .. }
            | Action::Refund { .. }
            | Action::Reversal { .. } => Vec::new(),
        }
    }
}

pub(crate) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl EntryRequest {
    pub(crate) fn build(
        kind: EntryKind,
        upstream_id: String,
        action: Action,
        params_map: Map<String, Value>,
    ) -> EntryRequest {
        let params = canonical_params(&params_map);
        let fingerprint = Fingerprint::of_canonical(&params);
        EntryRequest {
            kind,
            upstream_id,
            action,
            params,
            params_map,
            fingerprint,
        }
    }
}

/// The fields every money-moving request shares.
pub(crate) struct Common {
    pub(crate) account: Option<String>,
    pub(crate) amount: Option<Decimal>,
    pub(crate) unit: Option<String>,
}

impl Common {
    pub(crate) fn read(f: &mut Fields) -> Self {
        Common {
            account: f.required_str("account", names::check_customer_account),
            amount: f.required_amount("amount"),
            unit: f.required_str("unit", names::check_unit),
        }
    }
}

pub(crate) fn read_counter(f: &mut Fields, account: Option<&str>) -> Option<Option<String>> {
    let counter = f.optional_str("counter_account", names::check_counter_account)?;
    if let (Some(c), Some(a)) = (&counter, account) {
        if c == a {
            f.error("counter_account", "must differ from account");
            return None;
        }
    }
    Some(counter)
}

/// When a hold expires: an instant, or a time to live counted from the
/// moment the hold is recorded (so a retry of the same hold keeps the
/// fingerprint and, being a replay, the original expiry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldExpiry {
    At(DateTime<Utc>),
    Ttl(i64),
}

impl HoldExpiry {
    pub fn resolve(self, recorded_at: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            HoldExpiry::At(t) => t,
            HoldExpiry::Ttl(seconds) => recorded_at + Duration::seconds(seconds),
        }
    }
}

#[derive(Debug, Clone)]
pub struct HoldRequest {
    pub account: String,
    pub amount: Decimal,
    pub unit: String,
    /// Credited when the hold is captured.
    pub counter_account: String,
    pub expiry: HoldExpiry,
}

/// `PUT /v1/accounts/{account}`: the settings an account should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsChange {
    pub account: String,
    pub unit: String,
    pub overdraft: Overdraft,
    pub metadata: Option<Map<String, Value>>,
    /// `alerts.low_balance`: `balance.low` fires when the available
    /// balance crosses below it (docs/events.md).
    pub low_balance: Option<rust_decimal::Decimal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Money to the account (from `@adjustments`).
    Credit,
    /// Money from the account (to `@adjustments`).
    Debit,
}

#[derive(Debug, Clone)]
pub struct AdjustmentRequest {
    pub account: String,
    pub amount: Decimal,
    /// When absent, the account's own unit (it must have one).
    pub unit: Option<String>,
    pub direction: Direction,
}
