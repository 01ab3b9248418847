-- Wire fields of the older service (notes.md "Wire details"): the lifecycle times and the chunk strategy on
-- documents, and a KB description that can be absent (an omitted description reads back as null).
ALTER TABLE documents ADD COLUMN deleted_at timestamptz;
ALTER TABLE documents ADD COLUMN doc_created_at timestamptz;
ALTER TABLE documents ADD COLUMN process_started_at timestamptz;
ALTER TABLE documents ADD COLUMN process_finished_at timestamptz;
ALTER TABLE documents ADD COLUMN chunk_strategy text;

-- Rows written before: their content is as old as the row, and a deleted row was deleted at its last write.
UPDATE documents SET doc_created_at = created_at;
UPDATE documents SET deleted_at = updated_at WHERE status = 'deleted';
UPDATE documents SET content_version = etag WHERE content_version IS NULL AND source_type = 's3';

ALTER TABLE knowledge_bases ALTER COLUMN description DROP NOT NULL;
ALTER TABLE knowledge_bases ALTER COLUMN description DROP DEFAULT;
