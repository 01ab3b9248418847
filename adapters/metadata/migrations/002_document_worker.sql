-- Worker bookkeeping: a heartbeat on documents being uploaded, processed or deleted, so that rows left
-- behind by a crashed process are found and re-queued or failed (nothing stays stuck).
ALTER TABLE documents ADD COLUMN heartbeat_at timestamptz;
CREATE INDEX documents_active_heartbeat ON documents (status, heartbeat_at)
  WHERE status IN ('uploading', 'fetching', 'running', 'deleting');

-- What the pending state is waiting for ('ingest', 'delete', 'delete_hard'), so recovery can queue it again.
ALTER TABLE documents ADD COLUMN pending_op text;
