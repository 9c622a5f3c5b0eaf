-- tally ledger schema, PostgreSQL engine.
-- Every primary key and UNIQUE constraint starts with tenant_id, so the schema
-- can be distributed by tenant (e.g. Citus) unchanged.

CREATE TABLE api_keys (
    tenant_id  TEXT NOT NULL,
    key_hash   TEXT NOT NULL,          -- hex sha256 of the secret; the secret is never stored
    scopes     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, key_hash)
);
CREATE INDEX api_keys_by_hash ON api_keys (key_hash);

-- The chain head of each tenant. SELECT … FOR UPDATE on it serialises groups,
-- across every tally process sharing the database.
CREATE TABLE ledger_heads (
    tenant_id TEXT NOT NULL PRIMARY KEY,
    seq       BIGINT NOT NULL,
    hash      TEXT NOT NULL
);

CREATE TABLE entries (
    tenant_id         TEXT NOT NULL,
    seq               BIGINT NOT NULL CHECK (seq > 0),
    id                TEXT NOT NULL,
    kind              TEXT NOT NULL,
    upstream_id       TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('posted', 'rejected')),
    rejection_code    TEXT,
    rejection_message TEXT,
    account           TEXT NOT NULL,
    debit_account     TEXT NOT NULL,
    credit_account    TEXT NOT NULL,
    amount            NUMERIC NOT NULL CHECK (amount > 0),
    unit              TEXT NOT NULL,
    params            TEXT NOT NULL,   -- canonical JSON, kept as text: its bytes are fingerprinted
    fingerprint       TEXT NOT NULL,
    recorded_at       TIMESTAMPTZ NOT NULL,
    balance_after     NUMERIC NOT NULL,
    prev_hash         TEXT NOT NULL,
    hash              TEXT NOT NULL,
    PRIMARY KEY (tenant_id, seq),
    -- The idempotency key: one entry per upstream intent, forever.
    UNIQUE (tenant_id, kind, upstream_id),
    UNIQUE (tenant_id, id)
);
CREATE INDEX entries_by_debit_account ON entries (tenant_id, debit_account, seq);
CREATE INDEX entries_by_credit_account ON entries (tenant_id, credit_account, seq);

-- The log is append-only in the database itself.
CREATE FUNCTION tally_entries_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'entries are append-only';
END
$$;
CREATE TRIGGER entries_append_only
    BEFORE UPDATE OR DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION tally_entries_append_only();
CREATE TRIGGER entries_append_only_truncate
    BEFORE TRUNCATE ON entries
    FOR EACH STATEMENT EXECUTE FUNCTION tally_entries_append_only();

-- The balance projection, kept in step with the log by the writer.
CREATE TABLE balances (
    tenant_id TEXT NOT NULL,
    account   TEXT NOT NULL,
    unit      TEXT NOT NULL,
    debits    NUMERIC NOT NULL,
    credits   NUMERIC NOT NULL,
    held      NUMERIC NOT NULL,
    PRIMARY KEY (tenant_id, account, unit)
);
