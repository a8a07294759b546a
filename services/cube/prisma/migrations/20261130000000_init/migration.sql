-- Identity: tenants, users and their tokens, API clients and their per-cube grants.
CREATE TABLE tenants (
  id uuid PRIMARY KEY,
  name text NOT NULL UNIQUE,
  created_at timestamptz(3) NOT NULL
);

CREATE TABLE users (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  display_name text NOT NULL,
  created_at timestamptz(3) NOT NULL
);
CREATE INDEX users_tenant_created_idx ON users (tenant_id, created_at);

CREATE TABLE user_tokens (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  user_id uuid NOT NULL REFERENCES users(id),
  lookup_digest bytea NOT NULL UNIQUE,
  verifier_digest bytea NOT NULL,
  created_at timestamptz(3) NOT NULL,
  revoked_at timestamptz(3)
);

CREATE TABLE clients (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  name text NOT NULL,
  credential_id uuid NOT NULL,
  lookup_digest bytea NOT NULL UNIQUE,
  verifier_digest bytea NOT NULL,
  credential_issued_at timestamptz(3) NOT NULL,
  created_at timestamptz(3) NOT NULL,
  revoked_at timestamptz(3)
);
CREATE INDEX clients_tenant_created_idx ON clients (tenant_id, created_at);
-- An active client's name is unique in its tenant.
CREATE UNIQUE INDEX clients_active_name_idx ON clients (tenant_id, name) WHERE revoked_at IS NULL;

-- Cubes; `head` is the last activity position handed out (the per-cube order's counter).
CREATE TABLE cubes (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  name text NOT NULL,
  directive text NOT NULL,
  taxonomy_json text,
  owner_id uuid NOT NULL,
  owner_kind text NOT NULL,
  request_key uuid NOT NULL,
  head bigint NOT NULL DEFAULT 0,
  created_at timestamptz(3) NOT NULL,
  updated_at timestamptz(3) NOT NULL
);
CREATE UNIQUE INDEX cubes_request_key_idx ON cubes (tenant_id, owner_id, request_key);
CREATE INDEX cubes_tenant_created_idx ON cubes (tenant_id, created_at);

CREATE TABLE cube_grants (
  client_id uuid NOT NULL REFERENCES clients(id),
  cube_id uuid NOT NULL REFERENCES cubes(id),
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  access smallint NOT NULL CHECK (access BETWEEN 1 AND 3),
  updated_at timestamptz(3) NOT NULL,
  PRIMARY KEY (client_id, cube_id)
);
CREATE INDEX cube_grants_cube_idx ON cube_grants (cube_id);

CREATE TABLE roles (
  id uuid PRIMARY KEY,
  cube_id uuid NOT NULL REFERENCES cubes(id),
  name text NOT NULL,
  short_description text NOT NULL,
  detailed_description text NOT NULL,
  role_class text NOT NULL CHECK (role_class IN ('queen', 'worker')),
  is_default boolean NOT NULL,
  mandatory boolean NOT NULL,
  human_seat boolean NOT NULL,
  can_broadcast boolean NOT NULL,
  receives_all_direct boolean NOT NULL,
  seat_counter integer NOT NULL DEFAULT 0,
  created_at timestamptz(3) NOT NULL,
  updated_at timestamptz(3) NOT NULL
);
CREATE UNIQUE INDEX roles_cube_name_idx ON roles (cube_id, name);
-- At most one default role per cube.
CREATE UNIQUE INDEX roles_one_default_idx ON roles (cube_id) WHERE is_default;

CREATE TABLE drones (
  id uuid PRIMARY KEY,
  cube_id uuid NOT NULL REFERENCES cubes(id),
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  role_id uuid NOT NULL REFERENCES roles(id),
  client_id uuid NOT NULL REFERENCES clients(id),
  label text NOT NULL,
  hostname text NOT NULL,
  created_at timestamptz(3) NOT NULL,
  last_seen_at timestamptz(3) NOT NULL,
  last_log_post_at timestamptz(3),
  evicted_at timestamptz(3),
  silent_ping_count integer NOT NULL DEFAULT 0,
  last_silent_ping_at timestamptz(3),
  inbox_position bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX drones_cube_label_idx ON drones (cube_id, label);
CREATE INDEX drones_cube_created_idx ON drones (cube_id, created_at);
CREATE INDEX drones_client_idx ON drones (client_id);
-- The liveness scan walks silent drones oldest first.
CREATE INDEX drones_last_seen_idx ON drones (last_seen_at) WHERE evicted_at IS NULL;

CREATE TABLE drone_sessions (
  id uuid PRIMARY KEY,
  drone_id uuid NOT NULL REFERENCES drones(id),
  cube_id uuid NOT NULL REFERENCES cubes(id),
  client_id uuid NOT NULL REFERENCES clients(id),
  tenant_id uuid NOT NULL REFERENCES tenants(id),
  lookup_digest bytea NOT NULL UNIQUE,
  verifier_digest bytea NOT NULL,
  created_at timestamptz(3) NOT NULL,
  expires_at timestamptz(3) NOT NULL,
  revoked_at timestamptz(3)
);
CREATE INDEX drone_sessions_drone_idx ON drone_sessions (drone_id);
CREATE INDEX drone_sessions_client_idx ON drone_sessions (client_id);

-- Entries and notifications share one per-cube order (`position`), committed before publish.
CREATE TABLE activity_items (
  id uuid PRIMARY KEY,
  cube_id uuid NOT NULL REFERENCES cubes(id),
  position bigint NOT NULL,
  item_type text NOT NULL CHECK (item_type IN ('entry', 'notification')),
  created_at timestamptz(3) NOT NULL,
  author_drone_id uuid,
  author_principal_id text,
  author_principal_kind text,
  author_label text,
  message text NOT NULL,
  visibility text CHECK (visibility IN ('broadcast', 'direct')),
  recipient_drone_ids uuid[] NOT NULL DEFAULT '{}',
  kind text,
  notification_kind text CHECK (notification_kind IN ('ack', 'claim', 'release', 'heartbeat_ping')),
  entry_id uuid,
  actor_drone_id uuid,
  actor_role_name text
);
CREATE UNIQUE INDEX activity_items_cube_position_idx ON activity_items (cube_id, position);
-- DronesSince: a drone's posts in time order.
CREATE INDEX activity_items_author_idx ON activity_items (cube_id, author_drone_id, created_at);
-- Recipient lookups (direct entries and notifications for a drone).
CREATE INDEX activity_items_recipients_idx ON activity_items USING gin (recipient_drone_ids);

CREATE TABLE acks (
  entry_id uuid NOT NULL REFERENCES activity_items(id),
  principal_id text NOT NULL,
  drone_id uuid,
  created_at timestamptz(3) NOT NULL,
  PRIMARY KEY (entry_id, principal_id)
);

CREATE TABLE claims (
  entry_id uuid PRIMARY KEY REFERENCES activity_items(id),
  holder_principal_id text NOT NULL,
  holder_drone_id uuid,
  holder_label text NOT NULL,
  claimed_at timestamptz(3) NOT NULL
);

CREATE TABLE decisions (
  id uuid PRIMARY KEY,
  cube_id uuid NOT NULL REFERENCES cubes(id),
  author_drone_id uuid,
  author_principal_id text NOT NULL,
  author_principal_kind text NOT NULL,
  author_label text NOT NULL,
  title text NOT NULL,
  rationale text NOT NULL,
  entry_id uuid REFERENCES activity_items(id),
  created_at timestamptz(3) NOT NULL
);
CREATE INDEX decisions_cube_created_idx ON decisions (cube_id, created_at);
