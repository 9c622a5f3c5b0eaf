-- tally ledger schema, SQLite engine.
-- Amounts are exact decimal TEXT: a NUMERIC column would turn '1.50' into a float.
-- Every primary key and UNIQUE constraint starts with tenant_id.

CREATE TABLE api_keys (
    tenant_id  TEXT NOT NULL,
    key_hash   TEXT NOT NULL,          -- hex sha256 of the secret; the secret is never stored
    scopes     TEXT NOT NULL,          -- comma-separated: post,read,audit,admin
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key_hash)
) STRICT;
CREATE INDEX api_keys_by_hash ON api_keys (key_hash);

-- The chain head of each tenant. Its row is the lock that serialises groups.
CREATE TABLE ledger_heads (
    tenant_id TEXT NOT NULL PRIMARY KEY,
    seq       INTEGER NOT NULL,
    hash      TEXT NOT NULL
) STRICT;

CREATE TABLE entries (
    tenant_id         TEXT NOT NULL,
    seq               INTEGER NOT NULL CHECK (seq > 0),
    id                TEXT NOT NULL,
    kind              TEXT NOT NULL,
    upstream_id       TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('posted', 'rejected')),
    rejection_code    TEXT,
    rejection_message TEXT,
    account           TEXT NOT NULL,
    debit_account     TEXT NOT NULL,
    credit_account    TEXT NOT NULL,
    amount            TEXT NOT NULL,
    unit              TEXT NOT NULL,
    params            TEXT NOT NULL,   -- canonical JSON of the client's business fields
    fingerprint       TEXT NOT NULL,   -- sha256:<hex> of params
    recorded_at       TEXT NOT NULL,   -- YYYY-MM-DDTHH:MM:SS.ffffffZ
    balance_after     TEXT NOT NULL,
    prev_hash         TEXT NOT NULL,
    hash              TEXT NOT NULL,
    PRIMARY KEY (tenant_id, seq),
    -- The idempotency key: one entry per upstream intent, forever.
    UNIQUE (tenant_id, kind, upstream_id),
    UNIQUE (tenant_id, id)
) STRICT;
CREATE INDEX entries_by_debit_account ON entries (tenant_id, debit_account, seq);
CREATE INDEX entries_by_credit_account ON entries (tenant_id, credit_account, seq);

-- The log is append-only in the database itself, not only by convention.
CREATE TRIGGER entries_append_only_update BEFORE UPDATE ON entries
BEGIN
    SELECT RAISE(ABORT, 'entries are append-only');
END;
CREATE TRIGGER entries_append_only_delete BEFORE DELETE ON entries
BEGIN
    SELECT RAISE(ABORT, 'entries are append-only');
END;

-- The balance projection, kept in step with the log by the writer.
CREATE TABLE balances (
    tenant_id TEXT NOT NULL,
    account   TEXT NOT NULL,
    unit      TEXT NOT NULL,
    debits    TEXT NOT NULL,
    credits   TEXT NOT NULL,
    held      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, account, unit)
) STRICT;
