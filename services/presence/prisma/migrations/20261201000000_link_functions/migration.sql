-- The two hot transitions (a link opens, a link closes) as one round trip each. Same rules as
-- the TypeScript paths in src/store/transitions.ts: lock order presence row → tenant log row;
-- the sequence number is drawn under the tenant log row lock; an event only on a change.

-- Appends one event and sets presence, under an already held presence row lock.
CREATE FUNCTION presence_append(p_machine uuid, p_tenant uuid, p_name text, p_linked boolean, p_at timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_seq bigint;
BEGIN
  UPDATE tenant_logs SET head = nextval('presence_events_seq_seq')
    WHERE tenant_logs.tenant_id = p_tenant RETURNING head INTO v_seq;
  IF v_seq IS NULL THEN
    RAISE EXCEPTION 'tenant log row missing for tenant %', p_tenant;
  END IF;
  INSERT INTO presence_events (seq, tenant_id, machine_id, name, linked, at)
    VALUES (v_seq, p_tenant, p_machine, p_name, p_linked, p_at);
  UPDATE presence SET linked = p_linked, changed_at = p_at WHERE presence.machine_id = p_machine;
  RETURN v_seq;
END $$;

-- A link opened: record it as the machine's owner link and link the machine if it was not.
-- o_status: 'ok' or 'revoked' (unknown or revoked machine: nothing changed).
CREATE FUNCTION presence_link_open(p_machine uuid, p_replica text, p_link uuid, p_lease timestamptz, p_at timestamptz)
RETURNS TABLE (o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev_replica text, o_prev_link uuid)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_seq bigint;
BEGIN
  SELECT p.tenant_id, p.linked, m.name, m.revoked_at, o.replica_id AS owner_replica, o.link_id AS owner_link
    INTO r
    FROM presence p JOIN machines m ON m.id = p.machine_id
    LEFT JOIN link_owners o ON o.machine_id = p.machine_id
    WHERE p.machine_id = p_machine
    FOR UPDATE OF p;
  IF NOT FOUND OR r.revoked_at IS NOT NULL THEN
    RETURN QUERY SELECT 'revoked'::text, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::uuid;
    RETURN;
  END IF;
  INSERT INTO link_owners (machine_id, tenant_id, replica_id, link_id, lease_expires_at)
    VALUES (p_machine, r.tenant_id, p_replica, p_link, p_lease)
    ON CONFLICT (machine_id) DO UPDATE SET replica_id = EXCLUDED.replica_id, link_id = EXCLUDED.link_id,
      lease_expires_at = EXCLUDED.lease_expires_at, tenant_id = EXCLUDED.tenant_id;
  IF NOT r.linked THEN
    v_seq := presence_append(p_machine, r.tenant_id, r.name, true, p_at);
  END IF;
  RETURN QUERY SELECT 'ok'::text, r.tenant_id, v_seq, r.name, r.owner_replica::text, r.owner_link;
END $$;

-- A link closed: if it is still the machine's owner link (and, with p_expired_before, its lease
-- expired before then), drop the ownership and unlink. o_status: 'ok', 'not_owner' or 'missing'.
CREATE FUNCTION presence_link_close(p_machine uuid, p_link uuid, p_at timestamptz, p_expired_before timestamptz)
RETURNS TABLE (o_status text, o_tenant uuid, o_seq bigint, o_name text)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_deleted int;
  v_seq bigint;
BEGIN
  SELECT p.tenant_id, p.linked, m.name
    INTO r
    FROM presence p JOIN machines m ON m.id = p.machine_id
    WHERE p.machine_id = p_machine
    FOR UPDATE OF p;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'missing'::text, NULL::uuid, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  DELETE FROM link_owners
    WHERE link_owners.machine_id = p_machine AND link_owners.link_id = p_link
      AND (p_expired_before IS NULL OR link_owners.lease_expires_at < p_expired_before);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted = 0 THEN
    RETURN QUERY SELECT 'not_owner'::text, r.tenant_id, NULL::bigint, r.name;
    RETURN;
  END IF;
  IF r.linked THEN
    v_seq := presence_append(p_machine, r.tenant_id, r.name, false, p_at);
  END IF;
  RETURN QUERY SELECT 'ok'::text, r.tenant_id, v_seq, r.name;
END $$;
