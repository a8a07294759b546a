-- Audit listings filtered by a time range (ListAuditEvents `from`/`to`) start from the range
-- instead of scanning the tenant's whole history by sequence.
CREATE INDEX audit_events_tenant_id_at_idx ON audit_events (tenant_id, at DESC);
