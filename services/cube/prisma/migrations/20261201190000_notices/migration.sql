-- Issue 16 item 6: notices, the outbox of what a drone must not miss, per presence machine.
-- One row per (activity item, recipient drone) whose live drone session named a machine
-- (AttachSeat `machine_id`) when the item was committed; written in the same statement or
-- transaction as the item. `id` is the stable notice id every resend carries. Presence relays
-- unconfirmed rows over the machine's Link; the daemon's confirmation sets `confirmed_at` (and the
-- entry's receipt `delivered` via MACHINE_LINK).
CREATE TABLE notices (
  id uuid PRIMARY KEY,
  -- Queue order per machine (oldest first); a reader never relies on it for completeness.
  seq bigserial NOT NULL,
  tenant_id uuid NOT NULL,
  machine_id uuid NOT NULL,
  cube_id uuid NOT NULL,
  drone_id uuid NOT NULL,
  -- The activity item (DIRECT entry or notification) the notice was queued for.
  item_id uuid NOT NULL,
  -- The entry it is about: the entry itself, or the notification's entry (may be null).
  entry_id uuid,
  created_at timestamptz(3) NOT NULL,
  confirmed_at timestamptz(3),
  UNIQUE (item_id, drone_id)
);
-- WatchNotices: a machine's unconfirmed notices in queue order.
CREATE INDEX notices_pending_idx ON notices (machine_id, seq) WHERE confirmed_at IS NULL;

-- The machines to ring after an entry's commit (its own notices and its notifications').
CREATE INDEX notices_entry_idx ON notices (entry_id);
