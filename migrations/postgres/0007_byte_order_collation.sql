-- Every text column tally compares, groups or indexes orders by bytes
-- (COLLATE "C"), whatever the database's default collation is.
--
-- Why: a database created with a glibc locale (this machine's PostgreSQL 15
-- defaults to C.UTF-8) compares text through strcoll() — in every B-tree
-- probe of a key look-up, every index insert of an entry, every grouping of
-- a rebuild: 5-8 % of PostgreSQL's CPU under a flood of posts. Byte order
-- is also what SQLite's BINARY collation and Rust's `str` ordering use, so
-- listings ordered by account or key come back in the same order on both
-- engines, whatever locale the database was created with (for UTF-8, byte
-- order is code-point order).
--
-- Changing a column's collation rewrites no table row (the bytes stay the
-- same); PostgreSQL rebuilds the indexes on the altered columns, once per
-- table since each table is altered in one statement.
ALTER TABLE api_keys
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN key_hash TYPE TEXT COLLATE "C",
    ALTER COLUMN scopes TYPE TEXT COLLATE "C";

ALTER TABLE ledger_heads
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN hash TYPE TEXT COLLATE "C";

ALTER TABLE entries
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN id TYPE TEXT COLLATE "C",
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN upstream_id TYPE TEXT COLLATE "C",
    ALTER COLUMN status TYPE TEXT COLLATE "C",
    ALTER COLUMN account TYPE TEXT COLLATE "C",
    ALTER COLUMN debit_account TYPE TEXT COLLATE "C",
    ALTER COLUMN credit_account TYPE TEXT COLLATE "C",
    ALTER COLUMN unit TYPE TEXT COLLATE "C",
    ALTER COLUMN usage_meter TYPE TEXT COLLATE "C",
    ALTER COLUMN usage_day TYPE TEXT COLLATE "C";

ALTER TABLE balances
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN account TYPE TEXT COLLATE "C",
    ALTER COLUMN unit TYPE TEXT COLLATE "C";

ALTER TABLE rule_state
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN key TYPE TEXT COLLATE "C",
    ALTER COLUMN expires_at TYPE TEXT COLLATE "C";

ALTER TABLE usage_summaries
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN account TYPE TEXT COLLATE "C",
    ALTER COLUMN meter TYPE TEXT COLLATE "C",
    ALTER COLUMN day TYPE TEXT COLLATE "C",
    ALTER COLUMN unit TYPE TEXT COLLATE "C";

ALTER TABLE projector_checkpoints
    ALTER COLUMN tenant_id TYPE TEXT COLLATE "C",
    ALTER COLUMN projector TYPE TEXT COLLATE "C";
