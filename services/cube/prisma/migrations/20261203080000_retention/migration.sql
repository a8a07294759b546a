-- Issue 29 item 4: retention. Expand only (the previous release runs on this schema: it reads
-- none of the new columns, and their defaults keep its inserts valid).
--
-- The retained floor of each cube: every position at or below it was pruned, except what the
-- retention job keeps for its holders. Cursors at or above it resume; below it they are expired.
ALTER TABLE cubes
  ADD COLUMN retained_floor bigint NOT NULL DEFAULT 0,
  -- The cube's own settings (UpdateCube `retention`); NULL follows the service default.
  ADD COLUMN retention_max_age_seconds integer,
  ADD COLUMN retention_max_items integer;

-- The age rule: the newest position of a cube older than the cut-off.
CREATE INDEX activity_items_cube_created_idx ON activity_items (cube_id, created_at);

-- Fleet-wide leases of background jobs that must run on one replica at a time (retention):
-- a replica holds `name` until `expires_at` and renews it each round; another takes it over
-- only once it expired.
CREATE TABLE job_leases (
  name text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz(3) NOT NULL
);
