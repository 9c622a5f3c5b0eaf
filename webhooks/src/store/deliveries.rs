//! Deliveries (one event for one endpoint) and their attempts.

use tally_ledger::store::{EngineRef, Storage};

use super::engine::{in_snapshot, in_write, new_id, now_micros, on_pool};
use crate::event::Event;
use crate::WebhookError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not delivered yet: sent at `next_attempt_at`.
    Pending,
    /// A 2xx answered it.
    Delivered,
    /// Given up (dead-lettered): still failing at the maximum age, or its
    /// endpoint answered 410 Gone.
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryRow {
    pub tenant_id: String,
    pub id: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    pub seq: i64,
    pub payload: String,
    pub status: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub scheduled_at: i64,
    pub updated_at: i64,
}

/// One attempt as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AttemptRow {
    pub delivery_id: String,
    pub attempt: i64,
    pub attempted_at: i64,
    /// `delivered`, `http_status`, `timeout`, `connection` or `gone`.
    pub outcome: String,
    pub http_status: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered {
        status: u16,
    },
    /// Any other answer but 410; retried.
    HttpStatus {
        status: u16,
    },
    Timeout,
    Connection {
        error: String,
    },
    /// 410: the endpoint is disabled, the delivery failed.
    Gone,
}

impl Outcome {
    fn name(&self) -> &'static str {
        match self {
            Outcome::Delivered { .. } => "delivered",
            Outcome::HttpStatus { .. } => "http_status",
            Outcome::Timeout => "timeout",
            Outcome::Connection { .. } => "connection",
            Outcome::Gone => "gone",
        }
    }

    fn http_status(&self) -> Option<i64> {
        match self {
            Outcome::Delivered { status } | Outcome::HttpStatus { status } => Some(*status as i64),
            Outcome::Gone => Some(410),
            _ => None,
        }
    }

    fn error(&self) -> Option<String> {
        match self {
            Outcome::Connection { error } => Some(error.clone()),
            Outcome::Timeout => Some("no answer within the timeout".into()),
            _ => None,
        }
    }

    /// The label of `tally_webhook_attempts_total`.
    pub fn label(&self) -> &'static str {
        self.name()
    }
}

/// An event to deliver to one endpoint.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    pub endpoint_id: &'a str,
    pub event: &'a Event,
}

/// `GET …/deliveries`: a status, and the page after a delivery id.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub status: Option<DeliveryStatus>,
    pub after: Option<String>,
    pub limit: i64,
}

/// The oldest delivery of an endpoint not delivered yet.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PendingAge {
    pub tenant_id: String,
    pub endpoint_id: String,
    pub oldest_scheduled_at: i64,
}

const COLUMNS: &str = "tenant_id, id, endpoint_id, event_id, event_type, seq, payload, status, \
    attempts, next_attempt_at, lease_owner, lease_until, last_status, last_error, scheduled_at, \
    updated_at";

const INSERT: &str = "INSERT INTO webhook_deliveries (tenant_id, id, endpoint_id, event_id, \
    event_type, seq, payload, status, attempts, next_attempt_at, scheduled_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 0, $8, $8, $8)";

/// Runs `$sql` ([`INSERT`] and its conflict clause) for each delivery, on
/// the write transaction's connection of either engine.
macro_rules! insert_each {
    ($tx:ident, $sql:expr, $tenant:expr, $deliveries:expr, $now:expr) => {
        for d in $deliveries {
            sqlx::query($sql)
                .bind($tenant)
                .bind(new_id("wd"))
                .bind(d.endpoint_id)
                .bind(&d.event.id)
                .bind(d.event.event_type.as_str())
                .bind(d.event.seq)
                .bind(&d.event.body)
                .bind($now)
                .execute(&mut *$tx)
                .await?;
        }
    };
}

/// The fan-out's write: `deliveries` and the tenant's checkpoint moved
/// from `from` to `to`, in one transaction. `false` (nothing written) if
/// the checkpoint is no longer `from`: another process fanned these
/// entries out first. A delivery already there is left as it is.
pub async fn fan_out(
    storage: &Storage,
    tenant: &str,
    from: i64,
    to: i64,
    deliveries: &[NewDelivery<'_>],
) -> Result<bool, WebhookError> {
    let insert = format!("{INSERT} ON CONFLICT (tenant_id, endpoint_id, event_id) DO NOTHING");
    const MOVE: &str = "UPDATE projector_checkpoints SET seq = $3 \
         WHERE tenant_id = $1 AND projector = 'webhooks' AND seq = $2";
    const CREATE: &str = "INSERT INTO projector_checkpoints (tenant_id, projector, seq) \
         VALUES ($1, 'webhooks', $2) ON CONFLICT (tenant_id, projector) DO NOTHING";
    let now = now_micros();
    let moved = in_write!(storage, tx => {
        // The checkpoint first: a stale fan-out stops before writing rows.
        let mut moved = sqlx::query(MOVE).bind(tenant).bind(from).bind(to)
            .execute(&mut *tx).await?.rows_affected() == 1;
        if !moved && from == 0 {
            moved = sqlx::query(CREATE).bind(tenant).bind(to)
                .execute(&mut *tx).await?.rows_affected() == 1;
        }
        if moved {
            insert_each!(tx, &insert, tenant, deliveries, now);
        }
        moved
    });
    Ok(moved)
}

/// A replay: each delivery is scheduled now, made if it is missing, sent
/// again if it was delivered or failed. How many were scheduled.
pub async fn schedule_again(
    storage: &Storage,
    tenant: &str,
    deliveries: &[NewDelivery<'_>],
) -> Result<usize, WebhookError> {
    let upsert = format!(
        "{INSERT} ON CONFLICT (tenant_id, endpoint_id, event_id) DO UPDATE SET \
         status = 'pending', next_attempt_at = excluded.next_attempt_at, \
         scheduled_at = excluded.scheduled_at, updated_at = excluded.updated_at"
    );
    let now = now_micros();
    in_write!(storage, tx => {
        insert_each!(tx, &upsert, tenant, deliveries, now);
    });
    Ok(deliveries.len())
}

/// Enabled endpoints with a delivery due at `now` and not leased: the
/// dispatcher's one query over tenants (ids only).
pub async fn due_endpoints(
    storage: &Storage,
    now: i64,
    limit: i64,
) -> Result<Vec<(String, String)>, WebhookError> {
    const SQL: &str = "SELECT DISTINCT d.tenant_id, d.endpoint_id FROM webhook_deliveries d \
         JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.id = d.endpoint_id \
         WHERE d.status = 'pending' AND d.next_attempt_at <= $1 \
           AND (d.lease_until IS NULL OR d.lease_until < $1) AND e.enabled \
         LIMIT $2";
    Ok(on_pool!(storage, pool => {
        sqlx::query_as(SQL).bind(now).bind(limit).fetch_all(pool).await?
    }))
}

/// Leases up to `n` due deliveries of one endpoint to `owner` until
/// `lease_until`, oldest first. On PostgreSQL rows another process is
/// claiming are skipped (`FOR UPDATE SKIP LOCKED`); SQLite has one writer.
pub async fn claim(
    storage: &Storage,
    tenant: &str,
    endpoint: &str,
    owner: &str,
    now: i64,
    lease_until: i64,
    n: i64,
) -> Result<Vec<DeliveryRow>, WebhookError> {
    let pick = "SELECT id FROM webhook_deliveries \
         WHERE tenant_id = $1 AND endpoint_id = $2 AND status = 'pending' \
           AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until < $3) \
         ORDER BY next_attempt_at, seq LIMIT $6";
    let lock = match storage.engine() {
        EngineRef::Postgres(_) => " FOR UPDATE SKIP LOCKED",
        EngineRef::Sqlite(_) => "",
    };
    let sql = format!(
        "UPDATE webhook_deliveries SET lease_owner = $4, lease_until = $5 \
         WHERE tenant_id = $1 AND id IN ({pick}{lock}) RETURNING {COLUMNS}"
    );
    Ok(in_write!(storage, tx => {
        sqlx::query_as(&sql)
            .bind(tenant)
            .bind(endpoint)
            .bind(now)
            .bind(owner)
            .bind(lease_until)
            .bind(n)
            .fetch_all(&mut *tx)
            .await?
    }))
}

/// Stores an attempt of `d` by `owner` and its consequence: `status` and,
/// when pending, the next attempt at `next_attempt_at`. Nothing changes if
/// `owner` no longer holds the lease (the attempt is still recorded).
#[allow(clippy::too_many_arguments)]
pub async fn record_attempt(
    storage: &Storage,
    d: &DeliveryRow,
    owner: &str,
    attempted_at: i64,
    duration_ms: i64,
    outcome: &Outcome,
    status: DeliveryStatus,
    next_attempt_at: i64,
) -> Result<(), WebhookError> {
    // Nothing is recorded of a delivery deleted meanwhile (its endpoint was).
    const ATTEMPT: &str = "INSERT INTO webhook_attempts (tenant_id, delivery_id, attempt, \
         attempted_at, outcome, http_status, error, duration_ms) \
         SELECT $1, $2, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM webhook_attempts \
           WHERE tenant_id = $1 AND delivery_id = $2), $3, $4, $5, $6, $7 \
         WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE tenant_id = $1 AND id = $2)";
    const UPDATE: &str = "UPDATE webhook_deliveries SET status = $4, \
         attempts = attempts + 1, next_attempt_at = $5, lease_owner = NULL, lease_until = NULL, \
         last_status = $6, last_error = $7, updated_at = $8 \
         WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3";
    let error = outcome.error();
    in_write!(storage, tx => {
        sqlx::query(ATTEMPT)
            .bind(&d.tenant_id)
            .bind(&d.id)
            .bind(attempted_at)
            .bind(outcome.name())
            .bind(outcome.http_status())
            .bind(&error)
            .bind(duration_ms)
            .execute(&mut *tx)
            .await?;
        sqlx::query(UPDATE)
            .bind(&d.tenant_id)
            .bind(&d.id)
            .bind(owner)
            .bind(status.as_str())
            .bind(next_attempt_at)
            .bind(outcome.http_status())
            .bind(&error)
            .bind(now_micros())
            .execute(&mut *tx)
            .await?;
    });
    Ok(())
}

impl DeliveryRow {
    pub async fn get(
        storage: &Storage,
        tenant: &str,
        id: &str,
    ) -> Result<DeliveryRow, WebhookError> {
        let sql =
            format!("SELECT {COLUMNS} FROM webhook_deliveries WHERE tenant_id = $1 AND id = $2");
        let row: Option<DeliveryRow> = on_pool!(storage, pool => {
            sqlx::query_as(&sql).bind(tenant).bind(id).fetch_optional(pool).await?
        });
        row.ok_or(WebhookError::NotFound)
    }

    /// `POST /v1/webhook-deliveries/{id}/retry`: pending again, due now.
    pub async fn retry(
        storage: &Storage,
        tenant: &str,
        id: &str,
    ) -> Result<DeliveryRow, WebhookError> {
        let sql = format!(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3, \
               scheduled_at = $3, updated_at = $3 \
             WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
        );
        let row: Option<DeliveryRow> = in_write!(storage, tx => {
            sqlx::query_as(&sql).bind(tenant).bind(id).bind(now_micros())
                .fetch_optional(&mut *tx).await?
        });
        row.ok_or(WebhookError::NotFound)
    }

    /// An endpoint's deliveries, newest first, with their attempts.
    pub async fn list(
        storage: &Storage,
        tenant: &str,
        endpoint: &str,
        filter: &DeliveryFilter,
    ) -> Result<Vec<(DeliveryRow, Vec<AttemptRow>)>, WebhookError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM webhook_deliveries \
             WHERE tenant_id = $1 AND endpoint_id = $2 AND ($3 IS NULL OR status = $3) \
               AND ($4 IS NULL OR id < $4) \
             ORDER BY id DESC LIMIT $5"
        );
        const ATTEMPTS: &str = "SELECT delivery_id, attempt, attempted_at, outcome, http_status, \
             error, duration_ms FROM webhook_attempts \
             WHERE tenant_id = $1 AND delivery_id = $2 ORDER BY attempt";
        let status = filter.status.map(|s| s.as_str());
        let out: Vec<(DeliveryRow, Vec<AttemptRow>)> = in_snapshot!(storage, tx => {
            let rows: Vec<DeliveryRow> = sqlx::query_as(&sql)
                .bind(tenant)
                .bind(endpoint)
                .bind(status)
                .bind(&filter.after)
                .bind(filter.limit)
                .fetch_all(&mut *tx)
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let attempts: Vec<AttemptRow> = sqlx::query_as(ATTEMPTS)
                    .bind(tenant)
                    .bind(&row.id)
                    .fetch_all(&mut *tx)
                    .await?;
                out.push((row, attempts));
            }
            out
        });
        Ok(out)
    }

    /// The oldest pending delivery of each enabled endpoint (`/metrics`).
    pub async fn pending_ages(storage: &Storage) -> Result<Vec<PendingAge>, WebhookError> {
        const SQL: &str =
            "SELECT d.tenant_id, d.endpoint_id, MIN(d.scheduled_at) AS oldest_scheduled_at \
             FROM webhook_deliveries d \
             WHERE d.status = 'pending' GROUP BY d.tenant_id, d.endpoint_id";
        Ok(on_pool!(storage, pool => sqlx::query_as(SQL).fetch_all(pool).await?))
    }
}
