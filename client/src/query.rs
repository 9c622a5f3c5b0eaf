//! The query strings of the read endpoints.

use chrono::{DateTime, NaiveDate, Utc};

use crate::model::wire::time;
use crate::model::{EntryKind, EntryStatus, Granularity, StripeEventStatus, WebhookDeliveryStatus};

/// Builds `a=1&b=2`, percent-encoding every value.
#[derive(Default)]
struct Query(Vec<String>);

impl Query {
    fn put(&mut self, name: &str, value: Option<impl AsRef<str>>) -> &mut Self {
        if let Some(v) = value {
            self.0.push(format!("{name}={}", encode(v.as_ref())));
        }
        self
    }

    /// `?a=1&b=2`, or nothing.
    fn finish(&self) -> String {
        if self.0.is_empty() {
            String::new()
        } else {
            format!("?{}", self.0.join("&"))
        }
    }
}

/// Filters of `GET /v1/entries`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntryQuery {
    /// Entries whose debit or credit side is this account.
    pub account: Option<String>,
    pub kind: Option<EntryKind>,
    /// Entries after this seq (the previous page's `next_after_seq`).
    pub after_seq: i64,
    /// 1 to 1,000; the server's default (100) when `None`.
    pub limit: Option<u32>,
    /// `recorded_at` at or after.
    pub from: Option<DateTime<Utc>>,
    /// `recorded_at` before.
    pub to: Option<DateTime<Utc>>,
    /// Long polling (0 to 30,000 ms): when no entry matches yet, the server
    /// answers as soon as one is committed, or with an empty page after the
    /// wait. The attempt's timeout is extended by it.
    pub wait_ms: Option<u32>,
    /// Only posted, or only rejected (stored rejections), entries.
    pub status: Option<EntryStatus>,
    /// Only the entries keyed by this upstream ID (`usage_record_id`,
    /// `payment_id`, …; one per kind at most).
    pub upstream_id: Option<String>,
}

impl EntryQuery {
    pub(crate) fn to_query(&self) -> String {
        Query(vec![format!("after_seq={}", self.after_seq)])
            .put("account", self.account.as_ref())
            .put("kind", self.kind.map(EntryKind::as_str))
            .put("limit", self.limit.map(|l| l.to_string()))
            .put("from", self.from.as_ref().map(time))
            .put("to", self.to.as_ref().map(time))
            .put("wait_ms", self.wait_ms.map(|w| w.to_string()))
            .put("status", self.status.map(EntryStatus::as_str))
            .put("upstream_id", self.upstream_id.as_ref())
            .finish()
    }
}

/// Options of `GET /v1/accounts`: customer accounts in account order
/// (bytes), a page at a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountQuery {
    /// Accounts whose id contains this text (ASCII letters in any case).
    pub q: Option<String>,
    /// Accounts after this id (the previous page's `next_after`).
    pub after: Option<String>,
    /// 1 to 1,000; the server's default (100) when `None`.
    pub limit: Option<u32>,
}

impl AccountQuery {
    pub(crate) fn to_query(&self) -> String {
        Query::default()
            .put("q", self.q.as_ref())
            .put("after", self.after.as_ref())
            .put("limit", self.limit.map(|l| l.to_string()))
            .finish()
    }
}

/// Options of `GET /v1/accounts/{account}/balance`: now by default, or as
/// of a log position, or as of a time (not both).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BalanceQuery {
    pub as_of_seq: Option<i64>,
    pub as_of: Option<DateTime<Utc>>,
    /// Required for a system account holding several units.
    pub unit: Option<String>,
}

impl BalanceQuery {
    pub(crate) fn to_query(&self) -> String {
        Query::default()
            .put("as_of_seq", self.as_of_seq.map(|s| s.to_string()))
            .put("as_of", self.as_of.as_ref().map(time))
            .put("unit", self.unit.as_ref())
            .finish()
    }
}

/// Options of `GET /v1/accounts/{account}/usage`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageQuery {
    /// Only this meter.
    pub meter: Option<String>,
    /// First day included.
    pub from: Option<NaiveDate>,
    /// First day excluded.
    pub to: Option<NaiveDate>,
    /// `day` when `None`.
    pub granularity: Option<Granularity>,
}

impl UsageQuery {
    pub(crate) fn to_query(&self) -> String {
        let day = |d: &NaiveDate| d.format("%Y-%m-%d").to_string();
        Query::default()
            .put("meter", self.meter.as_ref())
            .put("from", self.from.as_ref().map(day))
            .put("to", self.to.as_ref().map(day))
            .put("granularity", self.granularity.map(Granularity::as_str))
            .finish()
    }
}

/// The period of `GET /v1/accounts/{account}/statement`, on `recorded_at`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementQuery {
    /// Inclusive.
    pub from: DateTime<Utc>,
    /// Exclusive; after `from`, not in the future.
    pub to: DateTime<Utc>,
    /// Required for a system account holding several units.
    pub unit: Option<String>,
}

impl StatementQuery {
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Self {
            from,
            to,
            unit: None,
        }
    }

    pub(crate) fn to_query(&self) -> String {
        Query::default()
            .put("from", Some(time(&self.from)))
            .put("to", Some(time(&self.to)))
            .put("unit", self.unit.as_ref())
            .finish()
    }
}

/// The format of `GET /v1/audit/export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
    /// JSON Lines, one entry a line, then the trailer.
    #[default]
    Jsonl,
    Csv,
}

/// Options of `GET /v1/audit/export`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportQuery {
    /// The server's default (`jsonl`) when `None`.
    pub format: Option<ExportFormat>,
    /// First seq exported (default 1).
    pub from_seq: Option<i64>,
    /// Last seq exported (default: the head when the request starts).
    pub to_seq: Option<i64>,
}

impl ExportQuery {
    pub(crate) fn to_query(&self) -> String {
        let format = self.format.map(|f| match f {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Csv => "csv",
        });
        Query::default()
            .put("format", format)
            .put("from_seq", self.from_seq.map(|s| s.to_string()))
            .put("to_seq", self.to_seq.map(|s| s.to_string()))
            .finish()
    }
}

/// Options of `GET /v1/webhook-endpoints/{id}/deliveries` (newest first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WebhookDeliveryQuery {
    /// Only deliveries in this status.
    pub status: Option<WebhookDeliveryStatus>,
    /// Deliveries older than this one (the previous page's `next_after`).
    pub after: Option<String>,
    /// 1 to 100; the server's default (20) when `None`.
    pub limit: Option<u32>,
}

impl WebhookDeliveryQuery {
    pub(crate) fn to_query(&self) -> String {
        Query::default()
            .put("status", self.status.map(WebhookDeliveryStatus::as_str))
            .put("after", self.after.as_ref())
            .put("limit", self.limit.map(|l| l.to_string()))
            .finish()
    }
}

/// Options of `GET /v1/integrations/stripe/events` (in `event_id` order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StripeEventQuery {
    /// Only events in this status.
    pub status: Option<StripeEventStatus>,
    /// Events after this `event_id` (the previous page's `next_after`).
    pub after: Option<String>,
    /// 1 to 1,000; the server's default (100) when `None`.
    pub limit: Option<u32>,
}

impl StripeEventQuery {
    pub(crate) fn to_query(&self) -> String {
        Query::default()
            .put("status", self.status.map(StripeEventStatus::as_str))
            .put("after", self.after.as_ref())
            .put("limit", self.limit.map(|l| l.to_string()))
            .finish()
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a
/// path segment or a query value.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded() {
        assert_eq!(encode("@revenue"), "%40revenue");
        assert_eq!(encode("a b/c+é"), "a%20b%2Fc%2B%C3%A9");
        let q = EntryQuery {
            account: Some("cust 1".into()),
            kind: Some(EntryKind::HoldCapture),
            limit: Some(10),
            ..EntryQuery::default()
        };
        assert_eq!(
            q.to_query(),
            "?after_seq=0&account=cust%201&kind=hold_capture&limit=10"
        );
    }

    #[test]
    fn only_the_set_options_are_sent() {
        assert_eq!(BalanceQuery::default().to_query(), "");
        let s = StatementQuery::new(
            "2026-11-01T00:00:00Z".parse().unwrap(),
            "2026-11-29T12:30:00.5Z".parse().unwrap(),
        );
        assert_eq!(
            s.to_query(),
            "?from=2026-11-01T00%3A00%3A00Z&to=2026-11-29T12%3A30%3A00.500Z"
        );
        let u = UsageQuery {
            from: NaiveDate::from_ymd_opt(2026, 11, 1),
            granularity: Some(Granularity::Month),
            ..UsageQuery::default()
        };
        assert_eq!(u.to_query(), "?from=2026-11-01&granularity=month");
    }

    #[test]
    fn entry_and_account_filters() {
        let q = EntryQuery {
            status: Some(EntryStatus::Rejected),
            upstream_id: Some("ur 1".into()),
            ..EntryQuery::default()
        };
        assert_eq!(
            q.to_query(),
            "?after_seq=0&status=rejected&upstream_id=ur%201"
        );
        assert_eq!(AccountQuery::default().to_query(), "");
        let a = AccountQuery {
            q: Some("Cust".into()),
            after: Some("cust_1".into()),
            limit: Some(2),
        };
        assert_eq!(a.to_query(), "?q=Cust&after=cust_1&limit=2");
    }

    #[test]
    fn delivery_pages() {
        assert_eq!(WebhookDeliveryQuery::default().to_query(), "");
        let q = WebhookDeliveryQuery {
            status: Some(WebhookDeliveryStatus::Failed),
            after: Some("wd_1".into()),
            limit: Some(5),
        };
        assert_eq!(q.to_query(), "?status=failed&after=wd_1&limit=5");
    }

    #[test]
    fn stripe_event_pages() {
        assert_eq!(StripeEventQuery::default().to_query(), "");
        let q = StripeEventQuery {
            status: Some(StripeEventStatus::Unmapped),
            after: Some("evt_1".into()),
            limit: Some(50),
        };
        assert_eq!(q.to_query(), "?status=unmapped&after=evt_1&limit=50");
    }
}
