//! What the groups of a round write on PostgreSQL: the rows of every
//! group, of any number of tenants, in one statement (one sub-statement
//! per table), or, routed by tenant (Citus), one tenant's group as plain
//! statements that each name that tenant.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{Postgres, Row};

use crate::amount::canonical;
use crate::balance::AccountBalance;
use crate::entry::{StoredEntry, UsageColumns};
use crate::store::transaction::{GroupTransaction, GroupWrite};
use crate::LedgerError;

use super::group_tx::PgGroup;

type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

/// The rows of every group of `writes`, as one statement and one round
/// trip. Every row carries its group's index (`piece`) and tenant, bound
/// as arrays, so the statement is the same whatever the number of groups
/// and tenants and stays prepared. Each group's head moves from its
/// `start` to its `head` only if it is still at `start`, and a group's
/// rows are drawn through its head's update: a group whose head moved
/// writes nothing while the others are written. Returns, per write,
/// whether it was written. A row refused by a constraint (a key taken by
/// another process) fails the whole statement.
///
/// The heads are compared as `locked` returns them, not in the update's
/// own `WHERE`: a `WHERE` is first evaluated on the statement's snapshot,
/// which in autocommit may predate a group still committing ahead of this
/// one, so the row would be skipped without waiting. `FOR UPDATE` waits for
/// that commit and returns the row as it left it (READ COMMITTED); in tenant
/// order, so two statements never wait on each other in a circle. The
/// upserts of balances and records are safe on the older snapshot for the
/// same reason: `ON CONFLICT DO UPDATE` updates the latest version of a
/// row, and the values are absolute.
pub(super) async fn write_together<'c>(
    writes: &[&GroupWrite],
    on: impl sqlx::PgExecutor<'c>,
) -> Result<Vec<bool>, LedgerError> {
    let tenants: Vec<&str> = writes.iter().map(|w| w.tenant.as_str()).collect();
    let pieces: Vec<i32> = (0..writes.len()).map(piece_index).collect();
    // Every entry, balance and record with its group's index and tenant.
    let entries: Vec<(i32, &str, &StoredEntry)> = writes
        .iter()
        .enumerate()
        .flat_map(|(i, w)| {
            w.entries
                .iter()
                .map(move |e| (piece_index(i), w.tenant.as_str(), e))
        })
        .collect();
    let balances: Vec<(i32, &str, &(String, String, AccountBalance))> = writes
        .iter()
        .enumerate()
        .flat_map(|(i, w)| {
            w.balances
                .iter()
                .map(move |b| (piece_index(i), w.tenant.as_str(), b))
        })
        .collect();
    let records: Vec<(i32, &str, &crate::rule_state::StateRow)> = writes
        .iter()
        .enumerate()
        .flat_map(|(i, w)| {
            w.records
                .iter()
                .map(move |r| (piece_index(i), w.tenant.as_str(), r))
        })
        .collect();
    let q = sqlx::query(
        "WITH locked AS ( \
           SELECT tenant_id, seq, hash, generation FROM ledger_heads \
           WHERE tenant_id = ANY($1) ORDER BY tenant_id FOR UPDATE), \
         head AS ( \
           UPDATE ledger_heads h SET seq = v.seq, hash = v.hash \
           FROM UNNEST($1::text[], $2::int4[], $3::int8[], $4::text[], $5::int8[], \
               $6::int8[], $7::text[]) \
               AS v(tenant_id, piece, start_seq, start_hash, generation, seq, hash), \
             locked l \
           WHERE h.tenant_id = ANY($1) AND h.tenant_id = v.tenant_id \
             AND l.tenant_id = v.tenant_id AND l.seq = v.start_seq \
             AND l.hash = v.start_hash AND l.generation = v.generation \
           RETURNING v.piece), \
         new_entries AS ( \
           INSERT INTO entries (tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
             rejection_message, account, debit_account, credit_account, amount, unit, params, \
             fingerprint, recorded_at, balance_after, prev_hash, hash, \
             usage_meter, usage_day, usage_quantity) \
           SELECT e.tenant_id, e.seq, e.id, e.kind, e.upstream_id, e.status, e.rejection_code, \
             e.rejection_message, e.account, e.debit_account, e.credit_account, e.amount, \
             e.unit, e.params, e.fingerprint, e.recorded_at, e.balance_after, e.prev_hash, \
             e.hash, e.usage_meter, e.usage_day, e.usage_quantity \
           FROM UNNEST($8::int4[], $9::text[], $10::int8[], $11::text[], $12::text[], \
             $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], \
             $19::text[], $20::text[]::numeric[], $21::text[], $22::text[], $23::text[], \
             $24::timestamptz[], $25::text[]::numeric[], $26::text[], $27::text[], \
             $28::text[], $29::text[], $30::text[]::numeric[]) \
             AS e(piece, tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
               rejection_message, account, debit_account, credit_account, amount, unit, \
               params, fingerprint, recorded_at, balance_after, prev_hash, hash, \
               usage_meter, usage_day, usage_quantity) \
           WHERE e.piece IN (SELECT piece FROM head)), \
         new_balances AS ( \
           INSERT INTO balances (tenant_id, account, unit, debits, credits, held) \
           SELECT b.tenant_id, b.account, b.unit, b.debits, b.credits, b.held \
           FROM UNNEST($31::int4[], $32::text[], $33::text[], $34::text[], \
             $35::text[]::numeric[], $36::text[]::numeric[], $37::text[]::numeric[]) \
             AS b(piece, tenant_id, account, unit, debits, credits, held) \
           WHERE b.piece IN (SELECT piece FROM head) \
           ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
             debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held), \
         new_records AS ( \
           INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
           SELECT r.tenant_id, r.kind, r.key, r.value, r.expires_at \
           FROM UNNEST($38::int4[], $39::text[], $40::text[], $41::text[], $42::text[], \
             $43::text[]) AS r(piece, tenant_id, kind, key, value, expires_at) \
           WHERE r.piece IN (SELECT piece FROM head) \
           ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
             value = EXCLUDED.value, expires_at = EXCLUDED.expires_at) \
         SELECT piece FROM head",
    )
    .bind(&tenants)
    .bind(&pieces)
    .bind(
        writes
            .iter()
            .map(|w| w.start.head.seq)
            .collect::<Vec<i64>>(),
    )
    .bind(
        writes
            .iter()
            .map(|w| hex::encode(w.start.head.hash))
            .collect::<Vec<String>>(),
    )
    .bind(
        writes
            .iter()
            .map(|w| w.start.generation)
            .collect::<Vec<i64>>(),
    )
    .bind(writes.iter().map(|w| w.head.seq).collect::<Vec<i64>>())
    .bind(
        writes
            .iter()
            .map(|w| hex::encode(w.head.hash))
            .collect::<Vec<String>>(),
    )
    .bind(entries.iter().map(|e| e.0).collect::<Vec<i32>>())
    .bind(entries.iter().map(|e| e.1).collect::<Vec<&str>>());
    let only: Vec<&StoredEntry> = entries.iter().map(|e| e.2).collect();
    let q = bind_entry_columns(q, &only)
        .bind(balances.iter().map(|b| b.0).collect::<Vec<i32>>())
        .bind(balances.iter().map(|b| b.1).collect::<Vec<&str>>());
    let only: Vec<(&str, &str, &AccountBalance)> = balances
        .iter()
        .map(|(_, _, (a, u, b))| (a.as_str(), u.as_str(), b))
        .collect();
    let q = bind_balance_columns(q, &only)
        .bind(records.iter().map(|r| r.0).collect::<Vec<i32>>())
        .bind(records.iter().map(|r| r.1).collect::<Vec<&str>>());
    let only: Vec<&crate::rule_state::StateRow> = records.iter().map(|r| r.2).collect();
    let rows = bind_record_columns(q, &only).fetch_all(on).await?;
    let mut written = vec![false; writes.len()];
    for row in rows {
        let piece: i32 = row.try_get("piece")?;
        if let Some(w) = usize::try_from(piece).ok().and_then(|i| written.get_mut(i)) {
            *w = true;
        }
    }
    Ok(written)
}

/// A group's index in its round as bound: a round holds at most
/// `MAX_ROUND_WORK` (256) groups, far below `i32::MAX`.
fn piece_index(i: usize) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

impl PgGroup {
    /// Writes `writes` (see [`write_together`]); per write, whether it was
    /// written (`false`: its head was not at its `start`, and it wrote
    /// nothing). A failure (a constraint) leaves the transaction to be
    /// rolled back (to a savepoint). Routed by tenant, the writes are of
    /// one tenant and go one by one ([`PgGroup::write_routed`]).
    pub(crate) async fn write_many(
        &mut self,
        writes: &[&GroupWrite],
    ) -> Result<Vec<bool>, LedgerError> {
        if self.routed_by_tenant {
            let mut written = Vec::with_capacity(writes.len());
            for write in writes {
                written.push(self.write_routed(write).await?);
            }
            return Ok(written);
        }
        write_together(writes, &mut *self.tx).await
    }

    /// One tenant's group written routed by tenant (see
    /// [`super::PostgresStore::routed_by_tenant`]): every statement names the
    /// tenant as a bound scalar, so a distributed PostgreSQL (Citus) routes
    /// each to the one node holding the tenant, and no statement feeds
    /// another (Citus cannot push an insert drawn through an update's
    /// `RETURNING` down to a node). The head is locked and checked first;
    /// `Ok(false)`: it is not at `write.start`, and nothing was written.
    ///
    /// Each insert draws its tenant from the (locked) head row, `FROM
    /// ledger_heads h … WHERE h.tenant_id = $1`, not from `$1` alone: an
    /// `INSERT … SELECT` from arrays only is run by the Citus coordinator
    /// as a COPY into the shard, whose errors all arrive as `XX000`, so a
    /// key taken by another process would no longer read as a unique
    /// violation. Selected from a colocated table, the statement is pushed
    /// down whole to the tenant's node, which answers `23505` itself.
    pub(super) async fn write_routed(&mut self, write: &GroupWrite) -> Result<bool, LedgerError> {
        let tenant = write.tenant.as_str();
        let locked = self.locked_head(tenant).await?;
        if locked != Some(write.start) {
            return Ok(false);
        }
        if !write.entries.is_empty() {
            let entries: Vec<&StoredEntry> = write.entries.iter().collect();
            let q = sqlx::query(
                "INSERT INTO entries (tenant_id, seq, id, kind, upstream_id, status, \
                   rejection_code, rejection_message, account, debit_account, credit_account, \
                   amount, unit, params, fingerprint, recorded_at, balance_after, prev_hash, \
                   hash, usage_meter, usage_day, usage_quantity) \
                 SELECT h.tenant_id, e.* FROM ledger_heads h, UNNEST($2::int8[], $3::text[], \
                   $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], \
                   $10::text[], $11::text[], $12::text[]::numeric[], $13::text[], $14::text[], \
                   $15::text[], $16::timestamptz[], $17::text[]::numeric[], $18::text[], \
                   $19::text[], $20::text[], $21::text[], $22::text[]::numeric[]) AS e \
                 WHERE h.tenant_id = $1",
            )
            .bind(tenant);
            bind_entry_columns(q, &entries)
                .execute(&mut *self.tx)
                .await?;
        }
        if !write.balances.is_empty() {
            let rows: Vec<(&str, &str, AccountBalance)> = write
                .balances
                .iter()
                .map(|(a, u, b)| (a.as_str(), u.as_str(), b.clone()))
                .collect();
            self.write_balances(tenant, &rows).await?;
        }
        if !write.records.is_empty() {
            let records: Vec<&crate::rule_state::StateRow> = write.records.iter().collect();
            let q = sqlx::query(
                "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
                 SELECT h.tenant_id, r.* FROM ledger_heads h, \
                   UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) AS r \
                 WHERE h.tenant_id = $1 \
                 ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
                   value = EXCLUDED.value, expires_at = EXCLUDED.expires_at",
            )
            .bind(tenant);
            bind_record_columns(q, &records)
                .execute(&mut *self.tx)
                .await?;
        }
        if write.head != write.start.head {
            sqlx::query("UPDATE ledger_heads SET seq = $2, hash = $3 WHERE tenant_id = $1")
                .bind(tenant)
                .bind(write.head.seq)
                .bind(hex::encode(write.head.hash))
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(true)
    }
}

/// Binds the 21 columns of `entries` after `tenant_id`, in table order, as
/// arrays. Columns borrow from the entries: a group of 1,000 would
/// otherwise copy ~12,000 strings only to bind them.
fn bind_entry_columns<'q>(q: PgQuery<'q>, entries: &[&'q StoredEntry]) -> PgQuery<'q> {
    let col = |f: fn(&'q StoredEntry) -> &'q str| entries.iter().map(|e| f(e)).collect::<Vec<_>>();
    let opt = |f: fn(&'q StoredEntry) -> Option<&'q str>| {
        entries.iter().map(|e| f(e)).collect::<Vec<_>>()
    };
    let usage: Vec<Option<UsageColumns>> = entries.iter().map(|e| UsageColumns::of(e)).collect();
    q.bind(entries.iter().map(|e| e.seq).collect::<Vec<i64>>())
        .bind(col(|e| &e.id))
        .bind(col(|e| e.kind.as_str()))
        .bind(col(|e| &e.upstream_id))
        .bind(col(|e| e.status.as_str()))
        .bind(opt(|e| e.rejection_code.as_deref()))
        .bind(opt(|e| e.rejection_message.as_deref()))
        .bind(col(|e| &e.account))
        .bind(col(|e| &e.debit_account))
        .bind(col(|e| &e.credit_account))
        .bind(
            entries
                .iter()
                .map(|e| canonical(e.amount))
                .collect::<Vec<String>>(),
        )
        .bind(col(|e| &e.unit))
        .bind(col(|e| &e.params))
        .bind(col(|e| &e.fingerprint))
        .bind(
            entries
                .iter()
                .map(|e| e.recorded_at)
                .collect::<Vec<DateTime<Utc>>>(),
        )
        .bind(
            entries
                .iter()
                .map(|e| e.balance_after.to_string())
                .collect::<Vec<String>>(),
        )
        .bind(col(|e| &e.prev_hash))
        .bind(col(|e| &e.hash))
        .bind(
            usage
                .iter()
                .map(|u| u.as_ref().map(|u| u.meter.clone()))
                .collect::<Vec<Option<String>>>(),
        )
        .bind(
            usage
                .iter()
                .map(|u| u.as_ref().map(|u| u.day.clone()))
                .collect::<Vec<Option<String>>>(),
        )
        .bind(
            usage
                .iter()
                .map(|u| u.as_ref().map(|u| canonical(u.quantity)))
                .collect::<Vec<Option<String>>>(),
        )
}

/// Binds account, unit, debits, credits and held of `rows` as arrays.
fn bind_balance_columns<'q>(
    q: PgQuery<'q>,
    rows: &[(&'q str, &'q str, &AccountBalance)],
) -> PgQuery<'q> {
    let amounts = |f: fn(&AccountBalance) -> &crate::balance::WideDecimal| {
        rows.iter()
            .map(|r| f(r.2).to_string())
            .collect::<Vec<String>>()
    };
    q.bind(rows.iter().map(|r| r.0).collect::<Vec<&str>>())
        .bind(rows.iter().map(|r| r.1).collect::<Vec<&str>>())
        .bind(amounts(|b| &b.debits))
        .bind(amounts(|b| &b.credits))
        .bind(amounts(|b| &b.held))
}

/// Binds kind, key, value and expires_at of `records` as arrays.
fn bind_record_columns<'q>(
    q: PgQuery<'q>,
    records: &[&'q crate::rule_state::StateRow],
) -> PgQuery<'q> {
    q.bind(records.iter().map(|r| r.kind).collect::<Vec<&str>>())
        .bind(
            records
                .iter()
                .map(|r| r.key.as_str())
                .collect::<Vec<&str>>(),
        )
        .bind(
            records
                .iter()
                .map(|r| r.value.as_str())
                .collect::<Vec<&str>>(),
        )
        .bind(
            records
                .iter()
                .map(|r| r.expires_at.as_deref())
                .collect::<Vec<Option<&str>>>(),
        )
}
