//! [`EngineDb`]: the few sqlx operations that code written once for both
//! engines runs, on the engine's `sqlx::Database` (`Sqlite`, `Postgres`).
//!
//! Code generic over `sqlx::Database` has to repeat on every function the
//! bounds sqlx asks for (each bound value encodes, each column decodes, a
//! connection executes): a trait's where-clauses are not implied where the
//! trait is used. Here they are written once, on the one blanket
//! implementation, and the generic code asks only `DB: EngineDb`. What it
//! binds is an [`Arg`]; a statement's text is built with [`Sql`].
//!
//! What differs between the engines (a cast, a snapshot's `BEGIN`, array
//! binds) stays in each engine's own module, as concrete code.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

/// One value bound to a statement.
#[derive(Debug, Clone)]
pub enum Arg<'a> {
    Text(&'a str),
    OwnedText(String),
    OptText(Option<&'a str>),
    Int(i64),
    /// A timestamp (PostgreSQL's `timestamptz`; SQLite stores time as text).
    Time(DateTime<Utc>),
}

/// The text of a statement and its arguments, numbered `$1, $2, …` as both
/// engines read them (sqlx-sqlite takes `$n` as the n-th argument).
#[derive(Debug, Default)]
pub struct Sql<'a> {
    text: String,
    args: Vec<Arg<'a>>,
}

impl<'a> Sql<'a> {
    pub fn new(text: &str) -> Self {
        Sql {
            text: text.to_owned(),
            args: Vec::new(),
        }
    }

    /// A statement whose text holds the placeholders of `args`.
    pub fn with(text: &str, args: impl IntoIterator<Item = Arg<'a>>) -> Self {
        Sql {
            text: text.to_owned(),
            args: args.into_iter().collect(),
        }
    }

    /// Appends SQL text as written.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends the placeholder of the next argument and binds it.
    pub fn bind(&mut self, arg: Arg<'a>) -> &mut Self {
        self.args.push(arg);
        self.text.push('$');
        self.text.push_str(&self.args.len().to_string());
        self
    }

    /// Binds an argument whose placeholder the text already holds.
    pub fn arg(&mut self, arg: Arg<'a>) -> &mut Self {
        self.args.push(arg);
        self
    }

    /// Encloses the statement: `before`, the text so far, `after`.
    pub fn wrap(mut self, before: &str, after: &str) -> Self {
        self.text.insert_str(0, before);
        self.text.push_str(after);
        self
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// How many rows a statement changed: sqlx has this on each engine's
/// result, not on a trait.
pub trait RowsAffected {
    fn rows(&self) -> u64;
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

/// What generic code runs on an engine's database. Implemented once, for
/// every `sqlx::Database` that binds and decodes what tally stores.
pub trait EngineDb: Database {
    /// Every row the statement returns.
    fn fetch_all<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Sql<'c>,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>>;

    /// The statement's first row, if any.
    fn fetch_optional<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Sql<'c>,
    ) -> BoxFuture<'c, Result<Option<Self::Row>, sqlx::Error>>;

    /// Runs the statement; how many rows it changed.
    fn execute<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Sql<'c>,
    ) -> BoxFuture<'c, Result<u64, sqlx::Error>>;

    /// A text column of a row.
    fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error>;

    /// A text column that may be NULL.
    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error>;

    /// An integer column of a row.
    fn int(row: &Self::Row, column: &str) -> Result<i64, sqlx::Error>;
}

impl<DB> EngineDb for DB
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB> + Decode<'q, DB>,
    for<'q> Option<String>: Decode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB> + Decode<'q, DB>,
    for<'q> DateTime<Utc>: Encode<'q, DB> + Type<DB>,
    for<'a> &'a str: ColumnIndex<DB::Row>,
    DB::QueryResult: RowsAffected,
{
    fn fetch_all<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Sql<'c>,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>> {
        conn.fetch_all(query::<DB>(sql))
    }

    fn fetch_optional<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Sql<'c>,
    ) -> BoxFuture<'c, Result<Option<Self::Row>, sqlx::Error>> {
        conn.fetch_optional(query::<DB>(sql))
    }

    fn execute<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Sql<'c>,
    ) -> BoxFuture<'c, Result<u64, sqlx::Error>> {
        let done = conn.execute(query::<DB>(sql));
        Box::pin(async move { Ok(done.await?.rows()) })
    }

    fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error> {
        row.try_get(column)
    }

    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error> {
        row.try_get(column)
    }

    fn int(row: &Self::Row, column: &str) -> Result<i64, sqlx::Error> {
        row.try_get(column)
    }
}

/// The statement of `sql` with its arguments bound, in order.
fn query<'q, DB>(sql: &'q Sql<'q>) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
where
    DB: Database,
    for<'a> DB::Arguments<'a>: IntoArguments<'a, DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
    for<'a> Option<&'a str>: Encode<'a, DB> + Type<DB>,
    for<'a> String: Encode<'a, DB> + Type<DB>,
    for<'a> i64: Encode<'a, DB> + Type<DB>,
    for<'a> DateTime<Utc>: Encode<'a, DB> + Type<DB>,
{
    let mut q = sqlx::query(&sql.text);
    for arg in &sql.args {
        q = match arg {
            Arg::Text(v) => q.bind(*v),
            Arg::OwnedText(v) => q.bind(v.as_str()),
            Arg::OptText(v) => q.bind(*v),
            Arg::Int(v) => q.bind(*v),
            Arg::Time(v) => q.bind(*v),
        };
    }
    q
}
