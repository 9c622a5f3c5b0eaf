//! The query strings of the read endpoints: the parameters each accepts
//! (`crate::routes::query::QueryParams::documented` reads the names from
//! here) and their documentation. The handlers validate the values.

#![allow(dead_code)] // Never built: they name and describe the parameters.

use utoipa::IntoParams;

/// Query of `GET /v1/entries`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EntriesQuery {
    /// Entries whose debit or credit side is this account (system accounts too).
    #[param(example = "cust_42")]
    account: Option<String>,
    /// Only entries of this kind.
    kind: Option<crate::views::EntryKind>,
    /// Entries with `seq` greater than this (pass the previous page's
    /// `next_after_seq`); default 0.
    #[param(minimum = 0, example = 0)]
    after_seq: Option<i64>,
    /// Page size, 1–1,000; default 100.
    #[param(minimum = 1, maximum = 1000, example = 100)]
    limit: Option<i64>,
    /// `recorded_at` at or after this RFC 3339 time.
    #[param(format = DateTime, example = "2026-11-01T00:00:00Z")]
    from: Option<String>,
    /// `recorded_at` before this RFC 3339 time.
    #[param(format = DateTime, example = "2026-12-01T00:00:00Z")]
    to: Option<String>,
    /// Long polling: when no entry matches yet, wait up to this many
    /// milliseconds (0–30,000; default 0) for one to be committed, and
    /// answer as soon as one is; an empty page after the wait. The wait
    /// ends before the server's request timeout.
    #[param(minimum = 0, maximum = 30000, example = 10000)]
    wait_ms: Option<i64>,
    /// Only posted, or only rejected (stored rejections), entries.
    status: Option<crate::views::EntryStatus>,
    /// Only the entries keyed by this upstream ID (`usage_record_id`,
    /// `payment_id`, …; one per kind at most).
    #[param(example = "ur_123")]
    upstream_id: Option<String>,
}

/// Query of `GET /v1/accounts/{account}/balance`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BalanceQuery {
    /// The balance as of this log position (not beyond the head). Not with
    /// `as_of`.
    #[param(minimum = 0, example = 17)]
    as_of_seq: Option<i64>,
    /// The balance from the entries recorded at or before this RFC 3339
    /// time (not in the future). Not with `as_of_seq`.
    #[param(format = DateTime, example = "2026-11-29T12:00:00Z")]
    as_of: Option<String>,
    /// Required for a system account holding several units.
    #[param(example = "USD")]
    unit: Option<String>,
}

/// Query of `GET /v1/accounts/{account}/usage`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// Only this meter (exact match).
    #[param(example = "llm-tokens")]
    meter: Option<String>,
    /// First day included: `YYYY-MM-DD`, or an RFC 3339 time taken as its
    /// UTC date.
    #[param(example = "2026-11-01")]
    from: Option<String>,
    /// First day excluded (same forms); after `from`.
    #[param(example = "2026-12-01")]
    to: Option<String>,
    /// `day` (default) or `month`.
    granularity: Option<crate::views::Granularity>,
}

/// Query of `GET /v1/accounts/{account}/statement`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatementQuery {
    /// Start of the period (inclusive), RFC 3339, on `recorded_at`.
    #[param(format = DateTime, example = "2026-11-01T00:00:00Z")]
    from: String,
    /// End of the period (exclusive), RFC 3339; after `from`, not in the
    /// future.
    #[param(format = DateTime, example = "2026-11-29T00:00:00Z")]
    to: String,
    /// Required for a system account holding several units.
    #[param(example = "USD")]
    unit: Option<String>,
}

/// Query of `GET /v1/audit/export`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `jsonl` (default) or `csv`.
    #[param(example = "jsonl")]
    format: Option<String>,
    /// First seq exported (default 1).
    #[param(minimum = 1, example = 1)]
    from_seq: Option<i64>,
    /// Last seq exported (default: the head when the request starts).
    #[param(minimum = 0, example = 100)]
    to_seq: Option<i64>,
}

/// Query of `GET /v1/accounts`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AccountsQuery {
    /// Accounts whose id contains this text (ASCII letters in any case).
    #[param(example = "cust")]
    q: Option<String>,
    /// Accounts after this id (pass the previous page's `next_after`).
    #[param(example = "cust_41")]
    after: Option<String>,
    /// Page size, 1–1,000; default 100.
    #[param(minimum = 1, maximum = 1000, example = 100)]
    limit: Option<i64>,
}

/// Query of `GET /v1/webhook-endpoints/{id}/deliveries`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WebhookDeliveriesQuery {
    /// Only deliveries in this status.
    status: Option<crate::views::WebhookDeliveryStatus>,
    /// Deliveries older than this one (pass the previous page's
    /// `next_after`): newest first.
    #[param(example = "wd_0193a8d2c4f07b3e9a51c2d4e6f80a1b")]
    after: Option<String>,
    /// Page size, 1–100; default 20.
    #[param(minimum = 1, maximum = 100, example = 20)]
    limit: Option<i64>,
}

/// Query of `GET /v1/intents`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IntentsQuery {
    /// Only intents in this status as read now (an expired lease reads
    /// `released`, or `failed` at its last attempt).
    status: Option<crate::views::IntentStatusName>,
    /// Only intents of this action.
    #[param(example = "invoice.charge")]
    action: Option<String>,
    /// Intents after this `intent_id` (pass the previous page's `next_after`).
    #[param(example = "inv_2026_11_cust_41")]
    after: Option<String>,
    /// Page size, 1–1,000; default 100.
    #[param(minimum = 1, maximum = 1000, example = 100)]
    limit: Option<i64>,
}

/// Query of `GET /v1/integrations/stripe/events`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StripeEventsQuery {
    /// Only events with this status.
    status: Option<crate::views::StripeEventStatus>,
    /// Events after this `event_id` (pass the previous page's `next_after`).
    #[param(example = "evt_1NG8Du2eZvKYlo2CUI79vXWy")]
    after: Option<String>,
    /// Page size, 1–1,000; default 100.
    #[param(minimum = 1, maximum = 1000, example = 100)]
    limit: Option<i64>,
}
