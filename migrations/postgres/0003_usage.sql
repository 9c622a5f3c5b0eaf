-- Usage summaries: an asynchronous projection of the log (docs/usage-summaries.md).

-- Per tenant, account, meter ('' when the entry names none), UTC day and unit.
CREATE TABLE usage_summaries (
    tenant_id TEXT NOT NULL,
    account   TEXT NOT NULL,
    meter     TEXT NOT NULL,
    day       TEXT NOT NULL,           -- YYYY-MM-DD, UTC
    unit      TEXT NOT NULL,
    quantity  NUMERIC NOT NULL,
    amount    NUMERIC NOT NULL,
    entries   BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, account, meter, day, unit)
);

-- How far each asynchronous projector has folded each tenant's log.
-- SELECT … FOR UPDATE on its row serialises the projectors of every tally
-- process sharing the database.
CREATE TABLE projector_checkpoints (
    tenant_id TEXT NOT NULL,
    projector TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, projector)
);
