//! The code both engines run alike, written once.
//!
//! sqlx-sqlite reads `$1, $2` as the first and second argument, so where
//! the SQL is the same it is one constant ([`sql`]). The reads are generic
//! functions over [`EngineStore`], which each engine implements with what
//! differs (the entry columns, the decoding of an entry row, how a time is
//! bound), and run their statements through
//! [`EngineDb`](crate::store::EngineDb). They are split by concern: api
//! keys, entries, balances, rule state, expired holds, heads.

/// Matches a value of a two-engine enum (`Storage`, a group, a lock, a
/// locked connection) and runs the same body on either engine's value;
/// `$enum` is the enum's name, in scope where the macro is used. A macro
/// because the body is typed anew in each arm (the engine's own store,
/// group or connection): a function would need a closure generic over
/// both engines' types, which Rust cannot write.
#[macro_export]
macro_rules! on_engine {
    ($value:expr, $enum:ident, $engine:ident => $body:expr) => {
        match $value {
            $enum::Sqlite($engine) => $body,
            $enum::Postgres($engine) => $body,
        }
    };
}

pub(in crate::store) mod api_keys;
pub(in crate::store) mod balance_reads;
pub(in crate::store) mod engine_store;
pub(in crate::store) mod entry_reads;
pub(in crate::store) mod expired_holds;
pub(in crate::store) mod group_tx;
pub(in crate::store) mod log_heads;
pub(in crate::store) mod rule_records;
pub(in crate::store) mod sql;

pub(in crate::store) use engine_store::EngineStore;
