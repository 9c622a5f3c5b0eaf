//! The reads of intents (docs/intents.md): a page of records by id, and an
//! intent's history, its entries in the log. Both engines run the same SQL
//! (sqlx-sqlite reads `$1` as the first argument).

use sqlx::Row;

use super::log::EngineRef;
use super::storage::Storage;
use crate::entry::StoredEntry;
use crate::intents::{intent_id_of_upstream, IntentRecord};
use crate::request::EntryKind;
use crate::rule_state::{StateKey, StateValue};
use crate::LedgerError;

const PAGE_SQL: &str = "SELECT key, value FROM rule_state \
     WHERE tenant_id = $1 AND kind = 'intent' AND key > $2 ORDER BY key LIMIT $3";

/// Claims and releases are keyed `<intent_id>#<fence>`: a range of the
/// (tenant_id, kind, upstream_id) key from `<id>#` up to `<id>$` (`$` is
/// the byte after `#`; every key column orders by bytes). Outcomes are
/// keyed by the bare id.
fn history_sql(columns: &str) -> String {
    format!(
        "SELECT {columns} FROM entries WHERE tenant_id = $1 AND ( \
           (kind IN ('intent_claimed', 'intent_released') AND upstream_id >= $2 \
              AND upstream_id < $3) \
           OR (kind IN ('intent_succeeded', 'intent_failed') AND upstream_id = $4)) \
         ORDER BY seq"
    )
}

fn decode(key: String, value: &str) -> Result<IntentRecord, LedgerError> {
    match StateValue::from_json(&StateKey::Intent(key.clone()), value) {
        Some(StateValue::Intent(r)) => Ok(*r),
        _ => Err(LedgerError::Corrupt(format!(
            "rule state intent {key:?}: {value:?}"
        ))),
    }
}

impl Storage {
    /// One intent's record.
    pub async fn intent(
        &self,
        tenant: &str,
        intent_id: &str,
    ) -> Result<Option<IntentRecord>, LedgerError> {
        match self
            .record(tenant, &StateKey::Intent(intent_id.to_owned()))
            .await?
        {
            Some(StateValue::Intent(r)) => Ok(Some(*r)),
            Some(_) => Err(LedgerError::Corrupt(format!(
                "rule state intent {intent_id:?} is not an intent"
            ))),
            None => Ok(None),
        }
    }

    /// Up to `limit` intents with ids after `after`, in id (byte) order.
    pub async fn intents_page(
        &self,
        tenant: &str,
        after: &str,
        limit: i64,
    ) -> Result<Vec<IntentRecord>, LedgerError> {
        let rows: Vec<(String, String)> = match self.engine() {
            EngineRef::Sqlite(s) => sqlx::query(PAGE_SQL)
                .bind(tenant)
                .bind(after)
                .bind(limit)
                .fetch_all(s.pool())
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_, sqlx::Error>>()?,
            EngineRef::Postgres(s) => sqlx::query(PAGE_SQL)
                .bind(tenant)
                .bind(after)
                .bind(limit)
                .fetch_all(s.pool())
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_, sqlx::Error>>()?,
        };
        rows.into_iter().map(|(k, v)| decode(k, &v)).collect()
    }

    /// The entries of one intent, in seq order.
    pub async fn intent_history(
        &self,
        tenant: &str,
        intent_id: &str,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        let (from, to) = (format!("{intent_id}#"), format!("{intent_id}$"));
        let entries: Vec<StoredEntry> = match self.engine() {
            EngineRef::Sqlite(s) => {
                let sql = history_sql(super::sqlite::columns::ENTRY_COLUMNS);
                let rows = sqlx::query(&sql)
                    .bind(tenant)
                    .bind(&from)
                    .bind(&to)
                    .bind(intent_id)
                    .fetch_all(s.pool())
                    .await?;
                rows.iter()
                    .map(super::sqlite::columns::entry)
                    .collect::<Result<_, _>>()?
            }
            EngineRef::Postgres(s) => {
                let sql = history_sql(super::postgres::columns::ENTRY_COLUMNS);
                let rows = sqlx::query(&sql)
                    .bind(tenant)
                    .bind(&from)
                    .bind(&to)
                    .bind(intent_id)
                    .fetch_all(s.pool())
                    .await?;
                rows.iter()
                    .map(super::postgres::columns::entry)
                    .collect::<Result<_, _>>()?
            }
        };
        // The range also holds the claims of an intent whose id extends
        // this one's with `#…`.
        Ok(entries
            .into_iter()
            .filter(|e| {
                let with_fence =
                    matches!(e.kind, EntryKind::IntentClaimed | EntryKind::IntentReleased);
                intent_id_of_upstream(&e.upstream_id, with_fence) == intent_id
            })
            .collect())
    }
}
