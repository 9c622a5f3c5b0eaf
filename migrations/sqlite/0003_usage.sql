-- Usage summaries: an asynchronous projection of the log (docs/usage-summaries.md).
-- Amounts and quantities are exact decimal TEXT, as everywhere in SQLite.

-- Per tenant, account, meter ('' when the entry names none), UTC day and unit.
CREATE TABLE usage_summaries (
    tenant_id TEXT NOT NULL,
    account   TEXT NOT NULL,
    meter     TEXT NOT NULL,
    day       TEXT NOT NULL,           -- YYYY-MM-DD, UTC
    unit      TEXT NOT NULL,
    quantity  TEXT NOT NULL,
    amount    TEXT NOT NULL,
    entries   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, account, meter, day, unit)
) STRICT;

-- How far each asynchronous projector has folded each tenant's log.
CREATE TABLE projector_checkpoints (
    tenant_id TEXT NOT NULL,
    projector TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, projector)
) STRICT;
