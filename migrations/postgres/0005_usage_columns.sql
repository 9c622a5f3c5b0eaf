-- The usage key and quantity of each posted usage debit, taken from its
-- params by the writer when it appends the entry (ledger/src/usage.rs,
-- `UsageColumns`), so that `tally projections rebuild` adds usage up in
-- one SQL aggregate instead of reading every entry's params
-- (docs/usage-summaries.md). Not part of the entry's hash: `tally verify`
-- folds usage from params, as the projector does, and compares; a column
-- that disagreed with its params would show as a wrong summary there.
-- NULL on every other entry, and on usage debits appended before this
-- migration. Adding nullable columns rewrites nothing.
ALTER TABLE entries
    ADD COLUMN usage_meter TEXT,
    ADD COLUMN usage_day TEXT,
    ADD COLUMN usage_quantity NUMERIC;

-- Entries up to this seq were appended before the columns existed: the
-- rebuild folds those from params, as before.
ALTER TABLE ledger_heads ADD COLUMN usage_columns_from BIGINT NOT NULL DEFAULT 0;
UPDATE ledger_heads SET usage_columns_from = seq;

-- Without it PostgreSQL takes the four grouping columns for independent,
-- expects ~100,000 groups where a tenant has one per account, meter, day
-- and unit, and sorts the log instead of hashing it in parallel (1.18 s
-- against 0.48 s for a rebuild of 1,000,000 entries).
CREATE STATISTICS entries_usage_key (ndistinct)
    ON account, usage_meter, usage_day, unit FROM entries;
