-- A sequence number on signature rows, bumped on every write, so each process reads only what is new.
ALTER TABLE dedup_signatures ADD COLUMN seq bigserial;
CREATE INDEX dedup_signatures_kb_seq ON dedup_signatures (kb_id, seq);
-- The documents.status index alone is covered by documents_kb_status and the partial heartbeat index;
-- every status change had to maintain it.
DROP INDEX documents_status;
