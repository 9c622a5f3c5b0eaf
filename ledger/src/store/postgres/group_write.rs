//! PostgreSQL's one-statement group write.

use chrono::{DateTime, Utc};

use crate::amount::canonical;
use crate::balance::AccountBalance;
use crate::entry::{StoredEntry, UsageColumns};
use crate::store::transaction::GroupWrite;
use crate::LedgerError;

/// Everything one group writes, as one statement and one round trip: the
/// entries, the balances and rule-state records they changed (absolute
/// values, decided on the head `write.start`), and the head, moved only if
/// it is still at `write.start`. Every insert draws its rows through the
/// head's update, so a head that moved writes nothing, and the statement
/// answers 0 instead of 1. Inside a transaction holding the head's lock the
/// check always holds; alone (autocommit), it is the lock.
///
/// The head is compared as `locked` returns it, not in the update's own
/// `WHERE`: a `WHERE` is first evaluated on the statement's snapshot, taken
/// before the group still committing ahead of this one, so `seq = start`
/// would be false there and the row skipped without waiting. `FOR UPDATE`
/// waits for that commit and then returns the row as it left it (READ
/// COMMITTED). The upserts of balances and records are safe on the older
/// snapshot for the same reason: `ON CONFLICT DO UPDATE` locks and updates
/// the latest version of a row, and the values are absolute.
/// Columns travel as arrays, so the statement is the same whatever the
/// group size and stays prepared.
pub(super) async fn group_write<'c>(
    write: &GroupWrite,
    on: impl sqlx::PgExecutor<'c>,
) -> Result<i64, LedgerError> {
    let GroupWrite {
        tenant,
        entries,
        balances,
        records,
        start,
        head,
    } = write;
    // Columns borrow from the entries: a group of 1,000 would otherwise
    // copy ~12,000 strings only to bind them.
    let col = |f: fn(&StoredEntry) -> &str| entries.iter().map(f).collect::<Vec<&str>>();
    let opt =
        |f: fn(&StoredEntry) -> Option<&str>| entries.iter().map(f).collect::<Vec<Option<&str>>>();
    let texts = |f: fn(&StoredEntry) -> String| entries.iter().map(f).collect::<Vec<String>>();
    let seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
    let recorded: Vec<DateTime<Utc>> = entries.iter().map(|e| e.recorded_at).collect();
    let usage: Vec<Option<UsageColumns>> = entries.iter().map(UsageColumns::of).collect();
    let amounts = |f: fn(&AccountBalance) -> &crate::wide::WideDecimal| {
        balances
            .iter()
            .map(|r| f(&r.2).to_string())
            .collect::<Vec<String>>()
    };
    let accounts: Vec<&str> = balances.iter().map(|r| r.0.as_str()).collect();
    let units: Vec<&str> = balances.iter().map(|r| r.1.as_str()).collect();
    Ok(sqlx::query_scalar(
        "WITH locked AS ( \
           SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1 FOR UPDATE), \
         head AS ( \
           UPDATE ledger_heads SET seq = $29, hash = $30 WHERE tenant_id = $1 AND EXISTS ( \
             SELECT 1 FROM locked WHERE seq = $34 AND hash = $35 AND generation = $36) \
           RETURNING tenant_id), \
         new_entries AS ( \
           INSERT INTO entries (tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
             rejection_message, account, debit_account, credit_account, amount, unit, params, \
             fingerprint, recorded_at, balance_after, prev_hash, hash, \
             usage_meter, usage_day, usage_quantity) \
           SELECT head.tenant_id, e.* FROM head, UNNEST($2::int8[], $3::text[], $4::text[], \
             $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
             $11::text[], $12::text[]::numeric[], $13::text[], $14::text[], $15::text[], \
             $16::timestamptz[], $17::text[]::numeric[], $18::text[], $19::text[], \
             $31::text[], $32::text[], $33::text[]::numeric[]) AS e), \
         new_balances AS ( \
           INSERT INTO balances (tenant_id, account, unit, debits, credits, held) \
           SELECT head.tenant_id, b.* FROM head, UNNEST($20::text[], $21::text[], \
             $22::text[]::numeric[], $23::text[]::numeric[], $24::text[]::numeric[]) AS b \
           ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
             debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held), \
         new_records AS ( \
           INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
           SELECT head.tenant_id, r.* FROM head, \
             UNNEST($25::text[], $26::text[], $27::text[], $28::text[]) AS r \
           ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
             value = EXCLUDED.value, expires_at = EXCLUDED.expires_at) \
         SELECT count(*) FROM head",
    )
    .bind(tenant)
    .bind(seqs)
    .bind(col(|e| &e.id))
    .bind(col(|e| e.kind.as_str()))
    .bind(col(|e| &e.upstream_id))
    .bind(col(|e| e.status.as_str()))
    .bind(opt(|e| e.rejection_code.as_deref()))
    .bind(opt(|e| e.rejection_message.as_deref()))
    .bind(col(|e| &e.account))
    .bind(col(|e| &e.debit_account))
    .bind(col(|e| &e.credit_account))
    .bind(texts(|e| canonical(e.amount)))
    .bind(col(|e| &e.unit))
    .bind(col(|e| &e.params))
    .bind(col(|e| &e.fingerprint))
    .bind(recorded)
    .bind(texts(|e| e.balance_after.to_string()))
    .bind(col(|e| &e.prev_hash))
    .bind(col(|e| &e.hash))
    .bind(accounts)
    .bind(units)
    .bind(amounts(|b| &b.debits))
    .bind(amounts(|b| &b.credits))
    .bind(amounts(|b| &b.held))
    .bind(records.iter().map(|r| r.kind).collect::<Vec<&str>>())
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
    .bind(head.seq)
    .bind(hex::encode(head.hash))
    .bind(
        usage
            .iter()
            .map(|u| u.as_ref().map(|u| u.meter.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        usage
            .iter()
            .map(|u| u.as_ref().map(|u| u.day.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        usage
            .iter()
            .map(|u| u.as_ref().map(|u| canonical(u.quantity)))
            .collect::<Vec<_>>(),
    )
    .bind(start.head.seq)
    .bind(hex::encode(start.head.hash))
    .bind(start.generation)
    .fetch_one(on)
    .await?)
}

/// The group write of a Citus coordinator, inside the group's transaction:
/// the same rows as [`group_write`], one statement per table, each naming
/// the tenant as the scalar `$1`, so Citus routes every one to the
/// tenant's node (the one-statement form chains its inserts through the
/// head's `RETURNING`, which Citus refuses: "cannot push down this
/// subquery"). The head is locked first and compared with the one the
/// group was decided on; `false`, having written nothing, if it moved.
///
/// Each insert draws its tenant from the (locked) head row, `FROM
/// ledger_heads h … WHERE h.tenant_id = $1`, not from `$1` alone: an
/// `INSERT … SELECT` from arrays only is run by the coordinator as a COPY
/// into the shard, whose errors all arrive as `XX000`, so a key taken by
/// another process would no longer read as a unique violation. Selected
/// from a colocated table, the statement is pushed down whole to the
/// tenant's node, which answers `23505` itself.
pub(super) async fn routed_group_write(
    write: &GroupWrite,
    tx: &mut sqlx::PgConnection,
) -> Result<bool, LedgerError> {
    let GroupWrite {
        tenant,
        entries,
        balances,
        records,
        start,
        head,
    } = write;
    let locked: Option<(i64, String, i64)> = sqlx::query_as(
        "SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1 FOR UPDATE",
    )
    .bind(tenant)
    .fetch_optional(&mut *tx)
    .await?;
    let expected = (
        start.head.seq,
        hex::encode(start.head.hash),
        start.generation,
    );
    if locked.as_ref() != Some(&expected) {
        return Ok(false);
    }
    if !entries.is_empty() {
        let col = |f: fn(&StoredEntry) -> &str| entries.iter().map(f).collect::<Vec<&str>>();
        let opt = |f: fn(&StoredEntry) -> Option<&str>| {
            entries.iter().map(f).collect::<Vec<Option<&str>>>()
        };
        let texts = |f: fn(&StoredEntry) -> String| entries.iter().map(f).collect::<Vec<String>>();
        let usage: Vec<Option<UsageColumns>> = entries.iter().map(UsageColumns::of).collect();
        sqlx::query(
            "INSERT INTO entries (tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
               rejection_message, account, debit_account, credit_account, amount, unit, params, \
               fingerprint, recorded_at, balance_after, prev_hash, hash, \
               usage_meter, usage_day, usage_quantity) \
             SELECT h.tenant_id, e.* FROM ledger_heads h, UNNEST($2::int8[], $3::text[], \
               $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], \
               $10::text[], $11::text[], $12::text[]::numeric[], $13::text[], $14::text[], \
               $15::text[], $16::timestamptz[], $17::text[]::numeric[], $18::text[], \
               $19::text[], $20::text[], $21::text[], $22::text[]::numeric[]) AS e \
             WHERE h.tenant_id = $1",
        )
        .bind(tenant)
        .bind(entries.iter().map(|e| e.seq).collect::<Vec<i64>>())
        .bind(col(|e| &e.id))
        .bind(col(|e| e.kind.as_str()))
        .bind(col(|e| &e.upstream_id))
        .bind(col(|e| e.status.as_str()))
        .bind(opt(|e| e.rejection_code.as_deref()))
        .bind(opt(|e| e.rejection_message.as_deref()))
        .bind(col(|e| &e.account))
        .bind(col(|e| &e.debit_account))
        .bind(col(|e| &e.credit_account))
        .bind(texts(|e| canonical(e.amount)))
        .bind(col(|e| &e.unit))
        .bind(col(|e| &e.params))
        .bind(col(|e| &e.fingerprint))
        .bind(
            entries
                .iter()
                .map(|e| e.recorded_at)
                .collect::<Vec<DateTime<Utc>>>(),
        )
        .bind(texts(|e| e.balance_after.to_string()))
        .bind(col(|e| &e.prev_hash))
        .bind(col(|e| &e.hash))
        .bind(
            usage
                .iter()
                .map(|u| u.as_ref().map(|u| u.meter.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(
            usage
                .iter()
                .map(|u| u.as_ref().map(|u| u.day.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(
            usage
                .iter()
                .map(|u| u.as_ref().map(|u| canonical(u.quantity)))
                .collect::<Vec<_>>(),
        )
        .execute(&mut *tx)
        .await?;
    }
    if !balances.is_empty() {
        let amounts = |f: fn(&AccountBalance) -> &crate::wide::WideDecimal| {
            balances
                .iter()
                .map(|r| f(&r.2).to_string())
                .collect::<Vec<String>>()
        };
        sqlx::query(
            "INSERT INTO balances (tenant_id, account, unit, debits, credits, held) \
             SELECT h.tenant_id, b.* FROM ledger_heads h, UNNEST($2::text[], $3::text[], \
               $4::text[]::numeric[], $5::text[]::numeric[], $6::text[]::numeric[]) AS b \
             WHERE h.tenant_id = $1 \
             ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
               debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held",
        )
        .bind(tenant)
        .bind(balances.iter().map(|r| r.0.as_str()).collect::<Vec<&str>>())
        .bind(balances.iter().map(|r| r.1.as_str()).collect::<Vec<&str>>())
        .bind(amounts(|b| &b.debits))
        .bind(amounts(|b| &b.credits))
        .bind(amounts(|b| &b.held))
        .execute(&mut *tx)
        .await?;
    }
    if !records.is_empty() {
        sqlx::query(
            "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
             SELECT h.tenant_id, r.* FROM ledger_heads h, \
               UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) AS r \
             WHERE h.tenant_id = $1 \
             ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
               value = EXCLUDED.value, expires_at = EXCLUDED.expires_at",
        )
        .bind(tenant)
        .bind(records.iter().map(|r| r.kind).collect::<Vec<&str>>())
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
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("UPDATE ledger_heads SET seq = $2, hash = $3 WHERE tenant_id = $1")
        .bind(tenant)
        .bind(head.seq)
        .bind(hex::encode(head.hash))
        .execute(&mut *tx)
        .await?;
    Ok(true)
}
