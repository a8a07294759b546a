-- A thread root's reply count, kept by the reply's transaction (reads no longer count replies).
ALTER TABLE activity_items ADD COLUMN reply_count integer NOT NULL DEFAULT 0;
UPDATE activity_items r SET reply_count = c.n
FROM (SELECT thread_root_entry_id AS id, count(*) AS n FROM activity_items
      WHERE thread_root_entry_id IS NOT NULL GROUP BY 1) c
WHERE r.id = c.id;
