//! `GET /v1/entries`.

use serde::Serialize;
use tally_ledger::entry::EntryView;
use utoipa::ToSchema;

use super::Entry;

/// A page of the log, in `seq` order.
#[derive(Serialize, ToSchema)]
pub struct EntryPage {
    #[schema(value_type = Vec<Entry>)]
    pub entries: Vec<EntryView>,
    /// Pass as `after_seq` for the next page; null when this page is the last.
    #[schema(required = true)]
    pub next_after_seq: Option<i64>,
}
