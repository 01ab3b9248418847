-- The older service's run_id on the document record (notes.md "Wire details"): the connector sync run that
-- fetched the document's current content; null for uploads, and for documents stored before runs were recorded.
ALTER TABLE documents ADD COLUMN run_id uuid;
