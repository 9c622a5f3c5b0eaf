-- The expiry sweep reads each tenant's expired holds by a query that names
-- the tenant (so a distributed engine answers it on the tenant's node); this
-- index serves it. rule_state_expiring still finds which tenants have any.
CREATE INDEX rule_state_expiring_per_tenant ON rule_state (tenant_id, expires_at)
    WHERE expires_at IS NOT NULL;
