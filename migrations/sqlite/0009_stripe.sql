-- Stripe webhooks (docs/ingest.md). Times are microseconds since the Unix
-- epoch, UTC, in both engines. Every key starts with tenant_id.

-- A tenant's Stripe endpoint: endpoint_id is the unguessable last part of
-- the path given to Stripe, by which a delivery (which has no API key)
-- finds its tenant. signing_secrets is a JSON array, kept as is because
-- every delivery is checked with it; it is never read back by the API.
CREATE TABLE stripe_integrations (
    tenant_id            TEXT NOT NULL,
    endpoint_id          TEXT NOT NULL,
    signing_secrets      TEXT NOT NULL,
    account_metadata_key TEXT NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (tenant_id)
);
CREATE INDEX stripe_integrations_by_endpoint ON stripe_integrations (endpoint_id);

-- Every event received, by Stripe's event id: a redelivery is answered
-- with `answer` and writes nothing. status: applied, ignored, unmapped
-- (with `reason`); waiting_for: the payment an unmapped refund waits for,
-- applied when that payment arrives. payload: the event as received, for
-- a reapply.
CREATE TABLE stripe_events (
    tenant_id   TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    status      TEXT NOT NULL,
    reason      TEXT,
    waiting_for TEXT,
    payload     TEXT NOT NULL,
    answer      TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX stripe_events_by_status ON stripe_events (tenant_id, status, event_id);
CREATE INDEX stripe_events_waiting ON stripe_events (tenant_id, waiting_for)
    WHERE waiting_for IS NOT NULL;
