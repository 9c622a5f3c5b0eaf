-- The usage key and quantity of each posted usage debit, taken from its
-- params by the writer when it appends the entry (ledger/src/usage.rs,
-- `UsageColumns`), as on PostgreSQL (its migration 0005). SQLite cannot add
-- decimals exactly in SQL, so `tally projections rebuild` still adds them up
-- in Rust, but reads these short columns instead of asking SQLite to take
-- four values out of each entry's params JSON (2.3 s against 0.9 s for
-- 500,000 entries). Not part of the entry's hash: `tally verify` folds
-- usage from params and compares, so a column that disagreed with its
-- params would show as a wrong summary there.
-- NULL on every other entry, and on usage debits appended before this
-- migration. Quantities are exact decimal TEXT, like amounts.
ALTER TABLE entries ADD COLUMN usage_meter TEXT;
ALTER TABLE entries ADD COLUMN usage_day TEXT;
ALTER TABLE entries ADD COLUMN usage_quantity TEXT;

-- Entries up to this seq were appended before the columns existed: the
-- rebuild folds those from params, as before.
ALTER TABLE ledger_heads ADD COLUMN usage_columns_from INTEGER NOT NULL DEFAULT 0;
UPDATE ledger_heads SET usage_columns_from = seq;
