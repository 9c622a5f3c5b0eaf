use crate::fields::ValidationErrors;

/// Everything the ledger can answer besides success.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The request is not a valid entry request; nothing was written.
    #[error("invalid request: {0}")]
    Invalid(ValidationErrors),
    /// No such object in this tenant (or in another one: we do not say).
    #[error("not found")]
    NotFound,
    /// The tenant's writer queue is full; retry after a short pause.
    #[error("writer queue is full")]
    Overloaded,
    /// The database could not be reached or failed mid-transaction. Nothing
    /// of the affected group was committed; a retry is safe.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database refused for a reason a retry cannot cure (a missing
    /// table, a refused privilege, a constraint, a value it cannot take).
    /// How a database error crosses the writer's channel, which
    /// `sqlx::Error` (not `Clone`) cannot.
    #[error("database error ({}): {message}", cause.label())]
    Permanent { cause: Cause, message: String },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// Stored data that cannot be decoded: someone wrote behind the ledger's back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("unsupported database url: {0}")]
    UnsupportedUrl(String),
    /// The schema could not be distributed on a Citus cluster (or the
    /// server has no Citus to distribute it with).
    #[error("distribution on Citus: {0}")]
    Distribution(String),
}

impl LedgerError {
    /// True when a client may simply retry the same request later: the
    /// writer is busy, or the failure is transient ([`Cause::is_transient`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, LedgerError::Overloaded) || self.is_transient()
    }

    /// True for a failure that goes away by itself (a lost connection, a
    /// pool timeout, a serialization failure, a lock or disk that frees
    /// up): the same request can succeed later. Everything else is a bug,
    /// a damaged database or a misconfiguration, which a retry only repeats.
    pub fn is_transient(&self) -> bool {
        match self {
            LedgerError::Unavailable(_) => true,
            LedgerError::Database(e) => Cause::of(e).is_transient(),
            _ => false,
        }
    }

    /// The class of a failure that is not the client's: a fixed label for
    /// logs and the `tally_internal_errors_total` counter.
    pub fn cause(&self) -> Cause {
        match self {
            LedgerError::Unavailable(_) | LedgerError::Overloaded => Cause::Unavailable,
            LedgerError::Database(e) => Cause::of(e),
            LedgerError::Permanent { cause, .. } => *cause,
            LedgerError::Corrupt(_) => Cause::Corrupt,
            LedgerError::Migration(_) | LedgerError::Distribution(_) => Cause::Schema,
            LedgerError::Invalid(_) | LedgerError::NotFound | LedgerError::UnsupportedUrl(_) => {
                Cause::Other
            }
        }
    }

    /// The same failure as a value that can be sent to every caller of a
    /// failed group: transient ones as [`LedgerError::Unavailable`],
    /// permanent ones as [`LedgerError::Permanent`] with their cause.
    pub fn shared(&self) -> LedgerError {
        let message = self.to_string();
        if self.is_transient() {
            LedgerError::Unavailable(message)
        } else {
            LedgerError::Permanent {
                cause: self.cause(),
                message,
            }
        }
    }
}

/// Why a database operation failed, as far as a retry is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    // Transient: the same request can succeed later.
    /// Connection refused, reset or lost; PostgreSQL class 08.
    Connection,
    /// No pooled connection became free in time.
    PoolTimeout,
    /// Serialization failure (40001) or deadlock (40P01): run it again.
    Conflict,
    /// A lock not granted in time: PostgreSQL 55P03, SQLITE_BUSY or
    /// SQLITE_LOCKED after the busy timeout.
    Lock,
    /// The server is short of something or going away: too many
    /// connections, out of memory, shutting down (PostgreSQL 53xxx but
    /// disk full, 57P01–57P03, 57014).
    Resources,
    /// Disk full or an I/O error: PostgreSQL 53100 and 58030, SQLITE_FULL,
    /// SQLITE_IOERR.
    Storage,
    /// A read-only transaction, as during a failover (25006).
    ReadOnly,
    /// The ledger said so itself ([`LedgerError::Unavailable`]).
    Unavailable,
    // Permanent: a retry repeats the failure.
    /// A constraint violation (23xxx, SQLITE_CONSTRAINT).
    Constraint,
    /// A value the database refuses (22xxx, SQLITE_MISMATCH, SQLITE_TOOBIG).
    Data,
    /// Syntax, a missing table or column, a refused privilege (42xxx,
    /// SQLITE_ERROR, SQLITE_PERM, SQLITE_AUTH, SQLITE_READONLY); a failed
    /// migration.
    Schema,
    /// A row or value the ledger cannot decode; SQLITE_CORRUPT, SQLITE_NOTADB.
    Corrupt,
    /// Anything else.
    Other,
}

impl Cause {
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Cause::Connection
                | Cause::PoolTimeout
                | Cause::Conflict
                | Cause::Lock
                | Cause::Resources
                | Cause::Storage
                | Cause::ReadOnly
                | Cause::Unavailable
        )
    }

    /// A fixed label: never data of a tenant or of the database.
    pub fn label(self) -> &'static str {
        match self {
            Cause::Connection => "connection",
            Cause::PoolTimeout => "pool_timeout",
            Cause::Conflict => "conflict",
            Cause::Lock => "lock",
            Cause::Resources => "resources",
            Cause::Storage => "storage",
            Cause::ReadOnly => "read_only",
            Cause::Unavailable => "unavailable",
            Cause::Constraint => "constraint",
            Cause::Data => "data",
            Cause::Schema => "schema",
            Cause::Corrupt => "corrupt",
            Cause::Other => "other",
        }
    }

    /// The class of an sqlx error: by SQLSTATE on PostgreSQL, by the
    /// extended result code on SQLite, by kind otherwise.
    pub fn of(e: &sqlx::Error) -> Cause {
        use sqlx::Error as E;
        match e {
            E::Database(db) => {
                if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    Cause::of_sqlstate(pg.code())
                } else if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    // sqlx gives SQLite's extended result code as a number.
                    db.code()
                        .and_then(|c| c.parse::<i32>().ok())
                        .map_or(Cause::Other, Cause::of_sqlite)
                } else {
                    Cause::Other
                }
            }
            E::Io(_) | E::Tls(_) | E::Protocol(_) | E::WorkerCrashed | E::PoolClosed => {
                Cause::Connection
            }
            E::PoolTimedOut => Cause::PoolTimeout,
            E::RowNotFound
            | E::TypeNotFound { .. }
            | E::ColumnIndexOutOfBounds { .. }
            | E::ColumnNotFound(_)
            | E::ColumnDecode { .. }
            | E::Decode(_)
            | E::Encode(_) => Cause::Corrupt,
            E::Migrate(_) => Cause::Schema,
            _ => Cause::Other,
        }
    }

    /// The class of a PostgreSQL SQLSTATE (Appendix A of its manual).
    pub fn of_sqlstate(code: &str) -> Cause {
        match code {
            "40001" | "40P01" => Cause::Conflict,
            "55P03" => Cause::Lock,
            "53100" | "58030" => Cause::Storage,
            "25006" => Cause::ReadOnly,
            "57P01" | "57P02" | "57P03" | "57014" => Cause::Resources,
            _ if code.starts_with("08") => Cause::Connection,
            _ if code.starts_with("53") => Cause::Resources,
            _ if code.starts_with("23") => Cause::Constraint,
            _ if code.starts_with("22") => Cause::Data,
            _ if code.starts_with("42") => Cause::Schema,
            "XX001" | "XX002" => Cause::Corrupt,
            _ => Cause::Other,
        }
    }

    /// The class of an SQLite (extended) result code: its primary code is
    /// the low byte (https://sqlite.org/rescode.html).
    pub fn of_sqlite(code: i32) -> Cause {
        match code & 0xff {
            5 | 6 => Cause::Lock,            // SQLITE_BUSY, SQLITE_LOCKED
            10 | 13 => Cause::Storage,       // SQLITE_IOERR, SQLITE_FULL
            7 => Cause::Resources,           // SQLITE_NOMEM
            14 => Cause::Connection,         // SQLITE_CANTOPEN
            19 => Cause::Constraint,         // SQLITE_CONSTRAINT
            18 | 20 => Cause::Data,          // SQLITE_TOOBIG, SQLITE_MISMATCH
            11 | 26 => Cause::Corrupt,       // SQLITE_CORRUPT, SQLITE_NOTADB
            1 | 3 | 8 | 23 => Cause::Schema, // ERROR, PERM, READONLY, AUTH
            _ => Cause::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_sqlstates_are_classified() {
        let transient = [
            ("08000", Cause::Connection),
            ("08006", Cause::Connection),
            ("08001", Cause::Connection),
            ("40001", Cause::Conflict),
            ("40P01", Cause::Conflict),
            ("55P03", Cause::Lock),
            ("53000", Cause::Resources),
            ("53200", Cause::Resources),
            ("53300", Cause::Resources),
            ("53100", Cause::Storage),
            ("58030", Cause::Storage),
            ("57P01", Cause::Resources),
            ("57P02", Cause::Resources),
            ("57P03", Cause::Resources),
            ("57014", Cause::Resources),
            ("25006", Cause::ReadOnly),
        ];
        for (code, cause) in transient {
            assert_eq!(Cause::of_sqlstate(code), cause, "{code}");
            assert!(Cause::of_sqlstate(code).is_transient(), "{code}");
        }
        let permanent = [
            ("42601", Cause::Schema), // syntax error
            ("42P01", Cause::Schema), // undefined table
            ("42703", Cause::Schema), // undefined column
            ("42501", Cause::Schema), // insufficient privilege
            ("23505", Cause::Constraint),
            ("23503", Cause::Constraint),
            ("23514", Cause::Constraint),
            ("22003", Cause::Data), // numeric value out of range
            ("22P02", Cause::Data), // invalid text representation
            ("22021", Cause::Data), // character not in repertoire (NUL)
            ("XX001", Cause::Corrupt),
            ("0A000", Cause::Other),
            ("25P02", Cause::Other), // in failed transaction
            ("XX000", Cause::Other),
        ];
        for (code, cause) in permanent {
            assert_eq!(Cause::of_sqlstate(code), cause, "{code}");
            assert!(!Cause::of_sqlstate(code).is_transient(), "{code}");
        }
    }

    #[test]
    fn sqlite_result_codes_are_classified() {
        let transient = [
            (5, Cause::Lock),        // SQLITE_BUSY
            (517, Cause::Lock),      // SQLITE_BUSY_SNAPSHOT
            (261, Cause::Lock),      // SQLITE_BUSY_RECOVERY
            (6, Cause::Lock),        // SQLITE_LOCKED
            (262, Cause::Lock),      // SQLITE_LOCKED_SHAREDCACHE
            (13, Cause::Storage),    // SQLITE_FULL
            (10, Cause::Storage),    // SQLITE_IOERR
            (522, Cause::Storage),   // SQLITE_IOERR_SHORT_READ
            (7, Cause::Resources),   // SQLITE_NOMEM
            (14, Cause::Connection), // SQLITE_CANTOPEN
        ];
        for (code, cause) in transient {
            assert_eq!(Cause::of_sqlite(code), cause, "{code}");
            assert!(Cause::of_sqlite(code).is_transient(), "{code}");
        }
        let permanent = [
            (1, Cause::Schema),        // SQLITE_ERROR: no such table, syntax
            (3, Cause::Schema),        // SQLITE_PERM
            (8, Cause::Schema),        // SQLITE_READONLY
            (23, Cause::Schema),       // SQLITE_AUTH
            (19, Cause::Constraint),   // SQLITE_CONSTRAINT
            (2067, Cause::Constraint), // SQLITE_CONSTRAINT_UNIQUE
            (787, Cause::Constraint),  // SQLITE_CONSTRAINT_FOREIGNKEY
            (20, Cause::Data),         // SQLITE_MISMATCH
            (18, Cause::Data),         // SQLITE_TOOBIG
            (11, Cause::Corrupt),      // SQLITE_CORRUPT
            (26, Cause::Corrupt),      // SQLITE_NOTADB
            (21, Cause::Other),        // SQLITE_MISUSE
        ];
        for (code, cause) in permanent {
            assert_eq!(Cause::of_sqlite(code), cause, "{code}");
            assert!(!Cause::of_sqlite(code).is_transient(), "{code}");
        }
    }

    #[test]
    fn errors_without_a_database_code_are_classified_by_kind() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(LedgerError::Database(io).is_transient());
        assert!(LedgerError::Database(sqlx::Error::PoolTimedOut).is_transient());
        assert!(LedgerError::Unavailable("x".into()).is_transient());
        let decode = sqlx::Error::ColumnNotFound("amount".into());
        assert_eq!(LedgerError::Database(decode).cause(), Cause::Corrupt);
        assert!(!LedgerError::Corrupt("x".into()).is_transient());
        assert!(!LedgerError::Database(sqlx::Error::RowNotFound).is_transient());
    }

    #[test]
    fn a_shared_error_keeps_its_class() {
        let transient = LedgerError::Database(sqlx::Error::PoolTimedOut).shared();
        assert!(matches!(transient, LedgerError::Unavailable(_)));
        let permanent = LedgerError::Database(sqlx::Error::ColumnNotFound("x".into())).shared();
        assert!(
            matches!(
                permanent,
                LedgerError::Permanent {
                    cause: Cause::Corrupt,
                    ..
                }
            ),
            "{permanent:?}"
        );
        assert!(!permanent.is_transient());
    }
}
