//! The SQL both engines run as the same text.

pub(in crate::store) const PING: &str = "SELECT 1";
pub(in crate::store) const LIST_API_KEYS: &str =
    "SELECT tenant_id, key_hash, scopes, created_at FROM api_keys \
     WHERE CAST($1 AS TEXT) IS NULL OR tenant_id = $1 ORDER BY tenant_id, created_at, key_hash";
pub(in crate::store) const DELETE_API_KEY: &str =
    "DELETE FROM api_keys WHERE tenant_id = $1 AND key_hash = $2";
pub(in crate::store) const FIND_API_KEY: &str =
    "SELECT tenant_id, scopes FROM api_keys WHERE key_hash = $1";
pub(in crate::store) const TENANTS: &str = "SELECT tenant_id FROM ledger_heads ORDER BY tenant_id";
pub(in crate::store) const HEAD: &str = "SELECT seq, hash FROM ledger_heads WHERE tenant_id = $1";
pub(in crate::store) const RECORDS_OF_KIND: &str =
    "SELECT key, value FROM rule_state WHERE tenant_id = $1 AND kind = $2 ORDER BY key";
pub(in crate::store) const RECORD: &str =
    "SELECT value FROM rule_state WHERE tenant_id = $1 AND kind = $2 AND key = $3";
/// Which tenants have an open hold that expired by `$1`: tenant ids only,
/// from the `rule_state_expiring` index. The one query of the sweep that
/// spans tenants; each tenant's holds are then read by [`EXPIRED_HOLDS`].
pub(in crate::store) const TENANTS_WITH_EXPIRED_HOLDS: &str =
    "SELECT DISTINCT tenant_id FROM rule_state \
     WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY tenant_id";
/// One tenant's open holds that expired by `$2`, the oldest first.
pub(in crate::store) const EXPIRED_HOLDS: &str = "SELECT key FROM rule_state \
     WHERE tenant_id = $1 AND expires_at IS NOT NULL AND expires_at <= $2 \
     ORDER BY expires_at, key LIMIT $3";
/// Creates a tenant's head at seq 0 unless it exists.
pub(in crate::store) const CREATE_HEAD: &str =
    "INSERT INTO ledger_heads (tenant_id, seq, hash) VALUES ($1, 0, $2) \
     ON CONFLICT (tenant_id) DO NOTHING";
/// Writers must not trust records they remember across a rewrite.
pub(in crate::store) const BUMP_GENERATION: &str =
    "UPDATE ledger_heads SET generation = generation + 1 WHERE tenant_id = $1";

/// A balance row's columns, its amounts as exact decimal text on both
/// engines (PostgreSQL stores NUMERIC; SQLite stores STRICT TEXT, which
/// casts to itself).
pub(in crate::store) const BALANCE_COLUMNS: &str = "account, unit, \
     CAST(debits AS TEXT) AS debits, CAST(credits AS TEXT) AS credits, \
     CAST(held AS TEXT) AS held";

/// An account's balances (`unit, debits, credits, held`) beside the head
/// seq (`head_seq`) in one statement: one snapshot, and a row with no
/// balance if the account has none. `$1` the tenant, `$2` the account.
pub(in crate::store) const BALANCE_ROWS: &str = "SELECT b.unit, \
       CAST(b.debits AS TEXT) AS debits, CAST(b.credits AS TEXT) AS credits, \
       CAST(b.held AS TEXT) AS held, h.seq AS head_seq \
     FROM ledger_heads h LEFT JOIN balances b \
       ON b.tenant_id = h.tenant_id AND b.account = $2 \
     WHERE h.tenant_id = $1 ORDER BY b.unit";
