-- Webhooks (docs/events.md). Times are microseconds since the Unix epoch,
-- UTC, in both engines. Every key starts with tenant_id (docs/scaling.md).
-- Text compares by bytes (COLLATE "C"), as every table since migration 7.

-- A tenant's endpoints. The secret signs every delivery, so it is kept as
-- is (it is shown once, when made); the previous one signs beside it until
-- previous_secret_until after a rotation. Events with seq > after_seq are
-- sent to it (the tenant's head when it was made).
CREATE TABLE webhook_endpoints (
    tenant_id             TEXT COLLATE "C" NOT NULL,
    id                    TEXT COLLATE "C" NOT NULL,
    url                   TEXT COLLATE "C" NOT NULL,
    event_types           TEXT COLLATE "C" NOT NULL,
    description           TEXT COLLATE "C",
    enabled               BOOLEAN NOT NULL,
    disabled_reason       TEXT COLLATE "C",
    secret                TEXT COLLATE "C" NOT NULL,
    previous_secret       TEXT COLLATE "C",
    previous_secret_until BIGINT,
    after_seq             BIGINT NOT NULL,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

-- One event for one endpoint: written with the fan-out checkpoint in one
-- transaction, so an event committed to the log is never skipped; the
-- unique key makes a second fan-out of the same event a no-op. status:
-- pending (to send at next_attempt_at), delivered, failed (given up).
-- lease_owner/lease_until: the process sending it now. scheduled_at: when
-- the fan-out, a retry or a replay last scheduled it; it is given up once
-- it has failed for the maximum age since then.
CREATE TABLE webhook_deliveries (
    tenant_id       TEXT COLLATE "C" NOT NULL,
    id              TEXT COLLATE "C" NOT NULL,
    endpoint_id     TEXT COLLATE "C" NOT NULL,
    event_id        TEXT COLLATE "C" NOT NULL,
    event_type      TEXT COLLATE "C" NOT NULL,
    seq             BIGINT NOT NULL,
    payload         TEXT COLLATE "C" NOT NULL,
    status          TEXT COLLATE "C" NOT NULL,
    attempts        BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    lease_owner     TEXT COLLATE "C",
    lease_until     BIGINT,
    last_status     BIGINT,
    last_error      TEXT COLLATE "C",
    scheduled_at    BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, endpoint_id, event_id)
);
-- The due deliveries of an endpoint, oldest first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries
    (tenant_id, endpoint_id, status, next_attempt_at);
-- Which endpoints have anything due (the one query that spans tenants).
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';

-- Every attempt and its outcome: delivered, http_status, timeout,
-- connection, gone (410: the endpoint was disabled).
CREATE TABLE webhook_attempts (
    tenant_id    TEXT COLLATE "C" NOT NULL,
    delivery_id  TEXT COLLATE "C" NOT NULL,
    attempt      BIGINT NOT NULL,
    attempted_at BIGINT NOT NULL,
    outcome      TEXT COLLATE "C" NOT NULL,
    http_status  BIGINT,
    error        TEXT COLLATE "C",
    duration_ms  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, delivery_id, attempt)
);
