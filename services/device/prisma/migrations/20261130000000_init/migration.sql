-- Device-placement context: enroll tokens, devices (+ connection lease), placements, run claims, audit.

CREATE TABLE enroll_tokens (
  id                     uuid PRIMARY KEY,
  tenant_id              uuid NOT NULL,
  owner_subject_id       uuid NOT NULL,
  label                  text NOT NULL DEFAULT '' CHECK (char_length(label) <= 200),
  lookup_digest          bytea NOT NULL UNIQUE CHECK (octet_length(lookup_digest) = 32),
  verifier_digest        bytea NOT NULL CHECK (octet_length(verifier_digest) = 32),
  created_at             timestamptz(3) NOT NULL,
  expires_at             timestamptz(3) NOT NULL,
  consumed_at            timestamptz(3),
  consumed_by_public_key text,
  device_id              uuid,
  revoked_at             timestamptz(3),
  -- Lifetimes are whole seconds, 1 s to 7 days.
  CONSTRAINT enroll_tokens_ttl_whole_seconds CHECK (
    extract(epoch FROM (expires_at - created_at)) = trunc(extract(epoch FROM (expires_at - created_at)))
    AND expires_at - created_at BETWEEN interval '1 second' AND interval '7 days'
  ),
  CONSTRAINT enroll_tokens_consumed_together CHECK (
    (consumed_at IS NULL) = (consumed_by_public_key IS NULL) AND (consumed_at IS NULL) = (device_id IS NULL)
  )
);
-- ListEnrollTokens: the tenant's tokens, newest first.
CREATE INDEX enroll_tokens_tenant_id_created_at_id_idx ON enroll_tokens (tenant_id, created_at DESC, id DESC);

CREATE TABLE devices (
  id                    uuid PRIMARY KEY,
  tenant_id             uuid NOT NULL,
  owner_subject_id      uuid NOT NULL,
  public_key            text NOT NULL UNIQUE CHECK (char_length(public_key) BETWEEN 1 AND 128),
  platform              text NOT NULL CHECK (platform IN ('linux', 'macos', 'windows', 'android', 'ios')),
  display_name          text NOT NULL DEFAULT '' CHECK (char_length(display_name) <= 200),
  status                text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  revoked_reason        text CHECK (char_length(revoked_reason) <= 500),
  revoked_at            timestamptz(3),
  connection_generation bigint NOT NULL DEFAULT 0 CHECK (connection_generation >= 0),
  lease_expires_at      timestamptz(3),
  online                boolean NOT NULL DEFAULT false,
  rev                   bigint NOT NULL DEFAULT 1 CHECK (rev >= 1),
  enrolled_at           timestamptz(3) NOT NULL,
  updated_at            timestamptz(3) NOT NULL,
  credential_lookup     bytea NOT NULL UNIQUE CHECK (octet_length(credential_lookup) = 32),
  credential_verifier   bytea NOT NULL CHECK (octet_length(credential_verifier) = 32),
  enroll_token_id       uuid NOT NULL,
  CONSTRAINT devices_revoked_together CHECK ((status = 'revoked') = (revoked_at IS NOT NULL)),
  CONSTRAINT devices_revoked_offline CHECK (status = 'active' OR (NOT online AND lease_expires_at IS NULL))
);
-- ListDevices for USER callers (whole tenant) and CLIENT callers (own devices), newest first.
CREATE INDEX devices_tenant_id_enrolled_at_id_idx ON devices (tenant_id, enrolled_at DESC, id DESC);
CREATE INDEX devices_tenant_id_owner_subject_id_enrolled_at_id_idx
  ON devices (tenant_id, owner_subject_id, enrolled_at DESC, id DESC);
-- The lease sweeper: online devices by lease expiry.
CREATE INDEX devices_online_lease_expires_at_idx ON devices (lease_expires_at) WHERE online;

CREATE TABLE placements (
  tenant_id        uuid NOT NULL,
  root_session_id  text NOT NULL CHECK (root_session_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
  device_id        uuid NOT NULL REFERENCES devices (id),
  owner_subject_id uuid NOT NULL,
  rev              bigint NOT NULL DEFAULT 1 CHECK (rev >= 1),
  placed_at        timestamptz(3) NOT NULL,
  updated_at       timestamptz(3) NOT NULL,
  PRIMARY KEY (tenant_id, root_session_id)
);
CREATE INDEX placements_device_id_idx ON placements (device_id);
-- Operator lookups of a root session across tenants.
CREATE INDEX placements_root_session_id_idx ON placements (root_session_id);

CREATE TABLE run_claims (
  tenant_id       uuid NOT NULL,
  root_session_id text NOT NULL,
  run_id          text NOT NULL CHECK (run_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
  began_at        timestamptz(3) NOT NULL,
  PRIMARY KEY (tenant_id, root_session_id),
  FOREIGN KEY (tenant_id, root_session_id) REFERENCES placements (tenant_id, root_session_id)
);

CREATE TABLE audit_events (
  id               uuid PRIMARY KEY,
  seq              bigserial NOT NULL UNIQUE,
  tenant_id        uuid NOT NULL,
  owner_subject_id uuid NOT NULL,
  event_type       text NOT NULL CHECK (event_type IN (
    'enroll_token_issued', 'enroll_token_revoked', 'device_enrolled', 'device_revoked',
    'connection_acquired', 'connection_fenced', 'connection_released', 'connection_expired',
    'session_placed', 'session_rebound', 'run_began', 'run_ended'
  )),
  device_id        uuid,
  actor_id         text NOT NULL DEFAULT '',
  root_session_id  text NOT NULL DEFAULT '',
  enroll_token_id  uuid,
  detail           jsonb NOT NULL DEFAULT '{}',
  at               timestamptz(3) NOT NULL
);
CREATE INDEX audit_events_tenant_id_seq_idx ON audit_events (tenant_id, seq DESC);
CREATE INDEX audit_events_tenant_id_device_id_seq_idx ON audit_events (tenant_id, device_id, seq DESC);
CREATE INDEX audit_events_tenant_id_event_type_seq_idx ON audit_events (tenant_id, event_type, seq DESC);
CREATE INDEX audit_events_tenant_id_owner_subject_id_seq_idx ON audit_events (tenant_id, owner_subject_id, seq DESC);

-- Append-only: rows are never changed or removed.
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_events is append-only';
END
$$;
CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
