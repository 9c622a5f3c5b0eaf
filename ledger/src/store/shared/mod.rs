//! The code both engines run alike, written once.
//!
//! sqlx-sqlite reads `$1, $2` as the first and second argument, so where
//! the SQL is the same it is one constant here. What differs between the
//! engines (the entry columns, the decoding of an entry row, how a time is
//! bound) each engine hands to [`engine_reads!`] (the reads of a store)
//! and [`engine_group!`] (the common half of a group transaction), which
//! write that code for its types. Macros rather than functions generic
//! over `sqlx::Database`: each expansion is concrete code for one engine's
//! types, with no trait bounds to carry and nothing added at run time.

/// Matches a value of a two-engine enum (`Storage`, a group, a lock, a
/// locked connection) and runs the same body on either engine's value;
/// `$enum` is the enum's name, in scope where the macro is used.
#[macro_export]
macro_rules! on_engine {
    ($value:expr, $enum:ident, $engine:ident => $body:expr) => {
        match $value {
            $enum::Sqlite($engine) => $body,
            $enum::Postgres($engine) => $body,
        }
    };
}

pub(super) const PING: &str = "SELECT 1";
pub(super) const LIST_API_KEYS: &str =
    "SELECT tenant_id, key_hash, scopes, created_at FROM api_keys \
     WHERE CAST($1 AS TEXT) IS NULL OR tenant_id = $1 ORDER BY tenant_id, created_at, key_hash";
pub(super) const DELETE_API_KEY: &str =
    "DELETE FROM api_keys WHERE tenant_id = $1 AND key_hash = $2";
pub(super) const FIND_API_KEY: &str = "SELECT tenant_id, scopes FROM api_keys WHERE key_hash = $1";
pub(super) const TENANTS: &str = "SELECT tenant_id FROM ledger_heads ORDER BY tenant_id";
pub(super) const HEAD: &str = "SELECT seq, hash FROM ledger_heads WHERE tenant_id = $1";
pub(super) const RECORDS_OF_KIND: &str =
    "SELECT key, value FROM rule_state WHERE tenant_id = $1 AND kind = $2 ORDER BY key";
pub(super) const RECORD: &str =
    "SELECT value FROM rule_state WHERE tenant_id = $1 AND kind = $2 AND key = $3";
pub(super) const EXPIRED_HOLDS: &str = "SELECT tenant_id, key FROM ( \
       SELECT tenant_id, key, expires_at, \
         row_number() OVER (PARTITION BY tenant_id ORDER BY expires_at) AS n \
       FROM rule_state WHERE expires_at IS NOT NULL AND expires_at <= $1) AS e \
     WHERE n <= $2 ORDER BY expires_at";
/// Creates a tenant's head at seq 0 unless it exists.
pub(super) const CREATE_HEAD: &str =
    "INSERT INTO ledger_heads (tenant_id, seq, hash) VALUES ($1, 0, $2) \
     ON CONFLICT (tenant_id) DO NOTHING";
/// Writers must not trust records they remember across a rewrite.
pub(super) const BUMP_GENERATION: &str =
    "UPDATE ledger_heads SET generation = generation + 1 WHERE tenant_id = $1";

mod group;
mod reads;

pub(in crate::store) use group::engine_group;
pub(in crate::store) use reads::engine_reads;
