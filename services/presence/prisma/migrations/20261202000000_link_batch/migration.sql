-- Several link transitions of one tenant in one transaction, so one commit (one WAL flush) for
-- all of them. A tenant's log row is held from its first event to the commit, so one-by-one
-- commits of a busy tenant queued behind each other's flush. Same rules as the single
-- functions, which this one calls in the given order. Lock order as everywhere: presence rows
-- first (here all of them, in machine id order, before any event), then the tenant log row.
-- p_kinds[i] is 'open' or 'close'; p_replicas[i] and p_leases[i] matter for opens only.
-- One row per transition: o_index (1-based), then the columns of the single function.
CREATE FUNCTION presence_link_batch(
  p_kinds text[], p_machines uuid[], p_links uuid[], p_replicas text[], p_leases timestamptz[], p_ats timestamptz[]
)
RETURNS TABLE (o_index int, o_status text, o_tenant uuid, o_seq bigint, o_name text, o_prev_replica text, o_prev_link uuid)
LANGUAGE plpgsql AS $$
DECLARE
  i int;
BEGIN
  PERFORM 1 FROM presence lp WHERE lp.machine_id = ANY(p_machines) ORDER BY lp.machine_id FOR UPDATE;
  FOR i IN 1 .. coalesce(array_length(p_kinds, 1), 0) LOOP
    IF p_kinds[i] = 'open' THEN
      RETURN QUERY SELECT i, lo.o_status, lo.o_tenant, lo.o_seq, lo.o_name, lo.o_prev_replica, lo.o_prev_link
        FROM presence_link_open(p_machines[i], p_replicas[i], p_links[i], p_leases[i], p_ats[i]) lo;
    ELSE
      RETURN QUERY SELECT i, lc.o_status, lc.o_tenant, lc.o_seq, lc.o_name, NULL::text, NULL::uuid
        FROM presence_link_close(p_machines[i], p_links[i], p_ats[i], NULL) lc;
    END IF;
  END LOOP;
END $$;
