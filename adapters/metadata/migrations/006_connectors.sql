-- Connectors (issue 13): sync bookkeeping, the cross-process abort flag, the duplicate rule, schedule run
-- keys and the crawl state that lets an unchanged web page be skipped with a conditional request.

-- sync_run_id names the run in progress: a run writes only while it is still the current one, so a run
-- that was aborted or declared dead (30-minute window, stale heartbeat) can never overwrite its successor.
ALTER TABLE connectors ADD COLUMN sync_run_id uuid;
ALTER TABLE connectors ADD COLUMN sync_heartbeat_at timestamptz;
-- Read by the sync loop before each source request: abort works from any process.
ALTER TABLE connectors ADD COLUMN abort_requested boolean NOT NULL DEFAULT false;
-- What the last finished run did (fetched, skipped, pruned, ...), for sync/status.
ALTER TABLE connectors ADD COLUMN last_sync jsonb;
-- kb_id + source_type + the config's source (seed URLs, space, repository): one connector per source.
ALTER TABLE connectors ADD COLUMN source_key text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX connectors_source ON connectors (kb_id, source_type, source_key);

-- A schedule firing is claimed once across processes: the first INSERT of (connector, scheduled time) wins.
CREATE TABLE connector_runs (
  run_key       text PRIMARY KEY,
  connector_id  uuid NOT NULL,
  scheduled_at  timestamptz NOT NULL,
  claimed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX connector_runs_claimed ON connector_runs (claimed_at);

-- One row per URL a web connector fetched: its validators for conditional requests, the hash of its
-- extracted text and the links found on it (a 304 has no body, and the crawl still needs its links).
CREATE TABLE connector_pages (
  connector_id   uuid NOT NULL REFERENCES connectors (connector_id) ON DELETE CASCADE,
  url            text NOT NULL,
  etag           text,
  last_modified  text,
  content_hash   text,
  links          jsonb NOT NULL DEFAULT '[]'::jsonb,
  stored         boolean NOT NULL DEFAULT false,
  fetched_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (connector_id, url)
);

-- The process that took the run off the queue; only a claimed run can be declared dead by its heartbeat
-- (an unclaimed one waits for a consumer, within the 30-minute window).
ALTER TABLE connectors ADD COLUMN sync_owner text;
