-- No query reads placements by device alone or by root session across tenants (every read and
-- lock names the tenant and the root session: the primary key), and devices are never deleted, so
-- these two indexes only cost every PlaceSession and RebindSession two index inserts. Dropping an
-- index changes no result the previous release reads (it runs on this schema unchanged).
DROP INDEX placements_device_id_idx;
DROP INDEX placements_root_session_id_idx;
