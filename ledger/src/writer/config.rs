//! How the writers are bounded and tuned.

use std::time::Duration;

use crate::recent::DEFAULT_RECENT_ENTRIES_BYTES;
use crate::store::Storage;

#[derive(Debug, Clone, Copy)]
pub struct WriterConfig {
    /// Most requests decided in one transaction.
    pub max_group: usize,
    /// Most requests waiting per tenant before callers are turned away.
    pub queue_capacity: usize,
    /// How long a writer waits for more requests before committing a group
    /// smaller than `max_group`. Zero (the default) commits at once: groups
    /// then form naturally from what arrived during the previous commit.
    pub linger: Duration,
    /// A tenant's writer that received nothing for this long stops; the
    /// tenant's next request starts a new one (with nothing remembered).
    pub idle_after: Duration,
    /// Once this many keys in a row were looked up and found free, keys are
    /// no longer looked up before the writer: the UNIQUE constraint on the
    /// key is the look-up, and a taken key fails its group, which is then
    /// decided again with every key looked up (and look-ups resume). Zero
    /// always looks keys up. See `super::look_up::KeyLookUps`.
    pub skip_look_ups_after: usize,
    /// Bytes of recently committed entries held to answer retries without
    /// the writer or the database (`crate::recent::RecentEntries`); zero holds none.
    pub recent_entries_bytes: usize,
    /// Tasks committing the groups of different tenants together, each
    /// round in one transaction (`crate::group::RoundCommitter`), or, when
    /// every group of the round was decided ahead on PostgreSQL, one
    /// statement. Every group commits in a round: zero counts as one (the
    /// command line refuses it). SQLite has one write connection and uses
    /// one whatever the number. `None`: the engine's default
    /// ([`default_committers`]).
    pub committers: Option<usize>,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            max_group: 1_000,
            queue_capacity: 10_000,
            linger: Duration::ZERO,
            idle_after: DEFAULT_IDLE_AFTER,
            skip_look_ups_after: DEFAULT_SKIP_LOOK_UPS_AFTER,
            recent_entries_bytes: DEFAULT_RECENT_ENTRIES_BYTES,
            committers: None,
        }
    }
}

/// Free keys in a row after which keys are no longer looked up before the
/// writer (see [`WriterConfig::skip_look_ups_after`]): a run of new keys
/// this long makes a replay in the next group unlikely, and a replay that
/// does come costs one group decided twice, against the look-up of every
/// one of these keys it saves.
pub const DEFAULT_SKIP_LOOK_UPS_AFTER: usize = 1_000;

/// Committers of commit rounds by default (see [`WriterConfig::committers`]).
/// One on SQLite, where groups of many tenants then share the one write
/// connection's fsync (300 tenants at 64 clients: 1,964–2,089 posts/s
/// against 560 with each group alone). Four on PostgreSQL: with each group
/// alone, 300 tenants made 1.3 rows per WAL fsync and spent 1,463 µs of
/// PostgreSQL's CPU a row (862 posts/s); one committer, 932 µs and 1,035
/// posts/s, its rounds serial on one connection; four, 967 µs and 1,189
/// posts/s, the machine's CPU full again (measured when each group was
/// still a statement of its own). docs/performance.md, "Many tenants", has
/// the runs.
pub fn default_committers(storage: &Storage) -> usize {
    match storage {
        Storage::Sqlite(_) => 1,
        Storage::Postgres(_) => 4,
    }
}

/// How long a tenant's writer waits for work before it stops.
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(60);
