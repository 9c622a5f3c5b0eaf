//! A tenant's webhook endpoints.

use tally_ledger::store::{ReaderConnection, Storage};

use super::engine::{in_write, new_id, now_micros, on_pool};
use crate::event::EventType;
use crate::WebhookError;

/// Endpoints a tenant may have.
pub const MAX_ENDPOINTS_PER_TENANT: i64 = 16;

/// An endpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EndpointRow {
    pub tenant_id: String,
    pub id: String,
    pub url: String,
    /// A JSON array of event type names, sorted.
    pub event_types: String,
    pub description: Option<String>,
    pub enabled: bool,
    /// `gone` (the receiver answered 410) or `disabled` (by a PATCH).
    pub disabled_reason: Option<String>,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_until: Option<i64>,
    pub after_seq: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl EndpointRow {
    pub fn types(&self) -> Vec<EventType> {
        serde_json::from_str::<Vec<String>>(&self.event_types)
            .unwrap_or_default()
            .iter()
            .filter_map(|t| EventType::parse(t))
            .collect()
    }

    pub fn wants(&self, t: EventType) -> bool {
        self.types().contains(&t)
    }

    /// The secrets that sign a delivery sent at `now`: the current one,
    /// and the previous one during its grace period.
    pub fn signing_secrets(&self, now: i64) -> Vec<&str> {
        let mut out = vec![self.secret.as_str()];
        if let (Some(previous), Some(until)) = (&self.previous_secret, self.previous_secret_until) {
            if now < until {
                out.push(previous.as_str());
            }
        }
        out
    }
}

/// The JSON text stored for a set of event types (sorted, no repeats).
pub fn types_text(types: &[EventType]) -> String {
    let mut sorted = types.to_vec();
    sorted.sort();
    sorted.dedup();
    serde_json::Value::from(sorted.iter().map(|t| t.as_str()).collect::<Vec<_>>()).to_string()
}

/// A PATCH: what is `Some` changes.
#[derive(Debug, Default, Clone)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub event_types: Option<Vec<EventType>>,
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
}

const COLUMNS: &str = "tenant_id, id, url, event_types, description, enabled, disabled_reason, \
    secret, previous_secret, previous_secret_until, after_seq, created_at, updated_at";

impl EndpointRow {
    /// Creates an endpoint that receives the events after the tenant's
    /// head now. The tenant's fan-out checkpoint moves up to that head if
    /// the tenant has no other endpoint: events before it would go to
    /// nobody.
    pub async fn create(
        storage: &Storage,
        tenant: &str,
        url: &str,
        types: &[EventType],
        description: Option<&str>,
        secret: &str,
    ) -> Result<EndpointRow, WebhookError> {
        let now = now_micros();
        let id = new_id("we");
        let types = types_text(types);
        // Each statement names the tenant as a scalar and holds no
        // subquery, so Citus routes it to the tenant's node (it refuses
        // subqueries inside an INSERT): the count, the head and whether
        // other endpoints exist are read first, in the same transaction.
        const COUNT: &str = "SELECT COUNT(*) FROM webhook_endpoints WHERE tenant_id = $1";
        let insert = format!(
            "INSERT INTO webhook_endpoints ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, TRUE, NULL, $6, NULL, NULL, $7, $8, $8) \
             RETURNING {COLUMNS}"
        );
        // The checkpoint moves up to the new endpoint's start only when it
        // is the tenant's first endpoint: events before it go to nobody.
        const CHECKPOINT: &str = "INSERT INTO projector_checkpoints (tenant_id, projector, seq) \
             VALUES ($1, 'webhooks', $2) \
             ON CONFLICT (tenant_id, projector) DO UPDATE SET seq = CASE \
               WHEN projector_checkpoints.seq < excluded.seq AND $3 \
               THEN excluded.seq ELSE projector_checkpoints.seq END";
        let row: Option<EndpointRow> = in_write!(storage, tx => {
            let existing: i64 = sqlx::query_scalar(COUNT)
                .bind(tenant)
                .fetch_one(&mut *tx)
                .await?;
            if existing >= MAX_ENDPOINTS_PER_TENANT {
                None
            } else {
                let head = ReaderConnection::head_seq(&mut *tx, tenant).await?;
                let row: EndpointRow = sqlx::query_as(&insert)
                    .bind(tenant)
                    .bind(&id)
                    .bind(url)
                    .bind(&types)
                    .bind(description)
                    .bind(secret)
                    .bind(head)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
                sqlx::query(CHECKPOINT)
                    .bind(tenant)
                    .bind(row.after_seq)
                    .bind(existing == 0)
                    .execute(&mut *tx)
                    .await?;
                Some(row)
            }
        });
        row.ok_or_else(|| {
            WebhookError::Invalid(tally_ledger::fields::ValidationErrors::single(
                "url",
                format!("the tenant already has {MAX_ENDPOINTS_PER_TENANT} endpoints, the limit"),
            ))
        })
    }

    pub async fn get(
        storage: &Storage,
        tenant: &str,
        id: &str,
    ) -> Result<EndpointRow, WebhookError> {
        let sql =
            format!("SELECT {COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2");
        let row: Option<EndpointRow> = on_pool!(storage, pool => {
            sqlx::query_as(&sql).bind(tenant).bind(id).fetch_optional(pool).await?
        });
        row.ok_or(WebhookError::NotFound)
    }

    /// Every endpoint of the tenant, oldest first (at most
    /// [`MAX_ENDPOINTS_PER_TENANT`]).
    pub async fn list(storage: &Storage, tenant: &str) -> Result<Vec<EndpointRow>, WebhookError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id"
        );
        Ok(on_pool!(storage, pool => {
            sqlx::query_as(&sql).bind(tenant).fetch_all(pool).await?
        }))
    }

    /// Applies a PATCH. Enabling clears the reason it was disabled.
    pub async fn update(
        storage: &Storage,
        tenant: &str,
        id: &str,
        change: &EndpointChange,
    ) -> Result<EndpointRow, WebhookError> {
        let current = Self::get(storage, tenant, id).await?;
        let url = change.url.clone().unwrap_or(current.url);
        let types = change
            .event_types
            .as_deref()
            .map(types_text)
            .unwrap_or(current.event_types);
        let description = change.description.clone().unwrap_or(current.description);
        let (enabled, reason) = match change.enabled {
            None => (current.enabled, current.disabled_reason),
            Some(true) => (true, None),
            Some(false) if !current.enabled => (false, current.disabled_reason),
            Some(false) => (false, Some("disabled".to_owned())),
        };
        let sql = format!(
            "UPDATE webhook_endpoints SET url = $3, event_types = $4, description = $5, \
               enabled = $6, disabled_reason = $7, updated_at = $8 \
             WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
        );
        let row: Option<EndpointRow> = in_write!(storage, tx => {
            sqlx::query_as(&sql)
                .bind(tenant)
                .bind(id)
                .bind(&url)
                .bind(&types)
                .bind(&description)
                .bind(enabled)
                .bind(&reason)
                .bind(now_micros())
                .fetch_optional(&mut *tx)
                .await?
        });
        row.ok_or(WebhookError::NotFound)
    }

    /// Disables the endpoint because the receiver answered 410 Gone.
    pub async fn disable_gone(
        storage: &Storage,
        tenant: &str,
        id: &str,
    ) -> Result<(), WebhookError> {
        const SQL: &str = "UPDATE webhook_endpoints SET enabled = FALSE, \
             disabled_reason = 'gone', updated_at = $3 WHERE tenant_id = $1 AND id = $2";
        in_write!(storage, tx => {
            sqlx::query(SQL).bind(tenant).bind(id).bind(now_micros()).execute(&mut *tx).await?;
        });
        Ok(())
    }

    /// Deletes the endpoint with its deliveries and their attempts.
    pub async fn delete(storage: &Storage, tenant: &str, id: &str) -> Result<(), WebhookError> {
        const ATTEMPTS: &str =
            "DELETE FROM webhook_attempts WHERE tenant_id = $1 AND delivery_id IN \
             (SELECT id FROM webhook_deliveries WHERE tenant_id = $1 AND endpoint_id = $2)";
        const DELIVERIES: &str =
            "DELETE FROM webhook_deliveries WHERE tenant_id = $1 AND endpoint_id = $2";
        const ENDPOINT: &str = "DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2";
        let deleted = in_write!(storage, tx => {
            sqlx::query(ATTEMPTS).bind(tenant).bind(id).execute(&mut *tx).await?;
            sqlx::query(DELIVERIES).bind(tenant).bind(id).execute(&mut *tx).await?;
            sqlx::query(ENDPOINT).bind(tenant).bind(id).execute(&mut *tx).await?.rows_affected()
        });
        if deleted == 0 {
            return Err(WebhookError::NotFound);
        }
        Ok(())
    }

    /// A new secret; the current one keeps signing beside it for `grace`
    /// microseconds.
    pub async fn rotate(
        storage: &Storage,
        tenant: &str,
        id: &str,
        secret: &str,
        grace_micros: i64,
    ) -> Result<EndpointRow, WebhookError> {
        let now = now_micros();
        let sql = format!(
            "UPDATE webhook_endpoints SET previous_secret = secret, secret = $3, \
               previous_secret_until = $4, updated_at = $5 \
             WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
        );
        let row: Option<EndpointRow> = in_write!(storage, tx => {
            sqlx::query_as(&sql)
                .bind(tenant)
                .bind(id)
                .bind(secret)
                .bind(now.saturating_add(grace_micros))
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
        });
        row.ok_or(WebhookError::NotFound)
    }

    /// Endpoints disabled, over every tenant (`/metrics`).
    pub async fn count_disabled(storage: &Storage) -> Result<i64, WebhookError> {
        const SQL: &str = "SELECT COUNT(*) FROM webhook_endpoints WHERE NOT enabled";
        Ok(on_pool!(storage, pool => sqlx::query_scalar(SQL).fetch_one(pool).await?))
    }

    /// Tenants with an endpoint whose fan-out checkpoint is behind their
    /// head: tenant ids only (the fan-out's one query over tenants). A
    /// tenant whose endpoints are all disabled is fanned out too (to none
    /// of them), so an endpoint enabled again gets the events from then on,
    /// as every other endpoint does.
    pub async fn lagging_tenants(storage: &Storage) -> Result<Vec<String>, WebhookError> {
        // Driven by the endpoints: with none (most ledgers) it reads nothing
        // of the heads, however many tenants there are.
        const SQL: &str = "SELECT DISTINCT tenant_id FROM webhook_endpoints ORDER BY tenant_id";
        let tenants: Vec<String> =
            on_pool!(storage, pool => sqlx::query_scalar(SQL).fetch_all(pool).await?);
        Ok(storage.tenants_behind_among("webhooks", &tenants).await?)
    }
}
