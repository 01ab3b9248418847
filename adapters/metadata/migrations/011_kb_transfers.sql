-- KB export, import and migration (issue 39): what an import into a KB has done, so that an interrupted one
-- resumes where it stopped and a finished one is never copied twice.

-- One row per KB filled from an archive (an import, or `quarry migrate`): the archive's id, how far it got and,
-- once done, the verification report. A KB that exists without this row was not made by an import.
CREATE TABLE kb_transfers (
  kb_id         text PRIMARY KEY REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  archive_id    text NOT NULL,
  source_kb_id  text NOT NULL,
  state         text NOT NULL CHECK (state IN ('running', 'done')),
  documents     integer NOT NULL DEFAULT 0,
  -- The archive's last document written, by its id in the archive (documents come in doc_id order).
  last_doc_id   text,
  report        jsonb,
  started_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per document an import wrote, committed with the document's row: the archive's id for it and the
-- checksum of its entries, so that a re-run skips what is already there with the same checksum.
CREATE TABLE kb_transfer_docs (
  doc_id         text PRIMARY KEY REFERENCES documents (doc_id) ON DELETE CASCADE,
  kb_id          text NOT NULL,
  source_doc_id  text NOT NULL,
  sha256         text NOT NULL
);
CREATE INDEX kb_transfer_docs_kb ON kb_transfer_docs (kb_id, source_doc_id);
