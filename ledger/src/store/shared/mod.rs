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

mod group;
mod reads;
pub(in crate::store) mod sql;

pub(in crate::store) use group::engine_group;
pub(in crate::store) use reads::engine_reads;
