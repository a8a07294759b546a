-- Issue 16: threads, claim leases with fences, receipts, questions to humans, seat state,
-- notification coalescing.

-- Threads, reply expectations and questions on entries.
ALTER TABLE activity_items
  ADD COLUMN reply_to_entry_id uuid,
  ADD COLUMN thread_root_entry_id uuid,
  ADD COLUMN expects_reply boolean NOT NULL DEFAULT true,
  ADD COLUMN question boolean NOT NULL DEFAULT false,
  -- A question's answer: the first reply by a user or a human-seat drone (set once).
  ADD COLUMN answer_entry_id uuid,
  -- Set on the entry a seat state change appends.
  ADD COLUMN seat_state text CHECK (seat_state IN ('working', 'waiting', 'blocked', 'idle')),
  ADD COLUMN seat_state_note text;
ALTER TABLE activity_items DROP CONSTRAINT activity_items_notification_kind_check;
ALTER TABLE activity_items ADD CONSTRAINT activity_items_notification_kind_check CHECK (
  notification_kind IN ('ack', 'claim', 'release', 'heartbeat_ping', 'reply', 'claim_stale', 'takeover', 'unread_nudge'));
-- ReadThread and reply counts: a thread's replies in order.
CREATE INDEX activity_items_thread_idx ON activity_items (thread_root_entry_id, position)
  WHERE thread_root_entry_id IS NOT NULL;
-- ListQuestions: a cube's questions newest first.
CREATE INDEX activity_items_questions_idx ON activity_items (cube_id, position) WHERE question;

-- Claim leases: a released claim keeps its row (state 'released') so the next claim takes fence + 1.
-- `stale_at` is when a HELD claim turns stale unless renewed, and when a STALE one turned stale.
ALTER TABLE claims
  ADD COLUMN fence bigint NOT NULL DEFAULT 1,
  ADD COLUMN state text NOT NULL DEFAULT 'held' CHECK (state IN ('held', 'stale', 'released')),
  ADD COLUMN renewed_at timestamptz(3),
  ADD COLUMN stale_at timestamptz(3),
  ADD COLUMN cube_id uuid REFERENCES cubes(id);
UPDATE claims SET renewed_at = claimed_at, stale_at = claimed_at + interval '900 seconds',
  cube_id = (SELECT a.cube_id FROM activity_items a WHERE a.id = claims.entry_id);
ALTER TABLE claims ALTER COLUMN renewed_at SET NOT NULL, ALTER COLUMN stale_at SET NOT NULL,
  ALTER COLUMN cube_id SET NOT NULL;
-- Renewal by the holder's activity, and the liveness scan's due claims.
CREATE INDEX claims_holder_held_idx ON claims (holder_drone_id) WHERE state = 'held';
CREATE INDEX claims_due_idx ON claims (stale_at) WHERE state = 'held';

-- Receipts: per recipient of a DIRECT entry and per drone a reply notifies.
CREATE TABLE receipts (
  entry_id uuid NOT NULL REFERENCES activity_items(id),
  drone_id uuid NOT NULL REFERENCES drones(id),
  cube_id uuid NOT NULL REFERENCES cubes(id),
  -- Recipient order (the entry's recipient list order, then the notified drones).
  ordinal integer NOT NULL,
  created_at timestamptz(3) NOT NULL,
  -- Whether the unread nudge applies (a DIRECT entry expecting a reply).
  nudge boolean NOT NULL,
  delivered_at timestamptz(3),
  delivered_via text CHECK (delivered_via IN ('stream', 'machine_link')),
  read_at timestamptz(3),
  acked_at timestamptz(3),
  nudged_at timestamptz(3),
  PRIMARY KEY (entry_id, drone_id)
);
CREATE INDEX receipts_drone_idx ON receipts (drone_id);
-- The liveness scan's unread-nudge candidates, oldest first.
CREATE INDEX receipts_nudge_due_idx ON receipts (created_at)
  WHERE nudge AND read_at IS NULL AND nudged_at IS NULL;

-- Seat state, and the presence machine a drone's session runs on.
ALTER TABLE drones
  ADD COLUMN state text CHECK (state IN ('working', 'waiting', 'blocked', 'idle')),
  ADD COLUMN state_note text NOT NULL DEFAULT '',
  ADD COLUMN state_changed_at timestamptz(3),
  ADD COLUMN machine_id uuid;
ALTER TABLE drone_sessions ADD COLUMN machine_id uuid;
CREATE INDEX drones_machine_idx ON drones (machine_id) WHERE machine_id IS NOT NULL;

-- Coalescing: the last notification of a kind from an actor drone to a recipient. A notification
-- is written only when this mark is older than the window (decided in one conditional upsert).
CREATE TABLE notification_marks (
  recipient_drone_id uuid NOT NULL,
  actor_drone_id uuid NOT NULL,
  kind text NOT NULL,
  last_at timestamptz(3) NOT NULL,
  PRIMARY KEY (recipient_drone_id, actor_drone_id, kind)
);
