-- Rule state: account settings, holds, refunded totals, reversals (see
-- ledger/src/state.rs). A projection of the log, written by the writer in
-- the same transaction as the entries that change it.
CREATE TABLE rule_state (
    tenant_id  TEXT NOT NULL,
    kind       TEXT NOT NULL,          -- account | hold | refunded | reversal
    key        TEXT NOT NULL,          -- account, hold_id, payment_id or entry id
    value      TEXT NOT NULL,          -- JSON
    expires_at TEXT,                   -- open holds only: YYYY-MM-DDTHH:MM:SS.ffffffZ
    PRIMARY KEY (tenant_id, kind, key)
);
-- The expiry sweep reads open holds in expiry order across tenants.
CREATE INDEX rule_state_expiring ON rule_state (expires_at) WHERE expires_at IS NOT NULL;

-- Settings entries move no money: they alone carry amount 0.
ALTER TABLE entries DROP CONSTRAINT entries_amount_check;
ALTER TABLE entries ADD CONSTRAINT entries_amount_check
    CHECK (amount > 0 OR (kind = 'account_settings' AND amount = 0));
