-- Machine-presence context: machines, presence, the retained event log, tenant logs, link owners.

CREATE TABLE machines (
  id              uuid PRIMARY KEY,
  tenant_id       uuid NOT NULL,
  name            text NOT NULL,
  lookup_digest   bytea NOT NULL UNIQUE,
  verifier_digest bytea NOT NULL,
  created_at      timestamptz(3) NOT NULL,
  revoked_at      timestamptz(3)
);
CREATE INDEX machines_tenant_id_name_id_idx ON machines (tenant_id, name, id);
-- A name is unique among a tenant's non-revoked machines.
CREATE UNIQUE INDEX machines_active_name_key ON machines (tenant_id, name) WHERE revoked_at IS NULL;

CREATE TABLE presence (
  machine_id uuid PRIMARY KEY REFERENCES machines (id) ON DELETE CASCADE,
  tenant_id  uuid NOT NULL,
  linked     boolean NOT NULL DEFAULT false,
  changed_at timestamptz(3)
);
CREATE INDEX presence_tenant_id_linked_idx ON presence (tenant_id, linked);

CREATE TABLE presence_events (
  seq        bigserial PRIMARY KEY,
  tenant_id  uuid NOT NULL,
  machine_id uuid NOT NULL,
  name       text NOT NULL,
  linked     boolean NOT NULL,
  at         timestamptz(3) NOT NULL
);
CREATE INDEX presence_events_tenant_id_seq_idx ON presence_events (tenant_id, seq);
CREATE INDEX presence_events_at_idx ON presence_events (at);

CREATE TABLE tenant_logs (
  tenant_id   uuid PRIMARY KEY,
  head        bigint NOT NULL DEFAULT 0,
  floor       bigint NOT NULL DEFAULT 0,
  revocations bigint NOT NULL DEFAULT 0
);

CREATE TABLE link_owners (
  machine_id       uuid PRIMARY KEY,
  tenant_id        uuid NOT NULL,
  replica_id       text NOT NULL,
  link_id          uuid NOT NULL,
  lease_expires_at timestamptz(3) NOT NULL
);
CREATE INDEX link_owners_replica_id_idx ON link_owners (replica_id);
CREATE INDEX link_owners_lease_expires_at_idx ON link_owners (lease_expires_at);
