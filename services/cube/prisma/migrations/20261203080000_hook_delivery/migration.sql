-- Issue 28: a receipt may be delivered by an agent host's hook that reads the drone's inbox
-- through the gateway (no machine daemon): ReadUnread's `confirm_through` (DeliveryChannel HOOK).
ALTER TABLE receipts DROP CONSTRAINT receipts_delivered_via_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_delivered_via_check
  CHECK (delivered_via IN ('stream', 'machine_link', 'hook'));
