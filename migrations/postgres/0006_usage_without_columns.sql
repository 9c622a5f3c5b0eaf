-- The usage debits that carry no usage columns (appended by an instance
-- older than migration 0005), which `tally projections rebuild` must fold
-- from params. A rebuild found them, with the reversals, by a second scan
-- of the whole heap beside the aggregate of the columns; through this
-- index (and the reversals through the (tenant_id, kind, upstream_id) key)
-- it reads only those rows (docs/usage-summaries.md). Usage debits
-- appended with their columns, and every other kind, are not in it: a
-- write pays only the check of the predicate.
CREATE INDEX IF NOT EXISTS entries_usage_without_columns ON entries (tenant_id, seq)
    WHERE kind = 'usage_debit' AND usage_day IS NULL;
