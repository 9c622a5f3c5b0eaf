//! The read models of the tally log, kept beside the ledger and never
//! needed by it: usage summaries and their projector, statements and
//! balances at a time, the rebuild of stored balances and the checks of
//! every read model against a fresh fold of the log.
