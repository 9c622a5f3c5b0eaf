//! The two tables of the Stripe integration (migrations `*_stripe.sql`):
//! a tenant's endpoint and its secrets, and every event received. The SQL
//! is the same text on both engines, run through the ledger's
//! [`Storage`] statements (writes in a write of their own).

use tally_ledger::store::{Arg, Columns, FromColumns, Sql, Storage};
use tally_ledger::LedgerError;

/// A tenant's Stripe endpoint as stored.
#[derive(Debug, Clone)]
pub struct IntegrationRow {
    pub tenant_id: String,
    pub endpoint_id: String,
    /// A JSON array of the signing secrets.
    pub signing_secrets: String,
    pub account_metadata_key: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl IntegrationRow {
    pub fn secrets(&self) -> Vec<String> {
        serde_json::from_str(&self.signing_secrets).unwrap_or_default()
    }
}

impl FromColumns for IntegrationRow {
    fn from_columns(row: &dyn Columns) -> Result<Self, LedgerError> {
        Ok(IntegrationRow {
            tenant_id: row.text("tenant_id")?,
            endpoint_id: row.text("endpoint_id")?,
            signing_secrets: row.text("signing_secrets")?,
            account_metadata_key: row.text("account_metadata_key")?,
            created_at: row.int("created_at")?,
            updated_at: row.int("updated_at")?,
        })
    }
}

/// One event as recorded.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub tenant_id: String,
    pub event_id: String,
    pub event_type: String,
    /// `applied`, `ignored` or `unmapped`.
    pub status: String,
    pub reason: Option<String>,
    pub waiting_for: Option<String>,
    pub payload: String,
    /// The JSON body the first delivery was answered with.
    pub answer: String,
    pub received_at: i64,
    pub updated_at: i64,
}

impl FromColumns for EventRow {
    fn from_columns(row: &dyn Columns) -> Result<Self, LedgerError> {
        Ok(EventRow {
            tenant_id: row.text("tenant_id")?,
            event_id: row.text("event_id")?,
            event_type: row.text("event_type")?,
            status: row.text("status")?,
            reason: row.opt_text("reason")?,
            waiting_for: row.opt_text("waiting_for")?,
            payload: row.text("payload")?,
            answer: row.text("answer")?,
            received_at: row.int("received_at")?,
            updated_at: row.int("updated_at")?,
        })
    }
}

const INTEGRATION: &str =
    "tenant_id, endpoint_id, signing_secrets, account_metadata_key, created_at, updated_at";
const EVENT: &str = "tenant_id, event_id, event_type, status, reason, waiting_for, payload, \
    answer, received_at, updated_at";

/// Creates or replaces the tenant's endpoint settings; the endpoint id of
/// an existing one is kept (the path Stripe has stays valid).
pub async fn put_integration(
    storage: &Storage,
    tenant: &str,
    new_endpoint_id: &str,
    secrets_json: &str,
    account_key: &str,
    now: i64,
) -> Result<IntegrationRow, LedgerError> {
    let text = format!(
        "INSERT INTO stripe_integrations ({INTEGRATION}) VALUES ($1, $2, $3, $4, $5, $5) \
         ON CONFLICT (tenant_id) DO UPDATE SET signing_secrets = excluded.signing_secrets, \
           account_metadata_key = excluded.account_metadata_key, updated_at = excluded.updated_at \
         RETURNING {INTEGRATION}"
    );
    let args = [
        Arg::Text(tenant),
        Arg::Text(new_endpoint_id),
        Arg::Text(secrets_json),
        Arg::Text(account_key),
        Arg::Int(now),
    ];
    storage
        .write_returning(&Sql::with(&text, args))
        .await?
        .ok_or_else(|| LedgerError::Corrupt("an upsert returned no row".to_owned()))
}

pub async fn integration(
    storage: &Storage,
    tenant: &str,
) -> Result<Option<IntegrationRow>, LedgerError> {
    let text = format!("SELECT {INTEGRATION} FROM stripe_integrations WHERE tenant_id = $1");
    storage
        .query_optional(&Sql::with(&text, [Arg::Text(tenant)]))
        .await
}

/// The endpoint a delivery names, whatever its tenant.
pub async fn integration_by_endpoint(
    storage: &Storage,
    endpoint_id: &str,
) -> Result<Option<IntegrationRow>, LedgerError> {
    let text = format!("SELECT {INTEGRATION} FROM stripe_integrations WHERE endpoint_id = $1");
    storage
        .query_optional(&Sql::with(&text, [Arg::Text(endpoint_id)]))
        .await
}

/// Removes the tenant's endpoint (its events stay); false if none.
pub async fn delete_integration(storage: &Storage, tenant: &str) -> Result<bool, LedgerError> {
    const SQL: &str = "DELETE FROM stripe_integrations WHERE tenant_id = $1";
    Ok(storage.write(&Sql::with(SQL, [Arg::Text(tenant)])).await? > 0)
}

pub async fn event(
    storage: &Storage,
    tenant: &str,
    event_id: &str,
) -> Result<Option<EventRow>, LedgerError> {
    let text = format!("SELECT {EVENT} FROM stripe_events WHERE tenant_id = $1 AND event_id = $2");
    storage
        .query_optional(&Sql::with(&text, [Arg::Text(tenant), Arg::Text(event_id)]))
        .await
}

/// Records `row` unless its event is recorded already: true if this call
/// recorded it (the first delivery to finish wins; the others answer as
/// it did).
pub async fn insert_event(storage: &Storage, row: &EventRow) -> Result<bool, LedgerError> {
    let text = format!(
        "INSERT INTO stripe_events ({EVENT}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (tenant_id, event_id) DO NOTHING"
    );
    let args = [
        Arg::Text(&row.tenant_id),
        Arg::Text(&row.event_id),
        Arg::Text(&row.event_type),
        Arg::Text(&row.status),
        Arg::OptText(row.reason.as_deref()),
        Arg::OptText(row.waiting_for.as_deref()),
        Arg::Text(&row.payload),
        Arg::Text(&row.answer),
        Arg::Int(row.received_at),
        Arg::Int(row.updated_at),
    ];
    Ok(storage.write(&Sql::with(&text, args)).await? > 0)
}

/// Sets an event's status after it was applied again.
pub async fn update_event(storage: &Storage, row: &EventRow) -> Result<(), LedgerError> {
    // The answer stays the first delivery's: a redelivery answers as it did.
    const SQL: &str = "UPDATE stripe_events SET status = $3, reason = $4, waiting_for = $5, \
         updated_at = $6 WHERE tenant_id = $1 AND event_id = $2";
    let args = [
        Arg::Text(&row.tenant_id),
        Arg::Text(&row.event_id),
        Arg::Text(&row.status),
        Arg::OptText(row.reason.as_deref()),
        Arg::OptText(row.waiting_for.as_deref()),
        Arg::Int(row.updated_at),
    ];
    storage.write(&Sql::with(SQL, args)).await?;
    Ok(())
}

/// Unmapped events waiting for `payment_id`, oldest first.
pub async fn waiting_for(
    storage: &Storage,
    tenant: &str,
    payment_id: &str,
) -> Result<Vec<EventRow>, LedgerError> {
    let text = format!(
        "SELECT {EVENT} FROM stripe_events WHERE tenant_id = $1 AND waiting_for = $2 \
         AND status = 'unmapped' ORDER BY received_at, event_id"
    );
    storage
        .query_all(&Sql::with(
            &text,
            [Arg::Text(tenant), Arg::Text(payment_id)],
        ))
        .await
}

/// A page of the tenant's events in event-id order, after `after`.
pub async fn events_page(
    storage: &Storage,
    tenant: &str,
    status: Option<&str>,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<EventRow>, LedgerError> {
    // Byte order on both engines: the column is COLLATE "C" on PostgreSQL.
    let text = format!(
        "SELECT {EVENT} FROM stripe_events WHERE tenant_id = $1 \
         AND (CAST($2 AS TEXT) IS NULL OR status = $2) \
         AND (CAST($3 AS TEXT) IS NULL OR event_id > $3) ORDER BY event_id LIMIT $4"
    );
    let args = [
        Arg::Text(tenant),
        Arg::OptText(status),
        Arg::OptText(after),
        Arg::Int(limit),
    ];
    storage.query_all(&Sql::with(&text, args)).await
}
