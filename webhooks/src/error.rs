use tally_ledger::fields::ValidationErrors;
use tally_ledger::LedgerError;

/// What can go wrong managing endpoints and deliveries.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A request that is not valid; nothing was written.
    #[error("invalid request: {0}")]
    Invalid(ValidationErrors),
    /// No such endpoint or delivery in this tenant.
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<sqlx::Error> for WebhookError {
    fn from(e: sqlx::Error) -> Self {
        WebhookError::Ledger(LedgerError::Database(e))
    }
}
