-- Issue 30: identities of the company's identity provider linked to a client or a user.
-- A provider access token whose `sub` (else `client_id`) is `subject` acts as the linked client
-- (with its cube grants) or user. One link per (issuer, subject) across the installation: a
-- subject belongs to one tenant. Exactly one of client_id and user_id is set.
CREATE TABLE external_identities (
  issuer text NOT NULL,
  subject text NOT NULL,
  tenant_id uuid NOT NULL,
  client_id uuid,
  user_id uuid,
  created_at timestamptz(3) NOT NULL,
  PRIMARY KEY (issuer, subject),
  CONSTRAINT external_identities_one_target CHECK ((client_id IS NULL) <> (user_id IS NULL))
);
