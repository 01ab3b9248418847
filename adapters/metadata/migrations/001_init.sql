-- Knowledge bases, per-KB settings overrides, documents, parent chunks, dedup signatures, connectors.
-- One dialect for PGlite and PostgreSQL. Timestamps are timestamptz (sessions run in UTC).

CREATE TABLE knowledge_bases (
  kb_id        text PRIMARY KEY,
  kb_name      text NOT NULL DEFAULT '',
  description  text NOT NULL DEFAULT '',
  tags         jsonb NOT NULL DEFAULT '[]'::jsonb,
  status       text NOT NULL DEFAULT 'active',
  visibility   text NOT NULL DEFAULT 'private',
  created_by   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kb_settings_overrides (
  kb_id       text PRIMARY KEY REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  overrides   jsonb NOT NULL DEFAULT '{}'::jsonb,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
  doc_id           text PRIMARY KEY,
  kb_id            text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  title            text NOT NULL DEFAULT '',
  source_type      text NOT NULL DEFAULT 's3',
  source           text NOT NULL,
  storage_key      text,
  connector_id     uuid,
  status           text NOT NULL,
  doc_type         text,
  content_type     text,
  chunk_count      integer,
  file_size        bigint,
  embedding_model  text,
  last_error       text,
  etag             text,
  source_uri       text,
  content_version  text,
  duplicate_of     text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT documents_kb_source UNIQUE (kb_id, source)
);
CREATE INDEX documents_kb_status ON documents (kb_id, status);
CREATE INDEX documents_kb_updated ON documents (kb_id, updated_at DESC);
CREATE INDEX documents_status ON documents (status);
CREATE INDEX documents_connector ON documents (connector_id) WHERE connector_id IS NOT NULL;

-- Parent chunks of hierarchically chunked documents (leaves live in the vector store).
CREATE TABLE parent_chunks (
  chunk_id         text PRIMARY KEY,
  kb_id            text NOT NULL,
  doc_id           text NOT NULL REFERENCES documents (doc_id) ON DELETE CASCADE,
  level            integer NOT NULL,
  parent_chunk_id  text,
  child_count      integer NOT NULL DEFAULT 0,
  text             text NOT NULL,
  page_num         integer NOT NULL DEFAULT 1,
  page_label       text NOT NULL DEFAULT '1',
  start_offset     integer NOT NULL DEFAULT 0,
  end_offset       integer NOT NULL DEFAULT 0
);
CREATE INDEX parent_chunks_doc ON parent_chunks (doc_id);

-- Dedup: one signature row per indexed document, and its LSH band keys for candidate look-up.
CREATE TABLE dedup_signatures (
  doc_id       text PRIMARY KEY REFERENCES documents (doc_id) ON DELETE CASCADE,
  kb_id        text NOT NULL,
  simhash      text NOT NULL,
  minhash      bytea NOT NULL,
  title        text NOT NULL DEFAULT '',
  chunk_count  integer,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dedup_signatures_kb ON dedup_signatures (kb_id);

CREATE TABLE dedup_bands (
  kb_id   text NOT NULL,
  band    text NOT NULL,
  doc_id  text NOT NULL REFERENCES documents (doc_id) ON DELETE CASCADE,
  PRIMARY KEY (kb_id, band, doc_id)
);
CREATE INDEX dedup_bands_doc ON dedup_bands (doc_id);

CREATE TABLE connectors (
  connector_id      uuid PRIMARY KEY,
  kb_id             text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  name              text NOT NULL,
  source_type       text NOT NULL,
  config            jsonb NOT NULL,
  sync_schedule     text,
  schedule_enabled  boolean NOT NULL DEFAULT false,
  sync_status       text NOT NULL DEFAULT 'idle',
  sync_started_at   timestamptz,
  last_synced_at    timestamptz,
  status            text NOT NULL DEFAULT 'active',
  last_error        text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX connectors_kb ON connectors (kb_id);
