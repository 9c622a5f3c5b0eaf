//! Statements on a tenant's rows named by key tuples, bound as one text
//! array per key column and unnested: a probe per tuple, or a delete.

use sqlx::postgres::PgRow;
use sqlx::PgConnection;

use crate::LedgerError;

/// A key column and its values; the columns of one statement give values
/// of one length, a tuple per index.
pub(crate) type KeyColumn<'a> = (&'a str, &'a [&'a str]);

/// `UNNEST($2::text[], …) AS k(name, …)` over `keys`, and the conditions
/// ` AND row.name = k.name …` that match a row to a tuple.
fn unnest(keys: &[KeyColumn<'_>], row: &str) -> (String, String) {
    assert!(
        !keys.is_empty(),
        "a statement by key names at least one key column"
    );
    let names: Vec<&str> = keys.iter().map(|(name, _)| *name).collect();
    let arrays: Vec<String> = (2..keys.len() + 2)
        .map(|i| format!("${i}::text[]"))
        .collect();
    let matches: String = names
        .iter()
        .map(|n| format!(" AND {row}.{n} = k.{n}"))
        .collect();
    let from = format!("UNNEST({}) AS k({})", arrays.join(", "), names.join(", "));
    (from, matches)
}

/// The `columns` of the rows of `table` in `tenant` whose key columns hold
/// one of the tuples in `keys` (each a key column and its values, all of
/// one length), one index probe per tuple.
///
/// Written as a LATERAL join so that the prepared statement's generic plan
/// cannot turn it into a scan of the tenant's rows: cost grows with the
/// group, not with the log. Measured under load on entries:
/// `(kind, upstream_id) IN (SELECT * FROM UNNEST(..))` took 4.7 ms for
/// ~30 keys; `kind = ANY AND upstream_id = ANY` planned a scan;
/// `kind = $2 AND upstream_id = ANY($3)` took 460 ms for 1,000 keys; on
/// balances, `account = ANY($2)` with a thousand accounts took ~290 ms per
/// group. `OFFSET 0` keeps each probe a probe: flattened, the join was
/// hashed against a scan of every row of the tenant (3 ms for one debit).
pub(crate) async fn probe(
    conn: &mut PgConnection,
    tenant: &str,
    (table, columns): (&str, &str),
    keys: &[KeyColumn<'_>],
) -> Result<Vec<PgRow>, LedgerError> {
    let (from, matches) = unnest(keys, table);
    let sql = format!(
        "SELECT p.* FROM {from} CROSS JOIN LATERAL (SELECT {columns} \
         FROM {table} WHERE tenant_id = $1{matches} OFFSET 0) p"
    );
    let mut query = sqlx::query(&sql).bind(tenant);
    for (_, values) in keys {
        query = query.bind(*values);
    }
    Ok(query.fetch_all(conn).await?)
}

/// Deletes the rows of `table` in `tenant` whose key columns hold one of
/// the tuples in `keys`; nothing when there are none.
pub(crate) async fn delete(
    conn: &mut PgConnection,
    tenant: &str,
    table: &str,
    keys: &[KeyColumn<'_>],
) -> Result<(), LedgerError> {
    if keys.iter().all(|(_, values)| values.is_empty()) {
        return Ok(());
    }
    let (from, matches) = unnest(keys, "t");
    let sql = format!("DELETE FROM {table} t USING {from} WHERE t.tenant_id = $1{matches}");
    let mut query = sqlx::query(&sql).bind(tenant);
    for (_, values) in keys {
        query = query.bind(*values);
    }
    query.execute(conn).await?;
    Ok(())
}
