use crate::fields::ValidationErrors;

/// Everything the ledger can answer besides success.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The request is not a valid intent; nothing was written.
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
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// Stored data that cannot be decoded: someone wrote behind the ledger's back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("unsupported database url: {0}")]
    UnsupportedUrl(String),
}

impl LedgerError {
    /// True when a client may simply retry the same request later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LedgerError::Overloaded | LedgerError::Unavailable(_) | LedgerError::Database(_)
        )
    }
}
