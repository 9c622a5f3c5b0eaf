-- Stored rejections, for `GET /v1/entries?status=rejected` (the finance
-- console's "every rejection"): rejections are rare, so without an index
-- that listing walks a tenant's whole log to find none (400 ms over
-- 1,000,000 entries). A partial index holds only the rejected entries.
CREATE INDEX entries_rejected ON entries (tenant_id, seq) WHERE status = 'rejected';
