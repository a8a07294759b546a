-- The link functions also answer where each event sits in its tenant's log: the tenant's head
-- before it (o_prev) and the tenant's revocation counter (o_revocations), both read under the
-- tenant's log row lock in the event's own transaction. The doorbell carries them with the
-- event, so a feed whose cursor is exactly (o_prev, o_revocations) fans the event out without
-- reading it back (src/live/feed.ts).
--
-- Expand-then-contract: the release before calls the functions of 20261201000000_link_functions
-- and 20261202000000_link_batch by name, so they stay, with their result columns, and now
-- delegate to the ones below (one copy of the rules); they are dropped one release later.

-- As presence_append, and the head before the event and the revocation counter, read under the lock.
CREATE FUNCTION presence_append2(
  p_machine uuid, p_tenant uuid, p_name text, p_linked boolean, p_at timestamptz,
  OUT o_seq bigint, OUT o_prev bigint, OUT o_revocations bigint
) LANGUAGE plpgsql AS $$
BEGIN
  SELECT t.head, t.revocations INTO o_prev, o_revocations
    FROM tenant_logs t WHERE t.tenant_id = p_tenant FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'tenant log row missing for tenant %', p_tenant;
  END IF;
  UPDATE tenant_logs SET head = nextval('presence_events_seq_seq')
    WHERE tenant_logs.tenant_id = p_tenant RETURNING head INTO o_seq;
  INSERT INTO presence_events (seq, tenant_id, machine_id, name, linked, at)
    VALUES (o_seq, p_tenant, p_machine, p_name, p_linked, p_at);
  UPDATE presence SET linked = p_linked, changed_at = p_at WHERE presence.machine_id = p_machine;
END $$;

-- presence_link_open (same rules), with the event's o_prev and o_revocations.
CREATE FUNCTION presence_link_open2(p_machine uuid, p_replica text, p_link uuid, p_lease timestamptz, p_at timestamptz)
RETURNS TABLE (
  o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev_replica text, o_prev_link uuid,
  o_prev bigint, o_revocations bigint
)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_seq bigint;
  v_prev bigint;
  v_rev bigint;
BEGIN
  SELECT p.tenant_id, p.linked, m.name, m.revoked_at, o.replica_id AS owner_replica, o.link_id AS owner_link
    INTO r
    FROM presence p JOIN machines m ON m.id = p.machine_id
    LEFT JOIN link_owners o ON o.machine_id = p.machine_id
    WHERE p.machine_id = p_machine
    FOR UPDATE OF p;
  IF NOT FOUND OR r.revoked_at IS NOT NULL THEN
    RETURN QUERY SELECT 'revoked'::text, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::uuid,
      NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  INSERT INTO link_owners (machine_id, tenant_id, replica_id, link_id, lease_expires_at)
    VALUES (p_machine, r.tenant_id, p_replica, p_link, p_lease)
    ON CONFLICT (machine_id) DO UPDATE SET replica_id = EXCLUDED.replica_id, link_id = EXCLUDED.link_id,
      lease_expires_at = EXCLUDED.lease_expires_at, tenant_id = EXCLUDED.tenant_id;
  IF NOT r.linked THEN
    SELECT ap.o_seq, ap.o_prev, ap.o_revocations INTO v_seq, v_prev, v_rev
      FROM presence_append2(p_machine, r.tenant_id, r.name, true, p_at) ap;
  END IF;
  RETURN QUERY SELECT 'ok'::text, r.tenant_id, v_seq, r.name, r.owner_replica::text, r.owner_link, v_prev, v_rev;
END $$;

-- presence_link_close (same rules), with the event's o_prev and o_revocations.
CREATE FUNCTION presence_link_close2(p_machine uuid, p_link uuid, p_at timestamptz, p_expired_before timestamptz)
RETURNS TABLE (o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev bigint, o_revocations bigint)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_deleted int;
  v_seq bigint;
  v_prev bigint;
  v_rev bigint;
BEGIN
  SELECT p.tenant_id, p.linked, m.name
    INTO r
    FROM presence p JOIN machines m ON m.id = p.machine_id
    WHERE p.machine_id = p_machine
    FOR UPDATE OF p;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'missing'::text, NULL::uuid, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  DELETE FROM link_owners
    WHERE link_owners.machine_id = p_machine AND link_owners.link_id = p_link
      AND (p_expired_before IS NULL OR link_owners.lease_expires_at < p_expired_before);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted = 0 THEN
    RETURN QUERY SELECT 'not_owner'::text, r.tenant_id, NULL::bigint, r.name, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  IF r.linked THEN
    SELECT ap.o_seq, ap.o_prev, ap.o_revocations INTO v_seq, v_prev, v_rev
      FROM presence_append2(p_machine, r.tenant_id, r.name, false, p_at) ap;
  END IF;
  RETURN QUERY SELECT 'ok'::text, r.tenant_id, v_seq, r.name, v_prev, v_rev;
END $$;

-- presence_link_batch (same rules and lock order), with each event's o_prev and o_revocations.
CREATE FUNCTION presence_link_batch2(
  p_kinds text[], p_machines uuid[], p_links uuid[], p_replicas text[], p_leases timestamptz[], p_ats timestamptz[]
)
RETURNS TABLE (
  o_index int, o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev_replica text, o_prev_link uuid,
  o_prev bigint, o_revocations bigint
)
LANGUAGE plpgsql AS $$
DECLARE
  i int;
BEGIN
  PERFORM 1 FROM presence lp WHERE lp.machine_id = ANY(p_machines) ORDER BY lp.machine_id FOR UPDATE;
  FOR i IN 1 .. coalesce(array_length(p_kinds, 1), 0) LOOP
    IF p_kinds[i] = 'open' THEN
      RETURN QUERY SELECT i, lo.o_status, lo.o_tenant, lo.o_seq, lo.o_name, lo.o_prev_replica, lo.o_prev_link,
          lo.o_prev, lo.o_revocations
        FROM presence_link_open2(p_machines[i], p_replicas[i], p_links[i], p_leases[i], p_ats[i]) lo;
    ELSE
      RETURN QUERY SELECT i, lc.o_status, lc.o_tenant, lc.o_seq, lc.o_name, NULL::text, NULL::uuid,
          lc.o_prev, lc.o_revocations
        FROM presence_link_close2(p_machines[i], p_links[i], p_ats[i], NULL) lc;
    END IF;
  END LOOP;
END $$;

-- The release before's functions, same names and result columns, now through the ones above.
CREATE OR REPLACE FUNCTION presence_append(p_machine uuid, p_tenant uuid, p_name text, p_linked boolean, p_at timestamptz)
RETURNS bigint LANGUAGE sql AS $$
  SELECT o_seq FROM presence_append2(p_machine, p_tenant, p_name, p_linked, p_at)
$$;

CREATE OR REPLACE FUNCTION presence_link_open(p_machine uuid, p_replica text, p_link uuid, p_lease timestamptz, p_at timestamptz)
RETURNS TABLE (o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev_replica text, o_prev_link uuid)
LANGUAGE sql AS $$
  SELECT o_status, o_tenant, o_seq, o_name, o_prev_replica, o_prev_link
  FROM presence_link_open2(p_machine, p_replica, p_link, p_lease, p_at)
$$;

CREATE OR REPLACE FUNCTION presence_link_close(p_machine uuid, p_link uuid, p_at timestamptz, p_expired_before timestamptz)
RETURNS TABLE (o_status text, o_tenant uuid, o_seq bigint, o_name text)
LANGUAGE sql AS $$
  SELECT o_status, o_tenant, o_seq, o_name FROM presence_link_close2(p_machine, p_link, p_at, p_expired_before)
$$;

CREATE OR REPLACE FUNCTION presence_link_batch(
  p_kinds text[], p_machines uuid[], p_links uuid[], p_replicas text[], p_leases timestamptz[], p_ats timestamptz[]
)
RETURNS TABLE (o_index int, o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev_replica text, o_prev_link uuid)
LANGUAGE sql AS $$
  SELECT o_index, o_status, o_tenant, o_seq, o_name, o_prev_replica, o_prev_link
  FROM presence_link_batch2(p_kinds, p_machines, p_links, p_replicas, p_leases, p_ats)
$$;
