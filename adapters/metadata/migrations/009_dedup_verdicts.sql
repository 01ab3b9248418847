-- Dedup verdicts explained and reversible (issue 36).
-- documents.dedup: the verdict that concerns the document ({verdict, stage, score, matched_doc_id, reason}); null
-- for a unique document or when dedup is off.
ALTER TABLE documents ADD COLUMN dedup jsonb;
-- dedup_signatures.identity: the identity-bearing tokens of the text with their neighbours (codes, numbers,
-- names, title words), packed by compute/dedup/identity.ts; tells a sibling written from one template from a
-- revision of the same document. Null for rows written before this version.
ALTER TABLE dedup_signatures ADD COLUMN identity bytea;
-- Pairs an editor declared distinct by restoring one of them: neither is judged against the other again.
CREATE TABLE dedup_distinct (
  kb_id      text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  doc_a      text NOT NULL REFERENCES documents (doc_id) ON DELETE CASCADE,
  doc_b      text NOT NULL REFERENCES documents (doc_id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (doc_a, doc_b),
  CHECK (doc_a < doc_b)
);
CREATE INDEX dedup_distinct_b ON dedup_distinct (doc_b);
