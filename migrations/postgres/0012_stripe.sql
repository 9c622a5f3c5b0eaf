-- Stripe webhooks (docs/ingest.md). Times are microseconds since the Unix
-- epoch, UTC, in both engines. Every key starts with tenant_id. Text
-- compares by bytes (COLLATE "C"), as every table since migration 7.

-- A tenant's Stripe endpoint: endpoint_id is the unguessable last part of
-- the path given to Stripe, by which a delivery (which has no API key)
-- finds its tenant. signing_secrets is a JSON array, kept as is because
-- every delivery is checked with it; it is never read back by the API.
CREATE TABLE stripe_integrations (
    tenant_id            TEXT COLLATE "C" NOT NULL,
    endpoint_id          TEXT COLLATE "C" NOT NULL,
    signing_secrets      TEXT COLLATE "C" NOT NULL,
    account_metadata_key TEXT COLLATE "C" NOT NULL,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    PRIMARY KEY (tenant_id)
);
CREATE INDEX stripe_integrations_by_endpoint ON stripe_integrations (endpoint_id);

-- Every event received, by Stripe's event id: a redelivery is answered
-- with `answer` and writes nothing. status: applied, ignored, unmapped
-- (with `reason`); waiting_for: the payment an unmapped refund waits for,
-- applied when that payment arrives. payload: the event as received, for
-- a reapply.
CREATE TABLE stripe_events (
    tenant_id   TEXT COLLATE "C" NOT NULL,
    event_id    TEXT COLLATE "C" NOT NULL,
    event_type  TEXT COLLATE "C" NOT NULL,
    status      TEXT COLLATE "C" NOT NULL,
    reason      TEXT COLLATE "C",
    waiting_for TEXT COLLATE "C",
    payload     TEXT COLLATE "C" NOT NULL,
    answer      TEXT COLLATE "C" NOT NULL,
    received_at BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX stripe_events_by_status ON stripe_events (tenant_id, status, event_id);
CREATE INDEX stripe_events_waiting ON stripe_events (tenant_id, waiting_for)
    WHERE waiting_for IS NOT NULL;
